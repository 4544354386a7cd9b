"""Stage progress, reported by the assets and shown by whoever runs them.

Under ``dagster dev`` nobody listens and the reports cost nothing; ``c2s compile`` runs the
assets in-process and installs a listener that drives its progress bars.
"""

from __future__ import annotations

from typing import Callable, Protocol


class ProgressListener(Protocol):
    def update(self, stage: str, done: int, total: int) -> None: ...


_listener: ProgressListener | None = None


def set_listener(listener: ProgressListener | None) -> None:
    global _listener
    _listener = listener


def reporter(stage: str) -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        if _listener is not None:
            _listener.update(stage, done, total)

    return report
