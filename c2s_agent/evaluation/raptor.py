"""RAPTOR (Sarthi et al. 2024, "Recursive Abstractive Processing for Tree-Organized Retrieval") as
a retrieval baseline, following the reference implementation (github.com/parthsarthi03/raptor).

Faithful to the reference:

- leaves are chunks of at most :data:`CHUNK_TOKENS` tokens, cut on sentence ends (a sentence that
  is too long is cut on ``,;:``), embedded with one encoder;
- each layer reduces the node embeddings with UMAP (cosine; global: ``n_neighbors =
  int(sqrt(n - 1))``, ``n_components = min(10, n - 2)``; local, inside each global cluster of more
  than ``dim + 1`` nodes: ``n_neighbors = 10``, ``n_components = 10``), clusters them with a
  Gaussian mixture whose size is chosen by BIC over ``1 .. min(50, n) - 1`` components, soft
  membership at probability > 0.1 (a node may join several clusters), global then local;
- a cluster whose members hold more than :data:`CLUSTER_TOKEN_LIMIT` tokens is clustered again;
- every cluster (singletons too) is summarised into a parent node whose summary is embedded;
  layers stop when a layer has ``<= dim + 1`` nodes or after :data:`MAX_LAYERS` layers;
- retrieval is the collapsed tree: every node of every layer in one pool, ranked by cosine
  with the question, the best :data:`TOP_K` taken while they fit in :data:`CONTEXT_TOKENS`.

Different from the reference:

- tokens are whitespace words, not tiktoken tokens;
- chunks never cross documents (the reference splits one concatenated text), so each leaf keeps
  its ``doc_id``; sentences keep their punctuation (the reference drops the delimiters);
- summaries come from the compiler's own provider and "summary" task (:mod:`c2s_core.llm`,
  through the caching :class:`~c2s_core.llm.base.TaskRunner`) instead of the reference's
  GPT-3.5 prompt; a node's text is the summary's title and summary;
- UMAP and the mixtures use one fixed seed (the reference seeds only the mixtures);
- a node whose every membership probability is <= 0.1 joins its most likely cluster (the
  reference drops it from the layer above), and a re-clustering that makes no progress splits
  the cluster by tokens instead of recursing forever;
- the harness scores documents, so the retrieved nodes map to documents: walking the nodes by
  similarity, a chunk gives its document and a summary gives its descendant documents ordered by
  their best chunk's similarity, until :data:`RANK_DEPTH` distinct documents; the first
  :data:`CONTEXT_DOCS` are answered from (their first pages) by the shared answerer.

Caching, as the compiler caches its work: the finished tree (nodes as parquet, embeddings as
``.npy``) is stored under ``cache_dir/raptor/<key>``, the key hashing the documents (ids, content
and title hashes), the RAPTOR parameters, the provider's name, model and summary prompt version
and the encoder; each summary and embedding is also stored as it is made in
``cache_dir/raptor-items.sqlite`` (:class:`~c2s_core.cache.ItemCache`), so a build that stops
part-way redoes only the clustering (seeded, hence the same clusters) when run again.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from c2s_core.cache import ItemCache
from c2s_core.encoder import EmbedStats, Encoder, embed_with_cache
from c2s_core.llm.base import CompileProvider, TaskRunner
from c2s_core.llm.settings import LLMSettings
from c2s_core.llm.settings import build_provider as build_llm_provider
from c2s_core.llm.schemas import ClusterInput, ClusterSummary, MemberExcerpt
from c2s_core.text import sentences, sha256_hex

from c2s_core.navigation.scoring import embedder
from .answering import Answerer
from .baselines import CONTEXT_DOCS, RANK_DEPTH, Corpus, Retrieved

# The reference's defaults (RetrievalAugmentationConfig / ClusterTreeConfig / RAPTOR_Clustering).
CHUNK_TOKENS = 100
REDUCTION_DIM = 10
LOCAL_NEIGHBORS = 10
THRESHOLD = 0.1
MAX_CLUSTERS = 50
CLUSTER_TOKEN_LIMIT = 3500
MAX_LAYERS = 5
SEED = 224
# Retrieval: the paper's collapsed tree at a 2000-token budget, top-5 nodes.
TOP_K = 5
CONTEXT_TOKENS = 2000

RAPTOR_VERSION = "raptor-1"  # bump when the tree a given input builds changes
TREE_FILES = ("nodes.parquet", "embeddings.npy", "meta.json")


def n_tokens(text: str) -> int:
    return len(text.split())


# -- leaves ----------------------------------------------------------------------------------------


def split_text(text: str, max_tokens: int = CHUNK_TOKENS) -> list[str]:
    """Chunks of at most ``max_tokens`` whitespace tokens, packed from whole sentences; a sentence
    over the limit is cut on ``,;:`` like the reference, then on words if a piece is still too long."""
    pieces: list[str] = []
    for sentence in sentences(text):
        if n_tokens(sentence) <= max_tokens:
            pieces.append(sentence)
            continue
        for part in re.split(r"(?<=[,;:])\s+", sentence):
            words = part.split()
            pieces += [" ".join(words[i:i + max_tokens]) for i in range(0, len(words), max_tokens)]
    chunks: list[str] = []
    current: list[str] = []
    length = 0
    for piece in pieces:
        size = n_tokens(piece)
        if current and length + size > max_tokens:
            chunks.append(" ".join(current))
            current, length = [], 0
        current.append(piece)
        length += size
    if current:
        chunks.append(" ".join(current))
    return chunks


# -- clustering ------------------------------------------------------------------------------------


def reduce(embeddings: np.ndarray, n_components: int, n_neighbors: int, seed: int = SEED) -> np.ndarray:
    """UMAP on cosine distance, as the reference's global and local reductions."""
    import umap

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # n_jobs / spectral-init fallbacks on tiny inputs
        model = umap.UMAP(n_neighbors=max(2, n_neighbors), n_components=n_components, metric="cosine",
                          random_state=seed, n_jobs=1)
        return np.asarray(model.fit_transform(embeddings), dtype=np.float64)


