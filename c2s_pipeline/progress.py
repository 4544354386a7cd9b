"""Stage progress, reported by the assets and shown by whoever runs them.

Under ``dagster dev`` nobody listens and the reports cost nothing; ``c2s compile`` runs the
assets in-process and installs a listener that drives its progress bars.

A listener's ``update(stage, done, total)`` may also take ``llm``: the LLM stages then pass
their live counts (calls made / from cache / failed, dollars so far). Listeners written for
the three-argument form keep working: they are simply not given it.

A sharded stage (``doc_cards``, ``doc_embeddings``) runs as one step per shard; each shard's
reports are summed into the stage's, counting up to the corpus's documents, so a listener sees
one stage whichever steps do the work.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Protocol


@dataclass(frozen=True)
class LLMProgress:
    made: int = 0  # items computed by the provider in this stage
    cached: int = 0  # items taken from the per-item cache
    failed: int = 0  # items whose task failed (the stage stops)
    cost_usd: float = 0.0  # spent by this stage so far


class ProgressListener(Protocol):
    def update(self, stage: str, done: int, total: int, llm: LLMProgress | None = None) -> None: ...


_listener: ProgressListener | None = None
_takes_llm = False


def set_listener(listener: ProgressListener | None) -> None:
    global _listener, _takes_llm
    _listener = listener
    _takes_llm = listener is not None and _accepts_llm(listener.update)


def _accepts_llm(update: Callable) -> bool:
    try:
        params = inspect.signature(update).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "llm" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


# stage -> shard index -> (documents done, its LLM counts): the shards run in this process so far.
_shards: dict[str, dict[int, tuple[int, LLMProgress | None]]] = {}


def start_shards(stage: str, documents: int) -> None:
    """A sharded stage begins: forget its shards of an earlier run."""
    _shards[stage] = {}
    reporter(stage)(0, documents)


def shard_reporter(stage: str, shard: int, documents: int) -> Callable[..., None]:
    """Progress of one shard of ``stage``, reported as the stage's: what its shards have done,
    of all ``documents`` (a shard's own total is ignored; a retried shard counts once)."""
    def report(done: int, total: int, llm: LLMProgress | None = None) -> None:
        shards = _shards.setdefault(stage, {})
        shards[shard] = (done, llm)
        counts = [c for _, c in shards.values() if c is not None]
        summed = LLMProgress(*(sum(getattr(c, f) for c in counts) for f in ("made", "cached", "failed", "cost_usd"))
                             ) if counts else None
        reporter(stage)(sum(d for d, _ in shards.values()), documents, summed)

    return report


def stage_started(stage: str) -> None:
    """A stage's step begins. Told to a listener with a ``started(stage)`` method (one that follows
    which stage runs, as a benchmark attributing time and memory does), before the stage's first
    count; progress bars need not have it."""
    listener = _listener
    if listener is not None and hasattr(listener, "started"):
        listener.started(stage)


def reporter(stage: str) -> Callable[..., None]:
    def report(done: int, total: int, llm: LLMProgress | None = None) -> None:
        listener = _listener
        if listener is None:
            return
        if llm is not None and _takes_llm:
            listener.update(stage, done, total, llm=llm)
        else:
            listener.update(stage, done, total)

    return report
