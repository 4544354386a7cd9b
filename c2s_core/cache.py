"""Per-item cache shared by every corpus: LLM task results and embeddings keyed by content.

Keys are built by the callers from (content hash, stage version, provider + model + prompt
version), so an unchanged item is never recomputed, whichever corpus it belongs to.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable

import numpy as np


class ItemCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._con = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute(
            "CREATE TABLE IF NOT EXISTS items (namespace TEXT, key TEXT, value BLOB, "
            "PRIMARY KEY (namespace, key)) WITHOUT ROWID"
        )
        self._con.commit()

    def close(self) -> None:
        self._con.close()

    def _get_many(self, namespace: str, keys: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._con.execute(
                    f"SELECT key, value FROM items WHERE namespace = ? AND key IN ({marks})",
                    [namespace, *chunk],
                )
                found.update(rows)
        return found

    def _put_many(self, namespace: str, items: Iterable[tuple[str, bytes]]) -> None:
        with self._lock:
            self._con.executemany(
                "INSERT OR REPLACE INTO items VALUES (?, ?, ?)",
                [(namespace, k, v) for k, v in items],
            )
            self._con.commit()

    def get_json(self, namespace: str, keys: list[str]) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._get_many(namespace, keys).items()}

    def put_json(self, namespace: str, items: dict[str, Any]) -> None:
        self._put_many(namespace, ((k, json.dumps(v, sort_keys=True).encode()) for k, v in items.items()))

    def get_vectors(self, namespace: str, keys: list[str]) -> dict[str, np.ndarray]:
        return {k: np.frombuffer(v, dtype=np.float32) for k, v in self._get_many(namespace, keys).items()}

    def put_vectors(self, namespace: str, items: dict[str, np.ndarray]) -> None:
        self._put_many(namespace, ((k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()))
