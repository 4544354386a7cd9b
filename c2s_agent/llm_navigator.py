"""The LLM navigators of :func:`c2s_agent.answer`: a tool-use loop over the shared chat clients of
:mod:`c2s_core.llm.clients` (``anthropic``: the Messages API; ``openai``: chat completions,
OpenAI or any compatible server via ``base_url``)::

    answer("How do I get a refund?", "out/tree", navigator="anthropic")
    answer(q, tree, navigator="openai", model="llama3.1", base_url="http://localhost:8000/v1")

The loop: the system prompt (the method's rules + the preloaded skills) and the tools of
:data:`~c2s_agent.tools.TOOL_SCHEMAS` (plus ``search`` when the tree has a search index and the
``route`` option is not False) form a stable prefix (prompt-cached on Anthropic); every
tool call is executed through :class:`~c2s_agent.tools.TreeTools` (the only way to the corpus)
and answered with a tool result in the next turn (errors as ``is_error``). Each model call that
may use tools takes a turn of the :class:`~c2s_agent.agent.TurnBudget`; once it is spent the
model is asked once, with tools disabled, for its final answer. Stop reasons: ``end_turn`` ends
with the answer; ``tool_use`` continues; ``max_tokens`` asks once to finish; ``refusal`` ends
with the result flagged. Malformed tool calls (unknown tool, arguments that are not a JSON
object, missing required fields) get an error tool result and the loop goes on.

Options (keyword arguments of ``answer``): ``model``, ``api_key``, ``base_url`` (else the
``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL`` or ``OPENAI_API_KEY``/``OPENAI_BASE_URL``
environment variables; ``C2S_AGENT_MODEL`` names a default model), ``max_tokens``,
``temperature``, ``route`` (False: navigation only, no ``search`` tool), ``retry`` (a :class:`~c2s_core.llm.clients.RetryPolicy`), ``timeout``,
or ``client`` (a ready :class:`~c2s_core.llm.clients.ChatClient`).
"""

from __future__ import annotations

import os
import posixpath
import shlex
import time
from typing import Any

from c2s_core.llm.clients import (
    CONTEXT_EXCEEDED,
    MAX_TOKENS,
    ChatClient,
    ChatResult,
    Usage,
    make_client,
    tool_result,
)

from .agent import Reply, TurnBudget, citations_in
from .tools import ALL_TOOL_SCHEMAS, TOOL_SCHEMAS, TreeTools

DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1"}
DEFAULT_MAX_TOKENS = 2048

FINAL_PROMPT = ("Turn budget exhausted: no more tool calls. Answer the question now from the documents "
                "you have retrieved with get_document, citing them as [doc_id]; if they do not answer "
                "it, say so briefly.")
CONTINUE_PROMPT = ("Your reply was cut off at the output limit. Continue exactly where it stopped and "
                   "conclude briefly, without tool calls.")
_NAV_READERS = {"cat", "head", "tail"}


def client_for(provider: str, *, model: str | None = None, api_key: str | None = None,
               base_url: str | None = None, retry: Any = None, timeout: float | None = None) -> ChatClient:
    """The chat client of LLM provider ``provider`` (the API: ``anthropic`` or ``openai``) that an
    LLM navigator uses (raises ``MissingAPIKeyError`` naming the variable)."""
    model = model or os.environ.get("C2S_AGENT_MODEL") or DEFAULT_MODELS[provider]
    kwargs: dict[str, Any] = {"api_key": api_key, "base_url": base_url}
    if retry is not None:
        kwargs["retry"] = retry
    if timeout is not None:
        kwargs["timeout"] = timeout
    return make_client(provider, model, **kwargs)


def _required(name: str) -> list[str]:
    for schema in ALL_TOOL_SCHEMAS:
        if schema["name"] == name:
            return list(schema["input_schema"].get("required", []))
    return []


