"""Stage progress, reported by the assets and shown by whoever runs them.

Under ``dagster dev`` nobody listens and the reports cost nothing; ``c2s compile`` runs the
assets in-process and installs a listener that drives its progress bars.

A listener's ``update(stage, done, total)`` may also take ``llm``: the LLM stages then pass
their live counts (calls made / from cache / failed, dollars so far). Listeners written for
the three-argument form keep working: they are simply not given it.
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
