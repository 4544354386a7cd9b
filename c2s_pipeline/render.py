"""Rendering the forest to navigation files: SKILL.md per top-level cluster, INDEX.md below.

Each file: frontmatter, a routing summary, then sub-groups (or document rows), ``@see`` stubs
for softly-assigned items, example documents, and for skills their related skills. The rows
themselves are written (and parsed) by :mod:`c2s_core.navrows`; a leaf whose rows would take its
file past ``NAV_FILE_TARGET_BYTES`` renders them leaner, so nav files stay small on large corpora,
and one whose leanest rows would still not fit (:func:`rows_fit`) is split into sub-groups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from c2s_core.frontmatter import render_frontmatter
from c2s_core.layout import SECTION_DOCUMENTS, SECTION_EXAMPLES, SECTION_RELATED, SECTION_SEE_ALSO, SECTION_SUBGROUPS
from c2s_core.navrows import (GROUP_DESCRIPTION_CHARS, ROW_STYLES, DocCard, doc_row, doc_rows, example_row, group_row,
                              group_rows)
from c2s_core.text import clip, content_tokens, printable
from .forest import Forest, Node

@dataclass
class NodeExtras:
    """What the later stages attach to a node before rendering."""

    see_also: list[str] = field(default_factory=list)  # rendered stub lines, closest first
    examples: list[str] = field(default_factory=list)  # doc ids
    related: list[tuple[str, list[str]]] = field(default_factory=list)  # (skill node id, shared entities)
    entities: list[str] = field(default_factory=list)


NAV_FILE_TARGET_BYTES = 3900  # a leaf renders leaner rows past this, to stay under NAV_FILE_DESIGN_BYTES
SUMMARY_MIN_CHARS = 40  # a summary cut shorter than this says nothing: it is left out

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


def render_node(node: Node, cards: dict[str, DocCard], extras: NodeExtras, forest: Forest) -> str:
    """A node's nav file, within NAV_FILE_TARGET_BYTES where its rows allow: what only helps
    (example one-lines, then examples, then related skills past the first, then ``@see`` stubs)
    gives way before any row does, and rows render leaner before they would overflow."""
    head, see_also, related = _frame(node, extras, forest)
    examples = _examples(extras.examples, cards, with_one_line=True)
    lean_examples = _examples(extras.examples, cards, with_one_line=False)
    extra = _size(_beside_rows(head, see_also, related, lean_examples))
    if node.is_leaf:
        body = [f"{SECTION_DOCUMENTS} ({len(node.members)})\n",
                *doc_rows([cards[d] for d in node.members], NAV_FILE_TARGET_BYTES - extra)]
    else:
        body = [f"{SECTION_SUBGROUPS} ({len(node.children)})\n",
                *group_rows(node.children, NAV_FILE_TARGET_BYTES - extra)]
    head = _lean_head(head, _size(_beside_rows(head, see_also, related, []) + body) - NAV_FILE_TARGET_BYTES)
    if _size(head + body + see_also + examples + related) > NAV_FILE_TARGET_BYTES:
        examples = lean_examples  # their own rows say the rest
    if _size(head + body + examples + related) > NAV_FILE_TARGET_BYTES:
        examples = []  # examples are documents listed below: a crowded node shows its rows instead
    related = _related_within(related, NAV_FILE_TARGET_BYTES - _size(head + body))
    see_also = _stubs_within(see_also, NAV_FILE_TARGET_BYTES - _size(head + body + examples + related))
    return _text(head + body + see_also + examples + related)


def _lean_head(head: list[str], over: int) -> list[str]:
    """The head with its summary prose cut by ``over`` bytes (at a word, marked), when the rows
    and the least beside them would pass the size otherwise: the prose restates what the rows
    below list (a crowded node's "Covers: …" names its sub-groups), so it gives way before any
    row does. A summary cut to almost nothing is left out."""
    if over <= 0:
        return head
    summary = head[2].rstrip("\n")
    keep, kept = len(summary) - over, ""
    while keep >= SUMMARY_MIN_CHARS:
        kept = clip(summary, keep)
        if len(summary.encode()) - len(kept.encode()) >= over:
            break
        keep, kept = keep - 8, ""  # wide characters, or the cut's mark: a little more
    return [*head[:2], kept + "\n", *head[3:]] if kept else [*head[:2], *head[3:]]


def _related_within(related: list[str], room: int) -> list[str]:
    """The related skills that ``room`` bytes hold, closest first (at least one: a way across
    the tree is worth a few bytes past the target)."""
    if not related or _size(related) <= room:
        return related
    header, rows = related[0], related[1:]
    kept = rows[:1]
    for row in rows[1:]:
        if _size([header, *kept, row]) > room:
            break
        kept.append(row)
    return [header, *kept]


def _stubs_within(see_also: list[str], room: int) -> list[str]:
    """The ``@see`` section with as many stubs as ``room`` bytes hold, closest first (the order
    they come in), and a line saying how many were left out: a stub is a second way to a
    document or group that its own nav file lists, so a crowded corner of the tree keeps its
    files within their size instead of growing with every near-miss."""
    if not see_also or _size(see_also) <= room:
        return see_also
    header, stubs = see_also[0], see_also[1:]
    kept: list[str] = []
    used = _size([header, _left_out(len(stubs))])  # the note at its longest
    for stub in stubs:
        used += _size([stub])
        if used > room:
            break
        kept.append(stub)
    return [header, *kept, _left_out(len(stubs) - len(kept))]


def _left_out(stubs: int) -> str:
    return (f"({stubs} more `@see` stubs left out to keep this file within its size; "
            "their documents and groups are listed where they live.)")


def rows_fit(node: Node, cards: dict[str, DocCard], extras: NodeExtras, forest: Forest) -> bool:
    """Whether ``node``'s rows fit its nav file: rendered as lean as it can be (a leaf's document
    rows in the leanest row style, a split node's sub-group rows in the leanest description
    length, examples without their one-lines) and less its ``@see`` stubs
    (but for the line saying they were left out), it stays within NAV_FILE_TARGET_BYTES. A leaf
    whose rows do not is crowded and lists sub-groups instead (:mod:`.subgroups`); stubs are
    left out because a split does not make them fewer."""
    head, see_also, related = _frame(node, extras, forest)
    if node.is_leaf:
        body = [f"{SECTION_DOCUMENTS} ({len(node.members)})\n",
                *(doc_row(cards[d], ROW_STYLES[-1]) for d in node.members)]
    else:
        body = [f"{SECTION_SUBGROUPS} ({len(node.children)})\n",
                *(group_row(child, GROUP_DESCRIPTION_CHARS[-1]) for child in node.children)]
    beside = _beside_rows(head, see_also, related, _examples(extras.examples, cards, with_one_line=False))
    return len(_text(beside + body).encode()) <= NAV_FILE_TARGET_BYTES


def _beside_rows(head: list[str], see_also: list[str], related: list[str], lean_examples: list[str]) -> list[str]:
    """What a nav file keeps beside its rows at the least: its head, examples without their
    one-lines, its related skills and, where it has ``@see`` stubs, their heading and the line
    saying they were left out (the stubs themselves take what room is left)."""
    stubs_note = [see_also[0], _left_out(len(see_also) - 1)] if see_also else []
    return head + lean_examples + related + stubs_note


def _frame(node: Node, extras: NodeExtras, forest: Forest) -> tuple[list[str], list[str], list[str]]:
    """What a nav file holds beside its rows and examples: its head (frontmatter, title,
    summary, a skill's entities), ``@see`` stubs and a skill's related skills."""
    # The level shown is the node's height, which a navigator reads to know how far the
    # documents are: a cluster's level, one more above a crowded leaf's sub-groups.
    metadata = {"level": node.height, "documents": node.size}
    if node.is_subgroup:
        metadata["subgroup"] = True
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
    return head, see_also, related


def _text(lines: list[str]) -> str:
    # Titles and summaries come from documents: a control character would reach whoever cats the
    # file (an ANSI escape, a carriage return hiding a row), so each is written as an escape.
    # Document ids never hold one (ingest rejects them), so rows still name their documents.
    return printable("\n".join(lines).rstrip(), keep="\n") + "\n"


def _examples(doc_ids: list[str], cards: dict[str, DocCard], with_one_line: bool) -> list[str]:
    if not doc_ids:
        return []
    rows = [example_row(cards[d], with_one_line) for d in doc_ids]
    return [f"\n{SECTION_EXAMPLES}\n", *rows]


def _size(lines: list[str]) -> int:
    return len("\n".join(lines).encode()) + 1
