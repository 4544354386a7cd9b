"""The document store: full texts by doc_id in one SQLite file, read without loading the corpus."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

SCHEMA = """
CREATE TABLE documents (
    doc_id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    source TEXT NOT NULL
) WITHOUT ROWID
"""


@dataclass(frozen=True)
class StoredDocument:
    doc_id: str
    title: str
    text: str
    content_hash: str
    source: str


def write_document_store(path: Path, documents: Iterable[StoredDocument]) -> int:
    """Write a fresh store at ``path`` (replacing any file there); returns the row count."""
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.execute(SCHEMA)
        rows = [(d.doc_id, d.title, d.text, d.content_hash, d.source) for d in documents]
        con.executemany("INSERT INTO documents VALUES (?, ?, ?, ?, ?)", rows)
        con.commit()
        return len(rows)
    finally:
        con.close()


class DocumentStore:
    """Read-only access by exact doc_id; one connection per thread, so concurrent queries are safe."""

    def __init__(self, path: Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"document store not found: {self.path}")
        self._local = threading.local()

    def _connection(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            self._local.con = con
        return con

    def get(self, doc_id: str) -> StoredDocument | None:
        row = self._connection().execute(
            "SELECT doc_id, title, text, content_hash, source FROM documents WHERE doc_id = ?",
            (doc_id,),
        ).fetchone()
        return StoredDocument(*row) if row else None

    def __contains__(self, doc_id: str) -> bool:
        return self.get(doc_id) is not None

    def __len__(self) -> int:
        return self._connection().execute("SELECT COUNT(*) FROM documents").fetchone()[0]

    def ids(self) -> list[str]:
        return [r[0] for r in self._connection().execute("SELECT doc_id FROM documents ORDER BY doc_id")]
