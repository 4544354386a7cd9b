"""Parsing SKILL.md / INDEX.md text (the format ``c2s_pipeline.render`` writes) into rows.

Parsing is tolerant: an unexpected line is skipped, never an error, so a navigator keeps
working on trees rendered by a slightly different compiler version.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from c2s_core.frontmatter import parse_frontmatter
from c2s_core.layout import (SECTION_DOCUMENTS, SECTION_EXAMPLES, SECTION_RELATED, SECTION_SEE_ALSO,
                                 SECTION_SUBGROUPS)


@dataclass(frozen=True)
class Group:
    """A link to another nav file: a sub-group row, an ``@see`` group stub or a related skill."""

    name: str
    path: str  # nav file, relative to the tree root
    documents: int = 0
    description: str = ""


@dataclass(frozen=True)
class Card:
    """A document row (or ``@see`` stub, whose ``home`` is its canonical nav file)."""

    doc_id: str
    title: str
    one_line: str = ""
    phrases: tuple[str, ...] = ()
    home: str = ""
    identifiers: tuple[str, ...] = ()  # exact strings from the document's body

    @property
    def text(self) -> str:
        """What lexical scoring reads of the row: identifiers included, as the row shows them."""
        return f"{self.title}. {self.one_line} {'; '.join(self.phrases)} {' '.join(self.identifiers)}".strip()


@dataclass
class NavFile:
    path: str
    name: str = ""
    description: str = ""
    level: int = 0
    documents: int = 0
    title: str = ""
    summary: str = ""
    entities: list[str] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)  # ## Sub-groups
    cards: list[Card] = field(default_factory=list)  # ## Documents
    see_groups: list[Group] = field(default_factory=list)  # ## See also, group stubs
    see_cards: list[Card] = field(default_factory=list)  # ## See also, document stubs
    examples: list[Card] = field(default_factory=list)  # ## Example documents
    related: list[Group] = field(default_factory=list)  # ## Related skills

    @property
    def is_leaf(self) -> bool:
        return not self.groups


_GROUP_ROW = re.compile(r"^- \[(?P<name>[^\]]+)\]\((?P<link>[^)]+)\)(?: \((?P<n>\d+) docs?\))?"
                        r"(?: — (?P<desc>.*))?$")
_DOC_ROW = re.compile(r"^- `(?P<id>[^`]+)` \*\*(?P<title>.*?)\*\*(?: — (?P<rest>.*))?$")
_PHRASES = re.compile(r"\s*_\((?P<p>[^)]*)\)_\s*$")
# `` · `pg_dump` `--no-verify` `` after the one-line, or alone where the row leaves the one-line
# out (rows of older trees have none).
_IDENTIFIERS = re.compile(r"(?:^|\s*·\s*)(?P<i>(?:`[^`]+`\s*)+)$")
_CODE = re.compile(r"`([^`]+)`")
_SEE_DOC = re.compile(r"^- @see `(?P<id>[^`]+)` \*\*(?P<title>.*?)\*\* → `(?P<path>[^`]+)`")
_SEE_GROUP = re.compile(r"^- @see \[(?P<name>[^\]]+)\] (?P<title>.*?) → `(?P<path>[^`]+)`")
_RELATED_ROW = re.compile(r"^- \[(?P<name>[^\]]+)\]\((?P<link>[^)]+)\)(?: — shared: (?P<shared>.*))?$")
_SECTIONS = {SECTION_SUBGROUPS: "groups", SECTION_DOCUMENTS: "cards", SECTION_SEE_ALSO: "see",
             SECTION_EXAMPLES: "examples", SECTION_RELATED: "related"}


def parse_nav_file(text: str, path: str) -> NavFile:
    """``path`` is the file's tree-relative path; relative links are resolved against it."""
    nav = NavFile(path=path)
    body = text
    try:
        meta = parse_frontmatter(text)
        body = text[text.find("\n---\n", 4) + 5:]
    except Exception:  # noqa: BLE001 - a file without frontmatter still has rows worth reading
        meta = {}
    extra = meta.get("metadata") or {}
    nav.name = str(meta.get("name") or posixpath.basename(posixpath.dirname(path)))
    nav.description = " ".join(str(meta.get("description", "")).split())
    nav.level, nav.documents = _int(extra.get("level")), _int(extra.get("documents"))
    folder = posixpath.dirname(path)
    section, summary = "", []
    # Rows end at "\n" only: str.splitlines would also break a row at a control or separator
    # character inside a title (\x1e, \x85, \u2028), which trees before escaping may hold.
    for line in body.split("\n"):
        line = line.rstrip()
        if line.startswith("## "):
            section = next((v for k, v in _SECTIONS.items() if line.startswith(k)), "other")
            continue
        if not section:
            if line.startswith("# ") and not nav.title:
                nav.title = line[2:].strip()
            elif line.startswith("Entities:"):
                nav.entities = [e.strip() for e in line[9:].split(",") if e.strip()]
            elif line.strip():
                summary.append(line.strip())
        elif section == "groups" and (m := _GROUP_ROW.match(line)):
            nav.groups.append(Group(m["name"], _join(folder, m["link"]), _int(m["n"]), m["desc"] or ""))
        elif section in ("cards", "examples") and (m := _DOC_ROW.match(line)):
            rest, phrases, identifiers = m["rest"] or "", (), ()
            if p := _PHRASES.search(rest):
                phrases = tuple(x.strip() for x in p["p"].split(";") if x.strip())
                rest = rest[:p.start()]
            if i := _IDENTIFIERS.search(rest):
                identifiers = tuple(_CODE.findall(i["i"]))
                rest = rest[:i.start()]
            card = Card(m["id"], m["title"], rest.strip(), phrases, path if section == "cards" else "",
                        identifiers)
            (nav.cards if section == "cards" else nav.examples).append(card)
        elif section == "see" and (m := _SEE_DOC.match(line)):
            nav.see_cards.append(Card(m["id"], m["title"], home=m["path"]))
        elif section == "see" and (m := _SEE_GROUP.match(line)):
            nav.see_groups.append(Group(m["name"], m["path"], 0, m["title"]))
        elif section == "related" and (m := _RELATED_ROW.match(line)):
            nav.related.append(Group(m["name"], _join(folder, m["link"]), 0,
                                     f"shared: {m['shared']}" if m["shared"] else ""))
    nav.summary = " ".join(summary)
    return nav


def _join(folder: str, link: str) -> str:
    return posixpath.normpath(posixpath.join(folder, link))


def _int(value: object) -> int:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0
