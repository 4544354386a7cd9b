"""Flat retrieval baselines over the tree's document store, ranked by the tree's own search
index (``c2s_core.search_index``: one implementation for these baselines and the agent's
``search`` tool):

- ``bm25``: bm25s over every document's full text (title + text), English stop words and the
  Snowball English stemmer;
- ``dense``: exact cosine of the question (the compiler's encoder) to the document vectors the
  compile shipped in ``search_index/``; a tree without them gets title + text vectors from
  :class:`DenseIndex`, cached on disk (keyed by content hash);
- ``hybrid``: reciprocal rank fusion (k=60) of the two full rankings.

Each puts its top :data:`CONTEXT_DOCS` documents in context and answers from them through an
:class:`~c2s_agent.evaluation.answering.Answerer`, the same way as every other method (offline:
the navigator's extractive composer over the best three). The indexes are shared:
the ``agentic`` method searches these very indexes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from c2s_core.navigation.scoring import embedder
from c2s_core.search_index import STEMMER, SearchIndex
from c2s_core.tree import Tree

from ..tools import PAGE_CHARS, Page
from .answering import Answerer

CONTEXT_DOCS = 5  # documents a baseline puts in context
RANK_DEPTH = 10  # ranked list kept for recall@10 / MRR@10

BASELINES = ("bm25", "dense", "hybrid")


@dataclass
class Corpus:
    """Every document of a tree, in a fixed order (doc_id order)."""

    ids: list[str]
    titles: list[str]
    texts: list[str]
    hashes: list[str]

    @classmethod
    def load(cls, tree: Tree) -> Corpus:
        rows = tree.store._connection().execute(
            "SELECT doc_id, title, text, content_hash FROM documents ORDER BY doc_id").fetchall()
        if not rows:
            raise ValueError(f"the document store of {tree.root} is empty")
        ids, titles, texts, hashes = (list(c) for c in zip(*rows))
        return cls(ids, titles, texts, hashes)

    @cached_property
    def positions(self) -> dict[str, int]:
        """doc_id -> its index in this corpus."""
        return {d: i for i, d in enumerate(self.ids)}

    def page(self, i: int) -> Page:
        """What get_document's first page gives the navigator."""
        text = self.texts[i]
        end = min(PAGE_CHARS, len(text))
        return Page(self.ids[i], " ".join(self.titles[i].split()), text[:end], 0, len(text),
                    end if end < len(text) else None)

    def full_text(self, i: int) -> str:
        return f"{self.titles[i]}\n{self.texts[i]}"


@dataclass
class Retrieved:
    """One question answered by a retrieval method."""

    answer: str
    ranked: list[str]  # best first, RANK_DEPTH long
    context: list[str]  # the documents put in context
    seconds: float
    usage: dict = field(default_factory=dict)  # LLM tokens, llm_calls, cost_usd
    turns: int = 0  # rounds of tool calls (agentic methods)
    tool_calls: int = 0
    trace: list[dict] = field(default_factory=list)  # the tool calls made, in order
    flags: list[str] = field(default_factory=list)  # refusal / truncation of an LLM answer


class DenseIndex:
    """Unit vectors of every document (title + text), for a tree whose search index has no
    document vectors (compiled before they shipped); cached on disk by content hash."""

    def __init__(self, corpus: Corpus, cache_dir: Path | None = None):
        encoder = embedder().encoder
        texts = [corpus.full_text(i) for i in range(len(corpus.ids))]
        self.model = encoder.model_id
        self.cache_hits = 0
        cache = (cache_dir / "dense-embeddings.npz") if cache_dir else None
        known: dict[str, np.ndarray] = {}
        if cache and cache.is_file():
            try:
                with np.load(cache, allow_pickle=False) as data:
                    if str(data["model"]) == encoder.model_id:
                        known = dict(zip(data["keys"].tolist(), data["vectors"]))
            except (OSError, KeyError, ValueError):
                known = {}  # an unreadable cache is rebuilt
        keys = [f"{h}:{hash_title(t)}" for h, t in zip(corpus.hashes, corpus.titles)]
        missing = [i for i, k in enumerate(keys) if k not in known]
        self.cache_hits = len(keys) - len(missing)
        if missing:
            vectors = encoder.encode([texts[i] for i in missing])
            known.update({keys[i]: v for i, v in zip(missing, vectors)})
            if cache:
                cache.parent.mkdir(parents=True, exist_ok=True)
                tmp = cache.with_suffix(".tmp.npz")
                np.savez(tmp, model=np.array(encoder.model_id), keys=np.array(list(known)),
                         vectors=np.stack(list(known.values())).astype(np.float32))
                tmp.replace(cache)
        self.matrix = np.stack([known[k] for k in keys]).astype(np.float32)


