"""Assemble a large, real documentation corpus from Debian doc packages.

Scale benchmarks need thousands of genuine documents (not synthetic filler),
so this script fetches Debian documentation packages with `apt-get download`
(no root, no system install), unpacks them with `dpkg-deb -x` and splits the
manuals into section-sized JSONL documents::

    {"id": "<source>/<relative-path>#<anchor>", "title": "...", "text": "..."}

Everything lives under ``benchmarks/.cache/debian/`` (gitignored); re-runs
reuse the .deb files, the unpacked trees and the parsed documents.

    python benchmarks/debian_corpus.py --out benchmarks/.cache/debian-docs.jsonl \
        [--min-docs 5000] [--limit N] [--sources postgresql,python,manpages] \
        [--questions benchmarks/.cache/debian-questions.jsonl]

Other benchmarks can ``sys.path.insert(0, <benchmarks dir>)`` and call
``build_corpus(out, min_docs=5000, limit=None, sources=None)``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Container, Iterable, Iterator

from bs4 import BeautifulSoup, NavigableString, Tag

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "debian"
DEFAULT_SOURCES = ("git", "manpages", "postgresql", "python")
# Development sets leave the Python documentation out on purpose: its reference with FAQ
# questions is held out for evaluation, so nothing is tuned on it (Perl's, source ``perl``, stands in).
DEV_SOURCES = ("git", "manpages", "postgresql", "cmake")
# The scale corpus (over 50,000 documents): the Java SE and JavaFX APIs, member by member, beside
# the development sources.
SCALE_SOURCES = ("javadoc", *DEV_SOURCES)
# The command reference's packages: tools an administrator reaches for, none in DEV_SOURCES.
COMMAND_PACKAGES = ("coreutils", "util-linux", "systemd", "openssh-client", "iproute2", "procps",
                    "findutils", "rsync", "curl", "apt", "dpkg", "tar", "grep", "sed", "gawk", "sudo",
                    "lvm2", "e2fsprogs", "cron", "logrotate", "tmux", "openssl", "gpg", "mdadm",
                    "parted", "cryptsetup-bin", "nftables", "iptables", "diffutils", "wget", "xz-utils",
                    "zstd", "less", "man-db", "kmod", "udev", "bind9-dnsutils", "net-tools")
# The help center's packages: each ships Mallard pages under usr/share/help/C/<app>/.
HELP_PACKAGES = ("gnome-user-docs", "evolution-common", "evince-common", "seahorse", "shotwell-common",
                 "gedit-common", "eog", "gnome-terminal-data", "gnome-calculator", "gnome-system-monitor",
                 "pitivi", "gnome-boxes", "epiphany-browser-data", "zenity-common", "totem-common",
                 "file-roller", "cheese-common", "brasero-common", "simple-scan", "gnome-music", "baobab",
                 "gnome-clocks", "polari", "gnome-photos", "gnome-logs")
MIN_DOC_CHARS = 200  # shorter fragments are navigation crumbs, not documents
MAX_DOC_CHARS = 6000  # pages longer than this are split into their sections
TITLE_SEP = " › "


class CorpusError(RuntimeError):
    """The corpus cannot be assembled (apt missing, too few documents...)."""


# --------------------------------------------------------------------------
# Debian packages: resolve, download, unpack (all cached)


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise CorpusError(f"{cmd[0]} not found: this script needs apt/dpkg (Debian/Ubuntu)") from exc
    if proc.returncode != 0:
        hint = " (is apt's package list current? try `apt-get update`)" if cmd[0].startswith("apt") else ""
        raise CorpusError(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-500:]}{hint}")
    return proc.stdout


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", name))


def _newest_package(pattern: str) -> str:
    """Newest package whose name matches `pattern`, preferring one already cached
    (so a warm cache never depends on apt and stays repeatable)."""
    rx = re.compile(pattern)
    cached = {p.name.split("_", 1)[0] for p in (CACHE / "debs").glob("*.deb")}
    names = sorted((n for n in cached if rx.fullmatch(n)), key=_version_key)
    if not names:
        out = _run(["apt-cache", "search", "--names-only", pattern])
        names = sorted((l.split()[0] for l in out.splitlines() if rx.fullmatch(l.split()[0])),
                       key=_version_key)
    if not names:
        raise CorpusError(f"no Debian package matches {pattern!r}")
    return names[-1]


def fetch_package(pkg: str) -> tuple[Path, str]:
    """Download and unpack `pkg` into the cache; returns (tree, deb file name)."""
    debs = CACHE / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{pkg}_*.deb"))
    if not found:
        # The sandbox user cannot write into our cache dir; root download is fine.
        _run(["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", pkg], cwd=debs)
        found = sorted(debs.glob(f"{pkg}_*.deb"))
        if not found:
            raise CorpusError(f"apt-get download {pkg} produced no .deb")
    deb = found[-1]
    tree = CACHE / "tree" / deb.stem
    if not (tree / ".complete").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tree, ignore_errors=True)
        _run(["dpkg-deb", "-x", str(deb), str(tree)])
        (tree / ".complete").touch()  # marks a fully unpacked tree
    return tree, deb.name


# --------------------------------------------------------------------------
# Section tree shared by all formats, and the splitting rule


@dataclass
class Node:
    """A section: its own text (without child sections) plus child sections."""

    anchor: str | None
    heading: str
    text: str
    children: list["Node"] = field(default_factory=list)
    absolute: bool = False  # heading is a full name (e.g. "os.open"), no page prefix

    def full_text(self) -> str:
        return "\n\n".join(t for t in [self.text, *(c.full_text() for c in self.children)] if t)


def _short(title: str) -> str:
    """'os — Miscellaneous OS interfaces' -> 'os' (used as a prefix for subsections)."""
    return title.split(" — ", 1)[0]


def _chunks(text: str) -> list[str]:
    """Cut an oversized section without sub-sections (proc(5)'s file list, a
    giant table) into near-equal parts at line boundaries."""
    if len(text) <= MAX_DOC_CHARS * 3 // 2:
        return [text]
    target = len(text) / -(-len(text) // MAX_DOC_CHARS)
    parts, cur, size = [], [], 0
    for line in text.split("\n"):
        if cur and size + len(line) > target:
            parts.append("\n".join(cur))
            cur, size = [], 0
        cur.append(line)
        size += len(line) + 1
    if parts and size < target / 3:  # fold a small tail back in rather than drop it
        return parts[:-1] + [parts[-1] + "\n" + "\n".join(cur)]
    return parts + ["\n".join(cur)]


def split_page(root: Node, source: str, relpath: str) -> list[dict]:
    """Emit the whole page if it is small enough; else pack its intro and
    consecutive sections into documents of at most MAX_DOC_CHARS, recursing into
    sections that are too big on their own. Sections are not cut mid-way (unless
    one alone is huge), and small ones (a NAME, a short note) ride along with
    their neighbours instead of being dropped as too short."""
    docs: list[dict] = []
    page = _short(root.heading)
    seen: set[str] = set()
    counter = itertools.count()

    def title_of(group: list[Node]) -> str:
        head = group[0]
        if head is root:
            return root.heading
        if head.absolute:  # a run of API entries: name the first few
            names = [n.heading for n in group if n.absolute]
            return ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
        return f"{page}{TITLE_SEP}{head.heading}"

    def emit(group: list[Node], text: str) -> None:
        head, n = group[0], next(counter)
        base = head.anchor or ("top" if head is root else f"s{n}")
        for i, part in enumerate(_chunks(text), 1):
            anchor = base if i == 1 else f"{base}-part{i}"
            while anchor in seen:
                anchor += "_"
            seen.add(anchor)
            docs.append({"id": f"{source}/{relpath}#{anchor}",
                         "title": title_of(group) + (f" (part {i})" if i > 1 else ""),
                         "text": part, "_heading": head.heading if i == 1 else ""})

    def walk(node: Node) -> None:
        full = node.full_text()
        if len(full) <= MAX_DOC_CHARS or not node.children:
            emit([node], full)
            return
        group, texts = [node], [node.text] if node.text else []

        def close() -> None:
            if group and texts:
                emit(group, "\n\n".join(texts))

        for child in node.children:
            text = child.full_text()
            if len(text) > MAX_DOC_CHARS and child.children:
                close()
                group, texts = [], []
                walk(child)
            elif group and sum(map(len, texts)) + len(text) <= MAX_DOC_CHARS:
                group.append(child)
                texts.append(text)
            else:
                close()
                group, texts = [child], [text]
        close()

    walk(root)
    return docs


# --------------------------------------------------------------------------
# HTML -> text

_BLOCK = {"address", "article", "aside", "blockquote", "caption", "dd", "div", "dl", "dt",
          "figcaption", "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header",
          "hr", "li", "main", "nav", "ol", "p", "section", "table", "tbody", "thead", "tfoot",
          "tr", "ul"}
_PRE_OPEN, _PRE_CLOSE = "\x02", "\x03"
_WS = re.compile(r"\s+")
_NUMBERING = re.compile(r"^(?:(?:Chapter|Appendix|Part)\s+)?(?:[A-Z]|[IVXLC]+|\d+)(?:\.\d+)*\.\s+")


def _render(el: Tag, skip: set[int], parts: list[str]) -> None:
    for child in el.children:
        if isinstance(child, NavigableString):
            if type(child) is NavigableString:  # not Comment / Doctype / CData
                parts.append(_WS.sub(" ", str(child)))
        elif id(child) in skip:
            continue
        elif child.name == "pre":
            parts.append(_PRE_OPEN + child.get_text() + _PRE_CLOSE)
        elif child.name == "br":
            parts.append("\n")
        elif child.name in ("td", "th"):
            parts.append(" ")
            _render(child, skip, parts)
            parts.append(" ")
        elif child.name in _BLOCK:
            parts.append("\n")
            _render(child, skip, parts)
            parts.append("\n")
        else:
            _render(child, skip, parts)


def html_text(el: Tag, skip: Iterable[Tag] = ()) -> str:
    """Readable text: one line per block, whitespace collapsed, <pre> verbatim."""
    parts: list[str] = []
    _render(el, {id(t) for t in skip}, parts)
    pieces = re.split(f"{_PRE_OPEN}(.*?){_PRE_CLOSE}", "".join(parts), flags=re.S)
    lines: list[str] = []
    for i, piece in enumerate(pieces):
        if i % 2:  # code block: keep indentation
            lines.extend(l.rstrip() for l in piece.strip("\n").splitlines())
        else:
            lines.extend(s for s in (" ".join(l.split()) for l in piece.split("\n")) if s)
    return "\n".join(lines).strip()


def clean_heading(text: str) -> str:
    text = " ".join(text.replace("¶", "").split())
    return _NUMBERING.sub("", text)


@dataclass(frozen=True)
class HtmlFlavor:
    """How one documentation generator lays out its HTML."""

    content: Callable[[BeautifulSoup], Tag | None]  # main content element
    noise: tuple[str, ...]  # CSS selectors removed before anything else
    is_unit: Callable[[Tag], bool]  # elements that form a section
    heading: Callable[[Tag], tuple[str, bool]]  # (heading, absolute?) of a unit
    title: Callable[[BeautifulSoup], str | None] = lambda soup: None  # page title, before <title>


def _first_heading(el: Tag) -> str:
    h = el.find(re.compile(r"^h[1-6]$"))
    return clean_heading(h.get_text()) if h else ""


def _units_below(el: Tag, is_unit: Callable[[Tag], bool]) -> Iterator[Tag]:
    """Outermost unit elements strictly inside `el`."""
    for child in el.children:
        if isinstance(child, Tag):
            if is_unit(child):
                yield child
            else:
                yield from _units_below(child, is_unit)


def _anchor(el: Tag) -> str | None:
    if el.get("id"):
        return el["id"]
    for h in el.find_all(re.compile(r"^(h[1-6]|dt)$"), limit=1):
        return h.get("id")  # asciidoc / sphinx put the id on the heading
    return None


def _html_node(el: Tag, flavor: HtmlFlavor, heading: str, absolute: bool = False) -> Node:
    units = list(_units_below(el, flavor.is_unit))
    children = [_html_node(u, flavor, *flavor.heading(u)) for u in units]
    return Node(_anchor(el), heading, html_text(el, units), children, absolute)


def parse_html(path: Path, flavor: HtmlFlavor) -> Node | None:
    soup = BeautifulSoup(path.read_bytes(), "html.parser")
    title = flavor.title(soup)  # before noise removal: it may live in a header
    for sel in flavor.noise:
        for t in soup.select(sel):
            t.decompose()
    content = flavor.content(soup)
    if content is None:
        return None
    if not title:
        title = clean_heading(soup.title.get_text()) if soup.title else path.stem
    root = _html_node(content, flavor, title)
    root.anchor = None  # the content wrapper's id is layout, not a section
    # Descend through wrappers holding a single section (the usual page shape).
    while len(root.children) == 1 and len(root.text) < 80:
        root = root.children[0]
    return root


# -- PostgreSQL (DocBook XSL)

_PG_UNITS = {"sect1", "sect2", "sect3", "sect4", "refsect1", "refsect2", "refsect3", "refentry",
             "chapter", "appendix", "preface", "part", "simplesect", "refsynopsisdiv"}


def _pg_heading(el: Tag) -> tuple[str, bool]:
    if "refentry" in el.get("class", []):  # "SELECT — retrieve rows from a table or view"
        name = el.select_one(".refentrytitle")
        purpose = el.select_one(".refnamediv p")
        if name and purpose:
            what = purpose.get_text().split("—", 1)[-1]
            return f"{clean_heading(name.get_text())} — {' '.join(what.split())}", False
    return _first_heading(el), False


POSTGRES = HtmlFlavor(
    content=lambda s: s.body,
    noise=("div.navheader", "div.navfooter", "div.toc", "div.list-of-tables",
           "div.list-of-examples", "div.list-of-figures", "a.indexterm", "script", "style"),
    is_unit=lambda t: t.name == "div" and bool(_PG_UNITS.intersection(t.get("class", []))),
    heading=_pg_heading,
)


# -- Python (Sphinx): sections, and API entries (functions, classes, C API)


def _py_is_unit(t: Tag) -> bool:
    if t.name == "section" or (t.name == "div" and "section" in t.get("class", [])):
        return True
    if t.name == "dl" and {"py", "c"}.intersection(t.get("class", [])):
        dt = t.find("dt", recursive=False)
        return bool(dt and dt.get("id"))
    return False


def _py_heading(el: Tag) -> tuple[str, bool]:
    if el.name == "dl":
        name = el.find("dt", recursive=False)["id"]
        return re.sub(r"^c\.", "", name), True
    return _first_heading(el), False


PYTHON = HtmlFlavor(
    content=lambda s: s.select_one("div.body") or s.select_one('[role="main"]'),
    noise=("div.related", "div.sphinxsidebar", "div.footer", "a.headerlink", "div.toctree-wrapper",
           "nav", "script", "style", "form", "div.mobile-nav", "span.linenos"),
    is_unit=_py_is_unit,
    heading=_py_heading,
)

# -- CMake (Sphinx too; its pages open with a local table of contents)

CMAKE = replace(PYTHON, noise=PYTHON.noise + ("div.contents", "div.topic.contents"))


# -- Git (AsciiDoc)

def _git_title(soup: BeautifulSoup) -> str | None:
    """'git-clean(1) — Remove untracked files from the working tree' from the header."""
    h1 = soup.select_one("#header h1")
    if not h1:
        return None
    title = clean_heading(h1.get_text()).removesuffix(" Manual Page")
    name = soup.select_one("#header .sectionbody p")  # NAME: "git-clean - Remove ..."
    name = " ".join(name.get_text().split()) if name else ""
    if " - " in name:
        title += " — " + name.split(" - ", 1)[1]
    return title


GIT = HtmlFlavor(
    content=lambda s: s.select_one("#content") or s.body,
    noise=("#footer", "#toc", "#header", "script", "style"),
    is_unit=lambda t: t.name == "div" and bool({"sect1", "sect2", "sect3"}.intersection(t.get("class", []))),
    heading=lambda el: (_first_heading(el), False),
    title=_git_title,
)


# -- Java API (javadoc): a class page, and each member's detail as a document of its own

_FIRST_SENTENCE = re.compile(r"^(.+?[.!?])(?:\s|$)", re.S)


def _summary(el: Tag | None) -> str:
    """Javadoc's first sentence of a description block (its summary)."""
    if el is None:
        return ""
    text = " ".join(el.get_text().split())
    m = _FIRST_SENTENCE.match(text)
    return (m.group(1) if m else text)[:200]


