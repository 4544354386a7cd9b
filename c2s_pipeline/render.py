"""Rendering the forest to navigation files: SKILL.md per top-level cluster, INDEX.md below.

Each file: frontmatter, a routing summary, then sub-groups (or document rows), ``@see`` stubs
for softly-assigned items, example documents, and for skills their related skills.

A document row: ``- `doc_id` **title** — one-line · `identifier` `identifier` _(phrase; phrase)_``.
Nothing on a row repeats what its title or one-line already say, and a leaf whose rows would
take its file past ``NAV_FILE_TARGET_BYTES`` renders them leaner (fewer phrases, then a shorter
one-line, then fewer identifiers), so nav files stay small on large corpora.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from c2s_core.frontmatter import render_frontmatter
from c2s_core.layout import SECTION_DOCUMENTS, SECTION_EXAMPLES, SECTION_RELATED, SECTION_SEE_ALSO, SECTION_SUBGROUPS
from c2s_core.text import clip, content_tokens, printable
from .forest import Forest, Node

ROW_DESCRIPTION_CHARS = 120  # keeps nav files near the method's ~2 KB
ROW_PHRASES = 3
ROW_IDENTIFIERS = 4
NAV_FILE_TARGET_BYTES = 3900  # a leaf renders leaner rows past this, to stay under 4 KB
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


@dataclass
class NodeExtras:
    """What the later stages attach to a node before rendering."""

    see_also: list[str] = field(default_factory=list)  # rendered stub lines
    examples: list[str] = field(default_factory=list)  # doc ids
    related: list[tuple[str, list[str]]] = field(default_factory=list)  # (skill node id, shared entities)
    entities: list[str] = field(default_factory=list)


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
    for style in ROW_STYLES:
        rows = [doc_row(card, style) for card in cards]
        if sum(len(r.encode()) + 1 for r in rows) <= room:
            break
    return rows


_TOPIC_AREA = re.compile(r"Topic area: (?P<topic>[^\n]*?\.)(?:\s+|$)")
_KEY_TERMS = re.compile(r"Key terms: (?P<terms>[^.\n]*)\.")


def routing_summary(node: Node) -> str:
    """The node's summary less what its title and description already say: a topic area
    restating them, and key terms they name."""
    said_text = f"{node.title} {node.description}".lower()
    said = set(content_tokens(said_text)) | {"topic", "area"}
    summary = node.summary
    if (m := _TOPIC_AREA.match(summary)) and set(content_tokens(m["topic"])) <= said:
        summary = summary[m.end():]
    if m := _KEY_TERMS.search(summary):
        terms = [t for t in (x.strip() for x in m["terms"].split(",")) if t and t.lower() not in said_text]
        kept = f"Key terms: {', '.join(terms)}." if terms else ""
        summary = summary[:m.start()] + kept + summary[m.end():]
    return " ".join(summary.split()) or node.summary


_RESTATED_HEAD = re.compile(r"^(?P<head>[^:;]{1,120}): (?:\d+ (?:documents?|topics?|sub-groups?) on )?")


def group_row(child: Node) -> str:
    """A sub-group's row: its description without a head restating its name and size, which
    the row shows already."""
    description = clip(child.description, ROW_DESCRIPTION_CHARS)
    m = _RESTATED_HEAD.match(description)
    if m and set(content_tokens(m["head"])) <= set(content_tokens(f"{child.name.replace('-', ' ')} {child.title}")):
        description = description[m.end():] or description
    return f"- [{child.name}]({child.name}/INDEX.md) ({child.size} docs) — {description}"


def doc_stub(card: DocCard, canonical: str) -> str:
    return f"- @see `{card.doc_id}` **{card.title}** → `{canonical}`"


def group_stub(node: Node) -> str:
    return f"- @see [{node.name}] {clip(node.title, 80)} → `{node.nav_file}`"


def render_node(node: Node, cards: dict[str, DocCard], extras: NodeExtras, forest: Forest) -> str:
    metadata = {"level": node.level, "documents": node.size}
    if node.is_skill:
        metadata["skill_path"] = node.dir
    head = [render_frontmatter(node.name, node.description, metadata), f"# {node.title}\n",
            routing_summary(node) + "\n"]
    if node.is_skill and extras.entities:
        head.append(f"Entities: {', '.join(extras.entities)}\n")
    see_also = [f"\n{SECTION_SEE_ALSO}\n", *extras.see_also] if extras.see_also else []
    related = [f"\n{SECTION_RELATED}\n"] if extras.related else []
    for node_id, shared in extras.related:
        other = forest.by_id[node_id]
        related.append(f"- [{other.name}](../{other.name}/SKILL.md) — shared: {', '.join(shared[:5])}")
    examples = _examples(extras.examples, cards, with_one_line=True)
    if node.level == 1:
        body = [f"{SECTION_DOCUMENTS} ({len(node.members)})\n"]
        room = NAV_FILE_TARGET_BYTES - _size(head + body + see_also + examples + related)
        body += doc_rows([cards[d] for d in node.members], room)
    else:
        body = [f"{SECTION_SUBGROUPS} ({len(node.children)})\n", *(group_row(child) for child in node.children)]
    if _size(head + body + see_also + examples + related) > NAV_FILE_TARGET_BYTES:
        examples = _examples(extras.examples, cards, with_one_line=False)  # their own rows say the rest
    # Titles and summaries come from documents: a control character would reach whoever cats the
    # file (an ANSI escape, a carriage return hiding a row), so each is written as an escape.
    # Document ids never hold one (ingest rejects them), so rows still name their documents.
    return printable("\n".join(head + body + see_also + examples + related).rstrip(), keep="\n") + "\n"


def _examples(doc_ids: list[str], cards: dict[str, DocCard], with_one_line: bool) -> list[str]:
    if not doc_ids:
        return []
    rows = [f"- `{d}` **{cards[d].title}**" + (f" — {clip(cards[d].one_line, 120)}" if with_one_line else "")
            for d in doc_ids]
    return [f"\n{SECTION_EXAMPLES}\n", *rows]


def _size(lines: list[str]) -> int:
    return len("\n".join(lines).encode()) + 1
