"""The numeric side of the bottom-up hierarchy: K-Means per level, soft assignment, the
embedding evidence for verify-and-repartition, and applying its verdicts."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sklearn.cluster import KMeans

SEED = 0


def normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def cluster_count(n_items: int, branching: int) -> int:
    return max(1, math.ceil(n_items / branching))


def kmeans(vectors: np.ndarray, n_clusters: int) -> np.ndarray:
    """Labels 0..n_clusters-1, renumbered by first appearance so ids do not depend on K-Means'
    internal order. Vectors are L2-normalised, so Euclidean K-Means follows cosine."""
    if n_clusters == 1:
        return np.zeros(len(vectors), dtype=np.int64)
    raw = KMeans(n_clusters=n_clusters, n_init=3, random_state=SEED).fit_predict(normalise(vectors))
    order = {label: i for i, label in enumerate(dict.fromkeys(raw.tolist()))}
    return np.array([order[label] for label in raw.tolist()], dtype=np.int64)


def centroids(vectors: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    return normalise(np.stack([vectors[g].mean(axis=0) for g in groups]))


@dataclass(frozen=True)
class Placement:
    """Where one item sits: its primary cluster and, if within ``tau``, a runner-up."""

    item: int
    primary: int
    similarity: float
    runner_up: int | None
    runner_up_similarity: float | None


def place(vectors: np.ndarray, groups: list[list[int]], tau: float) -> list[Placement]:
    """Soft assignment: an item whose best other centroid is within ``tau`` cosine of its own
    cluster's keeps its primary place and is also listed (as an @see stub) in the runner-up."""
    cents = centroids(vectors, groups)
    sims = normalise(vectors) @ cents.T
    out = []
    for g, members in enumerate(groups):
        for item in members:
            row = sims[item].copy()
            own = float(row[g])
            runner_up, runner_sim = None, None
            if len(groups) > 1:
                row[g] = -np.inf
                best = int(np.argmax(row))
                if own - float(row[best]) < tau:
                    runner_up, runner_sim = best, float(row[best])
            out.append(Placement(item, g, own, runner_up, runner_sim))
    out.sort(key=lambda p: p.item)
    return out


def cohesion(vectors: np.ndarray, groups: list[list[int]]) -> list[float]:
    cents = centroids(vectors, groups)
    unit = normalise(vectors)
    return [float((unit[g] @ cents[i]).mean()) for i, g in enumerate(groups)]


def similar_pairs(vectors: np.ndarray, groups: list[list[int]], per_cluster: int = 2) -> list[tuple[int, int, float]]:
    """Each cluster's nearest sibling centroids (deduplicated pairs, most similar first)."""
    if len(groups) < 2:
        return []
    cents = centroids(vectors, groups)
    sims = cents @ cents.T
    np.fill_diagonal(sims, -np.inf)
    pairs: dict[tuple[int, int], float] = {}
    for i in range(len(groups)):
        for j in np.argsort(-sims[i])[:per_cluster]:
            a, b = sorted((i, int(j)))
            pairs[(a, b)] = float(sims[a, b])
    return sorted(((a, b, s) for (a, b), s in pairs.items()), key=lambda t: (-t[2], t[0], t[1]))


def proximity_batches(vectors: np.ndarray, groups: list[list[int]], batch_size: int = 60) -> list[list[int]]:
    """Sibling clusters in batches of ≤ batch_size, neighbours together: ordered along the
    centroids' first principal axis, so every cluster is judged beside the ones it resembles."""
    if len(groups) <= batch_size:
        return [list(range(len(groups)))]
    cents = centroids(vectors, groups)
    centred = cents - cents.mean(axis=0)
    axis = np.linalg.svd(centred, full_matrices=False)[2][0]
    order = np.argsort(centred @ axis, kind="stable").tolist()
    n_batches = math.ceil(len(order) / batch_size)
    size = math.ceil(len(order) / n_batches)
    return [sorted(order[i : i + size]) for i in range(0, len(order), size)]


def new_node_id(taken: set[str]) -> str:
    """The next unused id of a level (``L<level>-<nnnn>``, the level read from ``taken``); it is
    added to ``taken`` so ids of clusters merged away are never handed out again."""
    prefix = min(taken).split("-")[0]
    number = len(taken)
    while f"{prefix}-{number:04d}" in taken:
        number += 1
    taken.add(f"{prefix}-{number:04d}")
    return f"{prefix}-{number:04d}"


def split_in_two(vectors: np.ndarray, members: list[int]) -> tuple[list[int], list[int]]:
    """Re-split a mixed cluster: 2-means over its members, larger part first."""
    labels = KMeans(n_clusters=2, n_init=3, random_state=SEED).fit_predict(normalise(vectors[members]))
    a = [m for m, l in zip(members, labels) if l == 0]
    b = [m for m, l in zip(members, labels) if l == 1]
    return (a, b) if len(a) >= len(b) else (b, a)