def _nav_files(command: str) -> list[str]:
    """SKILL.md / INDEX.md files a code_execution command line reads (cat/head/tail)."""
    found = []
    for part in command.split("|"):
        try:
            words = shlex.split(part)
        except ValueError:
            continue
        if words and words[0] in _NAV_READERS:
            found += [posixpath.normpath(w.lstrip("/")) for w in words[1:]
                      if not w.startswith("-") and w.endswith(("SKILL.md", "INDEX.md"))]
    return found


class Session:
    """One question's conversation with one model of LLM provider ``provider`` (the API:
    ``anthropic`` or ``openai``)."""

    tool_schemas: list[dict[str, Any]] = TOOL_SCHEMAS  # the tools the model is offered
    final_prompt = FINAL_PROMPT  # asks for the answer once the turns are spent
    exhausted_note = "turn budget of {turns} exhausted: final answer forced"

    def __init__(self, provider: str, question: str, tools: TreeTools, *, budget: TurnBudget, system: str,
                 client: ChatClient, max_tokens: int = DEFAULT_MAX_TOKENS, temperature: float | None = None,
                 route: bool = True):
        self.provider = provider
        if tools is not None and self.tool_schemas is TOOL_SCHEMAS:  # subclasses bring their own tools
            self.tool_schemas = tools.schemas if route else TOOL_SCHEMAS
        self.tools = tools
        self.budget = budget
        self.system = system
        self.client = client
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
        self.usage = Usage()
        self.cost = 0.0
        self.calls = 0  # model calls
        self.attempts = 0  # HTTP attempts, retries included
        self.flags: list[str] = []
        self.notes: list[str] = []
        self.visited: list[str] = []
        self.stops: list[str] = []

    # -- one model call -------------------------------------------------------------------

    def _complete(self, *, tools_allowed: bool) -> ChatResult:
        result = self.client.complete(
            self.messages, system=self.system, tools=self.tool_schemas,  # tools stay defined: a stable prefix
            tool_choice=None if tools_allowed else "none", max_tokens=self.max_tokens,
            temperature=self.temperature, cache=True, cache_conversation=self.provider == "anthropic")
        self.calls += 1
        self.attempts += result.attempts
        self.usage = self.usage + result.usage
        self.cost += result.cost
        self.stops.append(result.stop_reason)
        return result

    # -- tools ----------------------------------------------------------------------------

    def _run_tool(self, call: Any) -> tuple[str, bool]:
        """Execute one tool call through TreeTools; (output, is_error). Never raises."""
        if call.error:  # the arguments were not a JSON object: nothing to run
            output = (f"error: the arguments of {call.name} were not a JSON object ({call.error}); call it "
                      "again with a JSON object, e.g. {\"command\": \"ls skills\"} or {\"doc_id\": \"...\"}")
            self.tools._record(call.name, dict(call.arguments), output, time.perf_counter(), error=True)  # noqa: SLF001
            return output, True
        offered = [s["name"] for s in self.tool_schemas]
        if call.name not in offered:  # e.g. search on a navigation-only run: not this session's tool
            output = f"error: unknown tool {call.name!r}; the tools are {', '.join(offered)}"
            self.tools._record(call.name, dict(call.arguments), output, time.perf_counter(), error=True)  # noqa: SLF001
            return output, True
        missing = [k for k in _required(call.name) if k not in call.arguments]
        if missing:
            output = f"error: {call.name} needs {', '.join(repr(k) for k in missing)}"
            self.tools._record(call.name, dict(call.arguments), output, time.perf_counter(), error=True)  # noqa: SLF001
            return output, True
        try:
            before = len(self.tools.trace)
            output = self.tools.call(call.name, call.arguments)
            trace = self.tools.trace
            failed = output.startswith("error:") or (len(trace) > before and trace[-1].error)
        except Exception as exc:  # noqa: BLE001 - a tool failure is the model's to handle
            output, failed = f"error: {type(exc).__name__}: {exc}", True
        if call.name == "code_execution" and not failed:
            for path in _nav_files(str(call.arguments.get("command", ""))):
                if path not in self.visited:
                    self.visited.append(path)
        return output, failed

    # -- the loop -------------------------------------------------------------------------

    def converse(self) -> str:
        """Tool turns until the model answers, or the budget forces an answer; the answer text."""
        while True:
            if not self.budget.take():
                self.messages.append({"role": "user", "content": self.final_prompt})
                answer = self._finish(self._complete(tools_allowed=False))
                self.notes.append(self.exhausted_note.format(turns=self.budget.max_turns))
                return answer
            result = self._complete(tools_allowed=True)
            if result.refused:
                self.flags.append("refusal: the model declined to answer")
                return result.text
            if not result.tool_calls:
                return self._finish(result)
            self.messages.append(result.message())
            for call in result.tool_calls:
                output, failed = self._run_tool(call)
                self.messages.append(tool_result(call, output, is_error=failed))
            if self.budget.left <= 1:
                self.messages.append({"role": "user", "content": self.budget.reminder()})

    def run(self) -> Reply:
        answer = self.converse()
        fetched = set(self.tools.fetched)
        cited = [d for d in citations_in(answer) if d in fetched]
        return Reply(answer=answer.strip(), fetched=cited, path=self._path(cited), turns=self.calls,
                     visited=self.visited, notes=self.notes, usage=self._usage(), flags=self.flags)

    def _finish(self, result: ChatResult) -> str:
        """The answer text of a turn without tool calls; a truncated one gets one continuation."""
        if result.refused:
            self.flags.append("refusal: the model declined to answer")
            return result.text
        if result.stop_reason not in (MAX_TOKENS, CONTEXT_EXCEEDED):
            return result.text
        text = result.text
        if result.stop_reason == MAX_TOKENS:
            self.messages.append({"role": "assistant", "content": text})
            self.messages.append({"role": "user", "content": CONTINUE_PROMPT})
            more = self._complete(tools_allowed=False)
            text = (text + more.text) if text else more.text
            if more.refused:
                self.flags.append("refusal: the model declined to answer")
            if not more.truncated:
                self.notes.append("answer cut off at max_tokens: continued once")
                return text
        self.flags.append(f"truncated: the answer was cut off ({result.stop_reason})")
        return text

    def _path(self, cited: list[str]) -> str:
        if not self.visited:
            return f"skills → {len(cited)} docs"
        parts = [p for p in posixpath.dirname(self.visited[-1]).split("/") if p and p != "skills"]
        return " → ".join(["skills", *parts, f"{len(cited)} docs"])

    def _usage(self) -> dict:
        return {**self.usage.as_dict(), "llm_calls": self.calls, "http_attempts": self.attempts,
                "cost_usd": round(self.cost, 6), "model": self.client.model, "stop_reasons": self.stops}


def _run(provider: str, question: str, tools: TreeTools, *, budget: TurnBudget | None = None, system: str = "",
         client: ChatClient | None = None, model: str | None = None, api_key: str | None = None,
         base_url: str | None = None, max_tokens: int = DEFAULT_MAX_TOKENS, temperature: float | None = None,
         retry: Any = None, timeout: float | None = None, route: bool = True, **_: object) -> Reply:
    if not system:
        from .agent import system_prompt

        system = system_prompt(tools.tree)
    client = client or client_for(provider, model=model, api_key=api_key, base_url=base_url, retry=retry,
                                  timeout=timeout)
    return Session(provider, question, tools, budget=budget or TurnBudget(), system=system, client=client,
                   max_tokens=max_tokens, temperature=temperature, route=route).run()


def anthropic(question: str, tools: TreeTools, **opts: Any) -> Reply:
    """The ``anthropic`` navigator (Claude through the Messages API)."""
    return _run("anthropic", question, tools, **opts)


def openai(question: str, tools: TreeTools, **opts: Any) -> Reply:
    """The ``openai`` navigator (chat completions: OpenAI, vLLM, Ollama, llama.cpp ...)."""
    return _run("openai", question, tools, **opts)
