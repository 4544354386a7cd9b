"""Crowded leaves split, so nav files keep their size design on any corpus.

Where the compile clusters level 1, a K-Means cluster whose documents' leanest rows would not
fit one leaf's nav file is split there into sibling clusters that each fit (:func:`fitting_parts`):
the tree keeps one depth, so a navigator reaches every document in as many rounds. What can
still overflow at render time (a leaf whose head is longer than :data:`LEAF_HEAD_BYTES`, a leaf
grown by incremental updates) is split below itself into sub-groups:

K-Means at level 1 makes ceil(N/p) clusters but not equal ones: a tight block of near-identical
documents (generated API pages, one man page per option) can land in one cluster of hundreds,
whose INDEX.md would run to tens of KB even in the leanest row style. Such a leaf (one whose
rows :func:`~c2s_pipeline.render.rows_fit` says do not fit) lists sub-groups instead: K-Means
over its members' vectors into ceil(n/p) sub-groups — fewer where their own rows would not fit
the leaf's file — each a child folder with its own INDEX.md. A sub-group still crowded splits
again. Sub-groups sit at level 0, below the level-1 cluster they divide (their nav files say
``subgroup: true``; the ``level`` a nav file shows is its height); they are named from the
words that set their documents apart from their siblings' (:func:`distinctive_terms`), without
an LLM call. The ``@see`` stubs soft assignment aimed at a split leaf go down to the sub-group
nearest each document (:func:`stub_home`).
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from c2s_core.layout import SECTION_DOCUMENTS
from c2s_core.navrows import ROW_STYLES, DocCard, doc_row, group_row
from c2s_core.text import clip, content_tokens

from .forest import SUBGROUP_LEVEL, Forest, Node, assign_names, safe_name
from .hierarchy import kmeans, members_by_label, normalise
from .render import NAV_FILE_TARGET_BYTES

SUBGROUPS_FILE = "subgroups.json"  # the compile's artifact: the sub-groups of the staged tree
MIN_SUBGROUPS = 2
LABEL_TERMS = 3  # words in a sub-group's name and title
KEY_TERMS = 8  # distinctive words kept per sub-group: its name's, then its key terms
TITLES_SHOWN = 3  # member titles in a sub-group's description
OVERSIZE = 2  # a K-Means part above this many times the mean part size is cut along its main axis
# ... and above this share of the whole, whatever the mean: split in two, K-Means may peel one
# near-duplicate off a crowd at a time (25 → 18 → 17 → 16 …), a level of sub-groups each.
MAX_PART_SHARE = 2 / 3

# What a leaf's nav file holds beside its rows (frontmatter, title, summary, the line noting
# left-out @see stubs): about the 90th percentile of leaf heads on a 20,000-document tree (median
# 590 bytes), so that few leaves a sibling split made fitting need sub-groups at render time.
LEAF_HEAD_BYTES = 700

Fits = Callable[[Node], bool]  # whether a node's rows fit its nav file


def leanest_row_bytes(cards: list[DocCard]) -> list[int]:
    """Each card's row in the leanest row style, in bytes with its line end: what a leaf lists at the least."""
    return [len(doc_row(card, ROW_STYLES[-1]).encode()) + 1 for card in cards]


def leanest_group_row_bytes(labels: Sequence[str], sizes: Sequence[int]) -> list[int]:
    """Each child node's row in its parent's nav file at the leanest (a link and its size, no
    description), in bytes with its line end, named as :func:`~.forest.safe_name` will name it."""
    rows = (group_row(_Named(safe_name(label), size), 0) for label, size in zip(labels, sizes))
    return [len(row.encode()) + 1 for row in rows]


@dataclass(frozen=True)
class _Named:
    """A child node as far as its leanest row shows it."""

    name: str
    size: int
    title: str = ""
    description: str = ""
    nav_file: str = ""


def leaf_room(documents: int) -> int:
    """Bytes a leaf of ``documents`` has for its rows: the file less :data:`LEAF_HEAD_BYTES` and its heading."""
    return NAV_FILE_TARGET_BYTES - LEAF_HEAD_BYTES - len(f"{SECTION_DOCUMENTS} ({documents})\n".encode())


def fits_one_leaf(row_bytes: Sequence[int]) -> bool:
    """Do rows of these sizes (:func:`leanest_row_bytes`; a node above the leaves: its children's
    :func:`leanest_group_row_bytes`) fit one nav file?"""
    return sum(row_bytes) <= leaf_room(len(row_bytes))


Divide = Callable[[list[int], int], list[list[int]]]  # members, parts wanted -> parts


