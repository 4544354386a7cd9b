"""The compile provider interface, the errors a provider raises, usage accounting, and the
runner that caches and counts every task call."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, TypeVar

from pydantic import BaseModel

from ..cache import ItemCache
from ..text import sha256_hex
from .clients import LLMError
from .schemas import (
    Card,
    CardInput,
    ClusterInput,
    ClusterSummary,
    Entities,
    EntitiesInput,
    RepartitionInput,
    RepartitionVerdict,
)

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)

TASKS = ("card", "summary", "repartition", "entities")

# Called with (index, result) as each item completes, possibly from another thread.
OnResult = Callable[[int, Any], None]


class CompileTaskError(LLMError):
    """An item's task failed; the message names the item. ``transient``: the API kept failing
    with errors worth retrying later (429, 5xx, timeouts); otherwise it failed for good (no
    valid answer after bounded re-asks, or an error no retry fixes)."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


class BudgetExceededError(LLMError):
    """The next call would have crossed the spending limit; nothing over it was spent."""

    def __init__(self, budget: float, spent: float, task: str):
        self.budget, self.spent, self.task = budget, spent, task
        super().__init__(self.describe(task))

    def describe(self, where: str) -> str:
        return (f"budget of ${self.budget:.2f} reached after ${self.spent:.2f} in {where}; rerun with a higher "
                "--max-cost to resume — completed items are cached")


class CompileProvider(Protocol):
    """Does the compile's LLM tasks. Each task takes the whole batch of sibling items (some
    providers need the siblings as context), computes only the indices in ``only`` and calls
    ``on_result`` as each one completes, so a failure part-way keeps what was done."""

    name: str
    model: str

    def prompt_version(self, task: str) -> str: ...

    def batch_context(self, task: str, items: Sequence[BaseModel]) -> str:
        """Extra cache-key material when an item's result depends on its siblings."""
        ...

    def cards(self, items: Sequence[CardInput], only: Sequence[int],
              on_result: OnResult | None = None) -> dict[int, Card]: ...

    def summaries(self, items: Sequence[ClusterInput], only: Sequence[int],
                  on_result: OnResult | None = None) -> dict[int, ClusterSummary]: ...

    def repartitions(self, items: Sequence[RepartitionInput], only: Sequence[int],
                     on_result: OnResult | None = None) -> dict[int, RepartitionVerdict]: ...

    def entities(self, items: Sequence[EntitiesInput], only: Sequence[int],
                 on_result: OnResult | None = None) -> dict[int, Entities]: ...

    def report(self) -> dict[str, Any]:
        """Usage so far: ``{"tasks": {task: {USAGE_FIELDS...}}, "cost_usd": ...}``."""
        ...


# -- usage accounting ------------------------------------------------------------------------------

USAGE_FIELDS = ("calls", "reasks", "retries", "input_tokens", "output_tokens", "cache_read_tokens",
                "cache_write_tokens", "cost_usd")


def usage_totals(report: dict[str, Any]) -> dict[str, float]:
    """A provider report's usage summed over its tasks."""
    tasks = report.get("tasks") or {}
    return {f: sum(t.get(f, 0) for t in tasks.values()) for f in USAGE_FIELDS}


def usage_sum(*usages: dict[str, float]) -> dict[str, float]:
    total = {f: sum(u.get(f, 0) for u in usages) for f in USAGE_FIELDS}
    total["cost_usd"] = round(total["cost_usd"], 6)
    return total


def cache_read_share(usage: dict[str, float]) -> float | None:
    """Of a usage's prompt tokens (uncached input, cache reads and writes), the share read from
    the prompt cache; None without prompt tokens."""
    prompt = usage.get("input_tokens", 0) + usage.get("cache_read_tokens", 0) + usage.get("cache_write_tokens", 0)
    return round(usage.get("cache_read_tokens", 0) / prompt, 4) if prompt else None


def usage_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    delta = {f: after[f] - before[f] for f in USAGE_FIELDS}
    delta["cost_usd"] = round(delta["cost_usd"], 6)
    return delta


# -- the runner ------------------------------------------------------------------------------------


