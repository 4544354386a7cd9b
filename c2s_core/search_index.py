"""The flat BM25 index written beside a compiled tree (``OUT/search_index/``), so an agent can
fall back to keyword search when the tree's evidence for a question is thin. Plain files
(bm25s's sparse matrix, vocabulary and parameters, plus ``docs.json``: doc_id, title and home
nav file in index order); nothing to run at serve time but a sparse dot product.

    write_search_index(out)                      # after documents.sqlite and manifest.json
    SearchIndex.load(out).search("refund fee", k=5)   # [SearchHit(doc_id, title, path, score)]

Documents are indexed as title + full text with bm25s's English stop words and no stemming,
the same scheme as the ``bm25`` baseline of ``c2s eval``, so the agent's search tool and the
flat baseline rank alike.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .layout import DOCUMENT_STORE_FILE, MANIFEST_FILE, SEARCH_INDEX_DIR

DOCS_FILE = "docs.json"
INDEX_VERSION = 1


@dataclass(frozen=True)
class SearchHit:
    doc_id: str
    title: str
    path: str  # the leaf nav file that lists the document ("" when unknown)
    score: float


def _tokenize(texts: list[str], **opts):
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", show_progress=False, **opts)


def write_search_index(root: str | Path) -> dict:
    """Index every document of the tree at ``root`` (its document store and manifest) into
    ``root/search_index/``; returns a small summary for the manifest or logs."""
    import bm25s

    root = Path(root)
    manifest = json.loads((root / MANIFEST_FILE).read_text(encoding="utf-8"))
    paths = manifest.get("doc_paths") or {}
    with sqlite3.connect(f"file:{root / DOCUMENT_STORE_FILE}?mode=ro", uri=True) as con:
        rows = con.execute("SELECT doc_id, title, text FROM documents ORDER BY doc_id").fetchall()
    target = root / SEARCH_INDEX_DIR
    target.mkdir(parents=True, exist_ok=True)
    docs = [{"doc_id": d, "title": " ".join((t or "").split()), "path": paths.get(d, "")} for d, t, _ in rows]
    if rows:
        retriever = bm25s.BM25()
        retriever.index(_tokenize([f"{t}\n{x}" for _, t, x in rows]), show_progress=False)
        retriever.save(str(target), show_progress=False)
    (target / DOCS_FILE).write_text(json.dumps({"version": INDEX_VERSION, "docs": docs}, ensure_ascii=False),
                                    encoding="utf-8")
    return {"documents": len(docs), "bytes": sum(f.stat().st_size for f in target.rglob("*") if f.is_file())}


class SearchIndex:
    """A loaded ``search_index/``; thread-safe for reading."""

    def __init__(self, retriever, docs: list[dict]):
        self.retriever = retriever
        self.docs = docs

    @classmethod
    def load(cls, root: str | Path) -> SearchIndex:
        """Raises FileNotFoundError when the tree has no index (compiled before it existed)."""
        import bm25s

        target = Path(root) / SEARCH_INDEX_DIR
        meta = json.loads((target / DOCS_FILE).read_text(encoding="utf-8"))
        docs = meta["docs"]
        retriever = bm25s.BM25.load(str(target), mmap=True, show_progress=False) if docs else None
        return cls(retriever, docs)

    def scores(self, query: str) -> np.ndarray:
        if self.retriever is None:
            return np.zeros(0)
        words = _tokenize([query], return_ids=False)[0]
        known = [w for w in words if w in self.retriever.vocab_dict]
        if not known:
            return np.zeros(len(self.docs))
        return np.asarray(self.retriever.get_scores(known), dtype=float)

    def search(self, query: str, k: int = 10) -> list[SearchHit]:
        """The ``k`` best documents with a positive score, best first (ties by doc_id order)."""
        scores = self.scores(query)
        order = np.argsort(-scores, kind="stable")[: max(0, int(k))]
        return [SearchHit(self.docs[i]["doc_id"], self.docs[i]["title"], self.docs[i]["path"], float(scores[i]))
                for i in order if scores[i] > 0]
