"""Scoring helpers for the offline navigator: small-set BM25, reciprocal rank fusion and
the embedded sentence encoder (loaded once per process, embeddings memoised by text)."""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np



def bm25(query: Sequence[str], docs: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75,
         lengths: Sequence[float] | None = None) -> np.ndarray:
    """BM25 of one query against a small candidate set (IDF from the set itself)."""
    n = len(docs)
    if n == 0:
        return np.zeros(0)
    counts = [Counter(d) for d in docs]
    lens = np.asarray(lengths if lengths is not None else [len(d) for d in docs], dtype=float)
    avg = lens.mean() or 1.0
    scores = np.zeros(n)
    for t in dict.fromkeys(query):
        df = sum(1 for c in counts if t in c)
        if not df:
            continue
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        tf = np.array([c.get(t, 0) for c in counts], dtype=float)
        scores += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lens / avg))
    return scores


def ranks(scores: Sequence[float]) -> np.ndarray:
    """0-based rank of each item, best first; ties share the better rank."""
    s = np.asarray(scores, dtype=float)
    order = np.argsort(-s, kind="stable")
    ordered = s[order]
    # Each place in the sorted order takes the place where its run of equal scores starts.
    starts = np.ones(len(s), dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    out = np.empty(len(s), dtype=float)
    out[order] = np.maximum.accumulate(np.where(starts, np.arange(len(s)), 0))
    return out


def fuse_rankings(rankings: Sequence[Sequence[str]], k: float, *, firsts_lead: bool = False,
                  weights: Sequence[float] | None = None) -> list[str]:
    """Reciprocal rank fusion of ranked lists of ids: each id scores the sum of w / (k + 1 +
    rank) over the lists holding it (``weights``, one a list; 1 by default); ties keep the order
    ids first appear in (the first list's order first). With ``firsts_lead``, each list's first id
    comes before every other id (the firsts in fused order): one list's best, which no other list
    holds, would otherwise sink under ids that two lists rank middling."""
    score: dict[str, float] = {}
    # strict: a ranking without a weight is an error, never dropped from the fusion
    for ranking, weight in zip(rankings, weights or [1.0] * len(rankings), strict=True):
        for rank, item in enumerate(ranking):
            score[item] = score.get(item, 0.0) + weight / (k + 1 + rank)
    fused = sorted(score, key=lambda item: -score[item])
    if not firsts_lead:
        return fused
    firsts = {ranking[0] for ranking in rankings if ranking}
    return [item for item in fused if item in firsts] + [item for item in fused if item not in firsts]


@dataclass(frozen=True)
class SearchHit:
    """One row of the flat search tool (``c2s_core.search_index``), which the engine fuses."""

    doc_id: str
    title: str
    path: str  # the leaf nav file that lists the document ("" when unknown)
    score: float  # bm25: BM25; dense: cosine; hybrid: the fused reciprocal-rank score


def rrf(*score_lists: Sequence[float], k: float = 60.0, weights: Sequence[float] | None = None) -> np.ndarray:
    """Reciprocal rank fusion: sum of w / (k + rank) over the signals."""
    weights = weights or [1.0] * len(score_lists)
    total = np.zeros(len(score_lists[0]))
    for w, scores in zip(weights, score_lists):
        total += w / (k + 1 + ranks(scores))
    return total


class Embedder:
    """The compiler's encoder (``c2s_core.encoder.Encoder``), memoising vectors by text, so
    rows and cards seen by earlier questions cost nothing the next time."""

    def __init__(self, max_items: int = 50_000, threads: int | None = 1):
        from c2s_core.encoder import Encoder

        self.encoder = Encoder()
        self.max_items = max_items
        self.threads = threads
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            vectors = self._encode(missing)
            with self._lock:
                for text, vec in zip(missing, vectors):
                    self._memo[text] = vec
                while len(self._memo) > self.max_items:
                    self._memo.popitem(last=False)
        with self._lock:
            found = [self._memo.get(t) for t in texts]
        if any(v is None for v in found):  # evicted meanwhile by another thread: recompute
            return self._encode(list(texts))
        return np.stack(found) if found else np.zeros((0, 384), np.float32)

    def _encode(self, texts: list[str]) -> np.ndarray:
        """Encode with few intra-op threads: query-time batches are tiny, and on a busy machine
        torch's thread pool made one question's encoding ~10x slower (measured on 2 cores)."""
        if not self.threads:
            return self.encoder.encode(texts)
        import torch

        with _TORCH_THREADS:
            previous = torch.get_num_threads()
            torch.set_num_threads(min(self.threads, previous))
            try:
                return self.encoder.encode(texts)
            finally:
                torch.set_num_threads(previous)


_TORCH_THREADS = threading.Lock()  # the thread count is process-wide: one switcher at a time
_EMBEDDER: Embedder | None = None
_EMBEDDER_LOCK = threading.Lock()


def embedder() -> Embedder:
    """The process-wide embedder (the model loads once, on first use)."""
    global _EMBEDDER
    with _EMBEDDER_LOCK:
        if _EMBEDDER is None:
            _EMBEDDER = Embedder()
        return _EMBEDDER
