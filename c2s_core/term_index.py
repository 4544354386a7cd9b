"""term_index.txt: the words of the documents' bodies, each with the leaves whose documents use it.

Nav rows carry titles, one-line summaries, phrases and identifiers, but a question is often
asked in words that only a document's body holds (a sentence of a reference page, an option
described in passing). The compiler writes, beside the tree, one line per leaf and then one line
per distinctive body term:

    @LEAF FOLDER
    TERM DOCS LEAF:ROW,ROW LEAF:ROW ...
    =TERM DOCS LEAF:ROW,ROW LEAF:ROW ...

``LEAF`` is a number naming a leaf, and its ``@LEAF`` line gives the leaf's folder below
``skills/``. ``TERM`` is a stemmed content term (:func:`c2s_core.text.terms`, as questions
are matched), ``DOCS`` how many documents use it, and each ``LEAF:ROWS`` a leaf with the rows of
its ``## Documents`` section (1-based) whose documents use the term; leaves with the most rows
first. A ``=TERM`` line lists, the same way, the rows whose *titles* use the term. So a navigator
can tell which leaf holds one document using all of a question's rare words, and, once it has
read that leaf, which of its rows.

Title lines are there because a question often names a document by its title, in words too
common to be listed as body terms ("list output format", "create new rows in a table"): on a
6,836-document development tree, the leaf with the best row held the page a known-item question
named for 22 of 100 questions from body lines alone and for 88 with title lines too. A title
that holds most of the question's term weight (it restates the question: :func:`row_scores`)
counts its words twice, once as title words and once as body words, as a title field is weighted
up in search engines; titles are short, so a question's title lines add ~0.8 KB.

A navigator reads the lines of its question's terms with one ``grep -E '^=?(t1|t2) '
term_index.txt``, and the folders of the leaves it wants with one ``grep -E '^@(3|17) '``: what
is read grows with the question, not the corpus. Leaves are numbers, not folders, in the term
lines because a folder is ~100 characters and a term is listed in up to a quarter of the leaves:
with folders, a question's full lines ran to ~4 KB and the file to ~3.6 KB a document, so a
navigator could afford only each term's first six leaves; from those, the leaf holding the
answer was among the best three for 77% of body-text questions on development sets, and from
whole lines for 97% (with numbers, whole lines are ~0.4 KB a question and ~0.5 KB a document). Terms used by documents of more
than :data:`MAX_LEAF_SHARE` of the leaves (or :data:`MAX_LEAVES_LISTED`) say little about where to go or which row to take
(listing them all grew the file by half for two points of recall), so they are left out; the
same cap holds for title terms.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from .layout import INDEX_FILE, SKILL_FILE, SKILLS_DIR
from .text import terms

MAX_LEAF_SHARE = 0.25  # a term in more leaves than this share (at least MIN_LEAVES) is not listed
MIN_LEAVES = 3
# ... nor one in more leaves than this, whatever the share: a question's lines are then read in
# bytes that do not grow with the corpus (a line lists ~9 bytes a leaf). Trees of up to 512 leaves
# (about 5,000 documents) meet the share first. On a 20,000-document tree of 2,594 leaves the share
# let a line list 648 leaves, and a question of common words read up to 88 KB of them. Such a
# body-text question is found by the row using all its words, so a cap costs recall there:
# navigator-only recall@5 0.93 at 64 leaves, 0.97 at 128, 0.98 at 256, at 2.9x, 3.1x and 3.2x the
# reference's nav bytes (before counts listed children by name, which took a fifth off). It is
# the one dev corpus large enough for the cap to bind, so no corpus was left out to choose it.
MAX_LEAVES_LISTED = 128
# A row's title counts its words again when it holds this share of the question's term weight:
# it restates the question. On development sets, every lower share (down to counting any title
# word) lost body-text and help-center questions to titles that merely share a few of their words;
# 0.6 kept those at their body-only recall and still held ~90% of known-item questions' pages.
# Left out, every development corpus but the real-question one is given 0.4 by the others and is
# no better there; that one alone chooses 0.4, and is given 0.6 (benchmarks/README.md).
TITLE_SHARE = 0.6
LEAF_MARK = "@"  # starts a leaf line; no term starts with it
TITLE_MARK = "="  # starts a title-term line (terms start with a letter or digit)
_TERM = re.compile(r"[^\s:@][^\s:]*")  # a line is split at spaces and a place at its colon
_LEAF_LINE = re.compile(r"@(\d+) (\S+)")
HEADER = ("# term_index: '@LEAF FOLDER' lines (FOLDER below skills/), then 'TERM DOCS LEAF:ROW,ROW ...' "
          "(ROW: the leaf's ## Documents rows whose documents use TERM) and '=TERM DOCS LEAF:ROW,ROW ...' "
          "(rows whose titles use TERM)")


@dataclass(frozen=True)
class TermPostings:
    documents: int  # documents using the term, corpus-wide
    leaves: dict[int, tuple[int, ...]]  # leaf number -> rows (1-based) of its documents using the term

    def idf(self, corpus_documents: int) -> float:
        """How much a document's use of the term says: rarer terms say more."""
        return math.log(1.0 + corpus_documents / (1.0 + self.documents))


