"""How a navigator weighs its evidence and how many nodes a level opens: one definition for the
offline navigator (``c2s_agent.offline_navigator``) and the compiler's navigability probe
(:mod:`c2s_pipeline.diagnostics`), so the probe descends as the navigator does."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from typing import TypeVar

RRF_K = 10.0  # small k: candidate lists are short (tens), so top ranks should count
# Routed, navigation's ranking and the search tool's fused as lists of ~10 documents: smaller still,
# so one list's first few documents hold their place (leave-one-corpus-out over the development
# corpora, against 10 and against 3: every left-out corpus is given 5, or does no better at the
# value it is given; benchmarks/README.md).
ROUTE_RRF_K = 5.0
# ... and each list's first document leads the fused order: a question worded as a document's body
# is often found by bm25 alone, and its document, in no other list, sank under documents two lists
# rank middling (leave-one-corpus-out over the development corpora: benchmarks/README.md).
ROUTE_FIRSTS_LEAD = True
# ... navigation's list weighing this share of the search lists together, and never less than one
# of them, so that the flat lists' voices do not drown navigation's (left out, every development
# corpus is given it by the others against 1/3; against 2/3 no corpus gains at a value chosen
# without it: benchmarks/README.md).
ROUTE_NAV_SHARE = 0.5
# ... unless navigation is lost: none of its first three documents is among any search list's first
# five. On every development set navigation found none of the answers where that happened (it
# happens on a question asked in other words than the tree's, rarely elsewhere), so its list is left
# out of the fusion and the documents read are the search lists' (0: never left out).
ROUTE_AGREE = 3
# Grep counts below a node rank the branch holding the answer first more often than the row's
# text does (on development trees, at every level), so they count four times in the fusion (6
# gained a question on two sets and cost the real-question set's navigator a question or its
# routed run three: not taken, twice; benchmarks/README.md, "The node-scoring and width constants").
EVIDENCE_WEIGHT = 4.0
# Nodes opened per level, from how far the level's best node stands out in fused score (its
# third-best under CLEAR_LEAD of it: BEAM_MIN; its second-best at NEAR_TIE or more: BEAM_MAX;
# else one more than BEAM_MIN). On development trees the branch holding the answer ranked first
# or second in all but a few levels with a clear lead, and within the top three in nearly all
# of the rest; the extra node each way is the margin that kept recall at a narrower read. Left
# out, every development corpus is given CLEAR_LEAD 0.85 by the other five (against 0.75), and,
# on trees whose upper levels cluster on their documents too, NEAR_TIE 0.9 (against 0.95: the
# widest beam a little more often, for ~4% more nav bytes).
BEAM_MIN, BEAM_MAX = 3, 5
CLEAR_LEAD, NEAR_TIE = 0.85, 0.9
# The term index (body words) in the node fusion: a higher weight won more body-text questions
# on development sets and lost title ones (left out, every development corpus is given 2, not 1)...
BODY_WEIGHT = 2.0
# ... and in ranking the documents of the leaves reached (their own words); a title that restates
# the question (``text.title_match``) is one more list there: a question that names a document by
# its title outranks documents that merely use its words more. Left out, no development corpus
# does better at BODY_CARD_WEIGHT 2 or TITLE_WEIGHT 2 than here (benchmarks/README.md).
BODY_CARD_WEIGHT = 3.0
TITLE_WEIGHT = 1.0
# The cards reached are scored by the vectors the tree ships for their documents (the compile's
# embedding of the full card and the start of the text), not by embedding each card's row: two
# thirds of the texts the compile's probe embedded were cards. Leave-one-corpus-out over the
# development corpora chose it, and it lost no set beyond its interval (benchmarks/README.md).
# Off, or on a tree that ships no vectors, the rows are embedded.
CARD_VECTORS = True
TERM_LEAVES = 8  # leaves whose folders the survey looks up: those with the best rows for the question's words
# ... of which the best two, where their best rows are as good as any in the leaves the beam
# reached, have those rows read even so: a body-text question's words are mostly in no nav row,
# so the branch scores miss its leaf where the term index names it (on development trees the
# index's best or second-best leaf held the answer to ~95% of body-text questions; weighting the
# index more in the branch scores instead lost title questions). Only the best three rows a
# leaf's lines name are read: the index has said which rows. Left out, no development corpus does
# better with the best one alone or the best three (benchmarks/README.md).
TERM_JUMP, TERM_JUMP_ROWS = 2, 3

Leaf = TypeVar("Leaf")


def term_jump(best: Mapping[Leaf, float], reached: Iterable[Leaf], opened: Container[Leaf]) -> list[Leaf]:
    """The leaves whose rows are read though the beam missed them: of those not opened, the
    best :data:`TERM_JUMP` whose best term-index row (``best``) scores at least as high as any
    leaf ``reached`` (ties count: an equally good row elsewhere is as likely the one asked),
    best first, ties in ``best``'s order."""
    floor = max((best.get(leaf, 0.0) for leaf in reached), default=0.0)
    return sorted((leaf for leaf, score in best.items() if score > 0 and score >= floor and leaf not in opened),
                  key=lambda leaf: -best[leaf])[:TERM_JUMP]


def beam_width(ranked: Sequence[float]) -> int:
    """Nodes to open from a level's fused scores, best first: fewest when the third is well
    behind the first, most when the second nearly ties it. Not from the corpus size."""
    best = (ranked[0] if len(ranked) else 0.0) or 1.0
    second, third = (ranked[i] / best if len(ranked) > i else 0.0 for i in (1, 2))
    return BEAM_MIN if third < CLEAR_LEAD else BEAM_MAX if second >= NEAR_TIE else BEAM_MIN + 1
