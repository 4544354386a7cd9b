"""Many questions navigated at once, their embeddings encoded together.

One question's navigation embeds a few dozen short texts in several small calls (the rows of a
level, the cards of the leaves it reached). Encoded call by call, the encoder runs many tiny
batches: its batches hold texts of one token length, and a call of 30 texts spans about as many
lengths. :func:`gathered_map` runs the questions on worker threads whose ``embed`` calls wait for
one another: once every running worker is waiting, the thread that started them encodes the texts
all of them asked for in a single call, and each goes on with its own. The encoder gives a text the same
vector whatever it is encoded with (:meth:`c2s_core.encoder.Encoder.encode`), so the results are
those of navigating the questions one after another, in any thread schedule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from .engine import Embed

Item = TypeVar("Item")
Result = TypeVar("Result")

# Questions in flight. 88 probe questions at 52,971 documents: 84 s one by one (69 s encoding),
# 66 s with 16 in flight, 62 s with 64 (43 s encoding). Threads cost the navigations' own Python
# work a little (15 s -> 19 s there; 1.5 s -> 3 s for the sample corpus's 499 questions).
WORKERS = 64


class GatheredEmbed:
    """An ``embed`` shared by ``workers`` threads. A call whose texts are all known returns at
    once; otherwise it waits until every running worker waits too (or has finished), and
    :meth:`serve`, in the thread that started the workers, encodes every waiting call's missing
    texts in one call of ``embed``. Vectors are kept by text for the object's life (``known``
    seeds them).

    The encoding stays in that one thread: the model loads and runs where the work was started
    (in a compile, the main thread, where Ctrl-C is held while torch loads), and torch keeps one
    CPU thread pool, not one per worker that happened to encode a round."""

    def __init__(self, embed: Embed, workers: int, known: dict[str, np.ndarray] | None = None):
        self._embed = embed
        self._vectors: dict[str, np.ndarray] = dict(known or {})
        self._ready = threading.Condition()
        self._running = workers
        self._waiting = 0
        self._wanted: dict[str, None] = {}  # missing texts of the waiting calls, in arrival order
        self._round = 0
        self._failures: dict[int, BaseException] = {}  # round -> why its encoding failed
        self._stopped: BaseException | None = None  # why serving ended early

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        with self._ready:
            missing = [t for t in texts if t not in self._vectors]
            if missing:
                self._wanted.update(dict.fromkeys(missing))
                self._waiting += 1
                mine = self._round
                self._ready.notify_all()
                self._ready.wait_for(lambda: self._round != mine or self._stopped is not None)
                if any(t not in self._vectors for t in missing):
                    raise RuntimeError("embedding the navigations' texts failed") from (
                        self._failures.get(mine) or self._stopped)
            return np.stack([self._vectors[t] for t in texts]) if len(texts) else np.zeros((0, 0), np.float32)

    @property
    def stopped(self) -> BaseException | None:
        """Why serving ended early, if it did."""
        return self._stopped

    def finished(self) -> None:
        """A worker is done: the others no longer wait for it."""
        with self._ready:
            self._running -= 1
            self._ready.notify_all()

    def close(self) -> None:
        """No more rounds: a call waiting or still to come raises (a no-op once every worker has
        finished)."""
        with self._ready:
            if self._stopped is None:
                self._stopped = RuntimeError("the navigations were stopped")
            self._ready.notify_all()

    def serve(self) -> None:
        """Encode rounds until every worker has finished. A round that fails raises in each call
        waiting on it; an interruption here (Ctrl-C, SIGTERM) ends the serving, and every call
        waiting or still to come raises."""
        with self._ready:
            try:
                while True:
                    self._ready.wait_for(lambda: self._running <= 0 or self._waiting >= self._running)
                    if not self._waiting:
                        return
                    wanted, self._wanted = list(self._wanted), {}
                    try:
                        # The lock stays held: every running worker is waiting on this round.
                        self._vectors.update(zip(wanted, self._embed(wanted)))
                    except Exception as exc:
                        self._failures[self._round] = exc
                    finally:
                        self._waiting = 0
                        self._round += 1
                        self._ready.notify_all()
            except BaseException as exc:
                self._stopped = exc
                self._ready.notify_all()
                raise


def gathered_map(work: Callable[[Item, Embed], Result], items: Sequence[Item], embed: Embed, *,
                 known: dict[str, np.ndarray] | None = None, workers: int = WORKERS,
                 on_done: Callable[[int, int], None] | None = None) -> list[Result]:
    """``[work(item, embed) for item in items]``, the items run on ``workers`` threads that share
    one :class:`GatheredEmbed` over ``embed``, encoded in this thread. ``on_done(done, total)``
    is called as items finish (one call at a time). The first exception raised by ``work`` is
    raised once every thread has stopped."""
    results: list[Result | None] = [None] * len(items)
    threads = min(workers, len(items))
    shared = GatheredEmbed(embed, threads, known)
    taken = iter(range(len(items)))
    lock = threading.Lock()
    done = 0
    errors: list[BaseException] = []

    def worker() -> None:
        nonlocal done
        try:
            while not errors and shared.stopped is None:
                with lock:
                    i = next(taken, None)
                if i is None:
                    return
                results[i] = work(items[i], shared)
                with lock:
                    done += 1
                    if on_done is not None:
                        on_done(done, len(items))
        except BaseException as exc:
            errors.append(exc)
        finally:
            shared.finished()

    running = [threading.Thread(target=worker, name=f"navigate-{n}", daemon=True) for n in range(threads)]
    try:
        for thread in running:
            thread.start()
        shared.serve()
    finally:
        shared.close()  # after an interruption, a navigation still running stops at its next call
        for thread in running:
            if thread.ident is not None:  # started
                thread.join()
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]