def split_to_fit(members: list[int], row_bytes: Sequence[int], divide: Divide) -> list[list[int]]:
    """``members`` (indexes of ``row_bytes``) as is when their rows fit one leaf's nav file
    (:func:`fits_one_leaf`), else ``divide``d into as many parts as the rows fill files, each
    divided again until all fit; a single member is a part whatever its size. Parts in order of
    their first member."""
    sizes = [row_bytes[i] for i in members]
    if len(members) < 2 or fits_one_leaf(sizes):
        return [members]
    count = max(MIN_SUBGROUPS, math.ceil(sum(sizes) / leaf_room(len(members))))
    return sorted((fitted for part in divide(members, count) for fitted in split_to_fit(part, row_bytes, divide)),
                  key=min)


def fitting_parts(members: list[int], row_bytes: Sequence[int], unit: np.ndarray) -> list[list[int]]:
    """A cluster (rows of ``unit`` and ``row_bytes``) split to fit (:func:`split_to_fit`)
    by :func:`partition` of its members' vectors."""
    return split_to_fit(members, row_bytes,
                        lambda ms, count: [[ms[i] for i in part] for part in partition(unit[ms], count)])


def split_crowded(forest: Forest, cards: dict[str, DocCard], vectors: np.ndarray, doc_row: dict[str, int], p: int,
                  fits: Fits, previous: dict[str, str] | None = None) -> list[Node]:
    """Split every leaf of ``forest`` whose rows do not ``fit`` into sub-groups, in place; the
    sub-groups made, parents before children. ``vectors``: document vectors (rows per
    ``doc_row``); ``previous``: published names, kept by sub-groups that had them."""
    made: list[Node] = []
    for leaf in [n for n in forest.nodes() if n.is_leaf and not fits(n)]:
        made += _split(leaf, forest, cards, vectors, doc_row, p, fits, previous or {})
    return made


