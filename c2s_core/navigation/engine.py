"""The navigation engine: one question's descent of a compiled tree and the ranking of the
documents it reaches, written once for the offline navigator (``c2s_agent.offline_navigator``, over the
sandboxed tools an LLM agent gets) and the compile's navigability probe
(``c2s_pipeline.diagnostics``, over the compile's in-memory artifacts). Each reads the tree
through a :class:`TreeView`; the two views answer the same calls with the same data, so the
probe predicts the navigator (a test holds them together).

One question, in rounds (a :class:`Rounds` budget, as the agent's turns; the calls of one
round depend only on what earlier rounds returned, as an agent's parallel tool calls would; but
for the survey's two lookups, the folders of the leaves its term-index lines name and, in the
navigator, the entries of the entity keys it found, each a second call after the first):

1. survey: per top-level skill and question term, how many lines of the nav files below it
   hold a word starting with the term (``grep -rih '\\<TERM' <skill> | wc -l``: lexical
   evidence, one number per node), and the term-index lines of the question's words: which
   leaves, and which rows in them, hold documents whose bodies or titles use them;
2. descend, one round a level: score the candidate nodes by reciprocal rank fusion of
   embedding similarity to the row (a skill's name and description; below, a group's name),
   BM25 on it, grep evidence below the node (weighted most), entity-index hits (the
   navigator's) and the best term-index row below it; open the best 3-5
   (:func:`~.beam.beam_width`): a leaf's rows are read (its document cards); an inner node's
   sub-folders are found and counted in the same round (one loop over ``NODE/*/``), ready for
   the next level's choice. The round that reads the last leaves also reads the best term-index
   rows of leaves the beam missed (:func:`~.beam.term_jump`);
3. rank the cards of the opened leaves (plus ``@see`` stubs and example rows seen on the way)
   on card embedding, card BM25, their term-index rows and how closely their titles restate
   the question (:func:`~c2s_core.text.title_match`), read the best :attr:`Engine.fetch`
   documents (one round) and re-rank on cards and document text together (a document's text
   by the vector the tree ships for it, :meth:`TreeView.document_vectors`). Routed, the flat
   rankings are fused with navigation's as lists, for both the reading and the order; navigation's
   list ranks only the documents it reached.

A tree whose skills stand h levels above the documents takes h + 2 rounds: the survey, h - 1
levels of choice, the leaves, the documents; h + 1 where the skills are so few that the first
level opens them all whatever they score (compiles with the default ``k`` mostly make two or
three), or where h + 2 would pass :data:`AGENT_ROUNDS`: the survey counts below their children
instead, and the first choice is among those.

What the engine leaves to a subclass (the navigator's extra fallbacks, which the probe does not
model, so that it measures the tree rather than the agent's recoveries): entity-index hits
(:meth:`Engine.entity_hits`), nodes opened beside a level's choice (:meth:`Engine.beside`: the
navigator's backtracking, taken ahead), a jump to related skills after the first level
(:meth:`Engine.after_first_level`) and routing to the flat search tool (:meth:`Engine.search`).
By default each does nothing.

Why this shape: routing, not leaf ranking, loses the recall; greedy descent is unusable, and a
narrow beam works only when nodes are scored lexically against what their members contain
(grep counts), which on development trees placed the branch holding the answer first more
often than the nodes' own rows did. Leaf ranking wants document text besides the cards.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Protocol

import numpy as np

from c2s_core.encoder import embedding_text
from c2s_core.navrows import Card, Group, NavFile
from c2s_core.term_index import RowScores, TermPostings, best_by_leaf, best_rows, row_scores
from c2s_core.text import query_terms, terms, title_match

from .beam import (BEAM_MIN, BODY_CARD_WEIGHT, BODY_WEIGHT, CARD_VECTORS, EVIDENCE_WEIGHT, ROUTE_AGREE,
                   ROUTE_FIRSTS_LEAD, ROUTE_NAV_SHARE, ROUTE_RRF_K, RRF_K, TERM_JUMP_ROWS, TERM_LEAVES, TITLE_WEIGHT,
                   beam_width, term_jump)
from .scoring import SearchHit, bm25, fuse_rankings, rrf

MAX_TERMS = 12  # question terms grepped for
MAX_ROUNDS = 10  # rounds of tool calls a question may take (the agent's default turn budget)
# Rounds a question is planned to take: what an LLM agent's budget affords. A tree tall enough to
# need more (four levels of skills, about 50,000 documents at p = 10) opens its skills in the survey.
AGENT_ROUNDS = 5
PAGE_CHARS = 6000  # what one read of a document returns: its first page (about 1,500 tokens)
THIN_COVERAGE = 0.5  # below this share of the question's term weight a branch is "thin"

Embed = Callable[[Sequence[str]], np.ndarray]  # texts -> L2-normalised rows


class Child(NamedTuple):
    """A sub-folder of a node, as :meth:`TreeView.count_children` reports it."""

    name: str
    counts: list[int]  # the question's terms counted below it
    inner: bool  # it has sub-folders: not one step above the documents


class TreeView(Protocol):
    """What the engine reads of a tree. Paths are nav files relative to the tree root
    (``skills/a/SKILL.md``, ``skills/a/b/INDEX.md``); a folder is a nav file's directory."""

    documents: int  # documents in the tree (the skills' counts summed)

    def skills(self) -> list[tuple[Group, int]]:
        """The top-level skills (name, nav file, documents, description) with their heights
        (1: the skill lists documents itself; 0: not recorded), as the agent's preloaded context."""

    def grep_counts(self, asked: list[tuple[str, str]]) -> list[int]:
        """For each (term, nav file): lines of the nav files in the nav file's folder and below
        holding a word that starts with the term (case-insensitive); asked together, as one
        round's counts are."""

    def count_children(self, asked: list[tuple[str, list[str]]]) -> dict[str, list[Child]]:
        """For each (nav file, terms): its folder's sub-folders, in name order, each with its
        :meth:`grep_counts` of the terms and whether it has sub-folders of its own, asked
        together; nav files whose folders cannot be read are left out."""

    def read_rows(self, nav_files: list[str]) -> dict[str, NavFile]:
        """Nav files' rows and section headings (no frontmatter or prose), read together; a path
        that is not a nav file is left out."""

    def read_document_rows(self, asked: list[tuple[str, int]]) -> list[Card | None]:
        """For each (leaf nav file, row): the ``row``-th (1-based) row of its ``## Documents``
        section (None where there is none), read together."""

    def term_lines(self, words: list[str]) -> dict[str, TermPostings]:
        """term_index.txt's body and title lines of ``words``, in file order (empty without the index)."""

    def leaves_numbered(self, numbers: list[int]) -> dict[int, str]:
        """term_index.txt's leaf lines of these leaf numbers: number -> leaf nav file."""

    def leaves_named(self, names: list[str]) -> dict[int, str]:
        """... of the leaves whose folders have these names (a folder's last part)."""

    def read_document(self, doc_id: str) -> DocumentPage | None:
        """A document's title and first page (:data:`PAGE_CHARS`); None if there is no such document."""

    def document_vectors(self, doc_ids: list[str]) -> np.ndarray | None:
        """The vectors the tree ships for these documents (``search_index/vectors.npy``: the
        compile's embeddings, which dense search scores), rows in order; None when it ships none."""


