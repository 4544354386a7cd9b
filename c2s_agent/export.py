"""``c2s export``: a compiled tree as plain Agent Skills that a client (Claude Code, any Agent Skills
loader) uses with its own file tools, no c2s server and no document store needed.

    DIR/.claude/skills/<skill>/SKILL.md     --format claude-code (open DIR in Claude Code)
    DIR/<skill>/SKILL.md                    --format agent-skills
    <skill>/<group>/INDEX.md                the nested nav files, their links rewritten
    <skill>/docs/<safe-name>.md             full text of each document the skill lists
    DIR/c2s-export.json                     format, skills, doc_id → file, notes (also the marker)
    DIR/EXPORT-NOTES.md                     what was trimmed, split or left out (only when anything was)

Every skill folder is self-contained (its documents live inside it), so one folder can be copied,
zipped or uploaded alone; links between skills (related skills, ``@see`` rows) are relative and
work wherever the skill folders stay siblings. Everything is deterministic: the same tree gives a
byte-identical export.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional
from urllib.parse import quote, unquote

import yaml

from c2s_core.docstore import DocumentStore
from c2s_core.frontmatter import (MAX_DESCRIPTION, MAX_NAME, NAME_RULE, RESERVED_WORDS, clean_description,
                                      parse_frontmatter)
from c2s_core.atomic_publish import swap_in
from c2s_core.layout import (INDEX_FILE, SECTION_DOCUMENTS, SECTION_EXAMPLES, SECTION_RELATED, SECTION_SEE_ALSO,
                                 SECTION_SUBGROUPS, SKILL_FILE, SKILLS_DIR)

from c2s_core.tree import Tree, open_tree

FORMATS = ("claude-code", "agent-skills")
EXPORT_FILE = "c2s-export.json"
NOTES_FILE = "EXPORT-NOTES.md"
DOCS_DIR = "docs"
CONTINUED_FILE = "CONTINUED-{n}.md"
CLAUDE_SKILLS_DIR = ".claude/skills"
# Agent Skills guidance: keep SKILL.md under 500 lines. Every exported nav file is held to it.
MAX_LINES = 499
# Claude Code loads every skill's name and description up front within a character budget
# (about 15,000 characters by default); over it, skills silently drop out of the model's view.
DESCRIPTION_BUDGET = 15_000
DESCRIPTION_FLOOR = 60  # shortest a description is cut to before whole skills are left out
PART_SKILL_RESERVE = 4096  # bytes a part's own SKILL.md may take
EXPORT_VERSION = 1


class ExportError(ValueError):
    """The export cannot be made as asked; the message says why, in one line."""


@dataclass
class ExportedSkill:
    name: str  # the folder, = frontmatter name
    description: str
    source: str  # the tree's skill folder (skills/<name>), shared by all parts of one skill
    part: int = 1
    parts: int = 1
    files: list[str] = field(default_factory=list)  # relative to the skill folder, sorted
    bytes: int = 0


@dataclass
class ExportResult:
    root: Path  # DIR
    skills_root: Path  # DIR/.claude/skills or DIR
    format: str
    corpus: str
    skills: list[ExportedSkill]
    documents: dict[str, str]  # doc_id → file, relative to root (first piece of a split document)
    notes: list[str]

    def to_json(self) -> dict:
        return {"c2s_export": EXPORT_VERSION, "format": self.format, "corpus": self.corpus,
                "skills_dir": self.skills_root.relative_to(self.root).as_posix() or ".",
                "skills": [{"name": s.name, "description": s.description, "source": s.source, "part": s.part,
                            "parts": s.parts, "files": len(s.files), "bytes": s.bytes} for s in self.skills],
                "documents": self.documents, "notes": self.notes}


# -- names and descriptions ------------------------------------------------------------------------


def valid_name(raw: str, taken: set[str], suffix: str = "") -> str:
    """``raw`` as an Agent Skills name (≤64 chars of [a-z0-9-], single inner hyphens, no reserved
    word), plus ``suffix``, unique among ``taken`` (which it joins)."""
    name = re.sub(r"[^a-z0-9]+", "-", raw.lower())
    for word in RESERVED_WORDS:
        name = name.replace(word, "-")
    name = re.sub(r"-{2,}", "-", name).strip("-") or "skill"
    base, n = name, 1
    while True:
        tail = suffix + (f"-{n}" if n > 1 else "")
        candidate = base[: MAX_NAME - len(tail)].rstrip("-") + tail
        if candidate not in taken and not any(w in candidate for w in RESERVED_WORDS):
            taken.add(candidate)
            return candidate
        n += 1


def _good_name(name: str) -> bool:
    return bool(NAME_RULE.match(name)) and len(name) <= MAX_NAME and not any(w in name for w in RESERVED_WORDS)


def cut_description(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut at a word and marked with an ellipsis."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head).rstrip(" ,;:") + "…"


def fit_budget(skills: list[tuple[str, str, int]], budget: int | None) -> tuple[dict[str, str], list[str], list[str]]:
    """Cut descriptions so the names plus descriptions of ``skills`` ((name, description, documents))
    fit ``budget`` characters: every description over a common cap is cut to it (the largest cap
    that fits, never under DESCRIPTION_FLOOR); when even the floor is too much, the skills with
    the fewest documents are left out first. Returns (name → description, left-out names, notes)."""
    descriptions = {name: desc for name, desc, _ in skills}
    if budget is None:
        return descriptions, [], []

    def cost(names: list[str], cap: int) -> int:
        return sum(len(n) + min(len(descriptions[n]), cap) for n in names)

    kept = [name for name, _, _ in skills]
    if cost(kept, MAX_DESCRIPTION) <= budget:
        return descriptions, [], []
    notes, dropped = [], []
    for name, _, docs in sorted(skills, key=lambda s: (s[2], s[0])):
        if cost(kept, DESCRIPTION_FLOOR) <= budget or len(kept) == 1:
            break
        kept.remove(name)
        dropped.append(name)
        notes.append(f"skill {name!r} ({docs} documents) left out: the descriptions of all skills exceed the "
                     f"{budget:,}-character budget even at {DESCRIPTION_FLOOR} characters each")
    low, high = 1, MAX_DESCRIPTION  # the largest cap that fits
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if cost(kept, mid) <= budget else (low, mid - 1)
    out = {}
    for name in kept:
        cut = cut_description(descriptions[name], low)
        if cut != descriptions[name]:
            notes.append(f"skill {name!r}: description cut from {len(descriptions[name])} to {len(cut)} characters "
                         f"(budget {budget:,} characters for all names and descriptions)")
        out[name] = cut
    return out, dropped, notes


def _safe_value(text: str) -> str:
    # skills-ref splits a SKILL.md at the first '---'; a value must never hold one.
    return str(text).replace("---", "—").replace("\x00", "")


# -- reading the tree ------------------------------------------------------------------------------


@dataclass
class _Nav:
    tree_path: str  # skills/<skill>/.../SKILL.md or INDEX.md
    skill: str  # the skill's tree folder name
    rel: str  # path inside the skill folder
    frontmatter: str  # original, '---' to '---' inclusive
    meta: dict
    body: list[str]


_DOC_ROW = re.compile(r"^- `(?P<id>[^`]+)` \*\*(?P<title>.*?)\*\*(?P<rest>.*)$")
_LINK_ROW = re.compile(r"^- \[(?P<name>[^\]]+)\]\((?P<link>[^)]+)\)(?P<rest>.*)$")
_SEE_DOC = re.compile(r"^- @see `(?P<id>[^`]+)` \*\*(?P<title>.*?)\*\* → `(?P<path>[^`]+)`(?P<rest>.*)$")
_SEE_GROUP = re.compile(r"^- @see \[(?P<name>[^\]]+)\] (?P<title>.*?) → `(?P<path>[^`]+)`(?P<rest>.*)$")
_INLINE_LINK = re.compile(r"(!?\[[^\]\n]*\]\()([^)\s]+)((?:\s+\"[^\"\n]*\")?\))")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
_SECTIONS = {SECTION_SUBGROUPS: "groups", SECTION_DOCUMENTS: "docs", SECTION_SEE_ALSO: "see",
             SECTION_EXAMPLES: "examples", SECTION_RELATED: "related"}


def _read_nav(root: Path, path: Path) -> _Nav:
    text = path.read_text(encoding="utf-8").replace("\x00", "\ufffd")  # \x00 marks links below
    rel_tree = path.relative_to(root).as_posix()
    parts = rel_tree.split("/")
    try:
        meta = parse_frontmatter(text)
        end = text.find("\n---\n", 4) + 5
    except (ValueError, yaml.YAMLError):
        meta, end = {}, 0
    return _Nav(rel_tree, parts[1], "/".join(parts[2:]), text[:end], meta, text[end:].splitlines())


def _sections(lines: list[str]) -> Iterator[tuple[str, str]]:
    section = ""
    for line in lines:
        if line.startswith("## "):
            section = next((v for k, v in _SECTIONS.items() if line.startswith(k)), "other")
        yield section, line


# -- the plan: every exported file, with links as placeholders -------------------------------------

# A link is written as \x00U:<skill>/<path>\x00 (its URL) or \x00T:<skill>/<path>\x00 (its text), with
# <skill>/<path> the file's place in the logical skill; they become relative paths once each file's
# folder (the skill, or a part of it) is known.
_PLACEHOLDER = re.compile("\x00([UT]):([^\x00]+)\x00")


def _url(key: str) -> str:
    return f"\x00U:{key}\x00"


def _text(key: str) -> str:
    return f"\x00T:{key}\x00"


@dataclass
class _File:
    skill: str  # logical (export) skill name
    rel: str  # path inside the skill
    kind: str  # "nav" | "doc"
    text: str = ""  # nav: the whole file; doc: header and footer around the text slice
    footer: str = ""
    doc_id: str = ""
    span: tuple[int, int] = (0, 0)  # doc: byte range of the (UTF-8) text
    estimate: int = 0  # bytes, an upper bound once placeholders are resolved
    folder: str = ""  # the exported folder it lands in (set by _assign_parts)


@dataclass
class _Skill:
    name: str
    source: str
    description: str
    documents: int
    files: list[_File] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)  # part k's folder at index k-1


def _doc_slug(doc_id: str) -> str:
    stem = re.sub(r"\.(md|markdown|txt|html?|jsonl?)$", "", doc_id, flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[:80].rstrip("-") or "document"


def _doc_names(doc_ids: list[str]) -> dict[str, str]:
    """doc_id → file stem: a readable slug, with a short hash of the id where slugs would collide
    (ids differing only in case or punctuation)."""
    slugs = {d: _doc_slug(d) for d in doc_ids}
    counts: dict[str, int] = {}
    for s in slugs.values():
        counts[s] = counts.get(s, 0) + 1
    out, used = {}, set()
    for d in sorted(doc_ids):
        name = slugs[d]
        if counts[name] > 1:
            name = f"{name}-{hashlib.sha256(d.encode()).hexdigest()[:10]}"
        while name in used:  # hash prefixes colliding too: longer hashes, still deterministic
            name = f"{name}-{hashlib.sha256(name.encode()).hexdigest()[:6]}"
        used.add(name)
        out[d] = name
    return out


def _pieces(data: bytes, max_bytes: int | None) -> list[tuple[int, int]]:
    """Byte ranges of ``data`` (UTF-8) of at most ``max_bytes`` each, cut at a character start, after
    a newline where one is in the second half, never inside a link placeholder."""
    if max_bytes is None or len(data) <= max_bytes:
        return [(0, len(data))]
    spans, start = [], 0
    while start < len(data):
        end = min(start + max_bytes, len(data))
        if end < len(data):
            while end > start + 1 and data[end] & 0xC0 == 0x80:  # a continuation byte: back to the char start
                end -= 1
            newline = data.rfind(b"\n", start, end)
            if newline > start + (end - start) // 2:
                end = newline + 1
            if data.count(b"\x00", start, end) % 2:
                end = data.rfind(b"\x00", start, end)
        spans.append((start, end))
        start = end
    return spans


def _estimate(text: str, depth: int) -> int:
    # Each placeholder becomes a relative path at most the key's length plus '../' per folder level
    # and a part suffix longer: a sound upper bound before the parts are known.
    n = len(_PLACEHOLDER.findall(text))
    return len(text.encode("utf-8")) + n * (3 * (depth + 2) + 12)


class _Planner:
    def __init__(self, tree: Tree, fmt: str, budget: int | None, max_doc_bytes: int | None):
        self.tree, self.fmt, self.budget, self.max_doc_bytes = tree, fmt, budget, max_doc_bytes
        self.notes: list[str] = []
        self.corpus = str(tree.manifest.get("corpus") or tree.root.name)

    def plan(self) -> list[_Skill]:
        root = self.tree.root
        folders = sorted(p.parent for p in (root / SKILLS_DIR).glob(f"*/{SKILL_FILE}"))
        navs: dict[str, list[_Nav]] = {}
        for folder in folders:
            files = [folder / SKILL_FILE] + sorted(folder.rglob(INDEX_FILE))
            navs[folder.name] = [_read_nav(root, f) for f in files]
        if not navs:
            raise ExportError(f"no skills in {root / SKILLS_DIR}")

        # Names already valid are claimed first, so a renamed skill never displaces one.
        taken: set[str] = set()
        wanted = {src: str(n[0].meta.get("name") or src) for src, n in navs.items()}
        names: dict[str, str] = {}
        for src, w in wanted.items():
            if _good_name(w) and w not in taken:
                names[src] = w
                taken.add(w)
        for src, w in wanted.items():
            if src not in names:
                names[src] = valid_name(w, taken)
        for src, name in names.items():
            if name != src:
                self.notes.append(f"skill {src!r} exported as {name!r} (Agent Skills name rules)")
        raw = []
        for src, n in navs.items():
            meta = n[0].meta
            desc = clean_description(_safe_value(" ".join(str(meta.get("description") or "").split())))
            desc = desc or f"Documents about {src.replace('-', ' ')}."
            docs = (meta.get("metadata") or {}).get("documents") if isinstance(meta.get("metadata"), dict) else 0
            raw.append((names[src], desc, _int(docs)))
        descriptions, dropped, notes = fit_budget(raw, self.budget)
        self.notes += notes
        self.exported = {src: names[src] for src in navs if names[src] not in dropped}
        self.nav_keys = {nav.tree_path: f"{self.exported[src]}/{nav.rel}"
                         for src, ns in navs.items() if src in self.exported for nav in ns}

        homes = self._home_documents(navs)
        self.doc_keys = {d: f"{skill}/{DOCS_DIR}/{stem}.md" for d, (skill, stem, _) in homes.items()}
        self.listed_in = {d: listed for d, (_, _, listed) in homes.items()}

        skills = []
        for src, ns in navs.items():
            if src not in self.exported:
                continue
            name = self.exported[src]
            meta = (ns[0].meta.get("metadata") or {}) if isinstance(ns[0].meta.get("metadata"), dict) else {}
            skill = _Skill(name, f"{SKILLS_DIR}/{src}", descriptions[name], _int(meta.get("documents")))
            for nav in ns:
                skill.files += self._nav_files(skill, nav)
            skills.append(skill)
        by_name = {s.name: s for s in skills}
        for doc_id, (skill, stem, _) in sorted(homes.items()):
            by_name[skill].files += self._doc_files(skill, stem, doc_id)
        return skills

    def _home_documents(self, navs: dict[str, list[_Nav]]) -> dict[str, tuple[str, str, Optional[str]]]:
        """doc_id → (export skill, file stem, nav key where it is a primary row): a document lives in
        the skill that lists it as a primary row, else in the first exported skill referring to it."""
        primary: dict[str, str] = {}
        referenced: dict[str, str] = {}
        for src, ns in navs.items():
            if src not in self.exported:
                continue
            for nav in ns:
                for section, line in _sections(nav.body):
                    m = (_DOC_ROW.match(line) if section in ("docs", "examples") else
                         _SEE_DOC.match(line) if section == "see" else None)
                    if not m:
                        continue
                    if section == "docs":
                        primary.setdefault(m["id"], nav.tree_path)
                    referenced.setdefault(m["id"], src)
        store: DocumentStore = self.tree.store
        known = set(store.ids())
        missing = sorted(d for d in referenced if d not in known)
        if missing:
            self.notes.append(f"{len(missing)} listed document(s) are not in the document store and have no file "
                              f"(e.g. {missing[0]!r})")
        unlisted = len(known - set(referenced))
        if unlisted:
            self.notes.append(f"{unlisted} document(s) of the store are listed in no exported nav file and have "
                              f"no file")
        ids = sorted(d for d in referenced if d in known)
        stems = _doc_names(ids)
        out = {}
        for d in ids:
            if d in primary:
                src = primary[d].split("/")[1]
                out[d] = (self.exported[src], stems[d], self.nav_keys[primary[d]])
            else:
                out[d] = (self.exported[referenced[d]], stems[d], None)
        return out

    # nav files

    def _nav_files(self, skill: _Skill, nav: _Nav) -> list[_File]:
        folder = posixpath.dirname(nav.tree_path)
        lines = []
        title = ""
        for section, line in _sections(nav.body):
            if not section and line.startswith("# ") and not title:
                title = line[2:].strip()
                lines.append(line)
                if nav.rel == SKILL_FILE:
                    lines += ["", self._guide(nav)]
                continue
            lines.append(self._rewrite(section, line, folder))
        head = self._skill_frontmatter(skill, nav) if nav.rel == SKILL_FILE else nav.frontmatter.rstrip("\n")
        all_lines = head.split("\n") + lines
        while all_lines and not all_lines[-1].strip():
            all_lines.pop()
        pieces = _split_lines(all_lines, title or skill.name)
        base = posixpath.dirname(nav.rel)
        names = [nav.rel] + [posixpath.join(base, CONTINUED_FILE.format(n=k)) for k in range(2, len(pieces) + 1)]
        if len(pieces) > 1:
            self.notes.append(f"{skill.name}/{nav.rel}: {len(all_lines)} lines, over {MAX_LINES}; split into "
                              f"{len(pieces)} files (the rest in {', '.join(names[1:])})")
        files = []
        for k, piece in enumerate(pieces):
            if k + 1 < len(pieces):
                nxt = f"{skill.name}/{names[k + 1]}"
                piece = piece + ["", f"_Continued in [{_text(nxt)}]({_url(nxt)})._"]
            text = "\n".join(piece) + "\n"
            files.append(_File(skill.name, names[k], "nav", text, estimate=_estimate(text, names[k].count("/"))))
        return files

    def _guide(self, nav: _Nav) -> str:
        return ("_How to use: follow a sub-group link down to its `INDEX.md`, to the rows of single documents; "
                "each document's title links to its full text under `docs/`. `@see` rows point to where an item "
                "is listed; search every row with grep._")

    def _skill_frontmatter(self, skill: _Skill, nav: _Nav) -> str:
        original = nav.meta.get("metadata") if isinstance(nav.meta.get("metadata"), dict) else {}
        metadata = {"c2s-corpus": self.corpus, "c2s-source": skill.source}
        metadata.update({str(k): str(v) for k, v in original.items() if k != "skill_path"})
        body: dict = {"name": skill.name, "description": skill.description}
        if self.fmt == "claude-code":
            body["allowed-tools"] = "Read Grep Glob"  # reading the skill's own files needs nothing else
        body["metadata"] = {k: _safe_value(v) for k, v in metadata.items()}
        dumped = yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=10**6, default_flow_style=False)
        return "---\n" + dumped + "---"

    def _rewrite(self, section: str, line: str, folder: str) -> str:
        if section in ("docs", "examples") and (m := _DOC_ROW.match(line)):
            key = self.doc_keys.get(m["id"])
            if key:
                return f"- `{m['id']}` **[{_escape(m['title'])}]({_url(key)})**{m['rest']}"
        elif section == "see" and (m := _SEE_DOC.match(line)):
            doc, nav = self.doc_keys.get(m["id"]), self.nav_keys.get(m["path"])
            title = f"[{_escape(m['title'])}]({_url(doc)})" if doc else m["title"]
            where = f"[{_text(nav)}]({_url(nav)})" if nav else f"`{m['path']}` (not in this export)"
            return f"- @see `{m['id']}` **{title}** → {where}{m['rest']}"
        elif section == "see" and (m := _SEE_GROUP.match(line)):
            nav = self.nav_keys.get(m["path"])
            if nav:
                return f"- @see [{m['name']}]({_url(nav)}) {m['title']}{m['rest']}"
            return f"- @see {m['name']} {m['title']} (not in this export){m['rest']}"
        elif section in ("groups", "related") and (m := _LINK_ROW.match(line)):
            target = posixpath.normpath(posixpath.join(folder, m["link"]))
            nav = self.nav_keys.get(target)
            if nav:
                name = nav.split("/", 1)[0] if section == "related" else m["name"]
                return f"- [{name}]({_url(nav)}){m['rest']}"
            return f"- {m['name']} (not in this export){m['rest']}"
        return line

    # documents

    def doc_text(self, doc_id: str) -> str:
        """The stored text, its relative links to other exported documents (``../billing/refunds.md``,
        relative to its doc_id as in the source folder) pointing at their files."""
        text = self.tree.store.get(doc_id).text.replace("\x00", "\ufffd")
        base = posixpath.dirname(doc_id)

        def sub(m: re.Match) -> str:
            target = m[2]
            if _SCHEME.match(target) or target.startswith(("#", "/")):
                return m[0]
            path, _, fragment = target.partition("#")
            key = self.doc_keys.get(posixpath.normpath(posixpath.join(base, unquote(path))))
            return m[1] + _url(key) + (f"#{fragment}" if fragment else "") + m[3] if key else m[0]

        return _INLINE_LINK.sub(sub, text)

    def _doc_files(self, skill: str, stem: str, doc_id: str) -> list[_File]:
        doc = self.tree.store.get(doc_id)
        assert doc is not None
        text = self.doc_text(doc_id)
        data = text.encode("utf-8")
        spans = _pieces(data, self.max_doc_bytes)
        names = [f"{DOCS_DIR}/{stem}.md"] + [f"{DOCS_DIR}/{stem}-{k}.md" for k in range(2, len(spans) + 1)]
        if len(spans) > 1:
            self.notes.append(f"document {doc_id!r}: {len(data):,} bytes, split into "
                              f"{len(spans)} files of at most {self.max_doc_bytes:,} bytes")
        listed = self.listed_in.get(doc_id)
        files = []
        for k, span in enumerate(spans):
            part = f" (part {k + 1} of {len(spans)})" if len(spans) > 1 else ""
            # A text that opens with its own heading keeps it; others get the title as one.
            heading = "" if k == 0 and not part and doc.text.lstrip().startswith("# ") else \
                f"# {_one_line(doc.title)}{part}\n\n"
            header = f"{heading}doc_id: `{_one_line(doc_id)}`"
            if listed:
                header += f" · listed in [{_text(listed)}]({_url(listed)})"
            header += "\n\n"
            footer = ""
            if k + 1 < len(spans):
                nxt = f"{skill}/{names[k + 1]}"
                footer = f"\n\n_Continued in [{_text(nxt)}]({_url(nxt)})._\n"
            elif not text.endswith("\n"):
                footer = "\n"
            files.append(_File(skill, names[k], "doc", header, footer, doc_id, span,
                               _estimate(header + data[span[0]:span[1]].decode("utf-8") + footer, 1)))
        return files


def _int(value: object) -> int:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0


def _escape(title: str) -> str:
    return title.replace("[", "\\[").replace("]", "\\]")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _split_lines(lines: list[str], title: str) -> list[list[str]]:
    """``lines`` in pieces of at most MAX_LINES lines (room left for a 'continued' line); each
    continuation repeats the section heading it continues."""
    if len(lines) <= MAX_LINES:
        return [lines]
    keep = MAX_LINES - 2
    pieces, rest = [lines[:keep]], lines[keep:]
    section = next((line for line in reversed(pieces[0]) if line.startswith("## ")), None)
    while rest:
        header = [f"# {title} (continued, part {len(pieces) + 1})", ""]
        if section and not rest[0].startswith("## "):
            header += [f"{section} (continued)", ""]
        room = MAX_LINES - len(header) - 2
        chunk, rest = rest[:room], rest[room:]
        section = next((line for line in reversed(chunk) if line.startswith("## ")), section)
        pieces.append(header + chunk)
    return pieces


# -- parts: one skill over the upload limits becomes several ---------------------------------------


def _assign_parts(skills: list[_Skill], max_files: int | None, max_bytes: int | None, notes: list[str]) -> None:
    """Give each file its folder: the skill's own, or ``<skill>-part-<k>`` when one folder would hold more
    than ``max_files`` files or ``max_bytes`` bytes. SKILL.md and the nav files come first (they
    stay in the skill's folder unless there are too many), then the documents, in path order."""
    taken = {s.name for s in skills}
    for skill in skills:
        order = sorted(skill.files, key=lambda f: (f.rel != SKILL_FILE, f.kind != "nav", f.rel))
        skill.files = order
        parts: list[list[_File]] = [[]]
        count = size = 0
        for f in order:
            if max_bytes is not None and f.estimate > max_bytes - PART_SKILL_RESERVE:
                raise ExportError(f"{skill.name}/{f.rel} is {f.estimate:,} bytes, over the {max_bytes:,}-byte limit "
                                  "of one upload")
            over = ((max_files is not None and count + 1 > max_files)
                    or (max_bytes is not None and size + f.estimate > max_bytes))
            if parts[-1] and over:
                parts.append([])
                count, size = 1, PART_SKILL_RESERVE  # the part's own SKILL.md
            parts[-1].append(f)
            count += 1
            size += f.estimate
        taken.discard(skill.name)
        skill.folders = [skill.name] + [valid_name(skill.name, taken, f"-part-{k}") for k in range(2, len(parts) + 1)]
        taken.add(skill.name)
        for k, part in enumerate(parts):
            for f in part:
                f.folder = skill.folders[k]
        if len(parts) > 1:
            notes.append(f"skill {skill.name!r}: {len(order)} files ({sum(f.estimate for f in order):,} bytes) "
                         f"exceed one upload's limits ({max_files} files, {max_bytes:,} bytes); split into "
                         f"{len(parts)} skills: {', '.join(skill.folders)}")


def _part_skill_md(skill: _Skill, k: int, fmt: str, corpus: str) -> str:
    n = len(skill.folders)
    description = _safe_value(cut_description(
        f"Full texts of documents of the skill {skill.name} (part {k} of {n}). Navigate from {skill.name}: its "
        f"SKILL.md and INDEX.md rows link to the files here. Topic: {skill.description}", MAX_DESCRIPTION))
    body: dict = {"name": skill.folders[k - 1], "description": description}
    if fmt == "claude-code":
        body["allowed-tools"] = "Read Grep Glob"
    body["metadata"] = {"c2s-corpus": _safe_value(corpus), "c2s-source": skill.source, "part": f"{k} of {n}"}
    head = "---\n" + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=10**6) + "---\n"
    return (head + f"\n# {skill.name} (part {k} of {n})\n\nThe documents here are listed, and linked, in the "
            f"nav files of [{skill.name}](../{quote(skill.name)}/SKILL.md); start there.\n")


