"""Answering a question over a compiled tree, whatever drives the navigation::

    from c2s_agent import answer
    result = answer("How do I get a refund?", "out/tree")
    print(result.answer, result.citations, result.path)

The pieces every navigator shares live here: the preloaded context (each skill's name and
description), the system prompt rules of the method, a turn budget, the citation check and the
:class:`AnswerResult`. A navigator (who navigates the tree to answer) is a function ``(question,
tools, *, budget, system, **opts) -> Reply`` that acts on the tree only through
:class:`~c2s_agent.tools.TreeTools`; ``offline`` (the deterministic navigator in
:mod:`c2s_agent.offline_navigator`), ``anthropic`` and ``openai`` (LLM tool-use loops in
:mod:`c2s_agent.llm_navigator`) are built in; others plug in with :func:`register_navigator`.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from c2s_core.navigation.engine import Rounds
from .tools import ToolCall, TreeTools
from c2s_core.tree import Tree, open_tree

RULES = """\
You answer questions from a company's documents, compiled into a tree of skill files that you \
browse with two tools: code_execution (ls, cat, grep, head ... over skills/, \
entity_index.json and term_index.txt) and get_document(doc_id) for a document's full text. Where a search tool is \
offered, search(query, k) is flat keyword search over every document, for when the tree's \
evidence is thin.

How to navigate:
- Start from the skills listed below. Keep at least two candidate skills before committing to \
one: cat their SKILL.md files and compare.
- When the question names an entity (a product, feature, error code, file format or proper \
noun), look it up in entity_index.json first (grep -i NAME entity_index.json) and go where it \
points.
- grep -ril TERM skills/<skill>/ shows which groups mention a term; use it as evidence.
- A word the rows do not show may be in the documents' bodies: grep -E '^=?(WORD|WORD) ' term_index.txt lists, per word, LEAF:ROWS places, LEAF a leaf number and ROWS the rows of its ## Documents section whose documents use the word (words are lower-case, plural and -ing/-ed endings dropped; a line starting '=' lists the rows whose titles use it); grep -E '^@(LEAF|LEAF) ' term_index.txt gives those leaves' folders below skills/. A row listed under several of the question's words is a strong candidate.
- Descend through ## Sub-groups to INDEX.md files whose ## Documents rows list doc ids. Follow \
@see stubs to documents filed elsewhere.
- When a branch is thin or off-topic, jump via ## Related skills or backtrack to the next-best \
branch instead of answering from it.
- When the tree's evidence is thin (the branches you read do not cover the question's terms, \
grep finds them nowhere useful, or the leaves reached look off-topic), call search with the \
question's distinctive terms; its rows name each document's INDEX.md, so you can go there. \
Navigate first: search is the fallback, not the first step.
- Summary files are for navigation only: read the documents you rely on with get_document.

How to answer:
- Every claim must come from a document you retrieved with get_document; cite it as \
[doc_id] right after the claim. Never cite a summary file or a document you did not retrieve.
- Direct answer first, no preamble. Factual questions: at most 80 words. Procedures: numbered \
steps, at most 150 words.
- If the documents do not answer the question, say so briefly."""


def preloaded_context(tree: Tree | str | os.PathLike[str]) -> str:
    """Each skill's name and description (~200 tokens), the agent's bird's-eye view."""
    skills = open_tree(tree).skills
    return "Skills (skills/<name>/SKILL.md):\n" + "\n".join(
        f"- {s.name} ({s.documents} docs): {s.description}" for s in skills)


def system_prompt(tree: Tree | str | os.PathLike[str]) -> str:
    return f"{RULES}\n\n{preloaded_context(tree)}"


class TurnBudget(Rounds):
    """Rounds of tool calls an agent may still make; the last round is for answering."""

    def reminder(self) -> str:
        """A line for an LLM navigator to append to tool results as the budget runs out."""
        if self.left <= 1:
            return "Turn budget exhausted: answer now from the documents you have retrieved."
        return f"{self.left} turn(s) left."


_CITATION = re.compile(r"\[([^\[\]\s]+)\](?!\()")  # [doc_id], but not a markdown [link](url)


def citations_in(text: str) -> list[str]:
    """The ``[doc_id]`` citations of an answer, in order of first appearance."""
    return list(dict.fromkeys(m.strip("`") for m in _CITATION.findall(text)))


def check_citations(answer: str, fetched: list[str], exists: Callable[[str], bool] | None = None) -> list[str]:
    """Problems with an answer's grounding (empty: every citation was retrieved and exists)."""
    cited = citations_in(answer)
    if not cited:
        return ["no citation: the answer cites no retrieved document"]
    problems = []
    seen = set(fetched)
    for doc_id in cited:
        if exists is not None and not exists(doc_id):
            problems.append(f"cited {doc_id} is not a document of this tree")
        elif doc_id not in seen:
            problems.append(f"cited {doc_id} was never retrieved with get_document")
    return problems