def _jdk_class(soup: BeautifulSoup) -> str:
    """'java.lang.String' from the page header ('Package java.lang', 'Class String')."""
    label = soup.select_one("div.sub-title .package-label-in-type")
    pkg = label.find_next("a") if label else None
    h1 = soup.select_one("h1.title")
    name = " ".join(h1.get_text().split()).split(" ", 1)[-1] if h1 else ""
    name = re.sub(r"<.*", "", name)  # generics: 'HashMap<K,V>' -> 'HashMap'
    return f"{pkg.get_text().strip().removeprefix('Package ')}.{name}" if pkg and name else name


def _jdk_title(soup: BeautifulSoup) -> str | None:
    name = _jdk_class(soup)
    purpose = _summary(soup.select_one("section.class-description div.block"))
    return f"{name} — {purpose}" if name and purpose else name or None


def _jdk_heading(el: Tag) -> tuple[str, bool]:
    name = el.find("h3")
    params = el.select_one(".member-signature .parameters")
    title = (name.get_text().strip() if name else el.get("id", "")) + (
        " ".join(params.get_text().split()) if params else "")
    purpose = _summary(el.select_one("div.block"))
    return (f"{title} — {purpose}" if purpose else title), True


JAVADOC = HtmlFlavor(
    content=lambda s: s.select_one("main"),
    noise=("nav", "header", "footer", "div.header", "section.summary", "div.inheritance", "script", "style"),
    is_unit=lambda t: t.name == "section" and "detail" in t.get("class", []) and bool(t.get("id")),
    heading=_jdk_heading,
    title=_jdk_title,
)


