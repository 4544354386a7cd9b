"""The flat index written beside a compiled tree (``OUT/search_index/``), so an agent can fall
back to search when the tree's evidence for a question is thin. Plain files: bm25s's sparse
matrix, vocabulary and parameters; ``vectors.npy``, the compile's document embeddings (float16,
one row per document in index order); and ``docs.json``: doc_id, title and home nav file in
index order, the tokenizer and the encoder that made the vectors. Nothing to run at serve time
but a sparse dot product, one encoded question and a dense one over a memory-mapped matrix.

    write_search_index(out, vectors, vector_ids, model)   # after documents.sqlite and manifest.json
    SearchIndex.load(out).search("refund fee", k=5)        # hybrid; [SearchHit(doc_id, title, path, score)]
    SearchIndex.load(out).search("refund fee", mode="bm25")

Modes: ``bm25`` (title + full text, bm25s with English stop words and the Snowball English
stemmer of PyStemmer), ``dense`` (cosine of the question, encoded with the bundled encoder, to
the documents' vectors) and ``hybrid`` (reciprocal rank fusion of the two full rankings,
k=60). This one index is also what the ``bm25`` / ``dense`` / ``hybrid``
baselines of ``c2s eval`` rank with, so the agent's search tool and the flat baselines agree.

A tree compiled before vectors shipped has no ``vectors.npy``: ``bm25`` works and the other
modes fall back to it (:meth:`SearchIndex.resolve` says so). One compiled before stemming
(``docs.json`` version 1) is queried unstemmed, as it was indexed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from .layout import DOCUMENT_STORE_FILE, MANIFEST_FILE, SEARCH_INDEX_DIR
from .navigation.scoring import SearchHit, embedder, rrf

__all__ = ["SearchHit", "SearchIndex", "write_search_index", "MODES", "DEFAULT_MODE"]

DOCS_FILE = "docs.json"
VECTORS_FILE = "vectors.npy"
INDEX_VERSION = 2  # 1: unstemmed BM25 only; 2: stemmed BM25 (+ vectors.npy when the compile embedded)
STEMMER = "english"  # PyStemmer's Snowball English
MODES = ("bm25", "dense", "hybrid")
DEFAULT_MODE = "hybrid"
DENSE_BLOCK_ROWS = 8192  # document vectors widened to float32 at a time (12 MB at 384 dimensions)
RRF_K = 60.0  # the standard constant (scoring.rrf's default): whole-corpus rankings, not short lists


@lru_cache(maxsize=4)
def _stemmer(language: str):
    import Stemmer

    return Stemmer.Stemmer(language)


def _tokenize(texts: list[str], stemmer: str | None = STEMMER, **opts):
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", stemmer=_stemmer(stemmer) if stemmer else None,
                          show_progress=False, **opts)


def _stable_ids(tokenized):
    """``tokenized`` with its vocabulary numbered in sorted order: bm25s numbers stems in the
    order of a ``set``, which depends on the process's hash seed, so the same documents indexed
    in two processes would give two different (equivalent) index files."""
    import bm25s

    order = sorted(tokenized.vocab)
    renumber = {tokenized.vocab[token]: i for i, token in enumerate(order)}
    return bm25s.tokenization.Tokenized(ids=[[renumber[i] for i in doc] for doc in tokenized.ids],
                                        vocab={token: i for i, token in enumerate(order)})


def _query_encoder(model: str):
    """What encodes a question for vectors made by ``model``: the process-wide embedder for the
    bundled encoder (loaded once, memoised), else that model loaded here."""
    from .encoder import BUNDLED_MODEL

    if model == BUNDLED_MODEL:
        return embedder()
    return _other_encoder(model)


@lru_cache(maxsize=2)
def _other_encoder(model: str):
    from .encoder import Encoder

    encoder = Encoder(model)
    return lambda texts: encoder.encode(list(texts))


class SearchIndex:
    """A loaded (or built) flat index; thread-safe for reading."""

    def __init__(self, retriever, docs: list[dict], *, stemmer: str | None = STEMMER,
                 vectors: np.ndarray | None = None, model: str | None = None):
        self.retriever = retriever
        self.docs = docs
        self.stemmer = stemmer
        self.vectors = vectors  # (documents, dim), unit rows, float16 on disk; None: bm25 only
        self.model = model
        self._rows: dict[str, int] | None = None  # doc id -> row, built on first use

    # -- building and storing ---------------------------------------------------------------

    @classmethod
    def build(cls, docs: list[dict], texts: list[str], *, vectors: np.ndarray | None = None,
              model: str | None = None, stemmer: str | None = STEMMER) -> SearchIndex:
        """An in-memory index of ``docs`` (dicts of doc_id, title, path) and their full
        ``texts``, each indexed as title + text; ``vectors`` row i belongs to ``docs[i]``
        (``stemmer=None``: the unstemmed scheme of version 1 indexes, for comparisons)."""
        import bm25s

        if vectors is not None and len(vectors) != len(docs):
            raise ValueError(f"{len(vectors)} vectors for {len(docs)} documents")
        retriever = None
        if docs:
            retriever = bm25s.BM25()
            retriever.index(_stable_ids(_tokenize([f"{d['title']}\n{t}" for d, t in zip(docs, texts)], stemmer)),
                            show_progress=False)
        return cls(retriever, docs, stemmer=stemmer, vectors=None if vectors is None else np.asarray(vectors, np.float16),
                   model=model if vectors is not None else None)

    def save(self, target: str | Path) -> None:
        target = Path(target)
        target.mkdir(parents=True, exist_ok=True)
        if self.retriever is not None:
            self.retriever.save(str(target), show_progress=False)
        meta: dict = {"version": INDEX_VERSION, "stemmer": self.stemmer, "stopwords": "en", "docs": self.docs}
        if self.vectors is not None:
            np.save(target / VECTORS_FILE, np.asarray(self.vectors, dtype=np.float16))
            meta["vectors"] = {"file": VECTORS_FILE, "model": self.model, "dim": int(self.vectors.shape[1]),
                               "dtype": "float16"}
        (target / DOCS_FILE).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, root: str | Path) -> SearchIndex:
        """Raises FileNotFoundError when the tree has no index (compiled before it existed)."""
        import bm25s

        target = Path(root) / SEARCH_INDEX_DIR
        meta = json.loads((target / DOCS_FILE).read_text(encoding="utf-8"))
        docs = meta["docs"]
        retriever = bm25s.BM25.load(str(target), mmap=True, show_progress=False) if docs else None
        vectors, model = None, None
        info = meta.get("vectors")
        if info and (target / info["file"]).is_file():
            vectors = np.load(target / info["file"], mmap_mode="r")  # paged in as questions touch it
            if vectors.shape[0] != len(docs):
                raise ValueError(f"{target / info['file']} has {vectors.shape[0]} rows for {len(docs)} documents")
            model = info.get("model")
        # Version 1 indexes were built unstemmed; their questions must be tokenized the same way.
        return cls(retriever, docs, stemmer=meta.get("stemmer"), vectors=vectors, model=model)

    # -- querying ---------------------------------------------------------------------------

    @property
    def has_vectors(self) -> bool:
        return self.vectors is not None and self.model is not None

    def resolve(self, mode: str) -> tuple[str, str | None]:
        """The mode a search in ``mode`` runs in, and a note when it is not ``mode`` (a tree
        without document vectors ranks dense and hybrid questions by bm25)."""
        if mode not in MODES:
            raise ValueError(f"unknown search mode {mode!r}: one of {', '.join(MODES)}")
        if mode != "bm25" and not self.has_vectors:
            return "bm25", (f"note: {mode} search needs document vectors, which this tree's search index lacks "
                            f"(compiled before they shipped); ranked by bm25 instead")
        return mode, None

    def vectors_of(self, doc_ids: Sequence[str]) -> np.ndarray | None:
        """These documents' shipped vectors (float32 rows, in order): the compile's embeddings,
        as dense search scores them; None without vectors or when one is not indexed."""
        if not self.has_vectors:
            return None
        if self._rows is None:
            self._rows = {d["doc_id"]: i for i, d in enumerate(self.docs)}
        rows = [self._rows.get(d) for d in doc_ids]
        if None in rows:
            return None
        return np.asarray(self.vectors[rows], dtype=np.float32)  # a list of rows: always (len, dim)

    def bm25_scores(self, query: str) -> np.ndarray:
        if self.retriever is None:
            return np.zeros(0)
        words = _tokenize([query], self.stemmer, return_ids=False)[0]
        known = [w for w in words if w in self.retriever.vocab_dict]
        if not known:
            return np.zeros(len(self.docs))
        return np.asarray(self.retriever.get_scores(known), dtype=float)

    def dense_scores(self, query: str) -> np.ndarray:
        """Cosine of the question to every document (the vectors are unit rows)."""
        if not self.has_vectors:
            raise ValueError("this search index has no document vectors")
        question = np.asarray(_query_encoder(self.model)([query])[0], dtype=np.float32)
        # In blocks: the float16 rows (memory-mapped) are widened a block at a time, not all at
        # once per question (at 50,000 documents that would be a 77 MB copy each time).
        scores = np.empty(len(self.vectors), dtype=np.float32)
        for start in range(0, len(scores), DENSE_BLOCK_ROWS):
            block = self.vectors[start:start + DENSE_BLOCK_ROWS]
            scores[start:start + len(block)] = np.asarray(block, dtype=np.float32) @ question
        return scores

    def scores(self, query: str, mode: str = "bm25") -> np.ndarray:
        """Every document's score in ``mode`` (after :meth:`resolve`'s fallback), index order."""
        mode, _ = self.resolve(mode)
        if mode == "bm25" or not self.docs:
            return self.bm25_scores(query)
        if mode == "dense":
            return self.dense_scores(query)
        return hybrid_scores(self.bm25_scores(query), self.dense_scores(query))

    def search(self, query: str, k: int = 10, mode: str = DEFAULT_MODE) -> list[SearchHit]:
        """The ``k`` best documents, best first (ties by doc_id order); in bm25, only those with
        a positive score (a question none of whose words occur finds nothing)."""
        used, _ = self.resolve(mode)
        scores = self.scores(query, used)
        order = np.argsort(-scores, kind="stable")[: max(0, int(k))]
        return [SearchHit(self.docs[i]["doc_id"], self.docs[i]["title"], self.docs[i]["path"], float(scores[i]))
                for i in order if used != "bm25" or scores[i] > 0]


def hybrid_scores(bm25: np.ndarray, dense: np.ndarray) -> np.ndarray:
    """The hybrid mode's scores: the two full rankings fused by reciprocal rank (:data:`RRF_K`),
    documents in the same order in both."""
    return rrf(bm25, dense, k=RRF_K)


def write_search_index(root: str | Path, vectors: np.ndarray | None = None, vector_ids: list[str] | None = None,
                       model: str | None = None) -> dict:
    """Index every document of the tree at ``root`` (its document store and manifest) into
    ``root/search_index/``; ``vectors`` (row i the embedding of ``vector_ids[i]``, by encoder
    ``model``: the compile's document embeddings, not recomputed) ship as ``vectors.npy`` in
    index order. Returns a small summary for the manifest or logs."""
    root = Path(root)
    manifest = json.loads((root / MANIFEST_FILE).read_text(encoding="utf-8"))
    paths = manifest.get("doc_paths") or {}
    with sqlite3.connect(f"file:{root / DOCUMENT_STORE_FILE}?mode=ro", uri=True) as con:
        rows = con.execute("SELECT doc_id, title, text FROM documents ORDER BY doc_id").fetchall()
    docs = [{"doc_id": d, "title": " ".join((t or "").split()), "path": paths.get(d, "")} for d, t, _ in rows]
    ordered = None
    if vectors is not None:
        if vector_ids is None or model is None:
            raise ValueError("document vectors need their doc_ids and the encoder that made them")
        position = {d: i for i, d in enumerate(vector_ids)}
        missing = [d["doc_id"] for d in docs if d["doc_id"] not in position]
        if missing or len(vector_ids) != len(vectors):
            raise ValueError(f"the document vectors do not match the document store ({len(missing)} missing)")
        ordered = np.asarray(vectors)[[position[d["doc_id"]] for d in docs]] if docs else np.zeros((0, 0))
    index = SearchIndex.build(docs, [x for _, _, x in rows], vectors=ordered, model=model)
    target = root / SEARCH_INDEX_DIR
    index.save(target)
    return {"documents": len(docs), "vectors": index.has_vectors,
            "bytes": sum(f.stat().st_size for f in target.rglob("*") if f.is_file())}