@dataclass
class TermIndex:
    leaves: dict[int, str] = field(default_factory=dict)  # leaf number -> its nav file
    terms: dict[str, TermPostings] = field(default_factory=dict)  # keyed as the lines are: "=TERM" for a title term

    def lines(self, words: Iterable[str]) -> dict[str, TermPostings]:
        """The body and title lines of ``words``, keyed as :attr:`terms` (what :func:`term_pattern`'s grep prints)."""
        return {key: self.terms[key] for w in dict.fromkeys(words) for key in (w, title_key(w)) if key in self.terms}


def title_key(term: str) -> str:
    """How a title term's line, and its key in :class:`TermIndex`, starts."""
    return TITLE_MARK + term


RowScores = dict[tuple[int, int], float]  # (leaf number, row) -> summed idf of the question's words it uses


def row_scores(lines: Mapping[str, TermPostings], corpus_documents: int) -> RowScores:
    """Each row using any of the question's terms (their body and title lines, keyed as
    :attr:`TermIndex.terms`) -> the summed idf of those its document uses, so one document using
    all of a question's rare words scores above many using one each; plus, for a row whose title
    holds :data:`TITLE_SHARE` of the question's term weight or more, the summed title idf of
    those words: a title that restates the question counts its words again, one sharing a few
    words with a longer question does not."""
    idf = {key: post.idf(corpus_documents) for key, post in lines.items()}
    # A term's weight: its body line's idf, or its title line's where only titles list it.
    weight = {key.removeprefix(TITLE_MARK): w for key, w in idf.items() if key.startswith(TITLE_MARK)}
    weight.update({key: w for key, w in idf.items() if not key.startswith(TITLE_MARK)})
    total = sum(weight.values()) or 1.0
    scores: RowScores = {}
    titled: dict[tuple[int, int], list[str]] = defaultdict(list)  # row -> the title lines naming it
    for key, post in lines.items():
        title = key.startswith(TITLE_MARK)
        for leaf, rows in post.leaves.items():
            for row in rows:
                if title:
                    titled[leaf, row].append(key)
                else:
                    scores[leaf, row] = scores.get((leaf, row), 0.0) + idf[key]
    for place, keys in titled.items():
        if sum(weight[key.removeprefix(TITLE_MARK)] for key in keys) / total >= TITLE_SHARE:
            scores[place] = scores.get(place, 0.0) + sum(idf[key] for key in keys)
    return scores


def best_by_leaf(scores: RowScores) -> dict[int, float]:
    """Leaf number -> the score of its best row."""
    best: dict[int, float] = {}
    for (leaf, _), score in scores.items():
        best[leaf] = max(best.get(leaf, 0.0), score)
    return best


def best_rows(scores: RowScores, leaf: int, count: int) -> list[int]:
    """The leaf's ``count`` best rows, best first (ties: the earlier row)."""
    return sorted((r for n, r in scores if n == leaf), key=lambda r: (-scores[leaf, r], r))[:count]


def leaf_folder(nav_file: str) -> str:
    """``skills/a/b/INDEX.md`` -> ``a/b`` (``skills/a/SKILL.md`` -> ``a``)."""
    return nav_file.removeprefix(f"{SKILLS_DIR}/").rsplit("/", 1)[0]


def leaf_nav_file(folder: str) -> str:
    """The inverse of :func:`leaf_folder`: a top-level folder is a skill, deeper ones are groups."""
    return f"{SKILLS_DIR}/{folder}/{INDEX_FILE if '/' in folder else SKILL_FILE}"


