"""The compile provider interface and the runner that caches and counts every task call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence, TypeVar

from pydantic import BaseModel

from ..cache import ItemCache
from ..text import sha256_hex
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


class CompileProvider(Protocol):
    """Does the compile's LLM tasks. Each task takes the whole batch of sibling items (some
    providers need the siblings as context) and computes only the indices in ``only``."""

    name: str
    model: str

    def prompt_version(self, task: str) -> str: ...

    def batch_context(self, task: str, items: Sequence[BaseModel]) -> str:
        """Extra cache-key material when an item's result depends on its siblings."""
        ...

    def cards(self, items: Sequence[CardInput], only: Sequence[int]) -> dict[int, Card]: ...

    def summaries(self, items: Sequence[ClusterInput], only: Sequence[int]) -> dict[int, ClusterSummary]: ...

    def repartitions(self, items: Sequence[RepartitionInput], only: Sequence[int]) -> dict[int, RepartitionVerdict]: ...

    def entities(self, items: Sequence[EntitiesInput], only: Sequence[int]) -> dict[int, Entities]: ...


@dataclass
class CallStats:
    made: int = 0
    cached: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"made": self.made, "cached": self.cached}


@dataclass
class TaskRunner:
    """Runs provider tasks through the per-item cache, keyed by the item's content, the stage
    version and provider + model + prompt version, so an unchanged item is never recomputed."""

    provider: CompileProvider
    cache: ItemCache
    stage_version: str
    stats: CallStats = field(default_factory=CallStats)
    on_progress: Callable[[int, int], None] | None = None

    def run(self, task: str, items: Sequence[In], output: type[Out], targets: Sequence[int] | None = None) -> list[Out]:
        """Results for ``items`` (or only for the indices in ``targets``, the other items then
        serving as sibling context), each from the cache when its key is there."""
        if not items:
            return []
        wanted = list(range(len(items))) if targets is None else list(targets)
        context = self.provider.batch_context(task, items)
        prefix = sha256_hex(task, self.stage_version, self.provider.name, self.provider.model,
                            self.provider.prompt_version(task), context)
        keys = {i: sha256_hex(prefix, items[i].model_dump_json()) for i in wanted}
        namespace = f"llm:{task}"
        hits = self.cache.get_json(namespace, list(keys.values()))
        results: dict[int, Out] = {i: output.model_validate(hits[k]) for i, k in keys.items() if k in hits}
        missing = [i for i in wanted if i not in results]
        self.stats.cached += len(results)
        if self.on_progress:
            self.on_progress(len(results), len(wanted))
        method = getattr(self.provider, _METHODS[task])
        # Work in slices so progress moves and a failure keeps what was done (the cache is per item).
        for start in range(0, len(missing), 64):
            chunk = missing[start : start + 64]
            computed = method(items, chunk)
            lost = [i for i in chunk if i not in computed]
            if lost:
                raise RuntimeError(f"{self.provider.name} returned no {task} for items {lost[:5]}")
            self.cache.put_json(namespace, {keys[i]: computed[i].model_dump(mode="json") for i in chunk})
            results.update(computed)
            self.stats.made += len(chunk)
            if self.on_progress:
                self.on_progress(len(results), len(wanted))
        return [results[i] for i in wanted]


_METHODS = {"card": "cards", "summary": "summaries", "repartition": "repartitions", "entities": "entities"}