@dataclass
class CallStats:
    made: int = 0
    cached: int = 0
    failed: int = 0  # items whose task failed (the stage stops at the first)

    def as_dict(self) -> dict[str, int]:
        return {"made": self.made, "cached": self.cached}


class _CacheWriter:
    """Stores completed items in small batches (a write per item would cost a commit each);
    whatever is pending is flushed when the run ends, failed or not."""

    def __init__(self, cache: ItemCache, namespace: str, batch: int = 64, every_s: float = 0.5):
        self.cache, self.namespace, self.batch, self.every_s = cache, namespace, batch, every_s
        self.pending: dict[str, Any] = {}
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def add(self, key: str, value: Any) -> None:
        with self.lock:
            self.pending[key] = value
            if len(self.pending) >= self.batch or time.monotonic() - self.last >= self.every_s:
                self._flush()

    def flush(self) -> None:
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        if self.pending:
            self.cache.put_json(self.namespace, self.pending)
            self.pending = {}
        self.last = time.monotonic()


@dataclass
class TaskRunner:
    """Runs provider tasks through the per-item cache, keyed by the item's content, the stage
    version and provider + model + prompt version, so an unchanged item is never recomputed.
    Each item is stored as it completes: an interrupted or failed run keeps every item finished
    before it, and only those (a result is stored after the provider validated it)."""

    provider: CompileProvider
    cache: ItemCache
    stage_version: str
    stats: CallStats = field(default_factory=CallStats)
    on_progress: Callable[[int, int], None] | None = None

    def keys(self, task: str, items: Sequence[BaseModel], indices: Sequence[int]) -> dict[int, str]:
        """The cache key of each item in ``indices``."""
        context = self.provider.batch_context(task, items)
        prefix = sha256_hex(task, self.stage_version, self.provider.name, self.provider.model,
                            self.provider.prompt_version(task), context)
        return {i: sha256_hex(prefix, items[i].model_dump_json()) for i in indices}

    def cached(self, task: str, items: Sequence[BaseModel], indices: Sequence[int] | None = None) -> dict[int, Any]:
        """The cached results (as JSON) of the items in ``indices`` that have one."""
        keys = self.keys(task, items, range(len(items)) if indices is None else indices)
        hits = self.cache.get_json(f"llm:{task}", list(keys.values()))
        return {i: hits[k] for i, k in keys.items() if k in hits}

    def run(self, task: str, items: Sequence[In], output: type[Out], targets: Sequence[int] | None = None) -> list[Out]:
        """Results for ``items`` (or only for the indices in ``targets``, the other items then
        serving as sibling context), each from the cache when its key is there."""
        if not items:
            return []
        wanted = list(range(len(items))) if targets is None else list(targets)
        keys = self.keys(task, items, wanted)
        namespace = f"llm:{task}"
        hits = self.cache.get_json(namespace, list(keys.values()))
        results: dict[int, Out] = {i: output.model_validate(hits[k]) for i, k in keys.items() if k in hits}
        missing = [i for i in wanted if i not in results]
        self.stats.cached += len(results)
        self._progress(len(results), len(wanted))
        if not missing:
            return [results[i] for i in wanted]
        writer = _CacheWriter(self.cache, namespace)
        lock = threading.Lock()

        def completed(i: int, result: Out) -> None:
            with lock:
                if i in results:
                    return
                results[i] = result
                self.stats.made += 1
                writer.add(keys[i], result.model_dump(mode="json"))
                done = len(results)
            self._progress(done, len(wanted))

        method = getattr(self.provider, _METHODS[task])
        try:
            computed = method(items, missing, on_result=completed)
            for i in missing:  # a provider may return results without reporting each one
                if i in computed:
                    completed(i, computed[i])
        except CompileTaskError:
            self.stats.failed += 1
            self._progress(len(results), len(wanted))
            raise
        finally:
            writer.flush()
        lost = [i for i in missing if i not in results]
        if lost:
            raise RuntimeError(f"{self.provider.name} returned no {task} for items {lost[:5]}")
        return [results[i] for i in wanted]

    def _progress(self, done: int, total: int) -> None:
        if self.on_progress:
            self.on_progress(done, total)


_METHODS = {"card": "cards", "summary": "summaries", "repartition": "repartitions", "entities": "entities"}