def best_mixture(points: np.ndarray, max_clusters: int = MAX_CLUSTERS, seed: int = SEED):
    """The fitted Gaussian mixture with the lowest BIC over 1 .. min(max_clusters, n) - 1
    components (the reference's range)."""
    from sklearn.mixture import GaussianMixture
    from threadpoolctl import threadpool_limits

    # One BLAS thread: these fits are tiny, and a thread pool made them ~10x slower on 2 cores.
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = [GaussianMixture(n_components=n, random_state=seed).fit(points)
                  for n in range(1, max(2, min(max_clusters, len(points))))]
        return min(fitted, key=lambda m: m.bic(points))  # the first of equal BICs, as argmin


def optimal_clusters(points: np.ndarray, max_clusters: int = MAX_CLUSTERS, seed: int = SEED) -> int:
    """The mixture size BIC chooses."""
    return best_mixture(points, max_clusters, seed).n_components


def soft_memberships(probs: np.ndarray, threshold: float = THRESHOLD) -> list[np.ndarray]:
    """Each node's clusters: those whose probability exceeds ``threshold`` (so a node may join
    several), else its most likely one, so that no node drops out of the layer above."""
    out = []
    for p in probs:
        labels = np.flatnonzero(p > threshold)
        out.append(labels if labels.size else np.array([int(np.argmax(p))]))
    return out


def gmm_cluster(points: np.ndarray, threshold: float = THRESHOLD, seed: int = SEED,
                max_clusters: int = MAX_CLUSTERS) -> tuple[list[np.ndarray], int]:
    """Soft labels of every point and the number of mixture components (chosen by BIC)."""
    from threadpoolctl import threadpool_limits

    mixture = best_mixture(points, max_clusters, seed)
    with threadpool_limits(1):
        probs = mixture.predict_proba(points)
    return soft_memberships(probs, threshold), mixture.n_components


def soft_cluster(embeddings: np.ndarray, dim: int = REDUCTION_DIM, threshold: float = THRESHOLD,
                 seed: int = SEED) -> list[list[int]]:
    """The reference's ``perform_clustering``: global UMAP + GMM, then a local UMAP + GMM inside
    each global cluster of more than ``dim + 1`` nodes. Clusters as lists of row indices, in
    (global, local) label order; a node appears in every cluster it belongs to."""
    n = len(embeddings)
    reduced = reduce(embeddings, min(dim, n - 2), int(math.sqrt(n - 1)), seed)
    global_labels, n_global = gmm_cluster(reduced, threshold, seed)
    clusters: list[list[int]] = []
    for g in range(n_global):
        members = [i for i, labels in enumerate(global_labels) if g in labels]
        if not members:
            continue
        if len(members) <= dim + 1:
            clusters.append(members)
            continue
        local = reduce(embeddings[members], dim, LOCAL_NEIGHBORS, seed)
        local_labels, n_local = gmm_cluster(local, threshold, seed)
        for j in range(n_local):
            sub = [members[k] for k, labels in enumerate(local_labels) if j in labels]
            if sub:
                clusters.append(sub)
    return clusters


