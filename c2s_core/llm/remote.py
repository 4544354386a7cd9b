"""The compile provider backed by a real LLM (Anthropic or any OpenAI-compatible server).

One call per item, ``concurrency`` calls in flight (asyncio on a private event-loop thread, so the
sync provider methods work from any caller, inside a running loop too). Every answer is parsed as
JSON (code fences stripped) and validated with the task's pydantic schema; an invalid or truncated
answer is re-asked with the problem stated, at most ``max_attempts`` calls per item, and an item
that never yields a valid answer raises ``CompileTaskError`` naming the document or cluster - never
a placeholder. Tokens and dollars are tallied per task (``usage_by_task``, ``cost_by_task``).

Each item is handed to ``on_result`` as it completes. When one item fails (or the budget is
reached), no further item starts; the calls in flight finish and are kept (they are paid for),
then the error is raised. ``max_cost`` caps what one provider spends: a call is refused when
what was spent, plus what the calls in flight may cost, plus its own estimate (prompt at 4
characters a token, output at its full budget) would cross the cap.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections import defaultdict
from concurrent.futures import Future
from typing import Any, Coroutine, Sequence, TypeVar

from pydantic import BaseModel, ValidationError

from . import pricing, prompts
from ..identifiers import MAX_IDENTIFIERS, cap_identifiers, extract_identifiers
from ..text import slugify
from .base import BudgetExceededError, CompileTaskError, OnResult
from .clients import ChatClient, ChatResult, LLMError, Usage
from .schemas import (
    MAX_DOC_TYPES,
    MAX_ENTITIES,
    MAX_PHRASES,
    Card,
    CardInput,
    ClusterInput,
    ClusterSummary,
    Entities,
    EntitiesInput,
    RepartitionInput,
    RepartitionVerdict,
)

log = logging.getLogger("c2s.llm")

Out = TypeVar("Out", bound=BaseModel)
T = TypeVar("T")

MAX_KEY_TERMS = 12
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


class RemoteProvider:
    """``CompileProvider`` over a ``ChatClient``. ``card_model`` (default ``model``) does the
    per-document cards, the bulk of the calls, where a cheaper model loses little."""

    def __init__(self, client: ChatClient, model: str | None = None, card_model: str | None = None,
                 concurrency: int = 20, max_attempts: int = 3, temperature: float | None = None,
                 max_cost: float | None = None):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.client = client
        self.name = client.provider
        self.model = model or client.model
        self.card_model = card_model or self.model
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.temperature = temperature
        self.max_cost = max_cost
        self._reserved = 0.0  # estimated cost of the calls in flight
        self.usage_by_task: dict[str, Usage] = defaultdict(Usage)
        self.cost_by_task: dict[str, float] = defaultdict(float)
        self.calls_by_task: dict[str, int] = defaultdict(int)  # model calls, re-asks included
        self.reasks_by_task: dict[str, int] = defaultdict(int)
        self.retries_by_task: dict[str, int] = defaultdict(int)  # HTTP retries (429, 5xx, timeouts)
        self._stats_lock = threading.Lock()
        for m in {self.model, self.card_model}:
            if self.name == "anthropic" and not pricing.price_for(m).known:
                log.warning("no price known for %s: its cost is reported as $0 (add it with pricing.register_price)", m)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._loop_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RemoteProvider({self.client!r}, model={self.model!r}, card_model={self.card_model!r})"

    # -- CompileProvider -----------------------------------------------------------------------
    def prompt_version(self, task: str) -> str:
        version = prompts.VERSIONS[task]
        # ``model`` keys every task already; the cards' own model must key the cards.
        return f"{version}@{self.card_model}" if task == "card" and self.card_model != self.model else version

    def batch_context(self, task: str, items: Sequence[BaseModel]) -> str:
        return ""  # an LLM answer depends on its own item only

    def cards(self, items: Sequence[CardInput], only: Sequence[int], on_result: OnResult | None = None) -> dict[int, Card]:
        return self._run("card", items, only, Card, on_result)

    def summaries(self, items: Sequence[ClusterInput], only: Sequence[int],
                  on_result: OnResult | None = None) -> dict[int, ClusterSummary]:
        return self._run("summary", items, only, ClusterSummary, on_result)

    def repartitions(self, items: Sequence[RepartitionInput], only: Sequence[int],
                     on_result: OnResult | None = None) -> dict[int, RepartitionVerdict]:
        return self._run("repartition", items, only, RepartitionVerdict, on_result)

    def entities(self, items: Sequence[EntitiesInput], only: Sequence[int],
                 on_result: OnResult | None = None) -> dict[int, Entities]:
        return self._run("entities", items, only, Entities, on_result)

    def model_for(self, task: str) -> str:
        return self.card_model if task == "card" else self.model

    # -- accounting ----------------------------------------------------------------------------
    @property
    def usage(self) -> Usage:
        return sum(self.usage_by_task.values(), Usage())

    @property
    def cost(self) -> float:
        return sum(self.cost_by_task.values())

    def report(self) -> dict[str, Any]:
        """Per task: calls, re-asks, HTTP retries, tokens and dollars."""
        tasks = sorted(set(self.calls_by_task) | set(self.usage_by_task))
        return {
            "provider": self.name, "model": self.model, "card_model": self.card_model,
            "tasks": {t: {"calls": self.calls_by_task[t], "reasks": self.reasks_by_task[t],
                          "retries": self.retries_by_task[t], **self.usage_by_task[t].as_dict(),
                          "cost_usd": round(self.cost_by_task[t], 6)} for t in tasks},
            "cost_usd": round(self.cost, 6),
            "priced": pricing.price_for(self.model).known,
        }

    def _reserve(self, task: str, model: str, system: str, messages: list[dict[str, Any]], max_tokens: int) -> float:
        """Book the estimated cost of the next call, or refuse it when it could cross ``max_cost``."""
        if self.max_cost is None:
            return 0.0
        estimate = estimate_call_cost(model, system, messages, max_tokens)
        with self._stats_lock:
            if self.cost + self._reserved + estimate > self.max_cost:
                raise BudgetExceededError(self.max_cost, self.cost, task)
            self._reserved += estimate
        return estimate

    def _release(self, estimate: float) -> None:
        with self._stats_lock:
            self._reserved -= estimate

    def _account(self, task: str, model: str, result: ChatResult) -> None:
        with self._stats_lock:
            self.usage_by_task[task] += result.usage
            self.cost_by_task[task] += pricing.cost(model, result.usage)
            self.calls_by_task[task] += 1
            self.retries_by_task[task] += result.attempts - 1

    # -- running -------------------------------------------------------------------------------
    def _run(self, task: str, items: Sequence[BaseModel], only: Sequence[int], output: type[Out],
             on_result: OnResult | None) -> dict[int, Out]:
        if not only:
            return {}
        return self._submit(self._gather(task, items, only, output, on_result))

    def _submit(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._loop_lock:
            if self._loop is None or self._loop.is_closed():
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name="c2s-llm", daemon=True)
                self._thread.start()
            loop = self._loop
        future: Future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt in the caller: stop the calls in flight
            raise

    def close(self) -> None:
        """Close the async HTTP connections and stop the private loop (a later call restarts it)."""
        with self._loop_lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.client.aclose(), loop).result(timeout=10)
        except Exception:  # noqa: BLE001 - best effort on shutdown
            pass
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=10)
        loop.close()

    async def _gather(self, task: str, items: Sequence[BaseModel], only: Sequence[int], output: type[Out],
                      on_result: OnResult | None) -> dict[int, Out]:
        semaphore = asyncio.Semaphore(self.concurrency)
        results: dict[int, Out] = {}
        errors: list[LLMError] = []

        async def one(i: int) -> None:
            async with semaphore:
                if errors:
                    return  # an item failed: start nothing new
                try:
                    result = await self._item(task, items[i], output)
                except (CompileTaskError, BudgetExceededError) as err:
                    errors.append(err)
                    return
                results[i] = result
                if on_result is not None:
                    on_result(i, result)

        # Cancelled (Ctrl-C in the caller): gather cancels every item, and none half-done is kept.
        await asyncio.gather(*(one(i) for i in only))
        if errors:
            error = errors[0]
            if isinstance(error, BudgetExceededError):
                error = BudgetExceededError(error.budget, self.cost, task)  # with the calls drained
            raise error
        return results

    async def _item(self, task: str, item: BaseModel, output: type[Out]) -> Out:
        system, user = prompts.build(task, item)
        model = self.model_for(task)
        budget = prompts.MAX_TOKENS[task]
        messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
        problem = ""
        for attempt in range(1, self.max_attempts + 1):
            if attempt > 1:
                with self._stats_lock:
                    self.reasks_by_task[task] += 1
            estimate = self._reserve(task, model, system, messages, budget)
            try:
                result = await self.client.acomplete(messages, system=system, max_tokens=budget, model=model,
                                                     json_mode=True, temperature=self.temperature)
            except LLMError as err:
                raise CompileTaskError(f"{task} for {prompts.describe(task, item)}: {err}",
                                       transient=getattr(err, "retryable", False)) from err
            finally:
                self._release(estimate)
            self._account(task, model, result)
            last = attempt == self.max_attempts
            if result.refused:
                problem = "the model declined to answer (stop reason: refusal)"
                follow_up = prompts.REASK_INVALID.format(error="you declined; the task only asks to describe "
                                                               "the text given, as JSON.")
            elif result.truncated:
                problem = f"the answer was cut off at the output limit of {budget} tokens"
                follow_up = prompts.REASK_TRUNCATED
                budget = min(budget * 2, prompts.MAX_TOKENS[task] * 4)
            else:
                try:
                    return parse_answer(task, item, result.text, output, lenient=last)
                except ValueError as err:
                    problem = str(err)
                    follow_up = prompts.REASK_INVALID.format(error=problem)
            messages = [*messages, {"role": "assistant", "content": result.text.strip() or "(no answer)"},
                        {"role": "user", "content": follow_up}]
        raise CompileTaskError(f"{task} for {prompts.describe(task, item)}: no valid answer from {model} after "
                               f"{self.max_attempts} attempts; last problem: {problem}")


def estimate_call_cost(model: str, system: str, messages: Sequence[dict[str, Any]], max_tokens: int) -> float:
    """An upper-leaning estimate of one call: the prompt at 4 characters a token, priced as a
    cache write where that costs more than plain input, and the whole output budget."""
    prompt = prompts.estimate_tokens(system + "".join(str(m.get("content", "")) for m in messages))
    return max(pricing.cost(model, Usage(input_tokens=prompt, output_tokens=max_tokens)),
               pricing.cost(model, Usage(cache_write_tokens=prompt, output_tokens=max_tokens)))


# -- parsing ---------------------------------------------------------------------------------------


def extract_json(text: str) -> dict[str, Any]:
    """The JSON object in an answer: bare, fenced (```json ... ```), or amid stray prose."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    if not stripped:
        raise ValueError("the answer is empty; a JSON object is required")
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as first:
        start, end = stripped.find("{"), stripped.rfind("}")
        if start < 0 or end <= start:
            raise ValueError(f"the answer is not JSON ({first.msg} at line {first.lineno} column {first.colno})")
        try:
            value = json.loads(stripped[start : end + 1])
        except json.JSONDecodeError as exc:
            raise ValueError(f"the answer is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})")
    if not isinstance(value, dict):
        raise ValueError(f"the answer is JSON but not an object (got {type(value).__name__})")
    return value


