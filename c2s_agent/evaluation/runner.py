"""Run every method over a QA set and score it: per-query records, per-method aggregates and the
paired bootstrap of the navigator against the best baseline."""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from c2s_core.tree import Tree, open_tree
from .answering import ANSWERING, Answerer
from .baselines import BASELINES, CONTEXT_DOCS, RANK_DEPTH, Baselines, Retrieved
from .judge import JUDGED, JUDGES
from .metrics import (QAItem, bootstrap_interval, context_scores, mrr_at, paired_bootstrap, recall_at,
                      token_f1)

NAVIGATOR = "navigator"  # routed: navigation, plus flat search when its routing confidence is low
NAVIGATOR_ONLY = "navigator-only"  # the same agent without the search tool
NAVIGATORS = (NAVIGATOR, NAVIGATOR_ONLY)
RAPTOR = "raptor"
AGENTIC = "agentic"
METHODS = (NAVIGATOR, NAVIGATOR_ONLY, *BASELINES, RAPTOR, AGENTIC)
RETRIEVAL = ("recall@1", "recall@5", "recall@10", "mrr@10", "context_recall", "context_precision")
QUALITY = ("token_f1", "bertscore", *JUDGED)
COST = ("turns", "tool_calls", "nav_bytes", "llm_calls", "tokens_in", "tokens_out", "tokens_cached", "cost_usd",
        "seconds")
COMPARED = ("token_f1", "recall@5", "factuality")  # the bootstrap's metrics (factuality: when judged)
INTERVALS = ("recall@5", "mrr@10", "context_recall", "context_precision", "token_f1", "bertscore", *JUDGED)


class MethodError(ValueError):
    """An unknown method."""