@dataclass(frozen=True)
class DocumentPage:
    """What reading a document gives: its title and first :data:`PAGE_CHARS` characters."""

    doc_id: str
    title: str
    text: str


class Rounds:
    """Rounds of tool calls still allowed; the last round is for answering."""

    def __init__(self, max_rounds: int = MAX_ROUNDS):
        if max_rounds < 1:
            raise ValueError("max_turns must be at least 1")
        self.max_turns = int(max_rounds)
        self.used = 0
        # What a navigator counts its calls with (e.g. the length of its tools' trace); each
        # round's start is marked on it, so calls per round can be reported.
        self.counter: Callable[[], int] | None = None
        self.marks: list[int] = []

    @property
    def left(self) -> int:
        return self.max_turns - self.used

    def take(self) -> bool:
        """Start a round if one is left."""
        if self.used >= self.max_turns:
            return False
        self.used += 1
        if self.counter is not None:
            self.marks.append(self.counter())
        return True

    def calls_per_round(self) -> list[int]:
        """Calls made in each round so far (with a :attr:`counter`; calls before the first
        round count in it)."""
        if self.counter is None or not self.marks:
            return []
        ends = [*self.marks[1:], self.counter()]
        return [end - (start if i else 0) for i, (start, end) in enumerate(zip(self.marks, ends))]


