"""The deterministic offline navigator: answers a question by browsing a compiled tree with the
same tools an LLM agent gets, and nothing else.

One question, in rounds ("turns") of tool calls:

1. survey: per top-level skill and question term, ``grep -rih TERM skills/<skill> | wc -l``
   (lexical evidence: how many card and summary lines below the node mention it; one number
   per node, so what is read grows with the skills, not the tree), an entity-index lookup
   for entities the question names, and the term-index lines of its words (one grep of
   term_index.txt: which leaves, and which rows in them, hold documents whose bodies or titles
   use them, and one for the folders of the leaves with the best rows);
2. descend: score the candidate nodes of this level (skills, then sub-groups and ``@see``
   group stubs of the nodes opened) by reciprocal rank fusion of embedding similarity to the
   row (or the node's name), BM25 on it, grep evidence below the node (weighted most),
   entity-index hits and the best term-index row below it; open the best 3-5 (as far as the
   best stands out): an inner node is listed (``ls`` of its folder: its children's names), a
   leaf's rows are read (its document cards); below the first level the grep counts cover only
   the children of the nodes opened (the beam's branches); repeat down to the leaves; jump to
   related skills when the chosen skills are thin, read the best term-index rows of leaves
   the beam missed (those rows only), and backtrack to the best unexplored node when the
   leaves reached look poor. What is read grows with the depth and the width chosen, not the
   corpus size;
3. route: the confidence that navigation reached the evidence (share of the question's term
   weight inside the opened leaves, times the first level's confidence). Below
   :data:`ROUTE_BELOW` the flat ``search`` tool's ranking is fused with navigation's, weighted
   up when its best hit stands out; above it, navigation alone;
4. rank the cards of the opened leaves (plus ``@see`` stubs, example rows and search hits)
   with their term-index rows (the question's words their bodies use) and how closely their
   titles restate the question (:func:`~c2s_core.text.title_match`), read the best
   candidates with ``get_document`` and re-rank on cards and document text together;
5. compose an extractive, cited answer from the best documents (:mod:`c2s_agent.compose`).

Why this shape: routing, not leaf ranking, loses the recall; greedy descent is unusable, and a
narrow beam works only when nodes are scored lexically against what their members contain
(grep counts), which on development trees placed the branch holding the answer first more
often than the nodes' own rows did. Leaf ranking wants document text besides the cards.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass

import numpy as np

from c2s_core.navigation.beam import (BEAM_MIN, BODY_CARD_WEIGHT, BODY_WEIGHT, EVIDENCE_WEIGHT, RRF_K, TERM_JUMP_ROWS,
                                TERM_LEAVES, TITLE_WEIGHT, beam_width, term_jump)
from c2s_core.layout import ENTITY_INDEX_FILE, SECTION_DOCUMENTS, SECTION_RELATED, TERM_INDEX_FILE
from c2s_core.term_index import (RowScores, best_by_leaf, best_rows, leaf_folder, leaf_name_pattern, leaf_pattern,
                                     parse_leaf_lines, parse_term_lines, row_scores, term_pattern)
from c2s_core.text import query_terms, terms, title_match, tokens

from .compose import compose_answer
from c2s_core.navrows import Card, Group, NavFile, parse_nav_file
from c2s_core.navigation.scoring import bm25, embedder, rrf
from .agent import Reply, TurnBudget, citations_in
from .tools import Page, SearchHit, TreeTools, parse_document

MAX_TERMS = 12  # question terms grepped for
MAX_ENTITIES = 8  # entity-index entries read per question
ENTITY_PLACES = 6  # places read per entity: the index lists them most-mentioned first
ENTITY_WINDOW = 4 * ENTITY_PLACES + 2  # lines read per entity in indent-1 JSON (4 lines per entry)
TERM_LEAVES_PER_GREP = 8  # leaf names (slugs of ≤50 characters) per pattern: the sandbox caps one at 512
THIN_COVERAGE = 0.5  # below this share of the question's term weight a branch is "thin"
REACHED_SHARE = 0.75  # backtrack when the leaves reached hold less of the question's term weight
MISSING_SHARE = 0.1  # ... and only towards a missing term that carries this much of it
MAX_BACKTRACKS = 2
DOC_ROW_PATTERN = r"^- `[^`]+` \*\*"  # a leaf's document rows (its @see stubs start '- @see')
EMBED_CHARS = 2000  # document text embedded after the card, as the compiler does
ROUTE_BELOW = 0.8  # routing confidence under which search results join the candidates (tuned on WixQA dev)
SEARCH_HITS = 10  # documents asked of the search tool when routing to it
SEARCH_READ = 5  # of those, always read with get_document (not only when the cards rank them)
SEARCH_LEAD_WEIGHT = 2.0  # extra weight of the search ranking when its best hit stands out


def navigate(question: str, tools: TreeTools, *, budget: TurnBudget | None = None,
             beam: int | None = None, fetch: int = 10, route: bool = True, route_below: float = ROUTE_BELOW,
             **_: object) -> Reply:
    """The ``offline`` provider (see :func:`c2s_agent.agent.answer`); ignores the system prompt,
    whose rules it follows by construction. ``route=False``: navigation only, never search;
    ``route_below``: the routing-confidence threshold (above 1: always search)."""
    return Navigator(tools, budget=budget or TurnBudget(), beam=beam, fetch=fetch, route=route,
                     route_below=route_below).run(question)


# Grep listings over thousands of nav files outgrow the 8 KB an LLM is shown; a program can read more.
navigate.tool_options = {"max_output_bytes": 256 * 1024}  # type: ignore[attr-defined]


@dataclass
class _Node:
    group: Group
    parent: str  # nav file it was reached from ("" for skills)
    score: float = 0.0


class Navigator:
    def __init__(self, tools: TreeTools, *, budget: TurnBudget, beam: int | None = None, fetch: int = 10,
                 route: bool = True, route_below: float = ROUTE_BELOW):
        self.tools = tools
        self.budget = budget
        skills = tools.tree.skills  # the preloaded context: names, descriptions, sizes
        self.documents = sum(s.documents for s in skills) or 1
        self.fixed_beam = max(1, beam) if beam else None
        self.widths: list[int] = []  # nodes opened per level, as each level's confidence chose
        self.route = route and tools.has_search
        self.route_below = route_below
        self.fetch = max(1, fetch)
        self.confidence = {"first_level": 1.0, "reach": 1.0, "routing": 1.0}
        self.embed = embedder()
        self.skills = [Group(s.name, s.path, s.documents, s.description) for s in skills]
        self.levels = {s.path: s.level for s in skills}  # from the skills' frontmatter; below: one less a step
        self.read: dict[str, NavFile] = {}
        self.parents: dict[str, str] = {}
        self.row_numbers: dict[str, list[int]] = {}  # leaf read in part -> the row number of each card read
        self.notes: list[str] = []

    # -- the run ------------------------------------------------------------------------

    def run(self, question: str) -> Reply:
        self.question = question
        self.qterms = query_terms(question)[:MAX_TERMS]
        self.qvec = self.embed([question])[0]
        self.budget.take()  # 1: survey
        self.grep_counts: dict[str, dict[str, int]] = {t: {} for t in self.qterms}
        self._count(self.skills)
        self.idf = self._idf()
        self.entity_hits = self._entities()
        self.body_hits = self._body_terms()
        leaves = self._descend()
        hits = self._route(leaves)
        cards = self._candidates(leaves, hits)
        ranked, pages = self._rank(cards, hits)
        text = compose_answer(question, [pages[d] for d in ranked[:3]], self.qterms, self.embed)
        path = self._path(ranked, cards, len(citations_in(text)))
        usage = {"beam": round(sum(self.widths) / max(1, len(self.widths)), 2), "widths": self.widths,
                 "routed": bool(hits),
                 **{f"confidence_{k}": round(v, 4) for k, v in self.confidence.items()}}
        return Reply(text, ranked, path, self.budget.used, list(self.read), self.notes, usage)

    def _can_descend(self, rounds: int = 1) -> bool:
        # Keep a round for get_document, and one for the search tool when it may be asked.
        return self.budget.left > rounds + self.route

    # -- survey -------------------------------------------------------------------------

    def _count(self, groups: list[Group], parents: dict[str, str] | None = None) -> None:
        """grep counts below each node not counted yet: ``grep -rih TERM <node dir> | wc -l``
        per question term, one number each. A term absent below a node's parent is absent below
        the node, so it is not grepped for (``parents``: node path -> the nav file it was
        listed in; ``@see`` groups live elsewhere and are always grepped)."""
        for g in groups:
            folder = posixpath.dirname(g.path)
            parent = (parents or {}).get(g.path, "")
            for word, hits in self.grep_counts.items():
                if g.path in hits:
                    continue
                if parent and _under(g.path, parent) and hits.get(parent, 1) == 0:
                    hits[g.path] = 0
                    continue
                # Words starting with the stem: 'fee' finds 'fees' but not 'coffee'.
                pattern = shlex.quote("\\<" + re.escape(word))
                out = self.tools.code_execution(f"grep -rih -e {pattern} {shlex.quote(folder)} | wc -l").strip()
                hits[g.path] = int(out) if out.isdigit() else 0

    def _idf(self) -> dict[str, float]:
        """From the first level's counts: matching lines anywhere against the documents."""
        return {t: float(np.log(1.0 + self.documents / (1.0 + lines))) if lines else 0.0
                for t, hits in self.grep_counts.items()
                for lines in [sum(hits.get(s.path, 0) for s in self.skills)]}

    def _entities(self) -> dict[str, float]:
        """Entities the question names -> {nav file: weight}, from entity_index.json."""
        words = [re.escape(w) for w in dict.fromkeys(self.qterms) if len(w) >= 3 and "'" not in w]
        if not words:
            return {}
        # Only keys made wholly of the question's words (stems, or its filler words), so the
        # output is the entities it names, not every key that contains one of its words.
        fill = [re.escape(w) for w in dict.fromkeys(tokens(self.question)) if "'" not in w and w not in words]
        stem, sep = f"({'|'.join(words)})[a-z0-9]*", '[^a-z0-9\"]+'
        word = f"({stem}|{'|'.join(fill)})" if fill else stem
        lead = f"(({'|'.join(fill)}){sep})*" if fill else ""
        out = self.tools.code_execution(
            f"grep -n -o -i -E '^ *\"{lead}{stem}({sep}{word})*\": *\\[({{[^{{}}]*}}[, ]*){{0,{ENTITY_PLACES}}}' "
            f"{ENTITY_INDEX_FILE}")
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

    def _body_terms(self) -> dict[str, float]:
        """Leaves whose documents' bodies (or titles) use the question's distinctive words -> the
        score of their best row (the idf of the words one document uses, its title's counted
        again), from term_index.txt: one grep for the question's body and title term lines, one
        for the folders of the best :data:`TERM_LEAVES` leaves."""
        self.term_rows: RowScores = {}  # (leaf number, row) -> idf of the question's words it uses
        self.leaf_numbers: dict[str, int] = {}  # leaf nav file -> its number, where read
        if not self.qterms:
            return {}  # (a tree compiled without the index answers with an error line: no places)
        out = self.tools.code_execution(f"grep -E {shlex.quote(term_pattern(self.qterms))} {TERM_INDEX_FILE}")
        self.term_rows = row_scores(parse_term_lines(out), self.documents)
        best = best_by_leaf(self.term_rows)
        top = sorted(best, key=lambda n: (-best[n], n))[:TERM_LEAVES]
        if not top:
            return {}
        found = parse_leaf_lines(self.tools.code_execution(
            f"grep -E {shlex.quote(leaf_pattern(top))} {TERM_INDEX_FILE}"))
        self.leaf_numbers = {nav: number for number, nav in found.items()}
        return {nav: best[number] for number, nav in found.items()}

    # -- descent ------------------------------------------------------------------------

    def _descend(self) -> list[NavFile]:
        frontier = [_Node(g, "") for g in self.skills]
        pending: list[_Node] = []  # scored but not opened: where backtracking resumes
        leaves: list[NavFile] = []
        level = 0
        while frontier and self._can_descend(2 if level else 1):
            if level:  # one round of grep counts over the beam's branches
                self.budget.take()
                self._count([n.group for n in frontier], {n.group.path: n.parent for n in frontier})
            self._score(frontier)
            frontier.sort(key=lambda n: -n.score)
            if not level:
                self._set_confidence(frontier)
            width = self._width(frontier)
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
        leaves += self._term_jump(leaves)
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

    def _term_jump(self, reached: list[NavFile]) -> list[NavFile]:
        """Read, in the leaves the descent missed whose term-index rows are as good as any it
        reached (:func:`~c2s_core.navigation.beam.term_jump`), the best :data:`TERM_JUMP_ROWS` rows the
        index names: it has said which rows, so the rest of the leaf is not read."""
        better = term_jump(self.body_hits, (nav.path for nav in reached), self.read)
        if not better or not self._can_descend() or not self.budget.take():
            return []
        opened = []
        for path in better:
            nav = NavFile(path=path, name=posixpath.basename(posixpath.dirname(path)))
            for row in sorted(best_rows(self.term_rows, self.leaf_numbers[path], TERM_JUMP_ROWS)):
                line = self.tools.code_execution(
                    f"grep -E {shlex.quote(DOC_ROW_PATTERN)} {shlex.quote(path)} | head -n {row} | tail -n 1")
                cards = parse_nav_file(f"{SECTION_DOCUMENTS}\n{line}", path).cards
                if cards:
                    nav.cards.append(cards[0])
                    self.row_numbers.setdefault(path, []).append(row)
            if nav.cards:
                opened.append(self._keep(nav, _Node(Group(nav.name, path), "")))
        if opened:
            self.notes.append(f"term-index rows read in {len(opened)} leaf(s) the descent missed")
        return opened

    def _missing(self, leaves: list[NavFile]) -> list[str]:
        """Terms carrying much of the question's weight that the tree has but the leaves lack."""
        present = {t for t, hits in self.grep_counts.items() if any(hits.values())}
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
                    if kids and self._can_descend(2):
                        self.budget.take()
                        self._count([k.group for k in kids], {k.group.path: k.parent for k in kids})
                        self._score(kids)
                        kids.sort(key=lambda n: -n.score)
                        width = BEAM_MIN
                        frontier += kids[:width]
                        best = kids[0].score or 1.0
                        pending += [_Node(k.group, k.parent, k.score / best) for k in kids[width:]]
        return leaves

    def _open(self, nodes: list[_Node]) -> list[NavFile]:
        """Open nodes: one round lists their folders (``ls``), and a node with sub-folders is
        known by its children's names; a leaf's rows (its cards) are read in one more round.
        Reading every inner node's rows costs ~3 KB a node and, next to the grep counts below
        each child, changed few choices on development trees; the leaves' cards are what the
        answer is ranked on."""
        nodes = [n for n in dict((n.group.path, n) for n in nodes).values() if n.group.path not in self.read]
        if not nodes or not self.budget.take():
            return []
        # A node one step above the documents (its height known from its skill's) is read at
        # once; any other is listed first, and read in one more round if it turns out a leaf.
        leaves = [n for n in nodes if self.levels.get(n.group.path) == 1]
        folders = {posixpath.dirname(n.group.path): n for n in nodes if n not in leaves}
        listing = _ls_children(self.tools.code_execution("ls " + " ".join(map(shlex.quote, folders))),
                               list(folders)) if folders else {}
        opened: list[NavFile] = []
        for folder, node in folders.items():
            if folder not in listing:
                continue  # a missing or refused folder: nothing to open
            if not listing[folder]:
                leaves.append(node)
                continue
            nav = NavFile(path=node.group.path, name=posixpath.basename(folder),
                          groups=[Group(k, f"{folder}/{k}/INDEX.md", 0, k.replace("-", " ")) for k in listing[folder]])
            opened.append(self._keep(nav, node))
            height = self.levels.get(node.group.path, 0)
            for g in nav.groups:
                self.levels[g.path] = height - 1 if height > 1 else 0
        if leaves and (not folders or self.budget.take()):
            for node in leaves:
                # The rows and their section headings: the node's own description was on its
                # parent's row, so the frontmatter and summary prose add bytes, not choices.
                text = self.tools.code_execution(f"grep -E '^(## |- )' {shlex.quote(node.group.path)}")
                if text.startswith("## "):  # else an error: not a nav file
                    opened.append(self._keep(parse_nav_file(text, node.group.path), node))
        return opened

    def _keep(self, nav: NavFile, node: _Node) -> NavFile:
        self.read[nav.path] = nav
        self.parents[nav.path] = node.parent
        return nav

    def _related_jump(self, opened: list[NavFile]) -> list[NavFile]:
        """Follow ## Related skills when the chosen skills are thin on the question's terms."""
        if not opened or max(self._coverage(n.path) for n in opened) >= THIN_COVERAGE or not self._can_descend(2):
            return []
        # Related-skill rows are the only rows that link to a sibling skill (../NAME/SKILL.md).
        self.budget.take()
        related: dict[str, Group] = {}
        for nav in opened:
            text = self.tools.code_execution(f"grep -E '^- \\[.*\\]\\(\\.\\./' {shlex.quote(nav.path)}")
            for g in parse_nav_file(f"{SECTION_RELATED}\n{text}", nav.path).related:
                if g.path not in self.read:
                    related.setdefault(g.path, g)
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
        # The best leaf below a node: one leaf using all the rare words beats many using one each.
        body = [max((w for p, w in self.body_hits.items() if _under(p, n.group.path)), default=0.0) for n in nodes]
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
            tf = np.array([self._below(hits, g.path) for g in groups], dtype=float)
            scores += self.idf[t] * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * sizes / avg))
        return scores

    def _below(self, hits: dict[str, int], path: str) -> int:
        return hits.get(path, 0)  # counted for every node that was scored

    def _coverage(self, path: str) -> float:
        """Share of the question's term weight found anywhere below ``path``."""
        total = sum(self.idf.values()) or 1.0
        return sum(self.idf[t] for t, hits in self.grep_counts.items() if self._below(hits, path)) / total

    # -- routing ------------------------------------------------------------------------

    def _set_confidence(self, skills: list[_Node]) -> None:
        """The first level's confidence for routing: how far the best skill stands out from
        the runner-up in fused score, and how much of the question's term weight lies below it."""
        best = skills[0].score or 1.0
        margin = 1.0 - (skills[1].score / best if len(skills) > 1 else 0.0)
        self.confidence["first_level"] = self._coverage(skills[0].group.path) * (0.5 + 0.5 * margin)

    def _width(self, ranked: list[_Node]) -> int:
        """How many of this level's best nodes to open, from how far the best stands out: fewest
        when the third is well behind the first, most when the second nearly ties it. Not from
        the corpus size."""
        width = self.fixed_beam or beam_width([n.score for n in ranked])
        self.widths.append(width)
        return min(width, len(ranked))

    def _reach(self, leaves: list[NavFile]) -> float:
        """Share of the question's term weight (terms the tree has) found in the leaves reached."""
        present = {t for t, hits in self.grep_counts.items() if any(hits.values())}
        total = sum(self.idf[t] for t in present)
        if not total:
            return 0.0 if not leaves else 1.0  # nothing lexical to go by: trust the structure
        found = {t for t in present if any(self._below(self.grep_counts[t], nav.path) for nav in leaves)}
        return sum(self.idf[t] for t in found) / total

    def _route(self, leaves: list[NavFile]) -> list[SearchHit]:
        """Search results when the routing confidence is low (and a round is left for them)."""
        reach = self._reach(leaves) if leaves else 0.0
        self.confidence["reach"] = reach
        self.confidence["routing"] = conf = reach * (0.5 + 0.5 * self.confidence["first_level"])
        if not self.route or conf >= self.route_below or self.budget.left < 2:  # this round and one for get_document
            return []
        self.budget.take()
        hits = self.tools.search_hits(self.question, SEARCH_HITS)
        self.notes.append(f"routing confidence {conf:.2f} < {self.route_below}: {len(hits)} search hit(s) fused")
        return hits

    # -- leaves -------------------------------------------------------------------------

    def _candidates(self, leaves: list[NavFile], hits: list[SearchHit] = ()) -> dict[str, Card]:
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
        for h in hits:  # a search row has no card: its title stands in
            if h.doc_id not in cards:
                cards[h.doc_id] = Card(h.doc_id, h.title, home=h.path)
        return cards

    def _rank(self, cards: dict[str, Card], hits: list[SearchHit] = ()) -> tuple[list[str], dict[str, Page]]:
        """Cards first (cheap), then the best candidates' text via get_document; fused. Search
        hits (when routed) add their rank as one more signal and their best are always read."""
        if not cards or not self.budget.take():
            return [], {}
        ids = list(cards)
        texts = [cards[d].text for d in ids]
        card_emb = self.embed(texts) @ self.qvec
        card_lex = bm25(self.qterms, [terms(t) for t in texts])
        searched = {h.doc_id: 1.0 / (1 + i) for i, h in enumerate(hits)}
        flat = np.array([searched.get(d, 0.0) for d in ids])
        searched_weight = _search_weight(hits)
        body = self._row_scores(ids)
        title = np.array([title_match(self.qterms, terms(cards[d].title), self.idf) for d in ids])
        first = rrf(card_emb, card_lex, body, title, *([flat] if hits else []), k=RRF_K,
                    weights=[1.0, 1.0, BODY_CARD_WEIGHT, TITLE_WEIGHT, searched_weight][:4 + bool(hits)])
        order = [ids[i] for i in np.argsort(-first, kind="stable")[: self.fetch]]
        order += [h.doc_id for h in hits[:SEARCH_READ] if h.doc_id not in order]
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
        pick = [at[d] for d in kept]
        final = rrf(card_emb[pick], card_lex[pick], doc_emb, doc_lex, body[pick], title[pick], k=RRF_K,
                    weights=[1.0, 1.0, 1.0, 1.0, BODY_CARD_WEIGHT, TITLE_WEIGHT])
        if hits:  # two rankings, navigation's and the search tool's, fused as lists
            final = rrf(final, flat[pick], k=RRF_K, weights=[1.0, searched_weight])
        ranked = [kept[i] for i in np.argsort(-final, kind="stable")]
        return ranked, pages

    def _row_scores(self, ids: list[str]) -> np.ndarray:
        """Per card of the leaves reached, the idf of the question's words its document uses,
        from the term lines the survey read; the numbers of reached leaves it did not name are
        looked up by folder name (unique in the tree), a few leaves a grep."""
        names = {posixpath.basename(posixpath.dirname(leaf)): leaf for leaf, _ in self.rows.values()
                 if leaf not in self.leaf_numbers}
        for chunk in _chunks(sorted(names), TERM_LEAVES_PER_GREP) if self.term_rows else []:
            found = parse_leaf_lines(self.tools.code_execution(
                f"grep -E {shlex.quote(leaf_name_pattern(chunk))} {TERM_INDEX_FILE}"))
            self.leaf_numbers.update({nav: number for number, nav in found.items()})
        return np.array([self.term_rows.get((self.leaf_numbers.get(self.rows[d][0], 0), self.rows[d][1]), 0.0)
                         if d in self.rows else 0.0 for d in ids])

    def _path(self, ranked: list[str], cards: dict[str, Card], cited: int) -> str:
        """skills → skill → group → … → N docs, along the branch of the best document."""
        if not ranked:
            return "skills → (no documents found)"
        home = cards[ranked[0]].home
        chain = []
        while home:
            nav = self.read.get(home)
            chain.append(nav.name if nav else posixpath.basename(posixpath.dirname(home)))
            parent = self.parents.get(home, "")
            if not parent and home.count("/") > 2:  # a leaf the term index led to: its folders name the rest
                chain += reversed(leaf_folder(home).split("/")[:-1])
            home = parent
        return " → ".join(["skills", *reversed(chain), f"{cited} doc{'s' * (cited != 1)}"])


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _search_weight(hits: list[SearchHit]) -> float:
    """How much the search tool's ranking counts against navigation's: more when its best hit
    stands out (on development sets a best hit scoring well above the second was the right
    document ~95% of the time; a near tie, about half the time)."""
    if len(hits) < 2 or hits[0].score <= 0:
        return 1.0 + SEARCH_LEAD_WEIGHT
    return 1.0 + SEARCH_LEAD_WEIGHT * (1.0 - hits[1].score / hits[0].score)


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


def _ls_children(text: str, folders: list[str]) -> dict[str, list[str]]:
    """``ls FOLDER...`` output -> {folder: its sub-folders}; folders ls could not list are left out."""
    out: dict[str, list[str]] = {}
    current = folders[0] if len(folders) == 1 else None  # one folder: ls prints no heading
    if current and text.startswith(("ls:", "error:")):
        return out
    if current:
        out[current] = []
    for line in text.splitlines():
        if line.endswith(":") and line[:-1] in folders:
            current = line[:-1]
            out[current] = []
        elif current and line.endswith("/"):
            out[current].append(line[:-1])
    return out
