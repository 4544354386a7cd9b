"""The deterministic offline navigator: answers a question by browsing a compiled tree with the
same two tools an LLM agent gets, and nothing else (no flat index over the documents).

One question, in rounds ("turns") of tool calls:

1. survey: ``grep -ric TERM skills`` per question term (lexical evidence: how many cards and
   summary lines below each node mention it) and an entity-index lookup for entities the
   question names;
2. descend: score the candidate nodes of this level (skills, then sub-groups and ``@see``
   group stubs of the nodes read) by reciprocal rank fusion of embedding similarity to the row,
   BM25 on the row, grep evidence below the node and entity-index hits; ``cat`` the best
   ``beam`` of them; repeat down to the leaves; jump to related skills when the chosen skills
   are thin, and backtrack to the best unexplored node when the leaves reached look poor;
3. rank the cards of the opened leaves (plus ``@see`` stubs and example rows), read the best
   candidates with ``get_document`` and re-rank on cards and document text together;
4. compose an extractive, cited answer from the best documents (:mod:`c2s_agent.compose`).

Why this shape: a prototype over four corpora found that routing, not leaf ranking, loses the
recall; greedy descent is unusable, a beam of ~5 (small trees) to ~10 (thousands of documents)
reaches parity with flat retrieval, and only when nodes are also scored lexically against what
their members contain (grep counts); leaf ranking wants document text besides the cards.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass

import numpy as np

from c2s_pipeline.layout import ENTITY_INDEX_FILE, SKILLS_DIR

from .compose import compose_answer
from .navfile import Card, Group, NavFile, parse_nav_file
from .scoring import bm25, embedder, query_terms, rrf, terms
from .agent import Reply, TurnBudget, citations_in
from .tools import Page, TreeTools, parse_document

MAX_TERMS = 12  # question terms grepped for
MAX_ENTITIES = 8  # entity-index entries read per question
ENTITY_WINDOW = 82  # lines read per entity (indent-1 JSON: 4 lines per entry, ~20 entries)
RRF_K = 10.0  # small k: candidate lists are short (tens), so top ranks should count
THIN_COVERAGE = 0.5  # below this share of the question's term weight a branch is "thin"
REACHED_SHARE = 0.75  # backtrack when the leaves reached hold less of the question's term weight
MISSING_SHARE = 0.1  # ... and only towards a missing term that carries this much of it
MAX_BACKTRACKS = 2
EMBED_CHARS = 2000  # document text embedded after the card, as the compiler does


def navigate(question: str, tools: TreeTools, *, budget: TurnBudget | None = None,
             beam: int | None = None, fetch: int = 10, **_: object) -> Reply:
    """The ``offline`` provider (see :func:`c2s_agent.agent.answer`); ignores the system prompt,
    whose rules it follows by construction."""
    return Navigator(tools, budget=budget or TurnBudget(), beam=beam, fetch=fetch).run(question)


# Grep listings over thousands of nav files outgrow the 8 KB an LLM is shown; a program can read more.
navigate.tool_options = {"max_output_bytes": 256 * 1024}  # type: ignore[attr-defined]


@dataclass
class _Node:
    group: Group
    parent: str  # nav file it was reached from ("" for skills)
    score: float = 0.0


class Navigator:
    def __init__(self, tools: TreeTools, *, budget: TurnBudget, beam: int | None = None, fetch: int = 10):
        self.tools = tools
        self.budget = budget
        skills = tools.tree.skills  # the preloaded context: names, descriptions, sizes
        total = sum(s.documents for s in skills)
        # Small trees reach parity with ~5 nodes per level; thousands of documents want ~10.
        self.beam = max(2, beam or (5 if total <= 2000 else 10))
        self.fetch = max(1, fetch)
        self.embed = embedder()
        self.skills = [Group(s.name, s.path, s.documents, s.description) for s in skills]
        self.read: dict[str, NavFile] = {}
        self.parents: dict[str, str] = {}
        self.notes: list[str] = []

    # -- the run ------------------------------------------------------------------------

    def run(self, question: str) -> Reply:
        self.question = question
        self.qterms = query_terms(question)[:MAX_TERMS]
        self.qvec = self.embed([question])[0]
        self.budget.take()  # 1: survey
        self.grep_counts = self._grep(self.qterms)
        self.idf = self._idf()
        self.entity_hits = self._entities()
        leaves = self._descend()
        cards = self._candidates(leaves)
        ranked, pages = self._rank(cards)
        text = compose_answer(question, [pages[d] for d in ranked[:3]], self.qterms, self.embed)
        path = self._path(ranked, cards, len(citations_in(text)))
        return Reply(text, ranked, path, self.budget.used, list(self.read), self.notes)

    def _can_descend(self) -> bool:
        return self.budget.left > 1  # keep one round for get_document

    # -- survey -------------------------------------------------------------------------

    def _grep(self, words: list[str]) -> dict[str, dict[str, int]]:
        """term -> {nav file: matching lines}; one grep over the tree per term."""
        counts: dict[str, dict[str, int]] = {}
        for word in words:
            # Words starting with the stem: 'fee' finds 'fees' but not 'coffee'.
            pattern = shlex.quote("\\<" + re.escape(word))
            out = self.tools.code_execution(f"grep -ric -e {pattern} {SKILLS_DIR} | grep -v ':0$'")
            if "[output truncated" in out:
                self.notes.append(f"grep for {word!r} was truncated; its counts are partial")
            hits = {}
            for line in out.splitlines():
                path, _, n = line.rpartition(":")
                if path.startswith(SKILLS_DIR + "/") and n.isdigit():
                    hits[path] = int(n)
            counts[word] = hits
        return counts

    def _idf(self) -> dict[str, float]:
        out = self.tools.code_execution(f"find {SKILLS_DIR} -name '*.md' | wc -l").strip()
        files = int(out) if out.isdigit() else 1
        return {t: float(np.log(1.0 + files / (1.0 + len(hits)))) if hits else 0.0
                for t, hits in self.grep_counts.items()}

    def _entities(self) -> dict[str, float]:
        """Entities the question names -> {nav file: weight}, from entity_index.json."""
        words = [re.escape(w) for w in dict.fromkeys(self.qterms) if len(w) >= 3 and "'" not in w]
        if not words:
            return {}
        out = self.tools.code_execution(
            f"grep -n -i -E '^ *\"[^\"]*({'|'.join(words)})[^\"]*\": *\\[' {ENTITY_INDEX_FILE}")
        qset = set(terms(self.question))
        named = []
        for line in out.splitlines():
            m = re.match(r'^(\d+):\s*"((?:[^"\\]|\\.)*)":', line)
            if not m:
                continue
            key_terms = set(terms(m[2]))
            if key_terms and key_terms <= qset:
                named.append((-len(key_terms), int(m[1]), m[2], line))
        weights: dict[str, float] = {}
        for size, lineno, key, line in sorted(named)[:MAX_ENTITIES]:
            text = line
            if '"path"' not in line:  # indent-1 JSON: the entries follow the key's line
                text = self.tools.code_execution(
                    f"head -n {lineno + ENTITY_WINDOW - 1} {ENTITY_INDEX_FILE} | tail -n +{lineno}")
            entries = _entity_entries(text)
            total = sum(n for _, n in entries) or 1
            for path, n in entries:  # a specific entity (few places) weighs more per place
                weights[path] = weights.get(path, 0.0) + (1.0 + (-size > 1)) * n / total
            self.notes.append(f"entity {key!r}: {len(entries)} place(s)")
        return weights

    # -- descent ------------------------------------------------------------------------

    def _descend(self) -> list[NavFile]:
        frontier = [_Node(g, "") for g in self.skills]
        pending: list[_Node] = []  # scored but not opened: where backtracking resumes
        leaves: list[NavFile] = []
        level = 0
        while frontier and self._can_descend():
            self._score(frontier)
            frontier.sort(key=lambda n: -n.score)
            width = self.beam if level else max(2, min(self.beam, len(frontier)))
            chosen, rest = frontier[:width], frontier[width:]
            best = frontier[0].score or 1.0
            pending += [_Node(n.group, n.parent, n.score / best) for n in rest]
            opened = self._open(chosen)
            if level == 0:
                opened += self._related_jump(opened)
            frontier = []
            seen = set(self.read)
            for nav in opened:
                if nav.is_leaf:
                    leaves.append(nav)
                    continue
                for g in nav.groups + nav.see_groups:
                    if g.path not in seen:
                        seen.add(g.path)
                        frontier.append(_Node(g, nav.path))
            level += 1
        # Backtrack: when the question's distinctive terms occur in the tree but in none of
        # the leaves reached, go back to the unexplored node that holds most of what is missing.
        for _ in range(MAX_BACKTRACKS):
            missing = self._missing(leaves)
            if not pending or not missing or not self._can_descend():
                break
            gain = [sum(self.idf[t] for t in missing if self._below(self.grep_counts[t], n.group.path))
                    for n in pending]
            best = max(range(len(pending)), key=lambda i: (gain[i], pending[i].score))
            if gain[best] <= 0:
                break
            start = pending.pop(best)
            self.notes.append(f"backtrack to {start.group.path}")
            leaves += self._greedy_from(start, pending)
        return leaves

    def _missing(self, leaves: list[NavFile]) -> list[str]:
        """Terms carrying much of the question's weight that the tree has but the leaves lack."""
        present = {t for t, hits in self.grep_counts.items() if hits}
        total = sum(self.idf[t] for t in present) or 1.0
        found = {t for t in present if any(self._below(self.grep_counts[t], nav.path) for nav in leaves)}
        lost = [t for t in present - found if self.idf[t] / total >= MISSING_SHARE]
        return lost if sum(self.idf[t] for t in present - found) / total > 1 - REACHED_SHARE else []

    def _greedy_from(self, start: _Node, pending: list[_Node]) -> list[NavFile]:
        """Descend from ``start`` with a narrower beam (a detour, not a second search)."""
        frontier, leaves = [start], []
        while frontier and self._can_descend():
            opened = self._open(frontier)
            frontier = []
            for nav in opened:
                if nav.is_leaf:
                    leaves.append(nav)
                else:
                    kids = [_Node(g, nav.path) for g in nav.groups + nav.see_groups if g.path not in self.read]
                    if kids:
                        self._score(kids)
                        kids.sort(key=lambda n: -n.score)
                        width = max(2, self.beam // 2)
                        frontier += kids[:width]
                        best = kids[0].score or 1.0
                        pending += [_Node(k.group, k.parent, k.score / best) for k in kids[width:]]
        return leaves

    def _open(self, nodes: list[_Node]) -> list[NavFile]:
        """One round: cat each node's nav file."""
        if not nodes or not self.budget.take():
            return []
        opened = []
        for node in nodes:
            path = node.group.path
            if path in self.read:
                continue
            text = self.tools.code_execution(f"cat {shlex.quote(path)}")
            if not text.startswith("---"):
                continue  # a missing or refused file: its error text is not a nav file
            nav = parse_nav_file(text, path)
            self.read[path] = nav
            self.parents[path] = node.parent
            opened.append(nav)
        return opened

    def _related_jump(self, opened: list[NavFile]) -> list[NavFile]:
        """Follow ## Related skills when the chosen skills are thin on the question's terms."""
        if not opened or max(self._coverage(n.path) for n in opened) >= THIN_COVERAGE:
            return []
        related = {g.path: g for nav in opened for g in nav.related if g.path not in self.read}
        if not related:
            return []
        nodes = [_Node(g, "") for g in related.values()]
        self._score(nodes)
        best = max(nodes, key=lambda n: n.score)
        self.notes.append(f"related jump to {best.group.name}")
        return self._open([best])

    # -- node scoring -------------------------------------------------------------------

    def _score(self, nodes: list[_Node]) -> None:
        texts = [f"{n.group.name.replace('-', ' ')}: {n.group.description}" for n in nodes]
        emb = self.embed(texts) @ self.qvec
        lex = bm25(self.qterms, [terms(t) for t in texts])
        evidence = self._evidence([n.group for n in nodes])
        entity = [sum(w for p, w in self.entity_hits.items() if _under(p, n.group.path)) for n in nodes]
        fused = rrf(emb, lex, evidence, entity, k=RRF_K)
        for node, score in zip(nodes, fused):
            node.score = float(score)

    def _evidence(self, groups: list[Group]) -> np.ndarray:
        """BM25 over grep counts: each node is the bag of card and summary lines below it."""
        sizes = np.array([g.documents or 0 for g in groups], dtype=float)
        sizes[sizes <= 0] = sizes[sizes > 0].mean() if (sizes > 0).any() else 1.0
        avg = sizes.mean()
        scores = np.zeros(len(groups))
        for t, hits in self.grep_counts.items():
            tf = np.array([self._below(hits, g.path) for g in groups], dtype=float)
            scores += self.idf[t] * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * sizes / avg))
        return scores

    def _below(self, hits: dict[str, int], path: str) -> int:
        return sum(n for p, n in hits.items() if _under(p, path))

    def _coverage(self, path: str) -> float:
        """Share of the question's term weight found anywhere below ``path``."""
        total = sum(self.idf.values()) or 1.0
        return sum(self.idf[t] for t, hits in self.grep_counts.items() if self._below(hits, path)) / total

    # -- leaves -------------------------------------------------------------------------

    def _candidates(self, leaves: list[NavFile]) -> dict[str, Card]:
        cards: dict[str, Card] = {}
        for nav in leaves:
            for c in nav.cards:
                cards[c.doc_id] = c
        for nav in self.read.values():  # stubs and exemplars: cards seen on the way down
            for c in nav.see_cards + nav.examples:
                if c.doc_id not in cards:
                    cards[c.doc_id] = Card(c.doc_id, c.title, c.one_line, c.phrases, c.home or nav.path)
        return cards

    def _rank(self, cards: dict[str, Card]) -> tuple[list[str], dict[str, Page]]:
        """Cards first (cheap), then the best candidates' text via get_document; fused."""
        if not cards or not self.budget.take():
            return [], {}
        ids = list(cards)
        texts = [cards[d].text for d in ids]
        card_emb = self.embed(texts) @ self.qvec
        card_lex = bm25(self.qterms, [terms(t) for t in texts])
        first = rrf(card_emb, card_lex, k=RRF_K)
        order = [ids[i] for i in np.argsort(-first, kind="stable")[: self.fetch]]
        pages: dict[str, Page] = {}
        for doc_id in order:
            page = parse_document(self.tools.get_document(doc_id))
            if page is not None:
                pages[doc_id] = page
        kept = [d for d in order if d in pages]
        if not kept:
            return [], {}
        at = {d: i for i, d in enumerate(ids)}
        doc_texts = [embedding_text(cards[d], pages[d].text) for d in kept]
        doc_emb = self.embed(doc_texts) @ self.qvec
        doc_lex = bm25(self.qterms, [terms(f"{pages[d].title} {pages[d].text}") for d in kept])
        final = rrf(card_emb[[at[d] for d in kept]], card_lex[[at[d] for d in kept]], doc_emb, doc_lex, k=RRF_K)
        ranked = [kept[i] for i in np.argsort(-final, kind="stable")]
        return ranked, pages

    def _path(self, ranked: list[str], cards: dict[str, Card], cited: int) -> str:
        """skills → skill → group → … → N docs, along the branch of the best document."""
        if not ranked:
            return "skills → (no documents found)"
        home = cards[ranked[0]].home
        chain = []
        while home:
            nav = self.read.get(home)
            chain.append(nav.name if nav else posixpath.basename(posixpath.dirname(home)))
            home = self.parents.get(home, "")
        return " → ".join(["skills", *reversed(chain), f"{cited} doc{'s' * (cited != 1)}"])


def embedding_text(card: Card, text: str) -> str:
    """What a document is embedded as: its card, then the start of its text (as the compiler
    does; the encoder reads ~256 tokens)."""
    return f"{card.title}. {card.one_line} {'; '.join(card.phrases)}\n{text[:EMBED_CHARS]}"


def _under(file: str, nav: str) -> bool:
    """Is ``file`` the nav file ``nav`` or below its directory?"""
    folder = posixpath.dirname(nav)
    return file == nav or file.startswith(folder + "/")


def _entity_entries(text: str) -> list[tuple[str, int]]:
    """(path, mentions) pairs of the first entity in ``text`` (compact or indented JSON)."""
    entries, path = [], None
    for i, line in enumerate(text.splitlines()):
        if i and re.match(r'^\s*"(?:[^"\\]|\\.)*":\s*\[', line):
            break  # the next entity
        for key, value in re.findall(r'"(path|mentions)":\s*("[^"]*"|\d+)', line):
            if key == "path":
                path = value.strip('"')
            elif path is not None:
                entries.append((path, int(value)))
                path = None
    return entries
