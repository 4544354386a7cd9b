"""The ``agentic`` method: an agent that searches the flat indexes itself, as many rounds as it
needs (at most :data:`MAX_ROUNDS`), then answers from what it found.

Three tools, each over the very indexes of the flat baselines (:class:`Baselines`, built once):
``search_bm25``, ``search_dense`` and ``search_hybrid`` take a query and return the top
:data:`SEARCH_K` documents with id, title and the opening :data:`SNIPPET_CHARS` characters.

- ``anthropic`` / ``openai``: a real tool-use loop (the navigator's :class:`~c2s_agent.llm_navigator.Session`
  with these tools instead of the tree's); once the rounds are spent the model is asked once, with
  tools disabled, for its answer.
- ``offline``: a deterministic agent. It searches bm25 with the question's key terms (question
  words dropped), dense with the question, hybrid with the question, then expands: hybrid with the
  title of its best document not yet used for expansion plus the key terms (pseudo-relevance
  feedback). It stops when a search leaves its fused top :data:`SEARCH_K` unchanged (the results
  have stabilised) or the rounds run out, and composes with the :class:`Answerer` from its context,
  best first.

Ranking: every search is a ranked list; the agent's ranking fuses them by reciprocal rank
(k = :data:`FUSION_K`), so documents that several searches find rise; an LLM agent's cited
documents go first. Context: the last :data:`CONTEXT_DOCS` distinct documents retrieved.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from c2s_core.llm.clients import ChatClient, ToolCall
from c2s_core.text import QUESTION_WORDS, content_tokens

from ..agent import TurnBudget, citations_in
from ..llm_navigator import DEFAULT_MAX_TOKENS, Session
from .answering import ANSWER_SYSTEM, Answerer
from .baselines import CONTEXT_DOCS, RANK_DEPTH, Baselines, Retrieved

MAX_ROUNDS = 10  # rounds of tool calls
SEARCH_K = 5  # documents a search returns
SNIPPET_CHARS = 800  # of each document's text in a search result
FUSION_K = 10.0  # small k: each list is only SEARCH_K long, so its order should count
TOOLS = {"search_bm25": "bm25", "search_dense": "dense", "search_hybrid": "hybrid"}

_KINDS = {"bm25": "keyword search (BM25): best for exact terms, names, error codes",
          "dense": "semantic search (sentence embeddings): best for paraphrases and intent",
          "hybrid": "keyword and semantic search fused (reciprocal rank fusion)"}
SEARCH_SCHEMAS: list[dict[str, Any]] = [
    {"name": name,
     "description": f"{_KINDS[method].capitalize()} over every document. Returns the top {SEARCH_K} "
                    f"documents: id, title and the first {SNIPPET_CHARS} characters of the text.",
     "input_schema": {"type": "object",
                      "properties": {"query": {"type": "string", "description": "what to search for"}},
                      "required": ["query"]}}
    for name, method in TOOLS.items()
]

def agent_system(rounds: int) -> str:
    return (f"{ANSWER_SYSTEM}\n\nFind the documents with the search tools: search_bm25 (keywords), "
            "search_dense (meaning) and search_hybrid (both). Reformulate and search again when the results "
            f"miss the point; you have at most {rounds} rounds of searches. Then answer from the documents "
            "the searches returned, citing each as [doc_id]. Direct answer first: factual questions in at "
            "most 80 words, procedures as numbered steps in at most 150 words.")


FINAL_PROMPT = ("No more searches. Answer the question now from the documents the searches returned, "
                "citing them as [doc_id]; if they do not answer it, say so briefly.")


@dataclass
class Search:
    """One tool call: what was asked and which documents came back (best first)."""

    tool: str
    query: str
    doc_ids: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Evidence:
    """The searches of one question over the shared indexes, and what they retrieved."""

    def __init__(self, baselines: Baselines):
        self.baselines = baselines
        self.searches: list[Search] = []

    def search(self, tool: str, query: Any) -> tuple[str, bool]:
        """Run one tool call; (the tool result text, is_error). Never raises on bad input."""
        method = TOOLS.get(tool)
        if method is None:
            return self._fail(tool, query, f"unknown tool {tool!r}; use {', '.join(TOOLS)}")
        if not isinstance(query, str) or not query.strip():
            return self._fail(tool, query, f"{tool} needs a non-empty 'query' string")
        corpus = self.baselines.corpus
        found = self.baselines.search(method, query, SEARCH_K)
        self.searches.append(Search(tool, query, [corpus.ids[i] for i in found]))
        rows = [f'{tool} "{query}": {len(found)} documents']
        for n, i in enumerate(found, 1):
            rows.append(f"[{n}] doc_id: {corpus.ids[i]}\ntitle: {' '.join(corpus.titles[i].split())}\n"
                        f"{' '.join(corpus.texts[i].split())[:SNIPPET_CHARS]}")
        return "\n\n".join(rows), False

    def _fail(self, tool: str, query: Any, reason: str) -> tuple[str, bool]:
        self.searches.append(Search(tool, query if isinstance(query, str) else repr(query), error=reason))
        return f"error: {reason}", True

    @property
    def retrieved(self) -> list[str]:
        """Every document returned, in the order returned (repeats kept)."""
        return [d for s in self.searches for d in s.doc_ids]

    def context(self, n: int = CONTEXT_DOCS) -> list[str]:
        """The last ``n`` distinct documents retrieved, oldest first."""
        latest = list(dict.fromkeys(reversed(self.retrieved)))[:n]
        return list(reversed(latest))

    def fused(self) -> list[str]:
        """Every document retrieved, best first: reciprocal rank fusion of the searches (ties:
        first retrieved first)."""
        score: dict[str, float] = defaultdict(float)
        for s in self.searches:
            for rank, doc_id in enumerate(s.doc_ids, 1):
                score[doc_id] += 1.0 / (FUSION_K + rank)
        first = {d: i for i, d in reversed(list(enumerate(self.retrieved)))}
        return sorted(score, key=lambda d: (-score[d], first[d]))


class SearchSession(Session):
    """The navigator's tool-use loop (usage, stop reasons, truncation) over the search tools."""

    tool_schemas = SEARCH_SCHEMAS
    final_prompt = FINAL_PROMPT
    exhausted_note = "{turns} rounds of searches spent: final answer forced"

    def __init__(self, provider: str, question: str, evidence: Evidence, *, budget: TurnBudget,
                 client: ChatClient, max_tokens: int = DEFAULT_MAX_TOKENS):
        super().__init__(provider, question, None, budget=budget,  # type: ignore[arg-type] - no tree here
                         system=agent_system(budget.max_turns), client=client, max_tokens=max_tokens)
        self.evidence = evidence

    def _run_tool(self, call: ToolCall) -> tuple[str, bool]:
        if call.error:  # the arguments were not a JSON object
            return self.evidence._fail(call.name, call.arguments.get("_raw", ""),  # noqa: SLF001
                                       f"the arguments of {call.name} were not a JSON object ({call.error}); "
                                       'call it again with e.g. {"query": "refund policy"}')
        return self.evidence.search(call.name, call.arguments.get("query"))