@dataclass
class Reply:
    """What a navigator returns."""

    answer: str
    fetched: list[str] = field(default_factory=list)  # evidence order; default: order first read
    path: str = ""
    turns: int = 0
    visited: list[str] = field(default_factory=list)  # nav files read
    notes: list[str] = field(default_factory=list)
    usage: dict = field(default_factory=dict)  # navigator extras, e.g. LLM tokens
    flags: list[str] = field(default_factory=list)  # navigator problems (refusal, truncation)
    reached: list[str] | None = None  # documents navigation itself reached; None: not recorded


@dataclass
class AnswerResult:
    """One answered question. ``fetched`` lists every document read with get_document, best
    first where the navigator ranks them (the offline navigator reads ~10 candidates to rank
    them; ``trace`` keeps the calls in the order they were made)."""

    question: str
    answer: str
    citations: list[str]
    fetched: list[str]
    trace: list[ToolCall]
    turns: int
    usage: dict
    path: str  # e.g. "skills → billing → refunds → 2 docs"
    navigator: str = "offline"  # who navigated: offline, anthropic, openai or a registered one
    flags: list[str] = field(default_factory=list)  # citation check problems
    visited: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The documents the navigator's descent reached (their rows read in the leaves it opened, stubs
    # and examples on the way), search hits aside; None where the navigator does not record them
    # (the LLM ones). Beside ``fetched`` it tells a miss of routing from a miss of ranking.
    reached: list[str] | None = None

    @property
    def grounded(self) -> bool:
        return not self.flags

    def to_dict(self) -> dict:
        data = asdict(self)
        data["trace"] = [c.to_dict() for c in self.trace]
        return data

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)


class UnknownNavigatorError(ValueError):
    pass


_NAVIGATORS: dict[str, Callable[..., Reply] | str] = {
    "offline": "c2s_agent.offline_navigator:navigate",
    "anthropic": "c2s_agent.llm_navigator:anthropic",  # LLM tool-use loops (c2s_agent.llm_navigator)
    "openai": "c2s_agent.llm_navigator:openai",
}


def register_navigator(name: str, navigator: Callable[..., Reply] | str) -> None:
    """Add a navigator: a callable, or a lazily imported "module:function" string."""
    _NAVIGATORS[name] = navigator


def navigators() -> list[str]:
    """The names :func:`answer` takes as ``navigator``, sorted."""
    return sorted(_NAVIGATORS)


def check_navigator(name: str) -> None:
    """Raise :class:`UnknownNavigatorError`, listing the available ones, unless ``name`` is one."""
    if name not in _NAVIGATORS:
        raise UnknownNavigatorError(f"unknown navigator {name!r}; available: {', '.join(navigators())}")


def _navigator(name: str) -> Callable[..., Reply]:
    check_navigator(name)
    found = _NAVIGATORS[name]
    if isinstance(found, str):
        module, _, attr = found.partition(":")
        found = _NAVIGATORS[name] = getattr(importlib.import_module(module), attr)
    return found


_SURROGATES = re.compile("[\ud800-\udfff]")


def tools_for(tree: Tree | str | os.PathLike[str], navigator: str = "offline") -> TreeTools:
    """The tools ``navigator`` works with over ``tree``: a navigator may ask for its own tool
    settings (the offline navigator reads long grep listings that would swamp an LLM's context,
    so it asks for a larger output cap)."""
    return TreeTools(tree, **getattr(_navigator(navigator), "tool_options", {}))


def answer(question: str, tree: Tree | TreeTools | str | os.PathLike[str], navigator: str = "offline",
           max_turns: int = 10, **opts: object) -> AnswerResult:
    """Answer ``question`` from the compiled tree at ``tree`` (a path, a Tree, or TreeTools to
    reuse; a fresh TreeTools gives a trace of this question alone) with ``navigator``: who
    navigates, ``offline`` (no LLM), ``anthropic``, ``openai`` or one added with
    :func:`register_navigator`; ``opts`` go to it (``model``, ``base_url`` ... for an LLM one)."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("the question is empty")
    # Undecodable bytes (a terminal's argv, JSON's lone \\udcxx escapes) as U+FFFD, like any
    # undecodable text: tokenisers and encoders take UTF-8 text only.
    question = _SURROGATES.sub("\ufffd", question)
    run = _navigator(navigator)
    tools = tree if isinstance(tree, TreeTools) else tools_for(tree, navigator)
    budget = TurnBudget(max_turns)
    start = time.perf_counter()
    reply = run(question, tools, budget=budget, system=system_prompt(tools.tree), **opts)
    read = tools.fetched
    fetched = list(dict.fromkeys([d for d in reply.fetched if d in set(read)] + read))
    flags = list(reply.flags) + check_citations(reply.answer, read, exists=lambda d: d in tools.tree.store)
    usage = {**tools.usage(), "nav_files_read": len(reply.visited), **reply.usage,
             "seconds": round(time.perf_counter() - start, 3)}
    return AnswerResult(question, reply.answer, citations_in(reply.answer), fetched, tools.trace,
                        reply.turns or budget.used, usage, reply.path, navigator, flags,
                        reply.visited, reply.notes, None if reply.reached is None else list(reply.reached))
