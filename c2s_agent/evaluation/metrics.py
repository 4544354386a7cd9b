"""Metrics of the evaluation protocol (docs/method: "Evaluation protocol worth keeping"), none of
which needs an LLM: retrieval on gold document ids (recall@k, MRR@k), context recall/precision
over the documents a method put in context, SQuAD Token F1 against the gold answer, and the paired
bootstrap that turns per-query scores into a win / tie / loss."""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
ALPHA = 0.05


# -- the QA file ------------------------------------------------------------------------------


class QAError(ValueError):
    """A QA file that cannot be used; the message names file:line and the reason."""


@dataclass(frozen=True)
class QAItem:
    id: str
    question: str
    answer: str | None = None
    gold_ids: tuple[str, ...] | None = None
    line: int = 0


def load_qa(path: str | Path, limit: int | None = None) -> list[QAItem]:
    """Rows ``{"id", "question", "answer"?, "gold_ids"?}``, one JSON object a line (blank lines
    and lines starting with ``#`` are skipped). Raises :class:`QAError` naming file:line."""
    path = Path(path)
    if not path.is_file():
        raise QAError(f"QA file not found: {path}")
    items: list[QAItem] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            where = f"{path}:{n}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise QAError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(row, dict):
                raise QAError(f"{where}: expected a JSON object, got {type(row).__name__}")
            question = row.get("question")
            if not isinstance(question, str) or not question.strip():
                raise QAError(f"{where}: \"question\" is missing or empty")
            qid = row.get("id", f"line-{n}")
            if not isinstance(qid, (str, int)) or isinstance(qid, bool) or str(qid).strip() == "":
                raise QAError(f"{where}: \"id\" must be a non-empty string")
            qid = str(qid)
            if qid in seen:
                raise QAError(f"{where}: duplicate id {qid!r} (first on line {seen[qid]})")
            seen[qid] = n
            answer = row.get("answer")
            if answer is not None and not isinstance(answer, str):
                raise QAError(f"{where}: \"answer\" must be a string")
            gold = row.get("gold_ids")
            if gold is not None:
                if isinstance(gold, str):
                    gold = [gold]
                if not isinstance(gold, list) or not all(isinstance(g, str) and g for g in gold):
                    raise QAError(f"{where}: \"gold_ids\" must be a list of document id strings")
                gold = tuple(dict.fromkeys(gold)) or None
            items.append(QAItem(qid, question.strip(), answer if answer and answer.strip() else None, gold, n))
            if limit is not None and len(items) >= limit:
                break
    if not items:
        raise QAError(f"{path}: no questions")
    return items


# -- retrieval on gold ids ----------------------------------------------------------------------


def recall_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of the gold documents among the first ``k`` ranked."""
    gold = set(gold)
    if not gold:
        raise ValueError("recall needs at least one gold id")
    return len(gold & set(list(ranked)[:k])) / len(gold)


def mrr_at(ranked: Sequence[str], gold: Sequence[str], k: int = 10) -> float:
    """1 / rank of the first gold document within the first ``k``; 0 when none is there."""
    gold = set(gold)
    for i, doc_id in enumerate(list(ranked)[:k], 1):
        if doc_id in gold:
            return 1.0 / i
    return 0.0


def context_scores(context: Sequence[str], gold: Sequence[str]) -> tuple[float, float]:
    """(recall, precision) of the documents put in context, by gold id."""
    gold, ctx = set(gold), list(dict.fromkeys(context))
    hits = len(gold & set(ctx))
    return hits / len(gold), (hits / len(ctx) if ctx else 0.0)


# -- Token F1 (SQuAD) ---------------------------------------------------------------------------

_CITATION = re.compile(r"\[[^\[\]\s]+\](?!\()")  # [doc_id]
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")  # [text](url) -> text
_URL = re.compile(r"https?://\S+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def clean_answer(text: str) -> str:
    """Drop what is markup rather than answer: ``[doc_id]`` citations, link targets and URLs."""
    return _URL.sub(" ", _LINK.sub(r"\1", _CITATION.sub(" ", text)))


def normalize(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD Token F1 of ``prediction`` against ``gold`` (citations and link targets removed
    first). Both empty after normalisation: 1.0; one empty: 0.0."""
    pred = normalize(clean_answer(prediction)).split()
    ref = normalize(clean_answer(gold)).split()
    if not pred or not ref:
        return float(pred == ref)
    common = Counter(pred) & Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


# -- paired bootstrap ---------------------------------------------------------------------------


@dataclass
class Bootstrap:
    metric: str
    method: str
    baseline: str
    n: int
    mean_method: float
    mean_baseline: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str  # "win" | "tie" | "loss" (of ``method`` against ``baseline``)
    resamples: int = BOOTSTRAP_RESAMPLES
    seed: int = BOOTSTRAP_SEED
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.__dict__.items()
                if k != "extra"} | self.extra


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES,
                     seed: int = BOOTSTRAP_SEED, alpha: float = ALPHA, metric: str = "",
                     method: str = "a", baseline: str = "b") -> Bootstrap:
    """Paired bootstrap of mean(a) - mean(b) over the same queries: resample queries with
    replacement ``resamples`` times; two-sided p = 2 * min(share of resampled differences <= 0,
    share >= 0), with +1 smoothing, capped at 1. Win / loss when p < ``alpha``, else tie."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) == 0:
        raise ValueError("paired bootstrap needs two equally long, non-empty score lists")
    d = x - y
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, 1000):  # chunks keep memory flat on large QA sets
        stop = min(start + 1000, resamples)
        idx = rng.integers(0, len(d), size=(stop - start, len(d)))
        means[start:stop] = d[idx].mean(axis=1)
    le, ge = np.sum(means <= 0), np.sum(means >= 0)
    p = min(1.0, 2 * (min(le, ge) + 1) / (resamples + 1))
    diff = float(d.mean())
    verdict = "tie" if p >= alpha or diff == 0 else ("win" if diff > 0 else "loss")
    low, high = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return Bootstrap(metric, method, baseline, len(d), float(x.mean()), float(y.mean()), diff,
                     float(low), float(high), float(p), verdict, resamples, seed)


def bootstrap_interval(values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED, alpha: float = ALPHA) -> tuple[float, float]:
    """Percentile bootstrap interval of a mean (for the chart's error bars)."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, 1000):
        stop = min(start + 1000, resamples)
        means[start:stop] = v[rng.integers(0, len(v), size=(stop - start, len(v)))].mean(axis=1)
    low, high = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(low), float(high)