def parse_javadoc(path: Path) -> Node | None:
    """A class page: its description, and one child per member detail (qualified by the
    class's simple name, so 'String.indexOf(int ch)' names one member corpus-wide)."""
    root = parse_html(path, JAVADOC)
    if root is None:
        return None
    simple = _short(root.heading).rsplit(".", 1)[-1]
    for child in root.children:
        child.heading = f"{simple}.{child.heading}"
    return root


def split_units(root: Node, source: str, relpath: str) -> list[dict]:
    """The page's own text, and each section below it, as documents of their own (an API
    reference is looked up one member at a time); a huge one is cut as ``split_page`` cuts."""
    flat = Node(root.anchor, root.heading, root.text)
    units = [flat] + [u for c in root.children for u in _units(c)]
    return [d for unit in units for d in split_page(unit, source, relpath)]


def _units(node: Node) -> list[Node]:
    return [Node(node.anchor, node.heading, node.text, [], node.absolute)] + [u for c in node.children for u in _units(c)]


# --------------------------------------------------------------------------
# roff (man pages) -> text, in pure Python so groff is not needed

_ROFF_GLYPHS = {
    "em": "—", "en": "–", "hy": "-", "mi": "-", "aq": "'", "dq": '"', "lq": "“", "rq": "”",
    "oq": "‘", "cq": "’", "bu": "•", "co": "©", "rg": "®", "tm": "™", "mu": "×", "di": "÷",
    "+-": "±", "<=": "≤", ">=": "≥", "!=": "≠", "->": "→", "<-": "←", "ua": "↑", "da": "↓",
    "ti": "~", "ha": "^", "rs": "\\", "sl": "/", "ga": "`", "ul": "_", "dg": "†", "de": "°",
    "pl": "+", "eq": "=", "fo": "«", "fc": "»", "bv": "|", "ba": "|", "lB": "[", "rB": "]",
    "lC": "{", "rC": "}", "la": "⟨", "ra": "⟩", "Tm": "™", "R": "®", "ss": "ß", "ae": "æ",
}
_ROFF_ESCAPE = re.compile(
    r"\\(?:(?P<font>[fF](?:\[[^\]]*\]|\(..|.))"
    r"|\((?P<g2>..)|\[(?P<gb>[^\]]*)\]"
    r"|\*(?:\((?P<s2>..)|\[(?P<sb>[^\]]*)\]|(?P<s1>.))"
    r"|(?P<size>s[-+]?(?:\d+|\(\d\d|\[\d+\]))"
    r"|(?P<fun>[hvwNmMkoDlLbxXYZ]|n[-+]?)(?:'[^']*'|\[[^\]]*\]|\(..|.)"
    r"|(?P<ch>.))"
)
_ROFF_SIMPLE = {"-": "-", "e": "\\", "\\": "\\", " ": " ", "~": " ", "0": " ", ".": ".",
                "'": "'", "`": "`", "t": "\t"}