def hash_title(title: str) -> str:
    import hashlib

    return hashlib.sha256(title.encode("utf-8")).hexdigest()[:16]


class Baselines:
    """The flat baselines over one tree; indexes build on first use.

    They rank with the tree's own search index (:class:`~c2s_core.search_index.SearchIndex`,
    what the agent's ``search`` tool ranks with): bm25 on it, dense on the document vectors it
    ships, hybrid their fusion. A tree compiled before the current index (unstemmed, or no
    index at all) gets the current BM25 built in memory, and one without document vectors gets
    title + text vectors from :class:`DenseIndex`, so every tree is measured against the same
    standard baselines."""

    def __init__(self, tree: Tree, cache_dir: Path | None = None):
        self.tree = tree
        self.cache_dir = cache_dir
        self.corpus = Corpus.load(tree)
        self._index: SearchIndex | None = None
        self._dense: DenseIndex | None = None  # only for a tree without document vectors
        self._dense_ready = False
        self.build_seconds: dict[str, float] = {}

    @property
    def bm25_index(self) -> SearchIndex:
        if self._index is None:
            start = time.perf_counter()
            self._index = self._load_or_build()
            self.build_seconds["bm25"] = round(time.perf_counter() - start, 3)
        return self._index

    def _load_or_build(self) -> SearchIndex:
        try:
            index = SearchIndex.load(self.tree.root)
        except (OSError, ValueError, KeyError):
            index = None
        if index is not None and [d["doc_id"] for d in index.docs] != self.corpus.ids:
            index = None  # not this store's documents: nothing of it can be used
        if index is not None and index.stemmer == STEMMER:
            return index
        docs = [{"doc_id": d, "title": " ".join(t.split()), "path": ""}
                for d, t in zip(self.corpus.ids, self.corpus.titles)]
        shipped = index is not None and index.has_vectors
        return SearchIndex.build(docs, self.corpus.texts, vectors=index.vectors if shipped else None,
                                 model=index.model if shipped else None)

    @property
    def dense_index(self) -> SearchIndex:
        """The search index with document vectors (the tree's, or title + text ones)."""
        index = self.bm25_index
        if not self._dense_ready:
            start = time.perf_counter()
            if not index.has_vectors:
                self._dense = DenseIndex(self.corpus, self.cache_dir)
                index.vectors, index.model = self._dense.matrix, self._dense.model
            index.dense_scores("")  # loads the encoder before any question is timed
            self.build_seconds["dense"] = round(time.perf_counter() - start, 3)
            self._dense_ready = True
        return index

    def prepare(self, methods: Sequence[str]) -> None:
        """Build the indexes the methods need (before timing queries)."""
        if {"bm25", "hybrid"} & set(methods):
            self.bm25_index
        if {"dense", "hybrid"} & set(methods):
            self.dense_index

    def scores(self, method: str, question: str) -> np.ndarray:
        if method not in BASELINES:
            raise ValueError(f"unknown baseline {method!r}")
        index = self.bm25_index if method == "bm25" else self.dense_index
        return index.scores(question, method)

    def search(self, method: str, query: str, k: int = RANK_DEPTH) -> list[int]:
        """Positions (in :attr:`corpus`) of the ``k`` best documents for ``query``, best first."""
        return [int(i) for i in np.argsort(-self.scores(method, query), kind="stable")[:k]]

    def run(self, method: str, question: str, answerer: Answerer | None = None) -> Retrieved:
        """Retrieve for ``question`` and answer from the documents in context (offline when no
        ``answerer`` is given)."""
        start = time.perf_counter()
        order = self.search(method, question, max(RANK_DEPTH, CONTEXT_DOCS))
        context = order[:CONTEXT_DOCS]
        answered = (answerer or Answerer()).answer(question, [self.corpus.page(i) for i in context])
        return Retrieved(answered.text, [self.corpus.ids[i] for i in order[:RANK_DEPTH]],
                         [self.corpus.ids[i] for i in context], time.perf_counter() - start,
                         {"documents_in_context": len(context), **answered.usage})
