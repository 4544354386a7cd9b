"""Navigation cost and quality of the offline navigator, routed and not, beside flat retrieval.

For one compiled tree and a QA set with gold ids it answers every question with

- ``navigator-only``: the offline navigator, no search tool (``route=False``);
- ``routed``: the navigator with its routing rule (search results fused when the routing
  confidence is below ``--route-below``, the navigator's default unless given);
- ``bm25`` / ``dense`` / ``hybrid``: the flat baselines of ``c2s eval``;

and reports recall@5 with 95% bootstrap intervals, paired bootstraps (routed vs
navigator-only and vs each flat method, navigator-only vs each flat method; 10,000 resamples, the project's
:func:`~c2s_agent.evaluation.metrics.paired_bootstrap`), the share of questions routed, and
nav bytes per query (tool output seen of the tree) against the reference
``p · ceil(log_p N)`` rows × mean row bytes, with the search tool's bytes beside them, and
each run's recall@5 as a ratio of the best flat method's (paired bootstrap interval).
:func:`evaluate` returns that report and :func:`print_report` prints it, for other runners
(``nav_dev.py``) to call on their own sets.

Routing happens after the descent, so "always search" and "never search" runs give the routed
result at any threshold exactly; ``--tune`` prints recall@5 over a grid of thresholds. Tune
on one set and report another::

    .venv/bin/python benchmarks/nav_bench.py --tree /tmp/nav/wix --qa qa_dev.jsonl --tune
    .venv/bin/python benchmarks/nav_bench.py --tree /tmp/nav/debian --qa debian-questions.jsonl \\
        --json debian-nav.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serve_bench import percentile, ratio_interval, row_stats  # noqa: E402,F401 - counted as serve_bench counts them

GRID = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01)


# (tree, question, route) -> (fetched, usage): sets that share a tree and questions but not
# their gold (section- and page-level gold of the same questions) navigate once.
_ANSWERS: dict[tuple[str, str, bool], tuple[list[str], dict]] = {}


def pages(ids: list[str]) -> list[str]:
    """Document ids as their pages (the part before ``#``), first appearance kept."""
    return list(dict.fromkeys(i.split("#", 1)[0] for i in ids))


def recall5(ranked: list[str], gold: list[str], page_level: bool = False) -> float:
    """recall@5 on documents, or with ``page_level`` on pages: a hit when the gold page is
    among the first five distinct pages (so a page of many sections is one answer, not many)."""
    from c2s_agent.evaluation.metrics import recall_at

    return recall_at(pages(ranked), pages(gold), 5) if page_level else recall_at(ranked, gold, 5)


def navigate_all(tree, items, route: bool, page_level: bool = False) -> list[dict]:
    from c2s_agent import answer

    out = []
    for i, item in enumerate(items):
        key = (str(tree.root), item.question, route)
        if key not in _ANSWERS:
            r = answer(item.question, tree, navigator="offline", route=route, route_below=1.01)
            _ANSWERS[key] = (list(r.fetched), {**r.usage, "rounds": r.turns}, r.reached)
        fetched, u, reached = _ANSWERS[key]
        out.append({"id": item.id, "ranked": fetched[:10], "recall@5": recall5(fetched, item.gold_ids, page_level),
                    "lost": where_lost(fetched, reached, item.gold_ids, page_level),
                    "nav_bytes": u["nav_bytes"], "search_bytes": u.get("search_bytes", 0),
                    "scanned_bytes": u["scanned_bytes"], "beam": u.get("beam"), "seconds": u["seconds"],
                    "confidence": u.get("confidence_routing", 1.0), "rounds": u["rounds"],
                    "round_calls_max": max(u.get("calls_per_round") or [0])})
        if (i + 1) % 20 == 0:
            print(f"  {'always-routed' if route else 'navigator-only'} {i + 1}/{len(items)}", file=sys.stderr)
    return out


def seed_answers(tree_path: Path, qa_path: Path, per_query: list[dict]) -> None:
    """Take a saved report's answers (``per_query`` of :func:`evaluate`, with their rankings) as
    if navigated now, so a rerun that changes one run's answers navigates only that run. Their
    cost figures other than nav bytes are not kept (zero)."""
    from c2s_agent.evaluation.metrics import load_qa
    from c2s_core.tree import open_tree

    root = str(open_tree(tree_path).root)
    question = {item.id: item.question for item in load_qa(qa_path, None)}
    for q in per_query:
        for route, run in ((False, "navigator-only"), (True, "always_routed")):
            usage = {"nav_bytes": q["nav_bytes"], "scanned_bytes": 0, "beam": q["beam"], "seconds": 0.0,
                     "confidence_routing": q["confidence"], "rounds": 0, "calls_per_round": [0]}
            _ANSWERS[(root, question[q["id"]], route)] = (list(q["ranked"][run]), usage, None)


LOST = ("found", "not reached", "reached, not read", "read, not in the first five")


def where_lost(fetched: list[str], reached: list[str] | None, gold: list[str], page_level: bool = False) -> str | None:
    """Where navigation lost a question's answer (:data:`LOST`): a gold document among the first
    five read (found), among those read, among those its descent reached, or nowhere it went.
    None where what it reached is not known (answers taken from a saved report)."""
    if reached is None:
        return None
    if recall5(fetched, gold, page_level):
        return LOST[0]
    named = pages if page_level else list
    wanted = set(named(gold))
    if wanted & set(named(fetched)):
        return LOST[3]
    return LOST[2] if wanted & set(named(reached)) else LOST[1]


def routed_at(threshold: float, nav: list[dict], always: list[dict]) -> list[dict]:
    """The routed navigator at ``threshold``: the search-fused run where confidence is below it."""
    return [a if n["confidence"] < threshold else n for n, a in zip(nav, always)]


FLAT = ("bm25", "dense", "hybrid")


def evaluate(tree_path: Path, qa_path: Path, *, limit: int | None = None, route_below: float | None = None,
             tune: bool = False, page_level: bool = False) -> dict:
    """Answer every question of ``qa_path`` on the tree at ``tree_path`` with the navigator
    (alone and routed) and the flat baselines; return the report ``print_report`` prints.
    ``page_level`` scores pages instead of documents (see :func:`recall5`)."""
    from c2s_agent.evaluation.baselines import Baselines
    from c2s_agent.evaluation.metrics import bootstrap_interval, load_qa, paired_bootstrap
    from c2s_agent.offline_navigator import ROUTE_BELOW
    from c2s_core.tree import open_tree

    tree = open_tree(tree_path)
    items = [i for i in load_qa(qa_path, limit) if i.gold_ids]
    threshold = ROUTE_BELOW if route_below is None else route_below
    n_docs = len(tree.store.ids())
    p = int(tree.manifest.get("parameters", {}).get("p", 10))
    rows = row_stats(tree.root)
    depth = max(1, math.ceil(math.log(n_docs, p)))
    reference = p * depth * rows["mean_row_bytes"]

    start = time.perf_counter()
    nav = navigate_all(tree, items, route=False, page_level=page_level)
    always = navigate_all(tree, items, route=True, page_level=page_level)
    flat = Baselines(tree)
    flat.prepare(FLAT)
    scores = {"navigator-only": [r["recall@5"] for r in nav]}
    routed = routed_at(threshold, nav, always)
    scores["routed"] = [r["recall@5"] for r in routed]
    flat_ranked: dict[str, list[list[str]]] = {}
    for method in FLAT:
        depth_k = 30 if page_level else 10  # enough sections for five distinct pages
        flat_ranked[method] = [[flat.corpus.ids[i] for i in flat.search(method, item.question, depth_k)]
                               for item in items]
        scores[method] = [recall5(ranked, item.gold_ids, page_level)
                          for ranked, item in zip(flat_ranked[method], items)]
    mean = lambda xs: sum(xs) / max(1, len(xs))
    best_flat = max(FLAT, key=lambda m: mean(scores[m]))  # first of equals, in FLAT's order
    paired = {f"{run} vs {b}": paired_bootstrap(scores[run], scores[b], metric="recall@5", method=run,
                                                baseline=b).to_dict()
              for run, baselines in (("routed", ("navigator-only", *FLAT)), ("navigator-only", FLAT))
              for b in baselines}
    report = {
        "tree": str(tree.root), "qa": str(qa_path), "questions": len(items), "documents": n_docs, "p": p,
        "page_level": page_level,
        "ceil_log_p_N": depth, **rows, "reference_bytes": round(reference), "route_below": threshold,
        "routed_share": round(mean([n["confidence"] < threshold for n in nav]), 3),
        "recall@5": {m: {"mean": round(mean(v), 4), "ci95": [round(x, 4) for x in bootstrap_interval(v)]}
                     for m, v in scores.items()},
        "paired": paired,
        "best_flat": best_flat,
        "ratio_to_best_flat": {
            run: {"ratio": round(mean(scores[run]) / mean(scores[best_flat]), 4) if mean(scores[best_flat]) else None,
                  "ci95": [round(x, 4) for x in ratio_interval(scores[run], scores[best_flat])],
                  "verdict": paired[f"{run} vs {best_flat}"]["verdict"]}
            for run in ("routed", "navigator-only")},
        "cost": {name: {"nav_bytes_mean": round(mean([r["nav_bytes"] for r in runs])),
                        "search_bytes_mean": round(mean([r["search_bytes"] for r in runs])),
                        "scanned_bytes_mean": round(mean([r["scanned_bytes"] for r in runs])),
                        "nav_bytes_per_reference": round(mean([r["nav_bytes"] for r in runs]) / reference, 2),
                        "beam_mean": round(mean([r["beam"] or 0 for r in runs]), 2),
                        # an agent's budget: rounds per question, and the most tool calls in one round
                        "rounds_p50": percentile([r["rounds"] for r in runs], 50),
                        "rounds_p95": percentile([r["rounds"] for r in runs], 95),
                        "round_calls_p95": percentile([r["round_calls_max"] for r in runs], 95),
                        "round_calls_max": max([r["round_calls_max"] for r in runs], default=0),
                        "seconds_mean": round(mean([r["seconds"] for r in runs]), 3)}
                 for name, runs in (("navigator-only", nav), ("routed", routed))},
        # navigator-only: where each question's answer was lost, and how many of those flat search found
        "where_lost": {where: {"questions": sum(n["lost"] == where for n in nav),
                               "flat_found": sum(n["lost"] == where and any(scores[m][i] for m in FLAT)
                                                 for i, n in enumerate(nav))}
                       for where in LOST} if all(n["lost"] for n in nav) else None,
        "wall_seconds": round(time.perf_counter() - start, 1),
        "per_query": [{"id": item.id, "confidence": n["confidence"], "beam": n["beam"],
                       "nav_bytes": n["nav_bytes"], **{m: v[i] for m, v in scores.items()},
                       "always_routed": a["recall@5"],
                       # the rankings themselves (first ten), to study a fusion rule without navigating again
                       "ranked": {"navigator-only": n["ranked"], "always_routed": a["ranked"],
                                  **{m: flat_ranked[m][i] for m in FLAT}}}
                      for i, (item, n, a) in enumerate(zip(items, nav, always))],
    }
    if tune:
        report["tuning"] = {str(t): round(mean([r["recall@5"] for r in routed_at(t, nav, always)]), 4)
                            for t in GRID}
    return report


def print_report(report: dict) -> None:
    print(f"{report['documents']} docs, p={report['p']}, ceil(log_p N)={report['ceil_log_p_N']}, "
          f"{report['nav_files']} nav files, mean row {report['mean_row_bytes']:.0f} B, reference "
          f"{report['reference_bytes']:,} B; {report['questions']} questions; route below "
          f"{report['route_below']}: {report['routed_share']:.0%} routed")
    print("| method | recall@5 | 95% CI |")
    print("|---|---:|---|")
    for m, v in report["recall@5"].items():
        print(f"| {m} | {v['mean']:.3f} | [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}] |")
    print("| pair | Δ recall@5 | 95% CI | p | verdict |")
    print("|---|---:|---|---:|---|")
    for pair, b in report["paired"].items():
        print(f"| {pair} | {b['diff']:+.3f} | [{b['ci_low']:+.3f}, {b['ci_high']:+.3f}] | {b['p_value']:.4f} | "
              f"{b['verdict']} |")
    print("| run | nav bytes/query | ×reference | search bytes/query | scanned bytes/query | mean beam | "
          "rounds p50 / p95 | calls in a round p95 / max | s/query |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, c in report["cost"].items():
        print(f"| {name} | {c['nav_bytes_mean']:,} | {c['nav_bytes_per_reference']} | {c['search_bytes_mean']:,} | "
              f"{c['scanned_bytes_mean']:,} | {c['beam_mean']} | {c['rounds_p50']} / {c['rounds_p95']} | "
              f"{c['round_calls_p95']} / {c['round_calls_max']} | {c['seconds_mean']} |")
    if report.get("where_lost"):
        print("| navigator-only: the answer | questions | of those, flat search found |")
        print("|---|---:|---:|")
        for where, n in report["where_lost"].items():
            print(f"| {where} | {n['questions']} | {n['flat_found']} |")
    if "tuning" in report:
        print("tuning (routed recall@5 by threshold): " + ", ".join(f"{t}: {v}" for t, v in report["tuning"].items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--qa", type=Path, required=True)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--route-below", type=float, help="routing threshold (default: the navigator's)")
    ap.add_argument("--tune", action="store_true", help="print routed recall@5 over a threshold grid")
    ap.add_argument("--page-level", action="store_true",
                    help="score pages (ids before '#'), not sections: any section of the gold page is a hit")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    report = evaluate(args.tree, args.qa, limit=args.limit, route_below=args.route_below, tune=args.tune,
                      page_level=args.page_level)
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
