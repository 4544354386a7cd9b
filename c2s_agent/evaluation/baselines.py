"""Flat retrieval baselines over the tree's document store.

- ``bm25``: bm25s over every document's full text (title + text);
- ``dense``: the compiler's encoder (:class:`c2s_core.encoder.Encoder`), exact cosine over
  every document's title + text; document vectors cached on disk (keyed by content hash);
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

from c2s_core.navigation.scoring import embedder, rrf
from ..tools import PAGE_CHARS, Page
from c2s_core.tree import Tree
from .answering import Answerer

CONTEXT_DOCS = 5  # documents a baseline puts in context
RANK_DEPTH = 10  # ranked list kept for recall@10 / MRR@10
RRF_K = 60.0

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


class BM25Index:
    def __init__(self, corpus: Corpus):
        import bm25s

        self.bm25s = bm25s
        self.retriever = bm25s.BM25()
        tokens = bm25s.tokenize([corpus.full_text(i) for i in range(len(corpus.ids))],
                                stopwords="en", show_progress=False)
        self.retriever.index(tokens, show_progress=False)
        self.vocab = tokens.vocab

    def scores(self, question: str) -> np.ndarray:
        words = self.bm25s.tokenize([question], stopwords="en", return_ids=False, show_progress=False)[0]
        known = [w for w in words if w in self.vocab]
        if not known:
            return np.zeros(self.retriever.scores["num_docs"], dtype=float)
        return np.asarray(self.retriever.get_scores(known), dtype=float)


class DenseIndex:
    """Unit vectors of every document (title + text), exact cosine search."""

    def __init__(self, corpus: Corpus, cache_dir: Path | None = None):
        self.embed = embedder()
        encoder = self.embed.encoder
        texts = [corpus.full_text(i) for i in range(len(corpus.ids))]
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

    def scores(self, question: str) -> np.ndarray:
        return self.matrix @ self.embed([question])[0]


def hash_title(title: str) -> str:
    import hashlib

    return hashlib.sha256(title.encode("utf-8")).hexdigest()[:16]


class Baselines:
    """The flat baselines over one tree; indexes build on first use."""

    def __init__(self, tree: Tree, cache_dir: Path | None = None):
        self.tree = tree
        self.cache_dir = cache_dir
        self.corpus = Corpus.load(tree)
        self._bm25: BM25Index | None = None
        self._dense: DenseIndex | None = None
        self.build_seconds: dict[str, float] = {}

    @property
    def bm25_index(self) -> BM25Index:
        if self._bm25 is None:
            start = time.perf_counter()
            self._bm25 = BM25Index(self.corpus)
            self.build_seconds["bm25"] = round(time.perf_counter() - start, 3)
        return self._bm25

    @property
    def dense_index(self) -> DenseIndex:
        if self._dense is None:
            start = time.perf_counter()
            self._dense = DenseIndex(self.corpus, self.cache_dir)
            self.build_seconds["dense"] = round(time.perf_counter() - start, 3)
        return self._dense

    def prepare(self, methods: Sequence[str]) -> None:
        """Build the indexes the methods need (before timing queries)."""
        if {"bm25", "hybrid"} & set(methods):
            self.bm25_index
        if {"dense", "hybrid"} & set(methods):
            self.dense_index

    def scores(self, method: str, question: str) -> np.ndarray:
        if method == "bm25":
            return self.bm25_index.scores(question)
        if method == "dense":
            return self.dense_index.scores(question)
        if method == "hybrid":
            return rrf(self.bm25_index.scores(question), self.dense_index.scores(question), k=RRF_K)
        raise ValueError(f"unknown baseline {method!r}")

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