def parse_methods(spec: str | Sequence[str]) -> list[str]:
    names = [m.strip().lower() for m in (spec.split(",") if isinstance(spec, str) else spec) if m.strip()]
    if not names:
        raise MethodError("no methods given; choose from " + ", ".join(METHODS))
    for name in names:
        if name not in METHODS:
            raise MethodError(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
    return list(dict.fromkeys(names))


@dataclass
class EvalRun:
    tree: str
    navigator: str  # who navigated (and, for the other methods, which LLM answered)
    methods: list[str]
    questions: int
    records: list[dict]  # one per (question, method)
    summary: dict[str, dict]  # method -> aggregate metrics
    bootstrap: dict[str, dict]  # metric -> navigator vs best baseline
    intervals: dict[str, dict[str, list[float]]]  # method -> metric -> [low, high] (95% CI of the mean)
    setup: dict[str, Any] = field(default_factory=dict)
    wall_seconds: float = 0.0
    model: str = "offline"  # the answering model of every method
    judge: dict[str, Any] = field(default_factory=dict)  # the judge's LLM provider, model, calls, cost; empty: none
    bertscore: str = ""  # how BERTScore was computed, or why not

    def scores(self, method: str, metric: str) -> list[float | None]:
        return [r.get(metric) for r in self.records if r["method"] == method]

    def to_dict(self) -> dict:
        return {"tree": self.tree, "navigator": self.navigator, "model": self.model, "questions": self.questions,
                "methods": self.summary, "bootstrap": self.bootstrap, "intervals": self.intervals,
                "judge": self.judge or None, "bertscore": self.bertscore,
                "setup": self.setup, "wall_seconds": round(self.wall_seconds, 3),
                "protocol": {"context_docs": CONTEXT_DOCS, "rank_depth": RANK_DEPTH,
                             "bootstrap": "paired, 10,000 resamples, seed 0, two-sided p < 0.05"}}


def navigator_context(result, navigator: str) -> list[str]:
    """The documents the navigator put in context: the offline navigator reads its candidates in
    one batch and ranks them, so its best five; an LLM agent's last five documents read."""
    if navigator == "offline":
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


def cost_fields(usage: dict) -> dict[str, float | int]:
    """A method's LLM usage as the record's cost columns (zeros offline)."""
    read, write = int(usage.get("cache_read_tokens", 0)), int(usage.get("cache_write_tokens", 0))
    return {"llm_calls": int(usage.get("llm_calls", 0)),
            "tokens_in": int(usage.get("input_tokens", 0)) + read + write,
            "tokens_out": int(usage.get("output_tokens", 0)), "tokens_cached": read,
            "cost_usd": round(float(usage.get("cost_usd") or 0.0), 6)}


def evaluate(tree: Tree | str | os.PathLike[str], items: Sequence[QAItem], methods: Sequence[str] = METHODS,
             navigator: str = "offline", cache_dir: Path | None = None, max_turns: int = 10,
             on_progress: Callable[[int, int, str], None] | None = None, *, model: str | None = None,
             base_url: str | None = None, judge: str = "none", judge_model: str | None = None,
             judge_base_url: str | None = None) -> EvalRun:
    """Answer every question with every method and score the answers. ``navigator`` (with
    ``model`` / ``base_url``) is who navigates for the navigator methods and, for the others, who
    answers: ``offline`` (no LLM), ``anthropic`` or ``openai``, so every method answers alike; ``judge`` (anthropic or openai) adds LLM-judged
    metrics. ``on_progress(done, total, method)`` is called as each (question, method) pair
    finishes."""
    from ..agent import answer, check_citations, citations_in

    started = time.perf_counter()
    methods = parse_methods(list(methods))
    if judge not in JUDGES:
        raise ValueError(f"unknown judge {judge!r}; choose from {', '.join(JUDGES)}")
    if navigator == "offline" and (model or base_url):
        raise ValueError("model and base_url are for an LLM navigator (anthropic or openai), not offline")
    tree = open_tree(tree)
    setup: dict[str, Any] = {}
    flat_needed = any(m not in NAVIGATORS for m in methods) or judge != "none"
    baselines = Baselines(tree, cache_dir) if flat_needed else None
    answerer = judger = None
    try:
        runners: dict[str, Callable[[str], Retrieved]] = {}
        # Every method answers through this one client; a navigator registered beside the built-in
        # ones (not offline / anthropic / openai) is fine when the navigator methods are the only ones.
        if navigator in ANSWERING or any(m not in NAVIGATORS for m in methods):
            answerer = Answerer(navigator, model=model, base_url=base_url)
        if any(m not in NAVIGATORS for m in methods):
            runners = build_methods(methods, baselines, answerer, cache_dir, navigator, model, base_url,
                                    max_turns, setup)
        if judge != "none":
            from .judge import Judge

            judger = Judge(judge, baselines.corpus, model=judge_model, base_url=judge_base_url, cache_dir=cache_dir)
        nav_opts: dict[str, Any] = {}
        if answerer is not None and answerer.client is not None:
            nav_opts = {"client": answerer.client}
        elif navigator != "offline":
            nav_opts = {k: v for k, v in (("model", model), ("base_url", base_url)) if v}
        records: list[dict] = []
        total, done = len(items) * len(methods), 0
        for item in items:
            for method in methods:
                record: dict[str, Any] = {"id": item.id, "method": method, "question": item.question}
                try:
                    if method in NAVIGATORS:
                        t0 = time.perf_counter()
                        result = answer(item.question, tree, navigator=navigator, max_turns=max_turns,
                                        route=method == NAVIGATOR, **nav_opts)
                        seconds = time.perf_counter() - t0
                        usage = {k: v for k, v in result.usage.items() if k != "seconds"}
                        record.update(answer=result.answer, citations=result.citations,
                                      ranked=list(result.fetched[:RANK_DEPTH]),
                                      context=navigator_context(result, navigator), turns=result.turns,
                                      tool_calls=int(result.usage.get("tool_calls", len(result.trace))),
                                      nav_bytes=int(result.usage.get("nav_bytes", 0)), seconds=round(seconds, 4),
                                      flags=result.flags, path=result.path, usage=usage, **cost_fields(usage))
                    else:
                        got = runners[method](item.question)
                        seen = list(dict.fromkeys([*got.ranked, *got.context,
                                                   *(d for s in got.trace for d in s.get("doc_ids", []))]))
                        flags = list(got.flags) + check_citations(got.answer, seen, exists=lambda d: d in tree.store)
                        record.update(answer=got.answer, citations=citations_in(got.answer), ranked=got.ranked,
                                      context=got.context, turns=got.turns, tool_calls=got.tool_calls, nav_bytes=0,
                                      seconds=round(got.seconds, 4), flags=flags, usage=got.usage,
                                      **cost_fields(got.usage))
                        if got.trace:
                            record["trace"] = got.trace
                    score(record, item, record["ranked"], record["context"])
                except Exception as e:  # one failing question must not sink the run: scored as zero
                    record.update(answer="", citations=[], ranked=[], context=[], turns=0, tool_calls=0,
                                  nav_bytes=0, seconds=0.0, **cost_fields({}), error=f"{type(e).__name__}: {e}",
                                  traceback=traceback.format_exc(limit=3))
                    score(record, item, [], [])
                if judger is not None and not record.get("error"):
                    record.update(judger.assess(item.question, record["answer"], record["context"], item.answer))
                records.append(record)
                done += 1
                if on_progress:
                    on_progress(done, total, method)
    finally:
        for client in (answerer, judger):
            if client is not None:
                client.close()
    if baselines is not None:
        setup.update({f"{k}_index_seconds": v for k, v in baselines.build_seconds.items()})
        if baselines._dense is not None:  # noqa: SLF001
            setup["dense_documents_from_cache"] = baselines._dense.cache_hits  # noqa: SLF001
            setup["documents"] = len(baselines.corpus.ids)
    bert = add_bertscore(records, items)
    summary = {m: aggregate([r for r in records if r["method"] == m]) for m in methods}
    intervals = {m: {k: list(bootstrap_interval([r[k] for r in records if r["method"] == m and r.get(k) is not None]))
                     for k in INTERVALS
                     if any(r.get(k) is not None for r in records if r["method"] == m)} for m in methods}
    return EvalRun(str(tree.root), navigator, methods, len(items), records, summary,
                   compare(records, methods), intervals, setup, time.perf_counter() - started,
                   model=answerer.model if answerer is not None else (model or navigator),
                   judge=judger.summary() if judger is not None else {}, bertscore=bert)


def build_methods(methods: Sequence[str], baselines: Baselines, answerer: Answerer, cache_dir: Path | None, llm: str,
                  model: str | None, base_url: str | None, max_turns: int,
                  setup: dict[str, Any]) -> dict[str, Callable[[str], Retrieved]]:
    """Each non-navigator method, built once (indexes before any query is timed), as
    ``question -> Retrieved``; index and tree build statistics go into ``setup``. ``llm`` (with
    ``model`` / ``base_url``): RAPTOR's summaries come from the compile provider of that name."""
    runners: dict[str, Callable[[str], Retrieved]] = {}
    baselines.prepare(methods)
    for method in methods:
        if method in BASELINES:
            runners[method] = lambda q, m=method: baselines.run(m, q, answerer)
        elif method == AGENTIC:
            from .agentic import Agentic

            agent = Agentic(baselines, answerer, max_rounds=max_turns)
            agent.prepare()  # the search tools use the baselines' indexes: built once, shared
            runners[method] = agent.run
        elif method == RAPTOR:
            from .raptor import Raptor

            raptor = Raptor(baselines.corpus, cache_dir=cache_dir, provider=llm, model=model,
                            base_url=base_url, answerer=answerer)
            setup.update({f"raptor_{k}": v for k, v in (raptor.prepare() or {}).items()})
            runners[method] = raptor.run
    return runners


def add_bertscore(records: list[dict], items: Sequence[QAItem]) -> str:
    """BERTScore F1 of every answer with a gold answer, in one batch; how it went, in words."""
    from . import bertscore

    if not bertscore.installed():
        return bertscore.NOT_INSTALLED
    gold = {item.id: item.answer for item in items}
    scored = [r for r in records if gold.get(r["id"]) is not None]
    try:
        values, described = bertscore.f1_scores([r["answer"] for r in scored], [gold[r["id"]] for r in scored])
    except Exception as e:  # noqa: BLE001 - an optional metric must not sink the run
        return f"failed: {type(e).__name__}: {e}"
    for record, value in zip(scored, values):
        record["bertscore"] = value
    return described


def aggregate(records: Sequence[dict]) -> dict:
    out: dict[str, float | int | None] = {"n": len(records)}
    for metric in (*RETRIEVAL, *QUALITY):
        values = [r[metric] for r in records if r.get(metric) is not None]
        if values or metric not in ("bertscore", *JUDGED):  # optional metrics appear only when computed
            out[metric] = round(float(np.mean(values)), 4) if values else None
    for metric in COST:
        values = [r.get(metric, 0) or 0 for r in records]
        out[metric] = round(float(np.mean(values)), 6 if metric == "cost_usd" else 4) if values else None
    out["cost_usd_total"] = round(float(sum(r.get("cost_usd", 0) or 0 for r in records)), 6)
    latencies = [r.get("seconds", 0.0) for r in records]
    out["seconds_p95"] = round(float(np.percentile(latencies, 95)), 4) if latencies else None
    out["errors"] = sum(1 for r in records if r.get("error"))
    if any("judge_error" in r or r.get("factuality") is not None or r.get("faithfulness") is not None
           for r in records):
        out["judge_errors"] = sum(1 for r in records if r.get("judge_error"))
    out["grounded"] = round(float(np.mean([not r.get("flags") for r in records])), 4) if records else None
    return out


def compare(records: Sequence[dict], methods: Sequence[str]) -> dict[str, dict]:
    """Navigator vs the best other method (by mean) on each compared metric, over the queries
    every method was scored on (navigator-only is the navigator's ablation, not a baseline)."""
    baselines = [m for m in methods if m not in NAVIGATORS]
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
