"""The deterministic offline navigator: answers a question by browsing a compiled tree with the
same tools an LLM agent gets, and nothing else.

The survey, descent, term-index jump and ranking are the navigation engine's
(:mod:`c2s_core.navigation.engine`, shared with the compile's navigability probe), read through
the tools (:class:`~c2s_agent.tool_view.ToolView`). The navigator adds four fallbacks the probe
does not model (each can be turned off, as the probe's parity test does):

* ``entities``: entity-index hits in the node scores (``grep`` of entity_index.json for the
  entities the question names: keys made wholly of its words);
* ``related``: after the first level, a jump to the best related skill (``## Related skills``
  rows) when the chosen skills are thin on the question's terms (under :data:`THIN_COVERAGE`
  of its term weight);
* ``backtrack``: when a level's chosen nodes lack, below them, terms carrying much of the
  question's weight that the tree has (their grep counts say so before anything below is read),
  the node of that level holding most of them is opened beside them in the same round (at most
  :data:`MAX_BACKTRACKS` times a question). Backtracking ahead takes no round of its own;
  going back once the leaves were reached took one a level and, measured on the development
  sets, found nothing backtracking ahead had not;
* ``route``: the confidence that navigation reached the evidence (share of the question's term
  weight inside the opened leaves, times the first level's confidence); below
  :data:`ROUTE_BELOW` the flat ``search`` tool's rankings (bm25, dense and hybrid, asked in the
  survey) are fused with navigation's as lists, navigation's weighing half the three together,
  to choose the documents read and to order them; each list's first document leads the fused
  order (a body-worded question's document that bm25 alone ranks first no longer sinks under
  documents two lists rank middling); a navigation whose first documents no search list holds
  is lost and left out (:data:`~c2s_core.navigation.beam.ROUTE_AGREE`).

It then composes an extractive, cited answer from the best documents (:mod:`c2s_agent.compose`).
"""

from __future__ import annotations

import posixpath
import re
import shlex

from c2s_core.layout import ENTITY_INDEX_FILE, SECTION_RELATED
from c2s_core.navigation.engine import MAX_TERMS, THIN_COVERAGE, Engine, Node, Rounds
from c2s_core.navigation.scoring import embedder
from c2s_core.navrows import Card, Group, NavFile, parse_nav_file
from c2s_core.search_index import SearchHit
from c2s_core.term_index import leaf_folder
from c2s_core.text import inflections_pattern, terms, tokens

from .agent import Reply, TurnBudget, citations_in
from .compose import compose_answer
from .tool_view import ToolView
from .tools import TreeTools

__all__ = ["MAX_TERMS", "ROUTE_BELOW", "Navigator", "navigate"]

MAX_ENTITIES = 8  # entity-index entries read per question
ENTITY_PLACES = 6  # places read per entity: the index lists them most-mentioned first
ENTITY_WINDOW = 4 * ENTITY_PLACES + 2  # lines read per entity in indent-1 JSON (4 lines per entry)
REACHED_SHARE = 0.75  # backtrack when the leaves reached hold less of the question's term weight
MISSING_SHARE = 0.1  # ... and only towards a missing term that carries this much of it
MAX_BACKTRACKS = 2
# Routing confidence under which search results join the candidates (left out, every development
# corpus is given 0.8 by the others; at 0.8 and above every development set scores the same:
# benchmarks/README.md).
ROUTE_BELOW = 0.8
SEARCH_HITS = 10  # documents asked of the search tool in each mode when routing to it
# The search tool's modes when routing to it, each a list beside navigation's: keywords and the
# document vectors ranked apart (a question worded as a document's body is found by bm25, one asked
# in a user's words by dense), and their fusion, hybrid, as a third (ROUTE_HYBRID): a document both
# rank well but neither first is what a question in other words than the documents' often asks
# for (leave-one-corpus-out over the development corpora chose it: benchmarks/README.md).
SEARCH_MODES = ("bm25", "dense", "hybrid")
ROUTE_HYBRID = True


def navigate(question: str, tools: TreeTools, *, budget: TurnBudget | None = None,
             beam: int | None = None, fetch: int = 10, route: bool = True, route_below: float = ROUTE_BELOW,
             entities: bool = True, related: bool = True, backtrack: bool = True, **_: object) -> Reply:
    """The ``offline`` navigator (see :func:`c2s_agent.agent.answer`); ignores the system prompt,
    whose rules it follows by construction. ``route=False``: navigation only, never search;
    ``route_below``: the routing-confidence threshold (above 1: always search);
    ``entities`` / ``related`` / ``backtrack``: the other fallbacks (see the module docstring)."""
    return Navigator(tools, budget=budget or TurnBudget(), beam=beam, fetch=fetch, route=route,
                     route_below=route_below, entities=entities, related=related, backtrack=backtrack).run(question)