def roff_unescape(text: str, strings: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        g = m.groupdict()
        if g["g2"] or g["gb"]:
            name = g["g2"] or g["gb"]
            if name.startswith("u") and re.fullmatch(r"u[0-9A-Fa-f]{4,6}", name):
                return chr(int(name[1:], 16))
            return _ROFF_GLYPHS.get(name, "")
        if g["s2"] or g["sb"] or g["s1"]:
            name = g["s2"] or g["sb"] or g["s1"]
            return strings.get(name, _ROFF_GLYPHS.get(name, ""))
        if g["ch"] is not None:
            return _ROFF_SIMPLE.get(g["ch"], "")  # \& \c \% \| \^ ... print nothing
        return ""  # fonts, sizes, motions

    return _ROFF_ESCAPE.sub(sub, text)


def _roff_args(line: str) -> list[str]:
    """Split macro arguments, honouring "double quotes" ("" is a literal quote)."""
    args, i = [], 0
    while i < len(line):
        if line[i] in " \t":
            i += 1
        elif line[i] == '"':
            j, buf = i + 1, []
            while j < len(line):
                if line[j] == '"' and line[j + 1:j + 2] == '"':
                    buf.append('"')
                    j += 2
                elif line[j] == '"':
                    break
                else:
                    buf.append(line[j])
                    j += 1
            args.append("".join(buf))
            i = j + 1
        else:
            j = i
            while j < len(line) and line[j] not in " \t":
                j += 2 if line[j] == "\\" else 1  # "\ " is an unbreakable space
            j = min(j, len(line))
            args.append(line[i:j])
            i = j
    return args


class _RoffWriter:
    """Collects filled paragraphs and no-fill lines into per-.SH sections."""

    def __init__(self) -> None:
        self.sections: list[tuple[int, str, list[str]]] = [(0, "", [])]
        self.para: list[str] = []
        self.fill = True

    def text(self, s: str) -> None:
        if self.fill:
            self.para.append(s)
        else:
            self.flush()
            self.sections[-1][2].append(s.rstrip())

    def flush(self) -> None:
        if self.para:
            self.sections[-1][2].append(" ".join(" ".join(self.para).split()))
            self.para = []

    def section(self, level: int, heading: str) -> None:
        self.flush()
        self.sections.append((level, heading, [heading]))


_ROFF_JOIN = {"BR", "IR", "RB", "BI", "IB", "RI"}  # alternating fonts, no spaces
_ROFF_BREAK = {"PP", "P", "LP", "sp", "HP", "TP", "TQ", "br", "SY", "YS", "RS", "RE", "in", "ti"}


def parse_roff(raw: str) -> tuple[str, str, list[tuple[int, str, list[str]]]] | None:
    """(name, section, [(level, heading, lines)]) of a man page, level 1 for .SH
    and 2 for .SS; None for .so aliases."""
    raw = re.sub(r"(?<!\\)\\\n", "", raw)  # line continuations
    strings: dict[str, str] = {}
    out = _RoffWriter()
    name, sec = "", ""
    in_table = table_head = False
    skip_until: str | None = None
    for line in raw.splitlines():
        if skip_until is not None:
            if line.startswith(skip_until):
                skip_until = None
            continue
        if line.startswith(("'\\\"", ".\\\"")):  # comment lines
            continue
        line = re.sub(r'(?<!\\)\\".*', "", line)  # trailing comments
        if line.strip() in (".", "'"):  # empty request
            continue
        if in_table:
            if table_head:  # tbl options and format lines end with "."
                table_head = not line.rstrip().endswith(".")
                continue
            if line.startswith(".TE"):
                in_table = False
                out.fill = True
                continue
            if line.strip() in ("_", "=", "T}"):
                continue
            line = line.replace("T{", "").replace("T}", "").replace("\t", "  ")
        if line.startswith((".", "'")) and len(line) > 1:
            m = re.match(r"[.'](\S+)\s*(.*)", line)
            if not m:
                continue
            macro, args = m.group(1), _roff_args(m.group(2))
            words = [roff_unescape(a, strings) for a in args]
            if macro == "so" and not name:
                return None
            if macro == "TH":
                name, sec = (words + ["", ""])[:2]
            elif macro in ("SH", "SS"):
                out.section(1 if macro == "SH" else 2, " ".join(words))
            elif macro == "IP":  # list item tag on its own line
                out.flush()
                if words:
                    out.text(words[0])
                    out.flush()
            elif macro in ("B", "I", "SM", "SB", "OP") and words:
                out.text(" ".join(words))
            elif macro in _ROFF_JOIN:
                out.text("".join(words))
            elif macro in ("nf", "EX"):
                out.flush()
                out.fill = False
            elif macro in ("fi", "EE"):
                out.fill = True
            elif macro in ("UR", "MT") and words:
                out.text(f"<{words[0]}>")
            elif macro == "ds" and args:  # user-defined string, used as \*(xx
                value = m.group(2).split(None, 1)[1:] or [""]
                strings[args[0]] = roff_unescape(value[0].removeprefix('"'), strings)
            elif macro == "de":
                skip_until = ".."
            elif macro == "TS":
                out.flush()
                in_table = table_head = True
                out.fill = False
            elif macro in _ROFF_BREAK:
                out.flush()
            # anything else (.ad .nh .PD .ft .if ...) only affects layout
        else:
            out.text(roff_unescape(line, strings))
    out.flush()
    return name, sec, out.sections


def parse_manpage(path: Path) -> Node | None:
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
        parsed = parse_roff(fh.read())
    if parsed is None:
        return None
    name, sec, sections = parsed
    body = next((lines for _, h, lines in sections if h == "NAME"), [])
    purpose = " ".join(body[1:]).split(" - ", 1)[-1].strip() if body else ""
    title = f"{name}({sec})" + (f" — {purpose}" if purpose else "")
    root = Node(None, title, "\n".join(sections[0][2]))
    for level, heading, lines in sections[1:]:
        anchor = re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-") or None
        node = Node(anchor, heading, "\n".join(lines))
        parent = root.children[-1] if level == 2 and root.children else root
        parent.children.append(node)
    return root


# --------------------------------------------------------------------------
# Mallard (GNOME's help pages: .page XML)

_MAL = "{http://projectmallard.org/1.0/}"
# Editorial and navigation markup: not what a reader of the page sees as its text.
_MAL_SKIP = {"info", "links", "comment", "media", "include"}
_MAL_LEAF = {"p", "code", "screen", "title", "subtitle", "synopsis"}


def _mal_tag(el) -> str:
    return el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""


def _mal_text(el, out: list[str], prefix: str = "") -> None:
    """The text of a page or section's own blocks (not its sub-sections), a line per block;
    a list or step item's first block is marked as a list entry."""
    for child in el:
        tag = _mal_tag(child)
        if tag in _MAL_SKIP or tag == "section":
            continue
        if tag in ("code", "screen"):
            text = "".join(child.itertext()).strip("\n")
        elif tag in _MAL_LEAF:
            text = _WS.sub(" ", "".join(child.itertext())).strip()
        else:
            item = tag == "item"
            _mal_text(child, out, "- " if item else prefix)
            continue
        if text:
            out.append(prefix + text)
            prefix = ""


def _mal_title(el) -> str | None:
    title = el.find(f"{_MAL}title")
    return _WS.sub(" ", "".join(title.itertext())).strip() if title is not None else None


def _mal_section(el, heading: str) -> Node:
    lines: list[str] = []
    _mal_text(el, lines)
    if heading and lines and lines[0] == heading:  # the section's own <title> is its heading
        lines = lines[1:]
    children = [_mal_section(s, _mal_title(s) or "") for s in el.findall(f"{_MAL}section")]
    return Node(el.get("id"), heading, "\n".join(lines), children)


def parse_mallard(path: Path) -> Node | None:
    import xml.etree.ElementTree as ET

    try:
        page = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise CorpusError(f"{path}: not well-formed Mallard XML: {exc}") from exc
    if _mal_tag(page) != "page":
        return None
    root = _mal_section(page, _mal_title(page) or path.stem)
    root.anchor = None
    return root


def _mallard_files(tree: Path) -> Iterator[tuple[Path, str]]:
    root = tree / "usr/share/help/C"  # the English originals; other folders are translations
    for path in sorted(root.glob("*/*.page")):
        yield path, path.relative_to(root).as_posix()


# --------------------------------------------------------------------------
# POD (Perl's reference pages and its core modules' documentation)

_POD_OPEN = re.compile(r"([A-Z])(<+)")
_POD_COMMAND = re.compile(r"=(\w+)\s*(.*)", re.S)
_POD_ENTITIES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "amp": "&", "quot": '"', "apos": "'",
                 "nbsp": " ", "copy": "©", "eacute": "é", "auml": "ä", "ouml": "ö", "uuml": "ü"}
