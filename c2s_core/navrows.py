"""Nav-file rows, written and parsed in one place: the row formats of SKILL.md / INDEX.md.

Parsing is tolerant: an unexpected line is skipped, never an error, so a navigator keeps
working on trees rendered by a slightly different compiler version.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from collections.abc import Iterable
from typing import Protocol

from .frontmatter import parse_frontmatter
from .layout import SECTION_DOCUMENTS, SECTION_EXAMPLES, SECTION_RELATED, SECTION_SEE_ALSO, SECTION_SUBGROUPS
from .text import clip, content_tokens


# -- writing rows ----------------------------------------------------------------------------------
# A document row: ``- `doc_id` **title** — one-line · `identifier` `identifier` _(phrase; phrase)_``.
# Nothing on a row repeats what its title or one-line already say; ROW_STYLES are ever leaner forms
# (fewer phrases, then a shorter one-line, then fewer identifiers) for crowded leaves.

ROW_DESCRIPTION_CHARS = 120  # keeps nav files near the method's ~2 KB
ROW_PHRASES = 3
ROW_IDENTIFIERS = 4
IDENTIFIERS_MARK = " · "


@dataclass(frozen=True)
class RowStyle:
    one_line: int  # characters of the one-line shown
    phrases: int
    identifiers: int


# Richest first; a leaf takes the first whose rows fit. Identifiers go last: they are the exact
# strings a question types, where phrases and a long one-line mostly echo the title.
ROW_STYLES = (RowStyle(ROW_DESCRIPTION_CHARS, ROW_PHRASES, ROW_IDENTIFIERS), RowStyle(100, 2, 4),
              RowStyle(80, 1, 4), RowStyle(64, 0, 4), RowStyle(48, 0, 3), RowStyle(0, 0, 3), RowStyle(0, 0, 2))


@dataclass(frozen=True)
class DocCard:
    doc_id: str
    title: str
    one_line: str
    phrases: list[str]
    identifiers: list[str] = field(default_factory=list)


class GroupNode(Protocol):
    """What a sub-group row and a group stub show of a node."""

    name: str
    title: str
    description: str
    size: int
    nav_file: str


def doc_row(card: DocCard, style: RowStyle = ROW_STYLES[0]) -> str:
    # A one-line that only restates the title ("bind - bind a name to a socket") is left out.
    restates = set(content_tokens(card.one_line)) <= set(content_tokens(card.title))
    one_line = "" if restates or not style.one_line else clip(card.one_line, style.one_line)
    shown = f"{card.title} {one_line}".lower()
    identifiers = [i for i in card.identifiers if i.lower() not in shown][:style.identifiers]
    said = set(content_tokens(" ".join([shown, *identifiers])))
    # With identifiers on the row, one phrase fewer; a phrase whose words are all said already, none.
    room = style.phrases - 1 if identifiers else style.phrases
    phrases = [p for p in card.phrases if not set(content_tokens(p)) <= said][:max(room, 0)]
    rest = one_line
    if identifiers:
        codes = " ".join(f"`{i}`" for i in identifiers)
        rest = f"{rest}{IDENTIFIERS_MARK}{codes}" if rest else codes
    if phrases:
        rest = f"{rest} _({'; '.join(phrases)})_".lstrip()
    return f"- `{card.doc_id}` **{card.title}**" + (f" — {rest}" if rest else "")


def doc_rows(cards: list[DocCard], room: int) -> list[str]:
    """The richest rows that fit in ``room`` bytes (the leanest when none do)."""
    return _richest(([doc_row(card, style) for card in cards] for style in ROW_STYLES), room)


def _richest(renderings: Iterable[list[str]], room: int) -> list[str]:
    """The first of ``renderings`` (richest first) whose lines fit in ``room`` bytes; the last when none do."""
    for rows in renderings:
        if sum(len(r.encode()) + 1 for r in rows) <= room:
            break
    return rows


_RESTATED_HEAD = re.compile(r"^(?P<head>[^:;]{1,120}): (?:\d+ (?:documents?|topics?|sub-groups?) on )?")


GROUP_DESCRIPTION_CHARS = (ROW_DESCRIPTION_CHARS, 80, 48, 0)  # ever leaner group rows, for a crowded node


def group_row(child: GroupNode, description_chars: int = ROW_DESCRIPTION_CHARS) -> str:
    """A sub-group's row: its description without a head restating its name and size, which
    the row shows already (clipped to ``description_chars``; none at 0)."""
    if description_chars <= 0:
        return f"- [{child.name}]({child.name}/INDEX.md) ({child.size} docs)"
    description = clip(child.description, description_chars)
    m = _RESTATED_HEAD.match(description)
    if m and set(content_tokens(m["head"])) <= set(content_tokens(f"{child.name.replace('-', ' ')} {child.title}")):
        description = description[m.end():] or description
    return f"- [{child.name}]({child.name}/INDEX.md) ({child.size} docs) — {description}"


def group_rows(children: list[GroupNode], room: int) -> list[str]:
    """The richest sub-group rows that fit in ``room`` bytes (the leanest when none do)."""
    return _richest(([group_row(child, chars) for child in children] for chars in GROUP_DESCRIPTION_CHARS), room)


def doc_stub(card: DocCard, canonical: str) -> str:
    return f"- @see `{card.doc_id}` **{card.title}** → `{canonical}`"


def group_stub(node: GroupNode) -> str:
    return f"- @see [{node.name}] {clip(node.title, 80)} → `{node.nav_file}`"


def example_row(card: DocCard, with_one_line: bool = True) -> str:
    """A row of a node's example documents: the title, and its one-line where there is room."""
    return f"- `{card.doc_id}` **{card.title}**" + (f" — {clip(card.one_line, 120)}" if with_one_line else "")


# -- parsing rows ----------------------------------------------------------------------------------

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