def split_by_tokens(embeddings: np.ndarray, tokens: Sequence[int], limit: int) -> list[list[int]]:
    """Consecutive groups of at most ``limit`` tokens along the first principal direction, so
    neighbours stay together: the fallback when clustering cannot split a cluster."""
    if len(embeddings) == 1:
        return [[0]]
    centred = embeddings - embeddings.mean(axis=0)
    direction = np.linalg.svd(centred, full_matrices=False)[2][0]
    groups: list[list[int]] = [[]]
    total = 0
    for i in np.argsort(centred @ direction, kind="stable").tolist():
        if groups[-1] and total + tokens[i] > limit:
            groups.append([])
            total = 0
        groups[-1].append(i)
        total += tokens[i]
    return groups


def cluster_nodes(embeddings: np.ndarray, tokens: Sequence[int], dim: int = REDUCTION_DIM,
                  threshold: float = THRESHOLD, limit: int = CLUSTER_TOKEN_LIMIT,
                  seed: int = SEED) -> list[list[int]]:
    """The reference's ``RAPTOR_Clustering.perform_clustering``: soft clusters, each cluster over
    ``limit`` tokens clustered again on its own members."""
    if len(embeddings) <= dim + 1:  # too few for UMAP; only reached by a re-clustering
        return split_by_tokens(embeddings, tokens, limit)
    out: list[list[int]] = []
    for members in soft_cluster(embeddings, dim, threshold, seed):
        if len(members) == 1 or sum(tokens[i] for i in members) <= limit:
            out.append(members)
        elif len(members) == len(embeddings):  # no progress: the reference would recurse forever
            out += split_by_tokens(embeddings, tokens, limit)
        else:
            sub = cluster_nodes(embeddings[members], [tokens[i] for i in members], dim, threshold, limit, seed)
            out += [[members[i] for i in group] for group in sub]
    return out


# -- the tree --------------------------------------------------------------------------------------


@dataclass
class RaptorTree:
    """Every node of every layer; row i of ``embeddings`` is node i (unit vectors)."""

    texts: list[str]
    layers: list[int]
    children: list[list[int]]  # empty for leaves
    doc_ids: list[list[str]]  # documents of the node's descendant leaves (a leaf: its own)
    embeddings: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return max(self.layers) + 1 if self.layers else 0

    def save(self, folder: Path) -> None:
        """Written to a temporary folder and renamed, so a reader never sees half a tree."""
        import polars as pl

        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
        try:
            pl.DataFrame({
                "node": list(range(len(self.texts))), "layer": self.layers, "text": self.texts,
                "children": self.children, "doc_ids": self.doc_ids,
            }, schema={"node": pl.Int64, "layer": pl.Int64, "text": pl.String, "children": pl.List(pl.Int64),
                       "doc_ids": pl.List(pl.String)}).write_parquet(tmp / "nodes.parquet")
            np.save(tmp / "embeddings.npy", self.embeddings.astype(np.float32))
            (tmp / "meta.json").write_text(json.dumps(self.meta, indent=2, sort_keys=True))
            try:
                os.replace(tmp, folder)
            except OSError:  # another process stored the same tree first
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def load(cls, folder: Path) -> RaptorTree | None:
        """The stored tree, or None when it is missing or unreadable (then it is rebuilt)."""
        import polars as pl

        if not all((folder / name).is_file() for name in TREE_FILES):
            return None
        try:
            nodes = pl.read_parquet(folder / "nodes.parquet").sort("node")
            embeddings = np.load(folder / "embeddings.npy", allow_pickle=False)
            meta = json.loads((folder / "meta.json").read_text())
        except (OSError, ValueError, pl.exceptions.PolarsError):
            return None
        if len(embeddings) != nodes.height:
            return None
        return cls(nodes["text"].to_list(), nodes["layer"].to_list(), nodes["children"].to_list(),
                   nodes["doc_ids"].to_list(), embeddings, meta)


