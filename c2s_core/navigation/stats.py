"""Paired bootstrap statistics over questions grouped by the document they ask about: the
navigability probe's intervals and verdicts (a document's questions are resampled together)."""

from __future__ import annotations

import numpy as np

BOOTSTRAP = 2000  # resamples
# A winner is named only when it leads by more than this share of the flat method's recall, beyond
# the 95% interval: the bar navigation alone is held to (0.95x the best flat method). Within it the
# two are on par for a user's purposes. The probe asks hundreds of questions in the documents' own
# words, so a gap of a point or two is beyond its interval yet does not carry over to real
# questions (on the development corpora such gaps measured ties either way: benchmarks/README.md).
EQUIVALENCE = 0.05


def bootstrap_groups(docs: np.ndarray, rng: np.random.Generator, resamples: int = BOOTSTRAP) -> np.ndarray:
    """``resamples`` resamples of the documents in ``docs`` (one entry per question, a
    document's questions move together), as a (resamples x questions) weight matrix."""
    unique, which = np.unique(docs, return_inverse=True)
    draws = rng.integers(0, len(unique), size=(resamples, len(unique)))
    per_doc = np.zeros((resamples, len(unique)))
    np.add.at(per_doc, (np.repeat(np.arange(resamples), len(unique)), draws.ravel()), 1.0)
    return per_doc[:, which]


def interval(values: np.ndarray, weights: np.ndarray, key: str = "rate") -> dict:
    """Mean of ``values`` with its 95% bootstrap interval (``weights``: :func:`bootstrap_groups`)."""
    if not len(values):
        return {key: None, "low": None, "high": None}
    means = (weights @ values) / weights.sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {key: round(float(values.mean()), 4), "low": round(float(low), 4), "high": round(float(high), 4)}


def judge(gain: np.ndarray, weights: np.ndarray, flat: float) -> dict:
    """Navigation's recall minus the best flat method's, per question (``gain``), with its 95%
    interval, the margin a winner must clear (:data:`EQUIVALENCE` of ``flat``, the flat method's
    recall on the same questions) and the :func:`verdict`."""
    spread = {**interval(gain, weights, key="mean"), "margin": round(EQUIVALENCE * flat, 4)}
    return {**spread, "verdict": verdict(spread)}


def verdict(difference: dict) -> str:
    """From the 95% interval of navigation's recall minus the best flat method's: "navigation"
    when it lies wholly above the ``margin``, "flat" when wholly below minus the margin, "either"
    else."""
    if difference["low"] is None:
        return "either"
    margin = difference["margin"]
    return "navigation" if difference["low"] > margin else "flat" if difference["high"] < -margin else "either"