def _split(node: Node, forest: Forest, cards: dict[str, DocCard], vectors: np.ndarray, doc_row: dict[str, int],
           p: int, fits: Fits, previous: dict[str, str]) -> list[Node]:
    docs = list(node.members)
    unit = normalise(vectors[[doc_row[d] for d in docs]])
    count = max(MIN_SUBGROUPS, math.ceil(len(docs) / p))
    while True:
        parts = partition(unit, count)
        children = _subgroup_nodes(node, docs, parts, unit, cards)
        _attach(node, children, forest, previous)
        # The method's ceil(n/p) sub-groups, fewer (larger ones, split again below) where the
        # rows listing them would not fit this node's own file.
        if count == MIN_SUBGROUPS or fits(node):
            break
        for child in children:
            del forest.by_id[child.node_id]
        count = max(MIN_SUBGROUPS, count * 2 // 3)
    made = list(children)
    for child in children:
        if not fits(child):
            made += _split(child, forest, cards, vectors, doc_row, p, fits, previous)
    return made


def partition(unit: np.ndarray, count: int) -> list[list[int]]:
    """Rows of ``unit`` in about ``count`` parts, each at most MAX_PART_SHARE of the whole:
    K-Means, and a part above that or above OVERSIZE times the mean size (near-duplicates K-Means
    cannot tell apart) cut in runs along its first principal axis."""
    with warnings.catch_warnings():  # near-duplicates may give K-Means fewer distinct clusters: handled below
        warnings.simplefilter("ignore", ConvergenceWarning)
        labels = kmeans(unit, count)
    parts = members_by_label(labels, int(labels.max()) + 1)
    mean = math.ceil(len(unit) / count)
    # Never the whole (identical vectors make one K-Means part), and never most of it.
    cap = max(1, min(len(unit) - 1, OVERSIZE * mean, math.ceil(MAX_PART_SHARE * len(unit))))
    out = []
    for part in parts:
        if len(part) <= cap:
            out.append(part)
            continue
        block = unit[part] - unit[part].mean(axis=0)
        axis = np.linalg.svd(block, full_matrices=False)[2][0]
        order = [part[i] for i in np.argsort(block @ axis, kind="stable")]
        out += [sorted(int(i) for i in run) for run in np.array_split(order, max(2, math.ceil(len(part) / mean)))]
    out.sort(key=min)  # numbered by first member, as K-Means labels are
    return out


def _subgroup_nodes(parent: Node, docs: list[str], parts: list[list[int]], unit: np.ndarray,
                    cards: dict[str, DocCard]) -> list[Node]:
    ranked = distinctive_terms([[cards[docs[i]] for i in part] for part in parts], _said(parent))
    nodes = []
    for number, (part, terms) in enumerate(zip(parts, ranked), 1):
        members = [docs[i] for i in part]
        head = terms[:LABEL_TERMS] or [f"part {number}"]
        centre = normalise(unit[part].mean(axis=0, keepdims=True))[0]
        nearest = [members[i] for i in np.argsort(-(unit[part] @ centre), kind="stable")[:TITLES_SHOWN]]
        titles = "; ".join(clip(cards[d].title, 70) for d in nearest)
        title = clip(", ".join(head).capitalize(), 110)
        nodes.append(Node(
            node_id=f"{parent.node_id}.{number}", level=SUBGROUP_LEVEL, title=title,
            description=f"{title}: {len(members)} document{'s' if len(members) > 1 else ''}"
                        + (f" on {', '.join(terms[LABEL_TERMS:LABEL_TERMS + 4])}" if terms[LABEL_TERMS:] else "")
                        + f"; e.g. {titles}.",
            summary=f"Part {number} of {len(parts)} of {parent.title}."
                    + (f" Key terms: {', '.join(terms[:KEY_TERMS])}." if terms else ""),
            label="-".join(head), key_terms=terms[LABEL_TERMS:KEY_TERMS], size=len(members), members=members))
    return nodes


def distinctive_terms(parts: list[list[DocCard]], said: set[str]) -> list[list[str]]:
    """Per part, the words that set its documents apart from the other parts', best first: the
    share of its documents using a word times log(parts / parts using it), over card titles,
    phrases and identifiers. A word more than half the parts use does not set one apart, nor
    does one ``said`` already on the way down (the parent's and ancestors' names and titles)."""
    used = [[set(content_tokens(" ".join([c.title, *c.phrases, *c.identifiers]))) - said for c in cards]
            for cards in parts]
    spread = Counter(t for docs in used for t in set().union(*docs))
    out = []
    for docs in used:
        share = Counter(t for words in docs for t in words)
        score = {t: n / len(docs) * math.log(len(parts) / spread[t]) for t, n in share.items()
                 if 2 * spread[t] <= len(parts)}
        out.append([t for t, v in sorted(score.items(), key=lambda kv: (-kv[1], kv[0])) if v > 0][:KEY_TERMS])
    return out


def _said(node: Node | None) -> set[str]:
    words: set[str] = set()
    while node is not None:
        words |= set(content_tokens(f"{node.title} {node.name.replace('-', ' ')}"))
        node = node.parent
    return words


def stub_home(node: Node, vector: np.ndarray, centroid: Callable[[Node], np.ndarray]) -> Node:
    """Where a document's ``@see`` stub aimed at ``node`` is listed: ``node``, or once it is split,
    the sub-group (down to a leaf) whose centroid is nearest the document's vector."""
    while node.children and node.children[0].is_subgroup:
        sims = [float(centroid(c) @ vector) for c in node.children]
        node = node.children[int(np.argmax(sims))]
    return node


def _attach(parent: Node, children: list[Node], forest: Forest, previous: dict[str, str]) -> None:
    parent.children = children
    parent.members = [c.node_id for c in children]
    for child in children:
        child.parent = parent
        forest.by_id[child.node_id] = child
    assign_names(children, parent.dir, previous)


# -- kept beside the compile's artifacts, so the tree's diagnostics see the published shape ---------

def subgroup_rows(made: list[Node]) -> list[dict]:
    """The sub-groups as JSON-ready rows, parents before children."""
    return [{"node_id": n.node_id, "parent": n.parent.node_id, "title": n.title, "description": n.description,
             "summary": n.summary, "label": n.label, "key_terms": n.key_terms, "size": n.size,
             "members": n.members if n.is_leaf else []} for n in made]


def attach_subgroups(forest: Forest, rows: list[dict], previous: dict[str, str] | None = None) -> None:
    """Rebuild the sub-groups :func:`subgroup_rows` recorded onto a forest built from the same
    artifacts, named as published."""
    made: dict[str, list[Node]] = {}
    for row in rows:
        node = Node(node_id=row["node_id"], level=SUBGROUP_LEVEL, title=row["title"], description=row["description"],
                    summary=row["summary"], label=row["label"], key_terms=list(row["key_terms"]), size=row["size"],
                    members=list(row["members"]))
        made.setdefault(row["parent"], []).append(node)
        forest.by_id[node.node_id] = node
    for parent_id, children in made.items():  # parents first: a parent's folder is named before its children's
        _attach(forest.by_id[parent_id], children, forest, previous or {})
