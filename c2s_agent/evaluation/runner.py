"""Run every method over a QA set and score it: per-query records, per-method aggregates and the
paired bootstrap of the navigator against the best baseline."""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..tree import Tree, open_tree
from .baselines import BASELINES, CONTEXT_DOCS, NOT_IMPLEMENTED, RANK_DEPTH, Baselines
from .metrics import (QAItem, bootstrap_interval, context_scores, mrr_at, paired_bootstrap, recall_at,
                      token_f1)

NAVIGATOR = "navigator"
METHODS = (NAVIGATOR, *BASELINES)
RETRIEVAL = ("recall@1", "recall@5", "recall@10", "mrr@10", "context_recall", "context_precision")
QUALITY = ("token_f1",)
COST = ("turns", "tool_calls", "nav_bytes", "seconds")
COMPARED = ("token_f1", "recall@5")  # the bootstrap's metrics


class MethodError(ValueError):
    """An unknown or not yet implemented method."""


def parse_methods(spec: str | Sequence[str]) -> list[str]:
    names = [m.strip().lower() for m in (spec.split(",") if isinstance(spec, str) else spec) if m.strip()]
    if not names:
        raise MethodError("no methods given; choose from " + ", ".join(METHODS))
    for name in names:
        if name in NOT_IMPLEMENTED:
            raise MethodError(f"method {name!r} is not implemented yet; available now: {', '.join(METHODS)}")
        if name not in METHODS:
            raise MethodError(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
    return list(dict.fromkeys(names))


@dataclass
class EvalRun:
    tree: str
    provider: str
    methods: list[str]
    questions: int
    records: list[dict]  # one per (question, method)
    summary: dict[str, dict]  # method -> aggregate metrics
    bootstrap: dict[str, dict]  # metric -> navigator vs best baseline
    intervals: dict[str, dict[str, list[float]]]  # method -> metric -> [low, high] (95% CI of the mean)
    setup: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0

    def scores(self, method: str, metric: str) -> list[float | None]:
        return [r.get(metric) for r in self.records if r["method"] == method]

    def to_dict(self) -> dict:
        return {"tree": self.tree, "provider": self.provider, "questions": self.questions,
                "methods": self.summary, "bootstrap": self.bootstrap, "intervals": self.intervals,
                "setup": self.setup, "wall_seconds": round(self.wall_seconds, 3),
                "protocol": {"context_docs": CONTEXT_DOCS, "rank_depth": RANK_DEPTH,
                             "bootstrap": "paired, 10,000 resamples, seed 0, two-sided p < 0.05"}}


def navigator_context(result, provider: str) -> list[str]:
    """The documents the navigator put in context: the offline navigator reads its candidates in
    one batch and ranks them, so its best five; an LLM agent's last five documents read."""
    if provider == "offline":
        return list(result.fetched[:CONTEXT_DOCS])
    read = [str(c.input.get("doc_id", "")).strip().strip("`").strip()
            for c in result.trace if c.tool == "get_document" and not c.error]
    last = list(dict.fromkeys(reversed([d for d in read if d])))[:CONTEXT_DOCS]
    return list(reversed(last))


def score(record: dict, item: QAItem, ranked: Sequence[str], context: Sequence[str]) -> dict:
    gold = item.gold_ids
    if gold:
        record.update({"recall@1": recall_at(ranked, gold, 1), "recall@5": recall_at(ranked, gold, 5),
                       "recall@10": recall_at(ranked, gold, 10), "mrr@10": mrr_at(ranked, gold, 10)})
        record["context_recall"], record["context_precision"] = context_scores(context, gold)
    else:
        record.update({m: None for m in RETRIEVAL})
    record["token_f1"] = token_f1(record["answer"], item.answer) if item.answer is not None else None
    return record


def evaluate(tree: Tree | str | os.PathLike[str], items: Sequence[QAItem], methods: Sequence[str] = METHODS,
             provider: str = "offline", cache_dir: Path | None = None, max_turns: int = 10,
             on_progress: Callable[[int, int, str], None] | None = None) -> EvalRun:
    """Answer every question with every method and score the answers. ``on_progress(done, total,
    method)`` is called as each (question, method) pair finishes."""
    from ..agent import answer

    started = time.perf_counter()
    methods = parse_methods(list(methods))
    tree = open_tree(tree)
    baselines = Baselines(tree, cache_dir) if set(methods) & set(BASELINES) else None
    setup: dict[str, float] = {}
    if baselines:
        baselines.prepare(methods)
        setup.update({f"{k}_index_seconds": v for k, v in baselines.build_seconds.items()})
        if baselines._dense is not None:
            setup["dense_documents_from_cache"] = baselines._dense.cache_hits
            setup["documents"] = len(baselines.corpus.ids)
    records: list[dict] = []
    total, done = len(items) * len(methods), 0
    for item in items:
        for method in methods:
            record = {"id": item.id, "method": method, "question": item.question}
            try:
                if method == NAVIGATOR:
                    t0 = time.perf_counter()
                    result = answer(item.question, tree, provider=provider, max_turns=max_turns)
                    seconds = time.perf_counter() - t0
                    ranked, context = list(result.fetched[:RANK_DEPTH]), navigator_context(result, provider)
                    record.update(answer=result.answer, citations=result.citations, ranked=ranked,
                                  context=context, turns=result.turns,
                                  tool_calls=int(result.usage.get("tool_calls", len(result.trace))),
                                  nav_bytes=int(result.usage.get("nav_bytes", 0)), seconds=round(seconds, 4),
                                  flags=result.flags, path=result.path,
                                  usage={k: v for k, v in result.usage.items() if k != "seconds"})
                else:
                    got = baselines.run(method, item.question)
                    ranked, context = got.ranked, got.context
                    from ..agent import citations_in

                    record.update(answer=got.answer, citations=citations_in(got.answer), ranked=ranked,
                                  context=context, turns=0, tool_calls=0, nav_bytes=0,
                                  seconds=round(got.seconds, 4))
                score(record, item, ranked, context)
            except Exception as e:  # one failing question must not sink the run: scored as zero
                record.update(answer="", citations=[], ranked=[], context=[], turns=0, tool_calls=0,
                              nav_bytes=0, seconds=0.0, error=f"{type(e).__name__}: {e}",
                              traceback=traceback.format_exc(limit=3))
                score(record, item, [], [])
            records.append(record)
            done += 1
            if on_progress:
                on_progress(done, total, method)
    summary = {m: aggregate([r for r in records if r["method"] == m]) for m in methods}
    intervals = {m: {k: list(bootstrap_interval([r[k] for r in records if r["method"] == m and r.get(k) is not None]))
                     for k in ("token_f1", "recall@5", "mrr@10")
                     if any(r.get(k) is not None for r in records if r["method"] == m)} for m in methods}
    return EvalRun(str(tree.root), provider, methods, len(items), records, summary,
                   compare(records, methods), intervals, setup, time.perf_counter() - started)


def aggregate(records: Sequence[dict]) -> dict:
    out: dict[str, float | int | None] = {"n": len(records)}
    for metric in (*RETRIEVAL, *QUALITY):
        values = [r[metric] for r in records if r.get(metric) is not None]
        out[metric] = round(float(np.mean(values)), 4) if values else None
    for metric in COST:
        values = [r.get(metric, 0) or 0 for r in records]
        out[metric] = round(float(np.mean(values)), 4) if values else None
    latencies = [r.get("seconds", 0.0) for r in records]
    out["seconds_p95"] = round(float(np.percentile(latencies, 95)), 4) if latencies else None
    out["errors"] = sum(1 for r in records if r.get("error"))
    out["grounded"] = round(float(np.mean([not r.get("flags") for r in records])), 4) if records else None
    return out


def compare(records: Sequence[dict], methods: Sequence[str]) -> dict[str, dict]:
    """Navigator vs the best baseline (by mean) on each compared metric, over the queries every
    method was scored on."""
    baselines = [m for m in methods if m != NAVIGATOR]
    if NAVIGATOR not in methods or not baselines:
        return {}
    by = {(r["id"], r["method"]): r for r in records}
    ids = list(dict.fromkeys(r["id"] for r in records))
    out = {}
    for metric in COMPARED:
        usable = [i for i in ids if all(by[(i, m)].get(metric) is not None for m in methods)]
        if not usable:
            continue
        best = max(baselines, key=lambda m: (np.mean([by[(i, m)][metric] for i in usable]), -baselines.index(m)))
        result = paired_bootstrap([by[(i, NAVIGATOR)][metric] for i in usable],
                                  [by[(i, best)][metric] for i in usable],
                                  metric=metric, method=NAVIGATOR, baseline=best)
        out[metric] = result.to_dict()
    return out
