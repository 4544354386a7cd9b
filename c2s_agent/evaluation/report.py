"""Write an evaluation run: results.json, results.md (a pasteable table and the verdict),
per-query.jsonl and, when matplotlib imports, chart.png (bars with 95% bootstrap intervals)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from .runner import NAVIGATOR, EvalRun

SCORES = [("recall@1", "R@1"), ("recall@5", "R@5"), ("recall@10", "R@10"), ("mrr@10", "MRR@10"),
          ("context_recall", "Ctx R"), ("context_precision", "Ctx P"), ("token_f1", "Token F1"),
          ("bertscore", "BERTScore"), ("factuality", "Factuality"), ("faithfulness", "Faithfulness"),
          ("judge_context_recall", "Judge ctx R"), ("judge_context_precision", "Judge ctx P"),
          ("hallucination", "Halluc.")]
LOWER_IS_BETTER = {"hallucination"}
NAVIGATION = [("turns", "Turns"), ("tool_calls", "Tool calls"), ("nav_bytes", "Nav bytes")]
LLM_COST = [("llm_calls", "LLM calls"), ("tokens_in", "Tokens in"), ("tokens_out", "Tokens out"),
            ("tokens_cached", "Cached"), ("cost_usd", "$/query")]
LATENCY = [("seconds", "s/query")]
CHART_METRICS = [("recall@5", "recall@5"), ("mrr@10", "MRR@10"), ("context_recall", "Ctx R"),
                 ("context_precision", "Ctx P"), ("token_f1", "Token F1"), ("bertscore", "BERTScore"),
                 ("factuality", "Factuality"), ("faithfulness", "Faithful."), ("judge_context_recall", "J ctx R"),
                 ("judge_context_precision", "J ctx P"), ("hallucination", "Halluc.")]


def write_outputs(run: EvalRun, out: Path) -> dict[str, Path | str]:
    """Write every output into ``out``; returns name -> path (or, for a skipped chart, why)."""
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path | str] = {}
    paths["results.json"] = out / "results.json"
    paths["results.json"].write_text(json.dumps(run.to_dict(), indent=2) + "\n", encoding="utf-8")
    paths["per-query.jsonl"] = out / "per-query.jsonl"
    with paths["per-query.jsonl"].open("w", encoding="utf-8") as f:
        for record in run.records:
            f.write(json.dumps({k: v for k, v in record.items() if k != "traceback"}, ensure_ascii=False) + "\n")
    paths["results.md"] = out / "results.md"
    paths["results.md"].write_text(markdown(run), encoding="utf-8")
    paths["chart.png"] = chart(run, out / "chart.png")
    return paths


def _cell(value, metric: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if metric in ("nav_bytes", "tokens_in", "tokens_out", "tokens_cached"):
        return f"{value:,.0f}"
    if metric == "cost_usd":
        return f"${value:.4f}"
    if metric in ("turns", "tool_calls", "llm_calls"):
        return f"{value:.1f}"
    if metric == "seconds":
        return f"{value:.2f}"
    return f"{value:.3f}"


def columns(run: EvalRun) -> list[tuple[str, str]]:
    """The table's columns: scores that were computed, navigation cost, LLM cost when any method
    called an LLM, latency."""
    scored = [(m, label) for m, label in SCORES if any(s.get(m) is not None for s in run.summary.values())]
    llm = LLM_COST if any(s.get("llm_calls") for s in run.summary.values()) else []
    return [*scored, *NAVIGATION, *llm, *LATENCY]


def table(run: EvalRun) -> str:
    cols = columns(run)
    head = "| Method | " + " | ".join(label for _, label in cols) + " |"
    rule = "|---|" + "---:|" * len(cols)
    rows = []
    pick = {m: (min if m in LOWER_IS_BETTER else max) for m, _ in SCORES}
    best = {m: pick[m]((s.get(m) for s in run.summary.values() if s.get(m) is not None), default=None)
            for m, _ in cols if m in pick}
    for method, s in run.summary.items():
        cells = []
        for metric, _ in cols:
            text = _cell(s.get(metric), metric)
            if metric in best and best[metric] is not None and s.get(metric) == best[metric] and len(run.summary) > 1:
                text = f"**{text}**"
            cells.append(text)
        rows.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join([head, rule, *rows])


def verdict_lines(run: EvalRun) -> list[str]:
    if not run.bootstrap:
        if NAVIGATOR not in run.methods:
            return ["No verdict: the navigator was not among the methods."]
        return ["No verdict: no baseline to compare with (or no gold answers / ids)."]
    lines = []
    for metric, b in run.bootstrap.items():
        word = {"win": "**wins** over", "loss": "**loses** to", "tie": "**ties** with"}[b["verdict"]]
        lines.append(f"- {metric}: navigator {word} {b['baseline']} (best other method) — "
                     f"{b['mean_method']:.3f} vs {b['mean_baseline']:.3f}, Δ {b['diff']:+.3f} "
                     f"[95% CI {b['ci_low']:+.3f}, {b['ci_high']:+.3f}], p = {b['p_value']:.4f}, n = {b['n']}")
    return lines


def markdown(run: EvalRun) -> str:
    n_errors = sum(s.get("errors", 0) for s in run.summary.values())
    answering = "offline (extractive)" if run.navigator == "offline" else f"`{run.navigator}` model `{run.model}`"
    parts = [
        "# c2s evaluation", "",
        f"Tree `{run.tree}`, {run.questions} questions, methods: {', '.join(run.methods)}; every method "
        f"answers with {answering}.", "",
        table(run), "",
        "## Verdict (paired bootstrap, 10,000 resamples, seed 0; win/loss at p < 0.05)", "",
        *verdict_lines(run), "",
        "Recall@k / MRR@10 on gold document ids (navigator: its ranked fetched documents; agentic: its "
        "searches fused by reciprocal rank); context recall/precision over the 5 documents each method "
        "put in context; Token F1 with SQuAD normalisation after removing [doc_id] citations and link "
        "targets. "
        + ("Offline, every method answers with the navigator's extractive composer over its best 3 "
           "documents, so the comparison isolates retrieval. " if run.navigator == "offline" else
           "Flat methods answer with one call over their 5 documents in context; the navigator and the "
           "agentic method answer at the end of their own tool loops. ")
        + "Cost per query (means): turns, tool calls, navigation bytes read, LLM calls, tokens in / out / "
          "cached, dollars, and latency.",
        "",
        f"BERTScore: {run.bertscore}." if run.bertscore else "BERTScore: not computed.",
    ]
    if run.judge:
        j = run.judge
        parts += ["", f"Judge: `{j['provider']}` model `{j['model']}` (prompt {j['prompt_version']}): 1-5 scores "
                      "scaled to 0-1 as (s-1)/4 on the last 5 documents in context (8,000 characters); "
                      "hallucination = faithfulness < 0.6. "
                      f"{j['calls']} calls, {j['cache_hits']} cached verdicts, {j['errors']} errors, "
                      f"${j['cost_usd']:.4f}."]
    else:
        parts += ["", "Judge: none (--judge anthropic|openai adds factuality, faithfulness, judged context "
                      "recall/precision and the hallucination rate)."]
    if n_errors:
        parts += ["", f"**{n_errors} question(s) failed** (scored as zero; see `error` in per-query.jsonl)."]
    judge_errors = sum(s.get("judge_errors", 0) for s in run.summary.values())
    if judge_errors:
        parts += ["", f"**{judge_errors} judge verdict(s) failed** (left unscored; see `judge_error` in "
                      "per-query.jsonl)."]
    return "\n".join(parts) + "\n"


def chart(run: EvalRun, path: Path) -> Path | str:
    """Grouped bars per metric with 95% bootstrap intervals; a reason string when skipped."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "skipped: matplotlib is not installed (pip install matplotlib for chart.png)"
    metrics = [(m, label) for m, label in CHART_METRICS
               if any(run.summary[x].get(m) is not None for x in run.methods)]
    if not metrics:
        return "skipped: no scored metric to plot"
    fig, ax = plt.subplots(figsize=(min(24.0, 1.8 + 0.5 * len(metrics) * max(1, len(run.methods))), 4.5))
    width = 0.8 / len(run.methods)
    for j, method in enumerate(run.methods):
        xs, heights, lows, highs = [], [], [], []
        for i, (metric, _) in enumerate(metrics):
            mean = run.summary[method].get(metric)
            if mean is None:
                continue
            low, high = run.intervals.get(method, {}).get(metric, [mean, mean])
            xs.append(i + (j - (len(run.methods) - 1) / 2) * width)
            heights.append(mean)
            lows.append(max(0.0, mean - low))
            highs.append(max(0.0, high - mean))
        ax.bar(xs, heights, width, yerr=[lows, highs], capsize=3, label=method)
    ax.set_xticks(range(len(metrics)), [label for _, label in metrics])
    ax.set_ylim(0, 1)
    ax.set_title(f"c2s eval: {run.questions} questions (95% bootstrap intervals)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
