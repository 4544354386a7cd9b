"""Per-item cache shared by every corpus: LLM task results and embeddings keyed by content.

Keys are built by the callers from (content hash, stage version, provider + model + prompt
version), so an unchanged item is never recomputed, whichever corpus it belongs to.

The cache only saves work, so a corrupted database file never stops a compile: it is set aside
(renamed ``<name>.corrupt-<time>``, with a warning naming both files) and an empty one replaces it.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

import numpy as np

log = logging.getLogger(__name__)
T = TypeVar("T")


def _corrupt(exc: sqlite3.DatabaseError) -> bool:
    """A damaged file ("file is not a database", "database disk image is malformed"), not a
    busy or locked one (OperationalError), which waiting or a rerun fixes."""
    return not isinstance(exc, sqlite3.OperationalError)


class ItemCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.set_aside: Path | None = None  # where a corrupted file went, if one was found
        self._con = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            if not _corrupt(exc) or str(self.path) == ":memory:":
                raise
            self._set_aside(exc)
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute(
                "CREATE TABLE IF NOT EXISTS items (namespace TEXT, key TEXT, value BLOB, "
                "PRIMARY KEY (namespace, key)) WITHOUT ROWID"
            )
            con.commit()
        except BaseException:
            con.close()
            raise
        return con

    def _set_aside(self, exc: sqlite3.DatabaseError) -> None:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        for suffix in ("", "-wal", "-shm"):  # the WAL and its index belong to the damaged file
            part = Path(f"{self.path}{suffix}")
            if part.exists():
                os.replace(part, f"{aside}{suffix}")
        self.set_aside = aside
        log.warning("the item cache %s is corrupted (%s); it was moved to %s and an empty cache replaces it "
                    "(cached LLM results and embeddings are recomputed)", self.path, exc, aside)

    def _guarded(self, work: Callable[[], T], fallback: Callable[[], T]) -> T:
        """``work`` on the database; on a corrupted file, set it aside, start an empty one and
        return ``fallback()`` (a miss for reads, a retry for writes). Call with the lock held."""
        try:
            return work()
        except sqlite3.DatabaseError as exc:
            if not _corrupt(exc) or str(self.path) == ":memory:":
                raise
            self._con.close()
            self._set_aside(exc)
            self._con = self._connect()
            return fallback()

    def close(self) -> None:
        self._con.close()

    def _get_many(self, namespace: str, keys: list[str]) -> dict[str, bytes]:
        def read() -> dict[str, bytes]:
            found: dict[str, bytes] = {}
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._con.execute(
                    f"SELECT key, value FROM items WHERE namespace = ? AND key IN ({marks})",
                    [namespace, *chunk],
                )
                found.update(rows)
            return found

        with self._lock:
            return self._guarded(read, dict)

    def _put_many(self, namespace: str, items: Iterable[tuple[str, bytes]]) -> None:
        rows = [(namespace, k, v) for k, v in items]

        def write() -> None:
            self._con.executemany("INSERT OR REPLACE INTO items VALUES (?, ?, ?)", rows)
            self._con.commit()

        with self._lock:
            self._guarded(write, write)

    def get_json(self, namespace: str, keys: list[str]) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._get_many(namespace, keys).items()}

    def put_json(self, namespace: str, items: dict[str, Any]) -> None:
        self._put_many(namespace, ((k, json.dumps(v, sort_keys=True).encode()) for k, v in items.items()))

    def get_vectors(self, namespace: str, keys: list[str]) -> dict[str, np.ndarray]:
        return {k: np.frombuffer(v, dtype=np.float32) for k, v in self._get_many(namespace, keys).items()}

    def put_vectors(self, namespace: str, items: dict[str, np.ndarray]) -> None:
        self._put_many(namespace, ((k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()))
