"""Write an evaluation run: results.json, results.md (a pasteable table and the verdict),
per-query.jsonl and, when matplotlib imports, chart.png (bars with 95% bootstrap intervals)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from .runner import NAVIGATOR, EvalRun

COLUMNS = [("recall@1", "R@1"), ("recall@5", "R@5"), ("recall@10", "R@10"), ("mrr@10", "MRR@10"),
           ("context_recall", "Ctx R"), ("context_precision", "Ctx P"), ("token_f1", "Token F1"),
           ("turns", "Turns"), ("tool_calls", "Tool calls"), ("nav_bytes", "Nav bytes"),
           ("seconds", "s/query")]
CHART_METRICS = [("recall@5", "recall@5"), ("mrr@10", "MRR@10"), ("token_f1", "Token F1")]


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
    if metric == "nav_bytes":
        return f"{value:,.0f}"
    if metric in ("turns", "tool_calls"):
        return f"{value:.1f}"
    if metric == "seconds":
        return f"{value:.2f}"
    return f"{value:.3f}"


def table(run: EvalRun) -> str:
    head = "| Method | " + " | ".join(label for _, label in COLUMNS) + " |"
    rule = "|---|" + "---:|" * len(COLUMNS)
    rows = []
    best = {m: max((s.get(m) for s in run.summary.values() if s.get(m) is not None), default=None)
            for m, _ in COLUMNS[:7]}
    for method, s in run.summary.items():
        cells = []
        for metric, _ in COLUMNS:
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
        lines.append(f"- {metric}: navigator {word} {b['baseline']} (best baseline) — "
                     f"{b['mean_method']:.3f} vs {b['mean_baseline']:.3f}, Δ {b['diff']:+.3f} "
                     f"[95% CI {b['ci_low']:+.3f}, {b['ci_high']:+.3f}], p = {b['p_value']:.4f}, n = {b['n']}")
    return lines


def markdown(run: EvalRun) -> str:
    n_errors = sum(s.get("errors", 0) for s in run.summary.values())
    parts = [
        "# c2s evaluation", "",
        f"Tree `{run.tree}`, provider `{run.provider}`, {run.questions} questions, "
        f"methods: {', '.join(run.methods)}.", "",
        table(run), "",
        "## Verdict (paired bootstrap, 10,000 resamples, seed 0; win/loss at p < 0.05)", "",
        *verdict_lines(run), "",
        "Recall@k / MRR@10 on gold document ids (navigator: its ranked fetched documents); context "
        "recall/precision over the 5 documents each method put in context; Token F1 with SQuAD "
        "normalisation after removing [doc_id] citations and link targets. Baselines answer with "
        "the navigator's extractive composer over their top 3 documents. Cost: turns, tool calls, "
        "navigation bytes read and latency per query (means).",
    ]
    if n_errors:
        parts += ["", f"**{n_errors} question(s) failed** (scored as zero; see `error` in per-query.jsonl)."]
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
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(metrics) * max(1, len(run.methods)) / 2, 4))
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
