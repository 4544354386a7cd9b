"""Structural checks on a rendered tree, run before it is published (and reported as Dagster
asset checks): a tree that fails a blocking check never replaces the one being served."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from c2s_core.frontmatter import frontmatter_problems
from c2s_core.layout import (INDEX_FILE, NAV_FILE_DESIGN_BYTES, SECTION_DOCUMENTS, SECTION_SUBGROUPS, SKILL_FILE,
                             SKILLS_DIR, TERM_INDEX_FILE)
from c2s_core.term_index import parse_leaf_lines, parse_term_lines

# The check warns above the design (a leaf renders leaner rows past
# ``render.NAV_FILE_TARGET_BYTES`` to stay under it) and reports the median against the method's
# typical size.
NAV_FILE_TYPICAL_BYTES = 2048
DOC_ROW = re.compile(r"^- `([^`]+)` \*\*", re.MULTILINE)
_SUBGROUP = re.compile(r"^  subgroup: true$", re.MULTILINE)  # in the frontmatter's metadata


@dataclass
class CheckOutcome:
    name: str
    passed: bool
    blocking: bool
    description: str
    metadata: dict = field(default_factory=dict)


def nav_files(root: Path) -> list[Path]:
    skills = root / SKILLS_DIR
    return sorted(p for p in skills.rglob("*.md") if p.name in (SKILL_FILE, INDEX_FILE))


def primary_rows(text: str) -> list[str]:
    """Doc ids listed as primary rows (the Documents section; @see stubs are not rows)."""
    if SECTION_DOCUMENTS not in text:
        return []
    section = text.split(SECTION_DOCUMENTS, 1)[1].split("\n## ", 1)[0]
    return DOC_ROW.findall(section)


def _is_subgroup(text: str) -> bool:
    """Whether a nav file's frontmatter marks it a crowded leaf's sub-group."""
    return bool(_SUBGROUP.search(text, 0, max(text.find("\n---\n", 4), 0)))


def check_tree(root: Path, doc_ids: list[str], p: int) -> list[CheckOutcome]:
    """Every check in one pass over the nav files: each file is read, measured and parsed once
    (a 50,000-document tree has thousands of them)."""
    files = nav_files(root)
    texts = {f: f.read_text(encoding="utf-8") for f in files}
    rows = {f: primary_rows(t) for f, t in texts.items()}
    size = {f: len(t.encode("utf-8")) for f, t in texts.items()}
    outcomes = []

    listed = Counter(d for found in rows.values() for d in found)
    missing = [d for d in doc_ids if listed[d] == 0]
    repeated = [d for d, n in listed.items() if n > 1]
    unknown = sorted(set(listed) - set(doc_ids))
    ok = not (missing or repeated or unknown)
    outcomes.append(CheckOutcome(
        "every_document_placed_once", ok, True,
        "every accepted document is a primary row of exactly one leaf" if ok else
        f"{len(missing)} missing, {len(repeated)} listed twice, {len(unknown)} unknown "
        f"(e.g. {(missing + repeated + unknown)[:3]})",
        {"documents": len(doc_ids), "missing": len(missing), "repeated": len(repeated)},
    ))

    problems = {str(f.relative_to(root)): frontmatter_problems(t, f.parent.name) for f, t in texts.items()}
    bad = {k: v for k, v in problems.items() if v}
    outcomes.append(CheckOutcome(
        "frontmatter_valid", not bad, True,
        f"{len(files)} nav files pass the Agent Skills frontmatter rules" if not bad else
        "; ".join(f"{k}: {', '.join(v)}" for k, v in list(bad.items())[:5]),
        {"invalid_files": len(bad)},
    ))

    sizes = sorted(size.values())
    over = sorted((n, str(f.relative_to(root))) for f, n in size.items() if n > NAV_FILE_DESIGN_BYTES)
    p95 = sizes[min(len(sizes) - 1, math.ceil(0.95 * len(sizes)) - 1)] if sizes else 0
    median = sizes[(len(sizes) - 1) // 2] if sizes else 0
    outcomes.append(CheckOutcome(
        "nav_file_sizes", not over, False,
        f"largest {sizes[-1] if sizes else 0} B, p95 {p95} B, median {median} B "
        f"(typical: under {NAV_FILE_TYPICAL_BYTES} B); {len(over)} file(s) above {NAV_FILE_DESIGN_BYTES} B"
        + (f", largest {over[-1][1]}" if over else ""),
        {"largest_bytes": sizes[-1] if sizes else 0, "p95_bytes": p95, "median_bytes": median,
         "over_4kb": len(over)},
    ))

    # The bound is on the clustered levels; a crowded leaf's sub-groups lie below it.
    depths = {f: len(f.relative_to(root / SKILLS_DIR).parts) - 1 for f in files}
    depth = max((d for f, d in depths.items() if not _is_subgroup(texts[f])), default=0)
    below = max(depths.values(), default=0) - depth
    bound = math.ceil(math.log(max(len(doc_ids), 2), p)) + 1
    outcomes.append(CheckOutcome(
        "depth_within_bound", depth <= bound, True, f"depth {depth}, bound ceil(log_p N) + 1 = {bound}"
        + (f"; sub-groups of crowded leaves {below} level(s) below" if below else ""),
        {"depth": depth, "bound": bound, "subgroup_levels": below},
    ))

    empty = [str(f.relative_to(root)) for f, t in texts.items()
             if not rows[f] and not re.search(rf"{SECTION_SUBGROUPS} \(\d+\)\n\n- \[", t)]
    outcomes.append(CheckOutcome(
        "no_empty_cluster", not empty, True,
        "every nav file lists documents or sub-groups" if not empty else f"empty: {empty[:5]}",
        {"empty": len(empty)},
    ))

    siblings: dict[Path, Counter] = defaultdict(Counter)  # folder -> its sub-folders' names, lowered
    for f in files:
        siblings[f.parent.parent][f.parent.name.lower()] += 1
    clashes = [f"{folder.relative_to(root)}/{n}" for folder, names in siblings.items()
               for n, c in names.items() if c > 1]
    outcomes.append(CheckOutcome(
        "sibling_labels_unique", not clashes, True,
        "labels are unique among siblings" if not clashes else f"clashing labels: {clashes[:5]}",
    ))
    outcomes.append(_term_index_rows(root, {f.relative_to(root).as_posix(): len(found) for f, found in rows.items()}))
    return outcomes


def _term_index_rows(root: Path, rows: dict[str, int]) -> CheckOutcome:
    """term_index.txt names leaves by number and rows within them: each leaf line must name a
    leaf of the tree, and each place a leaf line and a row that leaf lists, or a navigator would
    credit the wrong document."""
    path = root / TERM_INDEX_FILE
    if not path.is_file():
        return CheckOutcome("term_index_rows", False, True, f"{TERM_INDEX_FILE} is missing")
    bad = []
    leaves: dict[int, str] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            for number, leaf in parse_leaf_lines(line).items():
                leaves[number] = leaf
                if not rows.get(leaf):
                    bad.append(f"line {lineno}: leaf {number} ({leaf}) is not a leaf of the tree")
            for term, post in parse_term_lines(line).items():
                bad += [f"line {lineno} ({term}): leaf {leaf} row {r}" for leaf, listed in post.leaves.items()
                        for r in listed if not 1 <= r <= rows.get(leaves.get(leaf, ""), 0)]
    return CheckOutcome(
        "term_index_rows", not bad, True,
        "every term-index place is a document row of its leaf" if not bad else
        f"{len(bad)} place(s) or leaf line(s) name no document row, e.g. {bad[:3]}", {"bad_places": len(bad)})