def parse_answer(task: str, item: BaseModel, text: str, output: type[Out], lenient: bool = False) -> Out:
    """Validate an answer for ``item``. Light, lossless-in-spirit repairs only: lists over their
    cap are cut, labels slugified, blanks dropped. ``lenient`` (the last attempt): repartition
    instructions naming unknown ids are dropped with a note instead of re-asked."""
    data = extract_json(text)
    if task == "card":
        data["phrases"] = _clean_list(data.get("phrases"), MAX_PHRASES)
        data["identifiers"] = _card_identifiers(item, data)  # type: ignore[arg-type]
    elif task == "summary":
        data["key_terms"] = _clean_list(data.get("key_terms"), MAX_KEY_TERMS)
        label = data.get("label") or data.get("title") or ""
        data["label"] = slugify(str(label), 50) if isinstance(label, str) else label
    elif task == "entities":
        data["entities"] = _clean_list(data.get("entities"), MAX_ENTITIES)
        data["doc_types"] = [t.lower() for t in _clean_list(data.get("doc_types"), MAX_DOC_TYPES)]
    try:
        result = output.model_validate(data)
    except ValidationError as exc:
        raise ValueError(_validation_text(exc)) from None
    if task == "repartition":
        result = _check_ids(item, result, lenient)  # type: ignore[arg-type,assignment]
    return result


