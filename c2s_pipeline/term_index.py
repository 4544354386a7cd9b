"""term_index.txt: the words of the documents' bodies, each with the leaves whose documents use it.

Nav rows carry titles, one-line summaries, phrases and identifiers, but a question is often
asked in words that only a document's body holds (a sentence of a reference page, an option
described in passing). The compiler writes, beside the tree, one line per distinctive body term:

    TERM DOCS LEAF:ROW,ROW LEAF:ROW ...

``TERM`` is a stemmed content term (:func:`c2s_pipeline.text.terms`, as questions are matched),
``DOCS`` how many documents use it, and each ``LEAF:ROWS`` a leaf (its folder below ``skills/``)
with the rows of its ``## Documents`` section (1-based) whose documents use it; leaves with the
most rows first. So a navigator can tell which leaf holds one document using all of a
question's rare words, and, once it has read that leaf, which of its rows. A navigator reads the lines of its question's
terms with one ``grep -E '^(t1|t2) ' term_index.txt``: what is read grows with the question, not
the corpus. Terms used by documents of more than :data:`MAX_LEAF_SHARE` of the leaves say little
about where to go or which row to take (on development sets, listing them all grew the file by half
for two points of recall), so they are left out.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from .layout import INDEX_FILE, SKILL_FILE, SKILLS_DIR
from .text import terms

MAX_LEAF_SHARE = 0.25  # a term in more leaves than this share (at least MIN_LEAVES) is not listed
MIN_LEAVES = 3
_TERM = re.compile(r"[^\s:]+")  # a line is split at spaces and a place at its last colon
HEADER = "# term_index: TERM DOCS LEAF:ROW,ROW ... (LEAF: folder below skills/; ROW: its document rows using TERM)"


@dataclass(frozen=True)
class TermPostings:
    documents: int  # documents using the term, corpus-wide
    leaves: dict[str, tuple[int, ...]]  # leaf nav file -> rows (1-based) of its documents using the term


def leaf_folder(nav_file: str) -> str:
    """``skills/a/b/INDEX.md`` -> ``a/b`` (``skills/a/SKILL.md`` -> ``a``)."""
    return nav_file.removeprefix(f"{SKILLS_DIR}/").rsplit("/", 1)[0]


def leaf_nav_file(folder: str) -> str:
    """The inverse of :func:`leaf_folder`: a top-level folder is a skill, deeper ones are groups."""
    return f"{SKILLS_DIR}/{folder}/{INDEX_FILE if '/' in folder else SKILL_FILE}"


def build_term_index(leaves: Iterable[tuple[str, Iterable[str]]]) -> str:
    """``leaves``: (leaf nav file, its documents' title and text in row order) -> the file's
    text, terms sorted."""
    used: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    count = 0
    for nav_file, texts in leaves:
        folder = leaf_folder(nav_file)
        count += 1
        for row, text in enumerate(texts, 1):
            for term in set(terms(text)):
                used[term][folder].append(row)
    cap = max(MIN_LEAVES, math.ceil(MAX_LEAF_SHARE * count))
    lines = [HEADER]
    for term in sorted(used):
        by_leaf = used[term]
        if len(by_leaf) > cap or not _TERM.fullmatch(term):
            continue
        places = " ".join(f"{f}:{','.join(map(str, rows))}"
                          for f, rows in sorted(by_leaf.items(), key=lambda kv: (-len(kv[1]), kv[0])))
        lines.append(f"{term} {sum(map(len, by_leaf.values()))} {places}")
    return "\n".join(lines) + "\n"


def term_pattern(words: Iterable[str]) -> str:
    """An extended regular expression matching the lines of ``words`` (for ``grep -E``)."""
    return "^(" + "|".join(re.escape(w) for w in dict.fromkeys(words)) + ") "


def parse_term_lines(text: str) -> dict[str, TermPostings]:
    """Lines of term_index.txt (any subset, e.g. grep output) -> {term: postings}; other lines are skipped."""
    out: dict[str, TermPostings] = {}
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) < 3 or not parts[1].isdigit():
            continue
        leaves = {}
        for place in parts[2:]:
            folder, _, rows = place.rpartition(":")
            numbers = tuple(int(r) for r in rows.split(",") if r.isdigit())
            if folder and numbers:
                leaves[leaf_nav_file(folder)] = numbers
        out[parts[0]] = TermPostings(int(parts[1]), leaves)
    return out