# Grep listings over thousands of nav files outgrow the 8 KB an LLM is shown; a program can read more.
navigate.tool_options = {"max_output_bytes": 256 * 1024}  # type: ignore[attr-defined]


def search_modes(has_vectors: bool) -> tuple[str, ...]:
    """The search modes routing asks for: bm25 alone where the tree ships no document vectors."""
    if not has_vectors:
        return SEARCH_MODES[:1]
    return SEARCH_MODES if ROUTE_HYBRID else SEARCH_MODES[:2]


class Navigator(Engine):
    """The engine over the tools, with the navigator's fallbacks (see the module docstring)."""

    def __init__(self, tools: TreeTools, *, budget: Rounds, beam: int | None = None, fetch: int = 10,
                 route: bool = True, route_below: float = ROUTE_BELOW, entities: bool = True,
                 related: bool = True, backtrack: bool = True):
        super().__init__(ToolView(tools), embedder(), budget=budget, beam=beam, fetch=fetch)
        self.tools = tools
        self.budget.counter = lambda: len(tools.trace)
        self.route = route and tools.has_search
        self.hits: list[SearchHit] = []
        self.route_below = route_below
        self.use_entities, self.use_related, self.use_backtrack = entities, related, backtrack
        self.backtracks = 0  # taken beside a level's choice, at most MAX_BACKTRACKS

    def run(self, question: str) -> Reply:
        found = self.navigate(question)
        ranked, pages, cards = found.ranked, found.pages, found.cards
        text = compose_answer(question, [pages[d] for d in ranked[:3]], self.qterms, self.embed)
        path = self._path(ranked, cards, len(citations_in(text)))
        usage = {"beam": round(sum(self.widths) / max(1, len(self.widths)), 2), "widths": self.widths,
                 "routed": bool(self.hits), "navigation_lost": self.lost, "calls_per_round": self.budget.calls_per_round(),
                 **{f"confidence_{k}": round(v, 4) for k, v in self.confidence.items()}}
        return Reply(text, ranked, path, self.budget.used, list(self.read), self.notes, usage,
                     reached=[d for d in cards if d in self.navigated])

    # -- entities -----------------------------------------------------------------------

    def entity_hits(self) -> dict[str, float]:
        """Entities the question names -> {nav file: weight}, from entity_index.json."""
        words = [w for w in dict.fromkeys(self.qterms) if len(w) >= 3 and "'" not in w]
        if not words or not self.use_entities:
            return {}
        # Only keys made wholly of the question's words (a term's inflections, or its filler
        # words), so the output is the entities it names, not every key that contains one of its
        # words or a longer word starting with one ('read' is not 'readline').
        fill = [re.escape(w) for w in dict.fromkeys(tokens(self.question)) if "'" not in w and w not in words]
        stem, sep = f"({'|'.join(map(inflections_pattern, words))})", '[^a-z0-9\"]+'
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
        named = sorted(named)[:MAX_ENTITIES]
        # Indent-1 JSON: the entries follow the key's line; each entity's window is read by one
        # pipeline of one call, and `cat -n` numbers each window from 1, which tells them apart.
        windows = [f"head -n {lineno + ENTITY_WINDOW - 1} {ENTITY_INDEX_FILE} | tail -n +{lineno} | cat -n"
                   for _, lineno, _, line in named if '"path"' not in line]
        read = iter(_windows(self.view.joined(windows)) if windows else [])
        weights: dict[str, float] = {}
        for size, lineno, key, line in named:
            entries = _entity_entries(line if '"path"' in line else next(read, ""))
            total = sum(n for _, n in entries) or 1
            for path, n in entries:  # a specific entity (few places) weighs more per place
                weights[path] = weights.get(path, 0.0) + (1.0 + (-size > 1)) * n / total
            self.notes.append(f"entity {key!r}: {len(entries)} place(s)")
        return weights

    # -- related skills -----------------------------------------------------------------

    def after_first_level(self, chosen: list[Node]) -> list[Node]:
        """Follow ## Related skills when the chosen skills are thin on the question's terms: their
        related rows are read in one round, and the best related skill is opened with them."""
        if (not self.use_related or not chosen or max(self.coverage(n.group.path) for n in chosen) >= THIN_COVERAGE
                or not self.can_descend(2)):
            return []
        # Related-skill rows are the only rows that link to a sibling skill (../NAME/SKILL.md).
        self.budget.take()
        paths = [n.group.path for n in chosen]
        out = self.tools.code_execution("grep -H -E '^- \\[.*\\]\\(\\.\\./' " + " ".join(map(shlex.quote, paths)))
        related: dict[str, Group] = {}
        for path in paths:
            rows = "\n".join(line[len(path) + 1:] for line in out.split("\n") if line.startswith(path + ":"))
            for g in parse_nav_file(f"{SECTION_RELATED}\n{rows}", path).related:
                if g.path not in self.read and g.path not in paths:
                    related.setdefault(g.path, g)
        if not related:
            return []
        nodes = [Node(g, "") for g in related.values()]
        self.score(nodes)
        best = max(nodes, key=lambda n: n.score)
        self.notes.append(f"related jump to {best.group.name}")
        return [best]

    # -- backtracking -------------------------------------------------------------------

    def beside(self, chosen: list[Node], rest: list[Node]) -> list[Node]:
        """Backtrack ahead: when the question's distinctive terms occur in the tree but below none
        of a level's chosen nodes (their counts say so before anything below is read), open
        beside them, in the same round, the node of the level that holds most of what is missing."""
        if not self.use_backtrack or self.backtracks >= MAX_BACKTRACKS:
            return []
        missing = self._missing([n.group.path for n in chosen])
        start = self._best_for(missing, rest)
        if start is None:
            return []
        self.backtracks += 1
        self.notes.append(f"backtrack to {start.group.path} beside the level's choice")
        return [start]

    def _best_for(self, missing: list[str], nodes: list[Node]) -> Node | None:
        """The node holding most of the ``missing`` terms' weight (ties: the better scored), if any."""
        if not missing or not nodes:
            return None
        gain = [sum(self.idf[t] for t in missing if self.grep_counts[t].get(n.group.path, 0)) for n in nodes]
        best = max(range(len(nodes)), key=lambda i: (gain[i], nodes[i].score))
        return nodes[best] if gain[best] > 0 else None

    def _missing(self, paths: list[str]) -> list[str]:
        """Terms carrying much of the question's weight that the tree has but none of ``paths``
        (nodes or leaves) holds below it."""
        present = {t for t, hits in self.grep_counts.items() if any(hits.values())}
        total = sum(self.idf[t] for t in present) or 1.0
        found = {t for t in present if any(self.grep_counts[t].get(path, 0) for path in paths)}
        lost = [t for t in present - found if self.idf[t] / total >= MISSING_SHARE]
        return lost if sum(self.idf[t] for t in present - found) / total > 1 - REACHED_SHARE else []

    # -- routing ------------------------------------------------------------------------

    def in_survey(self) -> None:
        """Ask the search tool in the survey round, once a mode: it needs only the question, and
        whether its hits are fused is decided once navigation's confidence is known."""
        self.found: list[list[SearchHit]] = []
        if not self.route:
            return
        index = self.tools.search_index
        modes = search_modes(index is not None and index.has_vectors)
        self.found = [self.tools.search_hits(self.question, SEARCH_HITS, mode) for mode in modes]

    def search(self, confidence: float) -> list[list[SearchHit]]:
        """The survey's search rankings, when the routing confidence is low."""
        if not self.route or confidence >= self.route_below:
            return []
        self.hits = [h for hits in self.found for h in hits]
        self.notes.append(f"routing confidence {confidence:.2f} < {self.route_below}: "
                          f"{' and '.join(f'{len(hits)} {mode}' for mode, hits in zip(SEARCH_MODES, self.found))} "
                          f"search hit(s) fused")
        return self.found

    # -- the answer's path ----------------------------------------------------------------

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


def _windows(text: str) -> list[str]:
    """``cat -n`` windows joined in one reply -> each window's lines, without their numbers."""
    windows: list[list[str]] = []
    for line in text.split("\n"):
        number, tab, rest = line.lstrip(" ").partition("\t")
        if not tab or not number.isdigit():
            continue
        if number == "1" or not windows:
            windows.append([])
        windows[-1].append(rest)
    return ["\n".join(w) for w in windows]


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
