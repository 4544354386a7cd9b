"""Rendering the forest to navigation files: SKILL.md per top-level cluster, INDEX.md below.

Each file: frontmatter, a routing summary, then sub-groups (or document rows), ``@see`` stubs
for softly-assigned items, example documents, and for skills their related skills.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .frontmatter import render_frontmatter
from .layout import SECTION_DOCUMENTS, SECTION_EXAMPLES, SECTION_RELATED, SECTION_SEE_ALSO, SECTION_SUBGROUPS
from .text import clip
from .tree import Forest, Node

ROW_DESCRIPTION_CHARS = 120  # keeps nav files near the method's ~2 KB
ROW_PHRASES = 3


@dataclass(frozen=True)
class DocCard:
    doc_id: str
    title: str
    one_line: str
    phrases: list[str]


@dataclass
class NodeExtras:
    """What the later stages attach to a node before rendering."""

    see_also: list[str] = field(default_factory=list)  # rendered stub lines
    examples: list[str] = field(default_factory=list)  # doc ids
    related: list[tuple[str, list[str]]] = field(default_factory=list)  # (skill node id, shared entities)
    entities: list[str] = field(default_factory=list)


def doc_row(card: DocCard) -> str:
    phrases = f" _({'; '.join(card.phrases[:ROW_PHRASES])})_" if card.phrases else ""
    return f"- `{card.doc_id}` **{card.title}** — {clip(card.one_line, ROW_DESCRIPTION_CHARS)}{phrases}"


def doc_stub(card: DocCard, canonical: str) -> str:
    return f"- @see `{card.doc_id}` **{card.title}** → `{canonical}`"


def group_stub(node: Node) -> str:
    return f"- @see [{node.name}] {clip(node.title, 80)} → `{node.nav_file}`"


def render_node(node: Node, cards: dict[str, DocCard], extras: NodeExtras, forest: Forest) -> str:
    metadata = {"level": node.level, "documents": node.size}
    if node.is_skill:
        metadata["skill_path"] = node.dir
    parts = [render_frontmatter(node.name, node.description, metadata), f"# {node.title}\n", node.summary + "\n"]
    if node.is_skill and extras.entities:
        parts.append(f"Entities: {', '.join(extras.entities)}\n")
    if node.level == 1:
        parts.append(f"{SECTION_DOCUMENTS} ({len(node.members)})\n")
        parts += [doc_row(cards[d]) for d in node.members]
    else:
        parts.append(f"{SECTION_SUBGROUPS} ({len(node.children)})\n")
        for child in node.children:
            rel = f"{child.name}/INDEX.md"
            parts.append(f"- [{child.name}]({rel}) ({child.size} docs) — {clip(child.description, ROW_DESCRIPTION_CHARS)}")
    if extras.see_also:
        parts.append(f"\n{SECTION_SEE_ALSO}\n")
        parts += extras.see_also
    if extras.examples:
        parts.append(f"\n{SECTION_EXAMPLES}\n")
        parts += [f"- `{d}` **{cards[d].title}** — {clip(cards[d].one_line, 120)}" for d in extras.examples]
    if extras.related:
        parts.append(f"\n{SECTION_RELATED}\n")
        for node_id, shared in extras.related:
            other = forest.by_id[node_id]
            parts.append(f"- [{other.name}](../{other.name}/SKILL.md) — shared: {', '.join(shared[:5])}")
    return "\n".join(parts).rstrip() + "\n"