def _card_identifiers(item: CardInput, data: dict[str, Any]) -> Any:
    """The model's identifiers, topped up with those extracted from the whole document: the
    prompt shows only its start, and the one a question names may sit past it."""
    given = _clean_list(data.get("identifiers"), MAX_IDENTIFIERS * 2)
    if not isinstance(given, list):
        return given  # let validation name the problem
    title = data.get("title") if isinstance(data.get("title"), str) else item.title
    shown = f"{title}\n{data.get('one_line') if isinstance(data.get('one_line'), str) else ''}"
    found = extract_identifiers(f"{item.text}\n{item.tail}", exclude=shown)
    return cap_identifiers([*(str(g) for g in given), *found], exclude=shown)


def _clean_list(value: Any, cap: int) -> Any:
    if value is None:
        return []
    if not isinstance(value, list):
        return value  # let validation name the problem
    seen, out = set(), []
    for v in value:
        if isinstance(v, str):
            v = " ".join(v.split())
            if not v or v.lower() in seen:
                continue
            seen.add(v.lower())
        out.append(v)
    return out[:cap]


def _validation_text(exc: ValidationError) -> str:
    problems = []
    for e in exc.errors()[:8]:
        where = ".".join(str(p) for p in e["loc"]) or "(root)"
        problems.append(f"{where}: {e['msg']}")
    return "the JSON does not match the format: " + "; ".join(problems)


def _check_ids(item: RepartitionInput, verdict: RepartitionVerdict, lenient: bool) -> RepartitionVerdict:
    clusters = {c.cluster_id for c in item.clusters}
    members = {m for c in item.clusters for m in c.member_ids}
    unknown: list[str] = []
    confusable = []
    for a, b in verdict.confusable:
        bad = [x for x in (a, b) if x not in clusters]
        unknown += bad
        if not bad and a != b:
            confusable.append((a, b))
    mixed = []
    for c in verdict.mixed:
        if c in clusters:
            mixed.append(c)
        else:
            unknown.append(c)
    moves = []
    for move in verdict.moves:
        bad = ([move.item_id] if move.item_id not in members else []) + (
            [move.to_cluster] if move.to_cluster not in clusters else [])
        unknown += bad
        if not bad:
            moves.append(move)
    if unknown and not lenient:
        raise ValueError(f"unknown ids {sorted(set(unknown))[:10]}: use only the cluster and member ids listed")
    notes = verdict.notes
    if unknown:
        notes = f"{notes} [dropped instructions naming unknown ids: {', '.join(sorted(set(unknown))[:10])}]".strip()
    return RepartitionVerdict(confusable=confusable, mixed=mixed, moves=moves, notes=notes)