# -- writing ---------------------------------------------------------------------------------------


def _render(f: _File, text: str, resolve: Callable[[str, str], str]) -> str:
    """Placeholders in ``text`` (part of ``f``) resolved relative to ``f``'s own final place."""
    here = f"{f.folder}/{f.rel}"

    def sub(m: re.Match) -> str:
        return resolve(here, m.group(2)) if m.group(1) == "T" else quote(resolve(here, m.group(2)))

    return _PLACEHOLDER.sub(sub, text)


def check_destination(dest: Path, tree_root: Path) -> None:
    """Refuse, before any work, a --to that is not ours to replace."""
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise ExportError(f"--to {dest} is not a directory; choose a folder for the export")
    resolved = dest.resolve()
    if resolved == tree_root or tree_root in resolved.parents:
        raise ExportError(f"--to {dest} is inside the tree {tree_root}; choose a folder outside it")
    if resolved in tree_root.parents:
        raise ExportError(f"--to {dest} holds the tree {tree_root}; choose a folder outside it")
    if not dest.exists() or not any(dest.iterdir()):
        return
    try:
        marker = json.loads((dest / EXPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        marker = None
    if not (isinstance(marker, dict) and "c2s_export" in marker):
        raise ExportError(f"refusing to write into {dest}: it is not empty and is not a c2s export "
                          f"(no {EXPORT_FILE}); choose an empty or new folder for --to")


def export_tree(tree: Tree | str | os.PathLike[str], dest: str | os.PathLike[str], fmt: str = "claude-code", *,
                description_budget: int | None = DESCRIPTION_BUDGET, max_files: int | None = None,
                max_bytes: int | None = None, max_doc_bytes: int | None = None) -> ExportResult:
    """Export ``tree`` to ``dest`` in ``fmt`` (claude-code or agent-skills); ``dest`` must be absent,
    empty or an earlier export, which is replaced whole. ``max_files`` / ``max_bytes`` split a skill
    folder that would exceed them into parts; ``max_doc_bytes`` splits larger documents."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}: choose {' or '.join(FORMATS)}")
    tree = open_tree(tree)
    dest = Path(dest).expanduser().absolute()
    check_destination(dest, tree.root)
    planner = _Planner(tree, fmt, description_budget, max_doc_bytes)
    skills = planner.plan()
    notes = planner.notes
    _assign_parts(skills, max_files, max_bytes, notes)

    folder_of = {f"{s.name}/{f.rel}": f.folder for s in skills for f in s.files}

    def resolve(here: str, key: str) -> str:
        rel = key.split("/", 1)[1]
        return posixpath.relpath(f"{folder_of[key]}/{rel}", posixpath.dirname(here))

    stage = dest.parent / f".{dest.name}.export-{os.getpid()}"
    if stage.exists():
        shutil.rmtree(stage)
    skills_rel = CLAUDE_SKILLS_DIR if fmt == "claude-code" else ""
    skills_stage = stage / skills_rel if skills_rel else stage
    exported: list[ExportedSkill] = []
    documents: dict[str, str] = {}
    prefix = f"{skills_rel}/" if skills_rel else ""
    try:
        skills_stage.mkdir(parents=True)
        for skill in skills:
            parts = {folder: ExportedSkill(folder, skill.description, skill.source, k + 1, len(skill.folders))
                     for k, folder in enumerate(skill.folders)}
            for k, folder in enumerate(skill.folders[1:], start=2):
                text = _part_skill_md(skill, k, fmt, planner.corpus)
                parts[folder].description = parse_frontmatter(text)["description"]
                _write(skills_stage / folder / SKILL_FILE, SKILL_FILE, text, parts[folder])
            for f in skill.files:
                if f.kind == "doc":
                    piece = planner.doc_text(f.doc_id).encode("utf-8")[f.span[0]:f.span[1]].decode("utf-8")
                    content = _render(f, f.text + piece + f.footer, resolve)
                    if f.span[0] == 0:
                        documents[f.doc_id] = f"{prefix}{f.folder}/{f.rel}"
                else:
                    content = _render(f, f.text, resolve)
                _write(skills_stage / f.folder / f.rel, f.rel, content, parts[f.folder])
            for part in parts.values():
                part.files.sort()
                _check_limits(part, max_files, max_bytes)
                exported.append(part)
        result = ExportResult(dest, dest / skills_rel if skills_rel else dest, fmt, planner.corpus, exported,
                              dict(sorted(documents.items())), notes)
        (stage / EXPORT_FILE).write_text(json.dumps(result.to_json(), indent=1, ensure_ascii=False) + "\n",
                                         encoding="utf-8")
        if notes:
            (stage / NOTES_FILE).write_text(
                "# Export notes\n\nWhat this export of the c2s tree changed to fit Agent Skills clients:\n\n"
                + "".join(f"- {n}\n" for n in notes), encoding="utf-8")
        swap_in(stage, dest)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return result


def _write(path: Path, rel: str, text: str, part: ExportedSkill) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    path.write_bytes(data)
    part.files.append(rel)
    part.bytes += len(data)


def _check_limits(part: ExportedSkill, max_files: int | None, max_bytes: int | None) -> None:
    if (max_files is not None and len(part.files) > max_files) or (max_bytes is not None and part.bytes > max_bytes):
        raise ExportError(f"skill folder {part.name} has {len(part.files)} files, {part.bytes:,} bytes: over the "
                          f"limits ({max_files} files, {max_bytes} bytes)")  # a planning bug, never expected