@dataclass
class Node:
    group: Group
    parent: str  # nav file it was reached from ("" for skills)
    score: float = 0.0


@dataclass
class Ranking:
    """What a question's navigation found: the leaves opened, the candidate cards, the documents
    read (title and first page) and their final order."""

    leaves: list[NavFile]
    cards: dict[str, Card]
    ranked: list[str]
    pages: dict[str, DocumentPage]


class Engine:
    """One question's navigation over a :class:`TreeView` (see the module docstring).
    ``beam``: a fixed number of nodes opened per level instead of :func:`~.beam.beam_width`;
    ``fetch``: documents read to re-rank on their text, in one round."""

    def __init__(self, view: TreeView, embed: Embed, *, budget: Rounds | None = None, beam: int | None = None,
                 fetch: int = 10):
        self.view = view
        self.embed = embed
        self.budget = budget or Rounds()
        self.fixed_beam = max(1, beam) if beam else None
        self.fetch = max(1, fetch)
        skills = view.skills()
        self.documents = view.documents or 1
        self.skills = [g for g, _ in skills]
        self.levels = {g.path: level for g, level in skills}  # below the skills: one less a step
        self.widths: list[int] = []  # nodes opened per level, as each level's confidence chose
        self.confidence = {"first_level": 1.0, "reach": 1.0, "routing": 1.0}
        self.read: dict[str, NavFile] = {}
        self.parents: dict[str, str] = {}
        self.row_numbers: dict[str, list[int]] = {}  # leaf read in part -> the row number of each card read
        self.notes: list[str] = []
        self.lost = False  # routed, and navigation's first documents are in no search list's first few

    # -- the run ------------------------------------------------------------------------

    def navigate(self, question: str) -> Ranking:
        """Survey, descend, rank: the documents ``question`` leads to, best first."""
        self.question = question
        self.qterms = query_terms(question)[:MAX_TERMS]
        self.qvec = self.embed([question])[0]
        self.budget.take()  # 1: survey
        self.grep_counts: dict[str, dict[str, int]] = {t: {} for t in self.qterms}
        first = self._survey_counts()
        self.idf = self._idf()
        self.entity_weights = self.entity_hits()
        self.body_hits = self._body_terms()
        self.in_survey()
        leaves = self._descend(first)
        flat = self._route(leaves)
        cards = self._candidates(leaves, [h for hits in flat for h in hits])
        ranked, pages = self._rank(cards, flat)
        return Ranking(leaves, cards, ranked, pages)

    def can_descend(self, rounds: int = 1) -> bool:
        """Are ``rounds`` more rounds of descent affordable? One is always kept for reading documents."""
        return self.budget.left > rounds

    # -- what a subclass adds (the navigator's extra fallbacks) ----------------------------

    def entity_hits(self) -> dict[str, float]:
        """Nav file -> weight of the entities the question names there (none by default)."""
        return {}

    def in_survey(self) -> None:
        """More calls made in the survey round, independent of its answers (none by default)."""

    def beside(self, chosen: list[Node], rest: list[Node]) -> list[Node]:
        """Nodes of ``rest`` (this level's others, best first) to open with ``chosen`` in the
        same round (none by default)."""
        return []

    def after_first_level(self, chosen: list[Node]) -> list[Node]:
        """More skills to open beside the first level's choice (none by default)."""
        return []

    def search(self, confidence: float) -> list[list[SearchHit]]:
        """Flat search rankings to fuse with navigation's, given the routing confidence (none by
        default)."""
        return []

    # -- survey -------------------------------------------------------------------------

    def _survey_counts(self) -> list[Node] | None:
        """The survey's grep counts. Skills are opened here when the first level would open them
        all however they score (no more than :data:`~.beam.BEAM_MIN`, or the fixed beam), or when
        choosing among them would take the question past :data:`AGENT_ROUNDS` (a tree of h
        levels takes h + 2 rounds so, h + 1 opened): their children are learned and counted in
        the survey (:meth:`_open`), saving the round the first level would spend on it, and each
        skill's counts are its children's summed (its own SKILL.md's lines aside). The counting
        reads the same files either way. Returns the next level's nodes (those children and any
        skill that lists documents itself), or None where the skills were counted instead."""
        skills = [Node(g, "") for g in self.skills]
        inner = [n for n in skills if self.levels.get(n.group.path) != 1]
        few = len(skills) <= (self.fixed_beam or BEAM_MIN)
        tall = max((self.levels.get(g.path, 0) for g in self.skills), default=0) + 2 > AGENT_ROUNDS
        if not inner or not (few or tall):
            self._count(self.skills)
            return None
        children = self._open(inner)
        for skill in inner:
            for hits in self.grep_counts.values():
                hits[skill.group.path] = sum(hits.get(c.group.path, 0) for c in children
                                             if c.parent == skill.group.path and c.group.path != skill.group.path)
        return [*children, *(n for n in skills if n not in inner)]

    def _count(self, groups: list[Group]) -> None:
        """Grep counts below each node, one number per question term, asked together in one
        round (below the skills, :meth:`_open` counts a node's children as it learns them)."""
        asked = [(word, g.path) for g in groups for word in self.grep_counts]
        for (word, path), n in zip(asked, self.view.grep_counts(asked) if asked else []):
            self.grep_counts[word][path] = n

    def _idf(self) -> dict[str, float]:
        """From the first level's counts: matching lines anywhere against the documents."""
        return {t: float(np.log(1.0 + self.documents / (1.0 + lines))) if lines else 0.0
                for t, hits in self.grep_counts.items()
                for lines in [sum(hits.get(s.path, 0) for s in self.skills)]}

    def _body_terms(self) -> dict[str, float]:
        """Leaves whose documents' bodies (or titles) use the question's distinctive words -> the
        score of their best row (the idf of the words one document uses, its title's counted
        again), from the term index: the question's term lines, then the folders of the best
        :data:`~.beam.TERM_LEAVES` leaves."""
        self.term_rows: RowScores = {}  # (leaf number, row) -> idf of the question's words it uses
        self.leaf_numbers: dict[str, int] = {}  # leaf nav file -> its number, where read
        if not self.qterms:
            return {}
        self.term_rows = row_scores(self.view.term_lines(self.qterms), self.documents)
        best = best_by_leaf(self.term_rows)
        top = sorted(best, key=lambda n: (-best[n], n))[:TERM_LEAVES]
        if not top:
            return {}
        found = self.view.leaves_numbered(top)
        self.leaf_numbers = {nav: number for number, nav in found.items()}
        return {nav: best[number] for number, nav in found.items()}

    # -- descent ------------------------------------------------------------------------

    def _descend(self, first: list[Node] | None = None) -> list[NavFile]:
        """Level by level from the skills (counted in the survey), or from ``first``: the
        children of skills the survey opened (:meth:`_survey_counts`)."""
        frontier = [Node(g, "") for g in self.skills]
        leaves: list[NavFile] = []
        self.jumped = False
        level = 0
        if first is not None:  # the first level's choice was every skill: scored for the confidence only
            self.score(frontier)
            frontier.sort(key=lambda n: -n.score)
            self._set_confidence(frontier)
            self._width(frontier)  # (recorded as any level's width; it opens them all)
            frontier, level = first, 1
        while frontier and self.can_descend():
            self.score(frontier)
            frontier.sort(key=lambda n: -n.score)
            if not level:
                self._set_confidence(frontier)
            width = self._width(frontier)
            chosen, rest = frontier[:width], frontier[width:]
            chosen += self.beside(chosen, rest)
            if level == 0:
                chosen += self.after_first_level(chosen)
            read, frontier = self.expand(chosen, leaves)
            leaves += read
            level += 1
        if not self.jumped:  # the descent stopped short of a round that read only leaves
            leaves += self._term_jump(leaves)
        return leaves

    def expand(self, nodes: list[Node], reached: Sequence[NavFile] = ()) -> tuple[list[NavFile], list[Node]]:
        """Open nodes in one round: a leaf's rows are read; an inner node's children are learned
        and counted (:meth:`_open`), ready for the next level's choice. When no children follow
        (the descent's last round), the term-index jump's rows are read in the same
        round: which they are follows from the leaves chosen, not from what they hold.
        Returns the leaves read and the children to choose from."""
        nodes = [n for n in dict((n.group.path, n) for n in nodes).values() if n.group.path not in self.read]
        if not nodes or not self.budget.take():
            return [], []
        leaves = [n for n in nodes if self.levels.get(n.group.path) == 1]  # one step above the documents
        inner = [n for n in nodes if self.levels.get(n.group.path) != 1]
        children = self._open(inner) if inner else []
        found = self.view.read_rows([n.group.path for n in leaves]) if leaves else {}
        read = [self.keep(found[n.group.path], n) for n in leaves if n.group.path in found]
        self._number_leaves([nav.path for nav in read])
        if not children:
            read += self._term_jump([*reached, *read], take=False)
        return read, children

    def _open(self, nodes: list[Node]) -> list[Node]:
        """Inner nodes' children, learned and counted in one round: per node, its sub-folders
        with the question's terms counted below each (a term absent below the node is absent
        below its children, so it is not asked). A node without sub-folders is a leaf after
        all: it comes back to be read."""
        asked = {n.group.path: [t for t, hits in self.grep_counts.items() if hits.get(n.group.path, 1) != 0]
                 for n in nodes}
        found = self.view.count_children(list(asked.items()))
        children: list[Node] = []
        for node in nodes:
            path = node.group.path
            if path not in found:
                continue  # a missing or refused folder: nothing to open
            if not found[path]:
                self.levels[path] = 1
                children.append(node)
                continue
            folder = posixpath.dirname(path)
            nav = NavFile(path=path, name=posixpath.basename(folder),
                          groups=[Group(c.name, f"{folder}/{c.name}/INDEX.md", 0, c.name.replace("-", " "))
                                  for c in found[path]])
            self.keep(nav, node)
            height = self.levels.get(path, 0)
            for g, child in zip(nav.groups, found[path]):
                # A child without sub-folders is read next, whatever the height above says: a
                # crowded leaf split into sub-groups makes one branch a level deeper than the rest.
                self.levels[g.path] = (height - 1 if height > 2 else 0) if child.inner else 1
                counted = dict(zip(asked[path], child.counts))
                for t, hits in self.grep_counts.items():
                    hits[g.path] = counted.get(t, 0)
                children.append(Node(g, path))
        return children

    def _term_jump(self, reached: list[NavFile], take: bool = True) -> list[NavFile]:
        """Read, in the leaves the descent missed whose term-index rows are as good as any it
        reached (:func:`~.beam.term_jump`), the best :data:`~.beam.TERM_JUMP_ROWS` rows the
        index names: it has said which rows, so the rest of the leaf is not read. ``take``: in
        a round of its own (else in the round that read the last leaves)."""
        self.jumped = True
        better = term_jump(self.body_hits, (nav.path for nav in reached), self.read)
        if not better or (take and (not self.can_descend() or not self.budget.take())):
            return []
        asked = [(path, row) for path in better
                 for row in sorted(best_rows(self.term_rows, self.leaf_numbers[path], TERM_JUMP_ROWS))]
        navs = {path: NavFile(path=path, name=posixpath.basename(posixpath.dirname(path))) for path in better}
        for (path, row), card in zip(asked, self.view.read_document_rows(asked)):
            if card is not None:
                navs[path].cards.append(card)
                self.row_numbers.setdefault(path, []).append(row)
        opened = [self.keep(nav, Node(Group(nav.name, nav.path), "")) for nav in navs.values() if nav.cards]
        if opened:
            self.notes.append(f"term-index rows read in {len(opened)} leaf(s) the descent missed")
        return opened

    def keep(self, nav: NavFile, node: Node) -> NavFile:
        self.read[nav.path] = nav
        self.parents[nav.path] = node.parent
        return nav

    # -- node scoring -------------------------------------------------------------------

    def score(self, nodes: list[Node]) -> None:
        texts = [f"{n.group.name.replace('-', ' ')}: {n.group.description}" for n in nodes]
        emb = self.embed(texts) @ self.qvec
        lex = bm25(self.qterms, [_terms(t) for t in texts])
        evidence = self._evidence([n.group for n in nodes])
        entity = [sum(w for p, w in self.entity_weights.items() if under(p, n.group.path)) for n in nodes]
        # The best leaf below a node: one leaf using all the rare words beats many using one each.
        body = [max((w for p, w in self.body_hits.items() if under(p, n.group.path)), default=0.0) for n in nodes]
        fused = rrf(emb, lex, evidence, entity, body, k=RRF_K,
                    weights=(1.0, 1.0, EVIDENCE_WEIGHT, 1.0, BODY_WEIGHT))
        for node, score in zip(nodes, fused):
            node.score = float(score)

    def _evidence(self, groups: list[Group]) -> np.ndarray:
        """BM25 over grep counts: each node is the bag of card and summary lines below it."""
        sizes = np.array([g.documents or 0 for g in groups], dtype=float)
        sizes[sizes <= 0] = sizes[sizes > 0].mean() if (sizes > 0).any() else 1.0
        avg = sizes.mean()
        scores = np.zeros(len(groups))
        for t, hits in self.grep_counts.items():
            tf = np.array([hits.get(g.path, 0) for g in groups], dtype=float)
            scores += self.idf[t] * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * sizes / avg))
        return scores

    def coverage(self, path: str) -> float:
        """Share of the question's term weight found anywhere below ``path``."""
        total = sum(self.idf.values()) or 1.0
        return sum(self.idf[t] for t, hits in self.grep_counts.items() if hits.get(path, 0)) / total

    # -- routing confidence ---------------------------------------------------------------

    def _set_confidence(self, skills: list[Node]) -> None:
        """The first level's confidence: how far the best skill stands out from the runner-up
        in fused score, and how much of the question's term weight lies below it."""
        best = skills[0].score or 1.0
        margin = 1.0 - (skills[1].score / best if len(skills) > 1 else 0.0)
        self.confidence["first_level"] = self.coverage(skills[0].group.path) * (0.5 + 0.5 * margin)

    def _width(self, ranked: list[Node]) -> int:
        """How many of this level's best nodes to open (:func:`~.beam.beam_width`)."""
        width = self.fixed_beam or beam_width([n.score for n in ranked])
        self.widths.append(width)
        return min(width, len(ranked))

    def reach(self, leaves: list[NavFile]) -> float:
        """Share of the question's term weight (terms the tree has) found in the leaves reached."""
        present = {t for t, hits in self.grep_counts.items() if any(hits.values())}
        total = sum(self.idf[t] for t in present)
        if not total:
            return 0.0 if not leaves else 1.0  # nothing lexical to go by: trust the structure
        found = {t for t in present if any(self.grep_counts[t].get(nav.path, 0) for nav in leaves)}
        return sum(self.idf[t] for t in found) / total

    def _route(self, leaves: list[NavFile]) -> list[list[SearchHit]]:
        """The confidence that navigation reached the evidence; the search rankings a subclass fuses."""
        reach = self.reach(leaves) if leaves else 0.0
        self.confidence["reach"] = reach
        self.confidence["routing"] = conf = reach * (0.5 + 0.5 * self.confidence["first_level"])
        return self.search(conf)

    # -- leaves -------------------------------------------------------------------------

    def _candidates(self, leaves: list[NavFile], hits: Sequence[SearchHit] = ()) -> dict[str, Card]:
        """The cards navigation reached (:attr:`navigated`: the leaves' rows, stubs and examples
        on the way), then those of search hits it did not reach."""
        cards: dict[str, Card] = {}
        self.rows: dict[str, tuple[str, int]] = {}  # doc id -> (leaf, row) of the leaves reached
        for nav in leaves:  # (a leaf the term index led to was read in part: its rows are recorded)
            for row, c in zip(self.row_numbers.get(nav.path) or range(1, len(nav.cards) + 1), nav.cards):
                cards[c.doc_id] = c
                self.rows[c.doc_id] = (nav.path, row)
        for nav in self.read.values():  # stubs and exemplars: cards seen on the way down
            for c in nav.see_cards + nav.examples:
                if c.doc_id not in cards:
                    cards[c.doc_id] = Card(c.doc_id, c.title, c.one_line, c.phrases, c.home or nav.path)
        self.navigated = set(cards)
        for h in hits:  # a search row has no card: its title stands in
            if h.doc_id not in cards:
                cards[h.doc_id] = Card(h.doc_id, h.title, home=h.path)
        return cards

    def _rank(self, cards: dict[str, Card], flat: Sequence[Sequence[SearchHit]] = ()
              ) -> tuple[list[str], dict[str, DocumentPage]]:
        """Cards first (cheap), then the best candidates' text; fused. When routed, navigation's
        ranking of what it reached and each flat ranking are fused as lists (reciprocal ranks,
        navigation's list weighing half the search lists together, each list's first leading),
        both to choose the documents read and to order them: a document ranked high by any one
        list is read and stays near the top, where an average of signals would sink it under
        documents every list ranks middling.

        Navigation ranks only the documents it reached: the search hits it did not reach are in
        the flat lists already, and among its own candidates they would shift its ranks (every
        signal is a rank within the set scored), so a document navigation alone ranks second
        could fall to fifth and out of the fused first five."""
        if not cards or not self.budget.take():
            return [], {}
        ids = [d for d in cards if d in self.navigated]
        texts = [cards[d].text for d in ids]
        shipped = self.view.document_vectors(ids) if CARD_VECTORS and ids else None
        card_emb = (shipped if shipped is not None else self.embed(texts)) @ self.qvec
        card_lex = bm25(self.qterms, [_terms(t) for t in texts])
        body = self._row_scores(ids)
        title = np.array([title_match(self.qterms, _terms(cards[d].title), self.idf) for d in ids])
        first = rrf(card_emb, card_lex, body, title, k=RRF_K, weights=[1.0, 1.0, BODY_CARD_WEIGHT, TITLE_WEIGHT])
        lists = [[h.doc_id for h in hits] for hits in flat]
        first_order = [ids[i] for i in np.argsort(-first, kind="stable")]
        self.lost = bool(lists) and not agrees(first_order, lists)
        if self.lost:
            self.notes.append(f"navigation's first {int(ROUTE_AGREE)} documents are in no search list's first five: "
                              "the search lists alone are read and ranked")
        # At most ``fetch`` documents, read in one round.
        order = self._fused(first_order, lists)[: self.fetch]
        pages: dict[str, DocumentPage] = {}
        for doc_id in order:
            page = self.view.read_document(doc_id)
            if page is not None:
                pages[doc_id] = page
        if not pages:
            return [], {}
        at = {d: i for i, d in enumerate(ids)}
        kept = [d for d in order if d in pages and d in at]
        pick = [at[d] for d in kept]
        # A document read is scored by the vector the tree ships for it (its full card and text,
        # embedded once by the compile): the one its card was scored by when the cards were, so the
        # embedding keeps its two shares of the final fusion. A tree without vectors has its pages
        # embedded here.
        if shipped is not None or not kept:
            doc_emb = card_emb[pick]
        else:
            vectors = self.view.document_vectors(kept)
            if vectors is None:
                vectors = self.embed([card_embedding_text(cards[d], pages[d].text) for d in kept])
            doc_emb = vectors @ self.qvec
        doc_lex = bm25(self.qterms, [_terms(f"{pages[d].title} {pages[d].text}") for d in kept])
        final = rrf(card_emb[pick], card_lex[pick], doc_emb, doc_lex, body[pick], title[pick], k=RRF_K,
                    weights=[1.0, 1.0, 1.0, 1.0, BODY_CARD_WEIGHT, TITLE_WEIGHT])
        ranked = [kept[i] for i in np.argsort(-final, kind="stable")]
        return self._fused(ranked, [[d for d in ranking if d in pages] for ranking in lists]), pages

    def _fused(self, ranked: list[str], lists: list[list[str]]) -> list[str]:
        """``ranked`` (navigation's order of documents it reached) alone, or, routed, fused with
        the flat rankings."""
        if not lists:
            return ranked
        if self.lost:
            return fuse_rankings(lists, ROUTE_RRF_K, firsts_lead=ROUTE_FIRSTS_LEAD)
        own = max(1.0, len(lists) * ROUTE_NAV_SHARE)
        return fuse_rankings([ranked, *lists], ROUTE_RRF_K, firsts_lead=ROUTE_FIRSTS_LEAD,
                             weights=[own] + [1.0] * len(lists))

    def _number_leaves(self, paths: list[str]) -> None:
        """The term-index numbers of leaves read that the survey did not name, looked up by
        folder name (unique in the tree) in the round that reads them, for :meth:`_row_scores`."""
        names = sorted({posixpath.basename(posixpath.dirname(p)) for p in paths if p not in self.leaf_numbers})
        if self.term_rows and names:
            found = self.view.leaves_named(names)
            self.leaf_numbers.update({nav: number for number, nav in found.items()})

    def _row_scores(self, ids: list[str]) -> np.ndarray:
        """Per card of the leaves reached, the idf of the question's words its document uses,
        from the term lines the survey read."""
        return np.array([self.term_rows.get((self.leaf_numbers.get(self.rows[d][0], 0), self.rows[d][1]), 0.0)
                         if d in self.rows else 0.0 for d in ids])


def agrees(navigation: Sequence[str], lists: Sequence[Sequence[str]]) -> bool:
    """Is one of navigation's first :data:`~.beam.ROUTE_AGREE` documents among the first five of
    a search list? Always, with ``ROUTE_AGREE`` 0."""
    if not ROUTE_AGREE:
        return True
    found = {d for ranking in lists for d in ranking[:5]}
    return any(d in found for d in navigation[:int(ROUTE_AGREE)])


def card_embedding_text(card: Card, text: str) -> str:
    """What a document is embedded as (:func:`c2s_core.encoder.embedding_text`), from its row's card."""
    return embedding_text(card.title, card.one_line, card.phrases, text)


def under(file: str, nav: str) -> bool:
    """Is ``file`` the nav file ``nav`` or below its directory?"""
    folder = posixpath.dirname(nav)
    return file == nav or file.startswith(folder + "/")


@lru_cache(maxsize=8192)
def _terms(text: str) -> tuple[str, ...]:
    """:func:`~c2s_core.text.terms`, memoised: rows, cards and pages recur across questions."""
    return tuple(terms(text))
