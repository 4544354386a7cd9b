"""The finished hierarchy as a tree of nodes with unique, filesystem-safe names and paths."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .artifacts import CorpusArtifacts
from c2s_core.layout import INDEX_FILE, SKILL_FILE, SKILLS_DIR
from c2s_core.text import slugify

MAX_NAME = 50
SUBGROUP_LEVEL = 0  # the level of a crowded leaf's sub-groups (c2s_pipeline.subgroups), below level 1
_RESERVED = re.compile(r"anthropic|claude")  # words Agent Skills names may not contain


@dataclass
class Node:
    node_id: str
    level: int
    title: str
    description: str
    summary: str
    label: str
    key_terms: list[str]
    size: int
    members: list[str]  # doc ids (a leaf) or child node ids
    name: str = ""
    dir: str = ""  # POSIX path relative to the tree root
    parent: "Node | None" = None
    children: list["Node"] = field(default_factory=list)

    @property
    def is_skill(self) -> bool:
        return self.parent is None

    @property
    def is_leaf(self) -> bool:
        """Lists documents itself: a level-1 cluster, or a sub-group of a crowded one
        (:mod:`.subgroups`); a level-1 cluster split into sub-groups is not a leaf."""
        return not self.children

    @property
    def is_subgroup(self) -> bool:
        return self.level == SUBGROUP_LEVEL

    @property
    def height(self) -> int:
        """Steps down to the documents (1: lists them). A cluster's level, except above a
        crowded leaf split into sub-groups, whose branch is that much deeper."""
        return 1 if self.is_leaf else 1 + max(child.height for child in self.children)

    @property
    def nav_file(self) -> str:
        return f"{self.dir}/{SKILL_FILE if self.is_skill else INDEX_FILE}"

    @property
    def depth(self) -> int:
        return 1 if self.parent is None else self.parent.depth + 1

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def documents(self) -> list[str]:
        if self.is_leaf:
            return list(self.members)
        return [d for child in self.children for d in child.documents()]


@dataclass
class Forest:
    skills: list[Node]
    by_id: dict[str, Node]
    levels: int

    def nodes(self):
        for skill in self.skills:
            yield from skill.walk()


def build_forest(art: CorpusArtifacts, previous_names: dict[str, str] | None = None) -> Forest:
    """The finished hierarchy; nodes named in ``previous_names`` keep those names (and paths)."""
    levels = art.used_levels()
    by_id: dict[str, Node] = {}
    for level in levels:
        for row in art.final_nodes(level).iter_rows(named=True):
            by_id[row["node_id"]] = Node(
                node_id=row["node_id"], level=level, title=row["title"], description=row["description"],
                summary=row["summary"], label=row["label"], key_terms=list(row["key_terms"]), size=row["size"],
                members=list(row["members"]),
            )
    for node in by_id.values():
        if node.level > 1:
            node.children = [by_id[m] for m in node.members]
            for child in node.children:
                child.parent = node
    top = max(levels)
    skills = [n for n in by_id.values() if n.level == top]
    assign_names(skills, SKILLS_DIR, previous_names or {})
    return Forest(skills=skills, by_id=by_id, levels=len(levels))


def safe_name(label: str) -> str:
    """An Agent Skills name: [a-z0-9-], no leading/trailing/double hyphens, no reserved words."""
    name = slugify(_RESERVED.sub("", label.lower()), MAX_NAME)
    return re.sub(r"-{2,}", "-", name).strip("-") or "group"


def assign_names(siblings: list[Node], parent_dir: str, previous: dict[str, str]) -> None:
    """Unique names among siblings: a node keeps its published name; a new node's name comes
    from its label, and a clash takes the node's next key term, then a number."""
    kept = {n.node_id: previous[n.node_id] for n in siblings if n.node_id in previous}
    if len(set(kept.values())) != len(kept):
        kept = {}  # siblings regrouped under new parents: names are assigned afresh
    taken: set[str] = set(kept.values())
    for node in sorted(siblings, key=lambda n: (n.node_id not in kept, -n.size, n.node_id)):
        if node.node_id in kept:
            node.name = kept[node.node_id]
            node.dir = f"{parent_dir}/{node.name}"
            assign_names(node.children, node.dir, previous)
            continue
        base = safe_name(node.label)
        name = base
        for term in node.key_terms:
            if name not in taken:
                break
            name = safe_name(f"{base}-{term}")
        counter = 2
        while name in taken:
            name = safe_name(f"{base[: MAX_NAME - 4]}-{counter}")
            counter += 1
        taken.add(name)
        node.name = name
        node.dir = f"{parent_dir}/{name}"
        assign_names(node.children, node.dir, previous)