# Pages that are not reference text: the FAQ (its questions are asked of the rest), the generated
# table of contents and the translations' notes.
POD_SKIP = re.compile(r"^(perlfaq\d*|perltoc|perlcn|perljp|perlko|perltw)$")
PERLFUNC = "pod/perlfunc"


def pod_inline(text: str, links: list[str] | None = None) -> str:
    """POD formatting codes as plain text (``C<< $a <=> $b >>`` → ``$a <=> $b``; ``X<>`` index
    entries dropped; ``L<text|target>`` → its text). Each link's target goes to ``links``."""

    def parse(i: int, close: re.Pattern | None) -> tuple[str, int]:
        out: list[str] = []
        while i < len(text):
            if close is not None:
                m = close.match(text, i)
                if m:
                    return "".join(out), m.end()
            m = _POD_OPEN.match(text, i)
            if m and (len(m.group(2)) == 1 or text[m.end():m.end() + 1].isspace()):
                n = len(m.group(2))
                inner, i = parse(m.end(), re.compile(">" if n == 1 else r"\s+" + ">" * n))
                out.append(_pod_code(m.group(1), inner.strip() if n > 1 else inner, links))
                continue
            out.append(text[i])
            i += 1
        return "".join(out), i

    return parse(0, None)[0]


def _pod_code(code: str, inner: str, links: list[str] | None) -> str:
    if code in "XZ":
        return ""
    if code == "E":  # a name, or a number: decimal, 0x hex or 0-led octal (perlpodspec)
        if inner.lower().startswith("0x"):
            return chr(int(inner, 16))
        if inner.isdigit():
            return chr(int(inner, 8) if inner.startswith("0") else int(inner))
        return _POD_ENTITIES.get(inner, inner)
    if code != "L":
        return inner
    label, _, target = inner.rpartition("|")
    if links is not None:
        links.append(target)
    if label:
        return label
    name, _, section = target.partition("/")
    section = section.strip('"')
    return f"{section} in {name}" if section and name else section or name


def pod_blocks(raw: str) -> Iterator[tuple[str, str, str]]:
    """A POD source's paragraphs as ``(command, argument, text)``: ``("head2", heading, "")``,
    ``("item", label, "")``, ``("", "", text)`` for ordinary and verbatim paragraphs. Code
    outside ``=pod``..``=cut``, ``=begin``..``=end`` regions and ``=for`` paragraphs are left out."""
    in_pod, skip_to = False, None
    for para in re.split(r"\n[ \t]*\n", raw.replace("\r\n", "\n")):
        para = para.strip("\n")
        if not para:
            continue
        command_match = _POD_COMMAND.match(para)
        if command_match:
            command, arg = command_match.groups()
            if command == "cut":
                in_pod = False
                continue
            in_pod = True
            if skip_to:
                if command == "end" and arg.split()[:1] == [skip_to]:
                    skip_to = None
                continue
            if command == "begin":
                skip_to = (arg.split() or [""])[0]
            elif command in ("head1", "head2", "head3", "head4", "item", "over", "back"):
                yield command, " ".join(arg.split()), ""
            continue
        if in_pod and not skip_to:
            yield "", "", para