def build_provider(provider: str, model: str | None, base_url: str | None, require_key: bool = True) -> CompileProvider:
    """The compile provider exactly as ``c2s compile`` builds it."""
    return build_llm_provider(LLMSettings(provider=provider, model=model or "", base_url=base_url or None),
                              require_key=require_key)


def _close(provider: CompileProvider) -> None:
    close = getattr(provider, "close", None)
    if close is not None:
        close()


class Raptor:
    """A RAPTOR tree over a corpus, built (or loaded from ``cache_dir``) by :meth:`prepare`, and
    collapsed-tree retrieval over it (:meth:`run`)."""

    def __init__(self, corpus: Corpus, cache_dir: Path | None = None, provider: str = "offline",
                 model: str | None = None, base_url: str | None = None, answerer: Answerer | None = None):
        self.corpus = corpus
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.provider_name, self.model, self.base_url = provider, model, base_url
        self.answerer = answerer
        self.tree: RaptorTree | None = None
        self.embed_stats = EmbedStats()
        self.llm_calls = 0
        self.llm_cached = 0  # summaries found in the per-item cache (a resumed build)
        self.timings: Counter[str] = Counter()  # seconds per build phase

    # -- build -------------------------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        return {"version": RAPTOR_VERSION, "chunk_tokens": CHUNK_TOKENS, "dim": REDUCTION_DIM,
                "local_neighbors": LOCAL_NEIGHBORS, "threshold": THRESHOLD, "max_clusters": MAX_CLUSTERS,
                "cluster_token_limit": CLUSTER_TOKEN_LIMIT, "max_layers": MAX_LAYERS, "seed": SEED}

    def cache_key(self, provider: CompileProvider, encoder: Encoder) -> str:
        documents = sha256_hex(*(f"{d}\x1e{h}\x1e{sha256_hex(t)}" for d, h, t in
                                 zip(self.corpus.ids, self.corpus.hashes, self.corpus.titles)))
        return sha256_hex(documents, json.dumps(self.params(), sort_keys=True), provider.name, provider.model,
                          provider.prompt_version("summary"), encoder.model_id)

    def prepare(self) -> dict[str, Any]:
        """Build the tree, or load it when ``cache_dir`` holds one built from the same inputs."""
        start = time.perf_counter()
        encoder = embedder().encoder
        # A provider that only names itself (model, prompt version) for the key: loading a stored
        # tree needs no API key.
        named = build_provider(self.provider_name, self.model, self.base_url, require_key=False)
        key = self.cache_key(named, encoder)
        _close(named)
        folder = self.cache_dir / "raptor" / key[:32] if self.cache_dir else None
        tree = RaptorTree.load(folder) if folder else None
        from_cache = tree is not None
        if tree is None:
            tree = self._build(encoder)
            tree.meta = {"key": key, **self.params(), "provider": self.provider_name, "model": self.model,
                         "encoder": encoder.model_id}
            if folder:
                tree.save(folder)
        self.tree = tree
        parents = Counter(c for children in tree.children for c in children)
        return {"nodes": len(tree.texts), "layers": tree.n_layers, "summary_layers": tree.n_layers - 1,
                "leaves": tree.layers.count(0), "summaries": sum(1 for x in tree.layers if x > 0),
                "from_cache": from_cache, "seconds": round(time.perf_counter() - start, 3),
                "llm_calls": self.llm_calls, "llm_cached": self.llm_cached, "embedded": self.embed_stats.computed,
                "shared_nodes": sum(1 for n in parents.values() if n > 1),  # nodes in two clusters or more
                "phase_seconds": {k: round(v, 3) for k, v in self.timings.items()}}

    def _build(self, encoder: Encoder) -> RaptorTree:
        # The per-item cache keeps every finished summary and embedding, so a build that stops
        # part-way resumes where it stopped; without a cache_dir it lives in memory.
        cache = ItemCache(self.cache_dir / "raptor-items.sqlite" if self.cache_dir else Path(":memory:"))
        provider = build_provider(self.provider_name, self.model, self.base_url)
        runner = TaskRunner(provider, cache, RAPTOR_VERSION)
        try:
            texts, layers, children, doc_ids = [], [], [], []
            titles: list[str] = []  # what a summary's prompt calls each member
            for i, doc in enumerate(self.corpus.ids):
                for chunk in split_text(self.corpus.full_text(i)):
                    texts.append(chunk)
                    layers.append(0)
                    children.append([])
                    doc_ids.append([doc])
                    titles.append(" ".join(self.corpus.titles[i].split()) or doc)
            clock = time.perf_counter()
            vectors = [embed_with_cache(encoder, cache, texts, self.embed_stats)]
            self.timings["embed"] += time.perf_counter() - clock
            current = list(range(len(texts)))
            for layer in range(1, MAX_LAYERS + 1):
                if len(current) <= REDUCTION_DIM + 1:  # the reference's stopping rule
                    break
                matrix = np.concatenate(vectors)
                emb = matrix[current]
                clock = time.perf_counter()
                groups = cluster_nodes(emb, [n_tokens(texts[i]) for i in current])
                self.timings["cluster"] += time.perf_counter() - clock
                inputs = []
                for g, group in enumerate(groups):
                    members = [current[i] for i in group]
                    # most central first, as the compiler orders a summary's members
                    centre = emb[group].mean(axis=0)
                    members = [members[i] for i in np.argsort(-(emb[group] @ centre), kind="stable")]
                    docs = list(dict.fromkeys(d for m in members for d in doc_ids[m]))
                    inputs.append(ClusterInput(
                        cluster_id=f"L{layer}-{g}", level=layer, size=len(docs),
                        members=[MemberExcerpt(item_id=str(m), title=titles[m], text=texts[m]) for m in members],
                        member_titles=list(dict.fromkeys(titles[m] for m in members))))
                    children.append(sorted(members))
                    doc_ids.append(docs)
                    layers.append(layer)
                before, hits, clock = runner.stats.made, runner.stats.cached, time.perf_counter()
                summaries: list[ClusterSummary] = runner.run("summary", inputs, ClusterSummary)
                self.llm_calls += runner.stats.made - before
                self.llm_cached += runner.stats.cached - hits
                self.timings["summarise"] += time.perf_counter() - clock
                new = [f"{s.title}. {s.summary}" for s in summaries]
                texts += new
                titles += [s.title for s in summaries]
                clock = time.perf_counter()
                vectors.append(embed_with_cache(encoder, cache, new, self.embed_stats))
                self.timings["embed"] += time.perf_counter() - clock
                current = list(range(len(texts) - len(new), len(texts)))
            return RaptorTree(texts, layers, children, doc_ids, np.concatenate(vectors).astype(np.float32))
        finally:
            _close(provider)
            cache.close()

    # -- retrieve ----------------------------------------------------------------------------------
    def retrieve(self, question: str) -> tuple[list[int], list[str], np.ndarray]:
        """(the collapsed-tree nodes retrieved, documents ranked best first, node similarities)."""
        if self.tree is None:
            self.prepare()
        tree = self.tree
        sims = tree.embeddings @ embedder()([question])[0]
        order = np.argsort(-sims, kind="stable")
        selected: list[int] = []
        budget = 0
        for i in order[:TOP_K].tolist():  # the reference's collapse-tree selection
            size = n_tokens(tree.texts[i])
            if budget + size > CONTEXT_TOKENS:
                break
            selected.append(i)
            budget += size
        best: dict[str, float] = {}  # each document's best chunk similarity
        for i in order.tolist():
            if tree.layers[i] == 0 and tree.doc_ids[i][0] not in best:
                best[tree.doc_ids[i][0]] = float(sims[i])
        ranked: list[str] = []
        seen: set[str] = set()
        for i in order.tolist():
            docs = tree.doc_ids[i]
            if len(docs) > 1:
                docs = sorted(docs, key=lambda d: -best.get(d, -2.0))
            for d in docs:
                if d not in seen:
                    seen.add(d)
                    ranked.append(d)
            if len(ranked) >= RANK_DEPTH:
                break
        return selected, ranked[:RANK_DEPTH], sims

    def run(self, question: str) -> Retrieved:
        start = time.perf_counter()
        selected, ranked, _ = self.retrieve(question)
        if self.answerer is None:
            self.answerer = Answerer(self.provider_name, self.model, self.base_url)
        context = ranked[:CONTEXT_DOCS]
        answered = self.answerer.answer(question, [self.corpus.page(self.corpus.positions[d]) for d in context])
        layers_hit = sorted({self.tree.layers[i] for i in selected})
        return Retrieved(answered.text, ranked, context, time.perf_counter() - start,
                         {"documents_in_context": len(context), "nodes_retrieved": len(selected),
                          "layers_hit": layers_hit, **answered.usage})
