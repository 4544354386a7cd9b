"""Paired bootstrap statistics over questions grouped by the document they ask about: the
navigability probe's intervals and verdicts (a document's questions are resampled together)."""

from __future__ import annotations

import numpy as np

BOOTSTRAP = 2000  # resamples


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


def verdict(difference: dict) -> str:
    """From the 95% interval of navigation's recall minus the best flat method's: "navigation"
    when it lies above zero, "flat" when below, "either" when it straddles zero."""
    if difference["low"] is None:
        return "either"
    return "navigation" if difference["low"] > 0 else "flat" if difference["high"] < 0 else "either"