def parse_pod(path: Path) -> Node | None:
    """A POD page as sections: ``=head1`` below the page, ``=head2`` below it, deeper heads below
    that; the page's title from its NAME paragraph. In ``perlfunc`` each function of the
    alphabetical listing (its ``=item`` signatures and their text) becomes a node of its own,
    marked ``absolute``, which :func:`split_pod` makes a page."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    functions = path.stem == "perlfunc"
    root = Node(None, path.stem, "")
    stack: list[tuple[int, Node]] = [(0, root)]
    texts: dict[int, list[str]] = {id(root): []}
    name_line, heading, depth, last = "", "", 0, ""
    entry: Node | None = None

    def add(level: int, node: Node) -> Node:
        while stack[-1][0] >= level:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((level, node))
        texts[id(node)] = []
        return node

    for command, arg, text in pod_blocks(raw):
        if command.startswith("head"):
            level = min(int(command[4]), 3)
            heading = pod_inline(arg).strip()
            entry = None
            if level == 1 and heading == "NAME":  # its paragraph is the page's title
                del stack[1:]
                continue
            add(level, Node(re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-") or None, heading, ""))
        elif command == "over":
            depth += 1
        elif command == "back":
            depth = max(0, depth - 1)
        elif command == "item":
            label = pod_inline(arg).strip()
            if functions and depth == 1 and heading == "Alphabetical Listing of Perl Functions":
                if entry is None or last != "item":
                    name = re.match(r"-?\w+|\S+", label or "?").group(0)
                    entry = add(4, Node(name, name, "", absolute=True))
                texts[id(entry)].append(label)
            elif label and label != "*":
                texts[id(stack[-1][1])].append("- " + label.lstrip("* "))
        else:
            # a verbatim paragraph (indented code) is kept as it is; it has no formatting codes
            body = text if text[:1] in " \t" else " ".join(pod_inline(text).split())
            if not body:  # an index entry alone (X<...>) is no text
                continue
            if heading == "NAME" and not name_line:
                name_line = body
                continue
            texts[id(stack[-1][1])].append(body)
        last = command or "text"
    nodes = [root]
    while nodes:
        node = nodes.pop()
        node.text = "\n".join(texts.get(id(node), []))
        nodes.extend(node.children)
    if not root.children and not root.text:
        return None
    name, _, purpose = (name_line or path.stem).partition(" - ")
    root.heading = f"{name.strip()} — {purpose.strip()}" if purpose.strip() else name.strip()
    return root


def split_pod(root: Node, source: str, relpath: str) -> list[dict]:
    """``split_page``, with each of perlfunc's functions a page of its own (``pod/perlfunc/sort``):
    a function is looked up by its name, as a module is."""
    pages = [(relpath, root)]
    if relpath == PERLFUNC:
        def pull(node: Node) -> None:
            for child in node.children:
                if child.absolute:
                    pages.append((f"{relpath}/{child.heading}", Node(None, f"perlfunc › {child.heading}",
                                                                       child.full_text())))
                else:
                    pull(child)
            node.children = [c for c in node.children if not c.absolute]
        pull(root)
    return [d for rel, node in pages for d in split_page(node, source, rel)]


def _pod_files(tree: Path) -> Iterator[tuple[Path, str]]:
    """Reference pages as ``pod/<name>`` and modules as their name's path (``Time/Piece``); a
    module documented in a ``.pod`` beside its ``.pm`` is read from the ``.pod``."""
    for root in sorted(tree.glob("usr/share/perl/5*")) + sorted(tree.glob("usr/lib/*/perl/5*")):
        for path in sorted({*root.rglob("*.pod"), *root.rglob("*.pm")}):
            rel = path.relative_to(root).with_suffix("").as_posix()
            if rel.startswith("pod/"):
                if POD_SKIP.match(path.stem):
                    continue
            elif path.suffix == ".pm" and path.with_suffix(".pod").exists():
                continue
            yield path, rel


# --------------------------------------------------------------------------
# Sources: which packages, which files, how to parse them


@dataclass(frozen=True)
class Source:
    packages: Callable[[], list[str]]  # resolved lazily: may need apt-cache
    files: Callable[[Path], Iterator[tuple[Path, str]]]  # unpacked tree -> (file, relpath)
    parse: Callable[[Path], Node | None]
    split: Callable[[Node, str, str], list[dict]] = split_page  # a page -> its documents


def _html_files(base_glob: str, skip: str) -> Callable[[Path], Iterator[tuple[Path, str]]]:
    """HTML pages under the directory matching `base_glob`, minus index/search
    pages (`skip` regex on the relative path), in sorted order."""
    skip_rx = re.compile(skip)

    def files(tree: Path) -> Iterator[tuple[Path, str]]:
        roots = sorted(tree.glob(base_glob))
        if not roots:
            raise CorpusError(f"{base_glob} not found in {tree}")
        for path in sorted(roots[0].rglob("*.html")):
            rel = path.relative_to(roots[0]).as_posix()
            if not skip_rx.search(rel):
                yield path, rel
    return files


def _man_files(tree: Path) -> Iterator[tuple[Path, str]]:
    root = tree / "usr/share/man"
    for path in sorted(root.glob("man*/*.gz")):
        if not path.is_symlink():  # symlinks are aliases of another page
            yield path, path.relative_to(root).as_posix()[:-3]


SOURCES: dict[str, Source] = {
    "git": Source(
        lambda: ["git-doc"],
        _html_files("usr/share/doc/git-doc", r"^(index|git-doc)\.html$"),
        lambda p: parse_html(p, GIT)),
    "manpages": Source(lambda: ["manpages", "manpages-dev"], _man_files, parse_manpage),
    "postgresql": Source(
        lambda: [_newest_package(r"postgresql-doc-[0-9]+")],
        _html_files("usr/share/doc/postgresql-doc-*/html", r"^(bookindex|index|biblio)\.html$"),
        lambda p: parse_html(p, POSTGRES)),
    "python": Source(
        lambda: [_newest_package(r"python3\.[0-9]+-doc")],
        # skip generated indexes, search, toctree-only pages and the raw changelog
        _html_files("usr/share/doc/python3.*/html",
                    r"^_|(^|/)(genindex[^/]*|py-modindex|search|contents|index)\.html$"
                    r"|^whatsnew/changelog\.html$"),
        lambda p: parse_html(p, PYTHON)),
    "javadoc": Source(
        # the Java SE API and JavaFX's (both written by javadoc 17, whose member sections we read)
        lambda: [_newest_package(r"openjdk-[0-9]+-doc"), "libopenjfx-java-doc"],
        # class and interface pages only (their names start upper-case); no indexes, trees or uses
        _html_files("usr/share/doc/*/api", r"(^|/)(class-use|index-files|doc-files)/"
                    r"|(^|/)[^A-Z/][^/]*\.html$"),
        parse_javadoc, split_units),
    # A help center's tech-support articles: GNOME's desktop help, its administrators' guide and
    # the help of the desktop's applications.
    "gnome-help": Source(lambda: list(HELP_PACKAGES), _mallard_files, parse_mallard),
    # A command reference: the manual pages of a system's everyday administration tools.
    "commands": Source(lambda: list(COMMAND_PACKAGES), _man_files, parse_manpage),
    # A language's reference: Perl's manual pages and its core modules' documentation (perlfaq
    # left out: its questions are asked of the rest, see ``make_perlfaq_questions``).
    "perl": Source(lambda: ["perl-doc", _newest_package(r"perl-modules-5\.[0-9]+"), _newest_package(r"libperl5\.[0-9]+")],
                   _pod_files, parse_pod, split_pod),
    "cmake": Source(
        lambda: ["cmake-doc"],
        _html_files("usr/share/doc/cmake-data/html", r"^_|(^|/)(genindex|search|index)\.html$"),
        lambda p: parse_html(p, CMAKE)),
}


# --------------------------------------------------------------------------
# Assembly


def _parse_one(job: tuple[str, str, str]) -> list[dict]:
    source, path, rel = job
    root = SOURCES[source].parse(Path(path))
    if root is None:
        return []
    return [d for d in SOURCES[source].split(root, source, rel) if len(d["text"]) >= MIN_DOC_CHARS]


def _code_hash() -> str:
    """Hash of the parsing code (everything above the assembly section), so changes to
    assembly or question generation keep the parsed documents cached."""
    text = Path(__file__).read_text(encoding="utf-8")
    return hashlib.sha1(text.split("\n# Assembly\n", 1)[0].encode()).hexdigest()[:12]


def source_docs(name: str, workers: int | None = None) -> list[dict]:
    """All documents of one source, parsed once and cached per package version
    and per version of this script."""
    src = SOURCES[name]
    fetched = [fetch_package(p) for p in src.packages()]
    key = hashlib.sha1("|".join([_code_hash(), *(deb for _, deb in fetched)]).encode()).hexdigest()[:16]
    cached = CACHE / "parsed" / f"{name}-{key}.jsonl"
    if cached.exists():
        return [json.loads(l) for l in cached.open(encoding="utf-8")]
    jobs = [(name, str(path), rel) for tree, _ in fetched for path, rel in src.files(tree)]
    workers = workers or max(1, min(8, os.cpu_count() or 1))
    with ProcessPoolExecutor(workers) as pool:
        docs = [d for page in pool.map(_parse_one, jobs, chunksize=8) for d in page]
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
    tmp.replace(cached)
    return docs


def dedupe(docs: list[dict]) -> list[dict]:
    """Sort by id and drop repeated texts (keeping the first id)."""
    seen_ids: set[str] = set()
    seen_text: set[str] = set()
    out = []
    for d in sorted(docs, key=lambda d: d["id"]):
        h = hashlib.sha1(d["text"].encode()).hexdigest()
        if h in seen_text or d["id"] in seen_ids:
            continue
        seen_text.add(h)
        seen_ids.add(d["id"])
        out.append(d)
    return out


def sample(docs: list[dict], limit: int | None) -> list[dict]:
    """Evenly strided deterministic sample, so a small run still spans every source."""
    if limit is None or limit >= len(docs):
        return docs
    return [docs[i * len(docs) // limit] for i in range(limit)]


def _write_jsonl(path: Path, rows: Iterable[dict]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path.stat().st_size


def build_corpus(out: Path, min_docs: int = 5000, limit: int | None = None,
                 sources: Iterable[str] | None = None, questions: Path | None = None,
                 n_questions: int = 100, faq_questions: Path | None = None,
                 faq_page_questions: Path | None = None, perlfaq_questions: Path | None = None) -> dict:
    """Write the corpus JSONL to `out` (and optionally questions); return a summary.

    `questions` are known-item questions from titles; `faq_questions` FAQ-style questions from
    body text with the source section as gold, `faq_page_questions` the same questions with
    every section of the page as gold; `perlfaq_questions` Perl's FAQ with the pages its answers
    link to as gold (the ``perl`` source).

    Raises CorpusError when fewer than `min_docs` documents can be assembled
    (checked before `limit` is applied, so small sampled runs stay possible).
    """
    start = time.time()
    names = list(sources or DEFAULT_SOURCES)
    unknown = [n for n in names if n not in SOURCES]
    if unknown:
        raise CorpusError(f"unknown sources {unknown}; known: {sorted(SOURCES)}")
    docs: list[dict] = []
    errors: list[str] = []
    for name in names:
        try:
            docs += source_docs(name)
        except CorpusError as exc:  # keep going: the other sources may suffice
            errors.append(f"{name}: {exc}")
            print(f"warning: {name}: {exc}", file=sys.stderr)
    docs = dedupe(docs)
    if len(docs) < min_docs:
        raise CorpusError(f"only {len(docs)} documents assembled, need {min_docs}"
                          + (f" ({'; '.join(errors)})" if errors else ""))
    docs = sample(docs, limit)
    from faq_questions import make_faq_questions, page_level  # a sibling: benchmarks/ is on the path

    qs = make_questions(docs, n_questions) if questions else []
    faq = make_faq_questions(docs, n_questions) if faq_questions or faq_page_questions else []
    size = _write_jsonl(Path(out), ({k: d[k] for k in ("id", "title", "text")} for d in docs))
    if questions:
        _write_jsonl(Path(questions), qs)
    if faq_questions:
        _write_jsonl(Path(faq_questions), faq)
    if faq_page_questions:
        _write_jsonl(Path(faq_page_questions), page_level(faq))
    perlfaq = make_perlfaq_questions(docs) if perlfaq_questions else []
    if perlfaq_questions:
        _write_jsonl(Path(perlfaq_questions), perlfaq)
    return {
        "out": str(out),
        "docs": len(docs),
        "per_source": dict(sorted(Counter(d["id"].split("/", 1)[0] for d in docs).items())),
        "bytes": size,
        "mb": round(size / 1e6, 2),
        "questions": len(qs),
        "faq_questions": len(faq),
        "perlfaq_questions": len(perlfaq),
        "errors": errors,
        "seconds": round(time.time() - start, 2),
    }


# --------------------------------------------------------------------------
# Evaluation questions: templated from distinctive titles, no LLM

_GENERIC = {"description", "examples", "example", "notes", "note", "see also", "synopsis",
            "overview", "introduction", "parameters", "options", "return value", "errors",
            "bugs", "compatibility", "conforming to", "standards", "history", "versions",
            "attributes", "files", "environment", "outputs", "inputs", "diagnostics", "usage",
            "summary", "details", "caveats", "authors", "author", "name", "library"}
_IDENTIFIER = re.compile(r"^[A-Za-z_][\w.]*(\(\))?$")


def _question_for(heading: str) -> tuple[str, str] | None:
    """(dedup key, question) for a section heading, or None if too vague."""
    if " — " in heading:  # "SELECT — retrieve rows ..." / "open(2) — open and possibly ..."
        purpose = heading.split(" — ", 1)[1].strip().rstrip(".")
        if len(purpose) >= 15:
            return purpose.lower(), f"Which page covers: {purpose}?"
        return None
    if heading.lower() in _GENERIC:
        return None
    if _IDENTIFIER.match(heading) and ("." in heading or "_" in heading):
        return heading.lower(), f"What is {heading} for?"
    if heading.split(" ", 1)[0] in ("How", "Why", "What", "When", "Where", "Can", "Is", "Are",
                                    "Do", "Does", "Should", "Which"):
        return heading.lower(), heading if heading.endswith("?") else heading + "?"
    if len(heading) >= 15 and len(heading.split()) >= 3:
        return heading.lower(), f"Where can I read about {heading}?"
    return None


def make_questions(docs: list[dict], n: int = 100) -> list[dict]:
    """~n questions, an equal share per source, from documents whose question key
    (title purpose or heading) is unique in the corpus; picked by a hash of the
    id so the selection is stable and spread out."""
    keyed = []
    for d in docs:
        q = _question_for(d["_heading"]) if d["_heading"] else None  # "" for "(part N)" docs
        if q:
            keyed.append((q[0], q[1], d))
    counts = Counter(k for k, _, _ in keyed)
    by_source: dict[str, list[tuple[str, dict]]] = {}
    for key, question, d in keyed:
        if counts[key] == 1:
            by_source.setdefault(d["id"].split("/", 1)[0], []).append((question, d))
    picked = []
    quota = -(-n // max(1, len(by_source)))
    for src in sorted(by_source):
        ranked = sorted(by_source[src], key=lambda qd: hashlib.sha1(qd[1]["id"].encode()).hexdigest())
        picked += ranked[:quota]
    picked = sorted(picked, key=lambda qd: hashlib.sha1(qd[1]["id"].encode()).hexdigest())[:n]
    return [{"id": f"q{i:03d}", "question": q, "gold_ids": [d["id"]]}
            for i, (q, d) in enumerate(sorted(picked, key=lambda qd: qd[1]["id"]))]



def _link_page(target: str, pages: Container[str]) -> str | None:
    """The corpus page a POD link's target names (``perlfunc/sort`` → ``perl/pod/perlfunc/sort``,
    ``perlop/"Quote..."`` → ``perl/pod/perlop``, ``Time::Piece`` → ``perl/Time/Piece``), if any."""
    name, _, section = target.strip().partition("/")
    name, section = name.strip().strip('"'), section.strip().strip('"')
    if name == "perlfunc":  # the function reference as a whole names no one page
        candidates = [f"perl/pod/perlfunc/{section.split()[0]}"] if section else []
    else:
        candidates = [f"perl/pod/{name}", "perl/" + name.replace("::", "/")]
    return next((c for c in candidates if c in pages), None)


def _faq_entries(pod: str) -> Iterator[tuple[str, list[str]]]:
    """A perlfaq page's questions (its ``=head2`` headings) with the link targets of each answer."""
    question, links = None, []
    for command, arg, text in pod_blocks(pod):
        if command.startswith("head"):
            if question:
                yield question, links
            question, links = (" ".join(pod_inline(arg).split()) if command == "head2" else None), []
        elif question:
            pod_inline(arg or text, links)
    if question:
        yield question, links