def document_terms(title: str, text: str) -> set[str]:
    """The terms a document is indexed under: those of its title and text (:func:`terms`)."""
    return set(terms(f"{title}\n{text}"))


@dataclass(frozen=True)
class BuiltTermIndex:
    """term_index.txt's text; the same lines parsed (what :func:`parse_term_index` reads back from
    the text); and how many documents use each term (every term, the ones too common to be listed
    too: what the navigability probe weighs a question's words by)."""

    text: str
    index: TermIndex
    document_frequency: dict[str, int]


def build_term_index(leaves: Iterable[tuple[str, Iterable[tuple[str, str]]]]) -> BuiltTermIndex:
    """``leaves``: (leaf nav file, its documents' (title, text) in row order), numbered 1, 2, ...
    in the order given -> the file's text: the leaf lines, then the body and title term lines
    sorted. A title is a document's first words, so its terms are body terms too."""
    body: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    titles: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    lines = [HEADER]
    index = TermIndex()
    for number, (nav_file, documents) in enumerate(leaves, 1):
        lines.append(f"{LEAF_MARK}{number} {leaf_folder(nav_file)}")
        index.leaves[number] = leaf_nav_file(leaf_folder(nav_file))
        for row, (title, text) in enumerate(documents, 1):
            for term in set(terms(title)):
                titles[term][number].append(row)
            for term in document_terms(title, text):
                body[term][number].append(row)
    cap = min(MAX_LEAVES_LISTED, max(MIN_LEAVES, math.ceil(MAX_LEAF_SHARE * (len(lines) - 1))))
    listed = list(body.items()) + [(title_key(term), places) for term, places in titles.items()]
    for key, by_leaf in sorted(listed):
        if len(by_leaf) > cap or not _TERM.fullmatch(key.removeprefix(TITLE_MARK)):
            continue
        ordered = sorted(by_leaf.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        users = sum(map(len, by_leaf.values()))  # documents using the term
        lines.append(f"{key} {users} " + " ".join(f"{leaf}:{','.join(map(str, rows))}" for leaf, rows in ordered))
        index.terms[key] = TermPostings(users, {leaf: tuple(rows) for leaf, rows in ordered})
    return BuiltTermIndex("\n".join(lines) + "\n", index,
                          {term: sum(map(len, by_leaf.values())) for term, by_leaf in body.items()})


def term_pattern(words: Iterable[str]) -> str:
    """An extended regular expression matching the body and title lines of ``words`` (for ``grep -E``)."""
    return f"^{TITLE_MARK}?(" + "|".join(re.escape(w) for w in dict.fromkeys(words)) + ") "


def leaf_pattern(numbers: Iterable[int]) -> str:
    """... matching the leaf lines of these leaf numbers."""
    return f"^{LEAF_MARK}(" + "|".join(str(n) for n in dict.fromkeys(numbers)) + ") "


def leaf_name_pattern(names: Iterable[str]) -> str:
    """... matching the leaf lines of the leaves with these folder names (a folder's last part)."""
    return f"^{LEAF_MARK}[0-9]+ ([^ ]*/)?(" + "|".join(re.escape(n) for n in dict.fromkeys(names)) + ")$"


def parse_term_lines(text: str) -> dict[str, TermPostings]:
    """Term lines of term_index.txt (any subset, e.g. grep output) -> {term: postings}, a title
    term keyed ``=TERM`` (:func:`title_key`); other lines are skipped."""
    out: dict[str, TermPostings] = {}
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) < 3 or not parts[1].isdigit() or not _TERM.fullmatch(parts[0]):
            continue
        leaves = {}
        for place in parts[2:]:
            leaf, _, rows = place.partition(":")
            numbers = tuple(int(r) for r in rows.split(",") if r.isdigit())
            if leaf.isdigit() and numbers:
                leaves[int(leaf)] = numbers
        out[parts[0]] = TermPostings(int(parts[1]), leaves)
    return out


def parse_leaf_lines(text: str) -> dict[int, str]:
    """Leaf lines of term_index.txt (any subset) -> {leaf number: its nav file}."""
    return {int(m[1]): leaf_nav_file(m[2]) for line in text.splitlines() if (m := _LEAF_LINE.fullmatch(line))}


def parse_term_index(text: str) -> TermIndex:
    """The whole file (or any subset of its lines)."""
    return TermIndex(parse_leaf_lines(text), parse_term_lines(text))