class Agentic:
    """The ``agentic`` method over shared baseline indexes, answering with ``answerer``'s LLM."""

    def __init__(self, baselines: Baselines, answerer: Answerer, max_rounds: int = MAX_ROUNDS):
        if max_rounds < 1:
            raise ValueError("the agentic method needs at least one round")
        self.baselines = baselines
        self.answerer = answerer
        self.max_rounds = max_rounds

    def prepare(self) -> None:
        """Build the indexes the search tools use (before timing queries)."""
        self.baselines.prepare(tuple(TOOLS.values()))

    def run(self, question: str) -> Retrieved:
        start = time.perf_counter()
        evidence = Evidence(self.baselines)
        client = self.answerer.client
        if client is None:
            turns = self._search_offline(question, evidence)
            ranked = evidence.fused()
            corpus = self.baselines.corpus
            # Compose from the context (what the agent last retrieved), best first by the fused ranking.
            order = {d: i for i, d in enumerate(ranked)}
            best = sorted(evidence.context(), key=order.__getitem__)
            answered = self.answerer.answer(question, [corpus.page(corpus.positions[d]) for d in best])
            answer, usage, flags = answered.text, answered.usage, answered.flags
        else:
            session = SearchSession(self.answerer.llm, question, evidence,
                                    budget=TurnBudget(self.max_rounds), client=client)
            answer = session.converse().strip()
            turns, usage, flags = session.calls, session._usage(), session.flags  # noqa: SLF001
            fused = evidence.fused()
            cited = [d for d in citations_in(answer) if d in set(fused)]
            ranked = list(dict.fromkeys(cited + fused))
        return Retrieved(answer, ranked[:RANK_DEPTH], evidence.context(), time.perf_counter() - start, usage,
                         turns=turns, tool_calls=len(evidence.searches),
                         trace=[s.to_dict() for s in evidence.searches], flags=flags)

    def _search_offline(self, question: str, evidence: Evidence) -> int:
        """Search until the top results stabilise or the rounds run out; the rounds used."""
        keywords = " ".join(dict.fromkeys(t for t in content_tokens(question) if t not in QUESTION_WORDS))
        planned = [("search_bm25", keywords), ("search_dense", question), ("search_hybrid", question)]
        expanded: set[str] = set()
        rounds = 0
        while rounds < self.max_rounds:
            if planned:
                tool, query = planned.pop(0)
                if not query.strip():
                    continue
            else:
                titles = [d for d in evidence.fused() if d not in expanded]
                if not titles:
                    break
                expanded.add(titles[0])
                title = self.baselines.corpus.titles[self.baselines.corpus.positions[titles[0]]]
                tool, query = "search_hybrid", f"{' '.join(title.split())} {keywords}".strip()
            before = evidence.fused()[:SEARCH_K]
            evidence.search(tool, query)
            rounds += 1
            if rounds >= 2 and evidence.fused()[:SEARCH_K] == before:
                break
        return rounds