def make_perlfaq_questions(docs: list[dict], faq_pods: Iterable[Path] | None = None) -> list[dict]:
    """The questions of Perl's FAQ (``perlfaq1``-``perlfaq9`` of perl-doc, or ``faq_pods``: each
    ``=head2`` is a question its authors answered), with the reference pages their answers link
    to as gold (page level: every document of a linked page). Questions whose answers link to no
    page of the corpus are left out; the FAQ itself is not in the corpus."""
    from faq_questions import docs_by_page  # a sibling: benchmarks/ is on the path

    if faq_pods is None:
        tree, _ = fetch_package("perl-doc")
        faq_pods = sorted(tree.glob("usr/share/perl/5*/pod/perlfaq[1-9].pod"))
    page_docs = docs_by_page(docs)
    rows = []
    for path in faq_pods:
        for question, links in _faq_entries(path.read_text(encoding="utf-8", errors="replace")):
            gold = list(dict.fromkeys(p for p in (_link_page(t, page_docs) for t in links) if p))
            if gold:
                rows.append({"id": f"{path.stem}-{len(rows):03d}", "question": question,
                             "gold_ids": [i for p in gold for i in page_docs[p]], "gold_pages": gold})
    return rows


# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=HERE / ".cache" / "debian-docs.jsonl")
    ap.add_argument("--min-docs", type=int, default=5000)
    ap.add_argument("--limit", type=int, default=None, help="deterministic strided sample size")
    ap.add_argument("--sources", default=",".join(DEFAULT_SOURCES),
                    help=f"comma list from {','.join(SOURCES)}")
    ap.add_argument("--questions", type=Path, default=None, help="also write evaluation questions")
    ap.add_argument("--faq-questions", type=Path, default=None,
                    help="also write FAQ-style questions from body text (section-level gold)")
    ap.add_argument("--faq-page-questions", type=Path, default=None,
                    help="the FAQ questions with page-level gold (every section of the page)")
    ap.add_argument("--n-questions", type=int, default=100)
    args = ap.parse_args(argv)
    try:
        summary = build_corpus(args.out, args.min_docs, args.limit,
                               [s.strip() for s in args.sources.split(",") if s.strip()],
                               args.questions, args.n_questions, args.faq_questions,
                               args.faq_page_questions)
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for src, count in summary["per_source"].items():
        print(f"{src:12s} {count:6d} docs")
    print(f"{'total':12s} {summary['docs']:6d} docs, {summary['mb']} MB -> {summary['out']}")
    if args.questions:
        print(f"questions    {summary['questions']:6d} -> {args.questions}")
    if args.faq_questions or args.faq_page_questions:
        print(f"faq          {summary['faq_questions']:6d} -> {args.faq_questions or args.faq_page_questions}")
    print(f"took {summary['seconds']}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
