"""Development sets for navigation against flat retrieval, and their acceptance table.

Builds the project's own development sets from public text that is not the Python
documentation (a language's reference docs are held out for evaluation, so nothing here is
tuned on them), compiles them with the offline default, and runs ``nav_bench.evaluate`` on
each set:

- ``debian known-item``: a deterministic sample of the Debian documentation corpus
  (``debian_corpus.DEV_SOURCES``: git, man pages, PostgreSQL, CMake), questions templated
  from distinctive titles;
- ``debian faq`` / ``debian faq-page``: FAQ-style questions drawn from the same documents'
  body text (``faq_questions.py``), gold the source section / every section of its page;
- ``wixqa dev``: the shared WixQA sample and its dev questions.

It prints one acceptance table: per set, routed and navigator-only recall@5 as a ratio of
the best flat method's (paired bootstrap 95% intervals; targets 1.0x and 0.95x), the paired
verdicts, nav bytes per query against the ``p · ceil(log_p N)`` reference, and, where the
compiled tree's manifest carries ``navigability``, the predicted winner beside the measured one
(the diagnostics' verdict for the set's style of question: ``topic`` for known-item and WixQA
questions, ``detail`` for FAQ questions drawn from body text).

    .venv/bin/python benchmarks/nav_dev.py [--docs 2000] [--questions 100] [--json results/nav-dev.json]

Corpora, question files, the c2s home (DAGSTER_HOME) and compiled trees live under
``benchmarks/.cache/nav-dev`` (gitignored); a tree is recompiled only when its corpus file
changes (or with ``--recompile``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from debian_corpus import DEV_SOURCES, CorpusError, build_corpus  # noqa: E402
from nav_bench import evaluate, print_report  # noqa: E402

CACHE = HERE / ".cache" / "nav-dev"
WIXQA = ROOT.parent / "shared" / "data" / "wixqa-sample"
TARGETS = {"routed": 1.0, "navigator-only": 0.95}  # share of the best flat method's recall@5


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _sha(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def compile_tree(corpus: Path, name: str, cache: Path, recompile: bool) -> tuple[Path, float | None, bool]:
    """``c2s compile`` in a subprocess with its own DAGSTER_HOME; returns the tree, the
    compile's wall seconds and whether the tree of this exact corpus file was reused (its
    stamp keeps the corpus hash and the seconds the compile took)."""
    tree = cache / "trees" / name
    stamp = cache / "trees" / f"{name}.source-sha1"
    digest = _sha(corpus)
    recorded = stamp.read_text().split() if stamp.exists() else []
    if not recompile and (tree / "manifest.json").exists() and recorded[:1] == [digest]:
        log(f"{name}: reusing {tree}")
        return tree, float(recorded[1]) if len(recorded) > 1 else None, True
    home = cache / "home"
    home.mkdir(parents=True, exist_ok=True)
    logfile = cache / f"compile-{name}.log"
    cmd = [sys.executable, "-m", "c2s_cli", "compile", str(corpus), "--corpus", name, "--out", str(tree)]
    log(f"{name}: compiling {corpus} (log: {logfile})")
    start = time.perf_counter()
    with logfile.open("w", encoding="utf-8") as fh:
        proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "DAGSTER_HOME": str(home), "COLUMNS": "100"},
                              stdout=fh, stderr=subprocess.STDOUT, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{name}: c2s compile failed (exit {proc.returncode}); see {logfile}")
    stamp.write_text(f"{digest} {seconds:.1f}")
    log(f"{name}: compiled in {seconds:.0f}s")
    return tree, seconds, False


def predicted_winner(tree: Path, style: str) -> str | None:
    """The compile-time diagnostics' expected winner for questions of ``style`` ("topic" or
    "detail"), else their overall one, if the manifest has them."""
    nav = json.loads((tree / "manifest.json").read_text(encoding="utf-8")).get("navigability")
    if not isinstance(nav, dict):
        return None
    return nav.get("verdict_by_question_style", {}).get(style) or nav.get("verdict")


def measured_winner(report: dict) -> str:
    """Navigation alone against the best flat method, by the paired bootstrap."""
    verdict = report["ratio_to_best_flat"]["navigator-only"]["verdict"]
    return {"win": "navigation", "loss": "flat"}.get(verdict, "either")


def acceptance_rows(sets: list[dict]) -> list[dict]:
    rows = []
    for s in sets:
        r = s["report"]
        row = {"set": s["name"], "documents": r["documents"], "questions": r["questions"],
               "best_flat": r["best_flat"], "best_flat_recall@5": r["recall@5"][r["best_flat"]]["mean"],
               "nav_bytes_per_reference": r["cost"]["routed"]["nav_bytes_per_reference"],
               "rounds_p95": r["cost"]["routed"]["rounds_p95"],
               "round_calls_max": r["cost"]["routed"]["round_calls_max"],
               "predicted": s["predicted"], "measured": measured_winner(r)}
        for run, target in TARGETS.items():
            ratio = r["ratio_to_best_flat"][run]
            row[run] = {"recall@5": r["recall@5"][run]["mean"], **ratio, "target": target,
                        "meets_target": ratio["ratio"] is not None and ratio["ratio"] >= target}
        rows.append(row)
    return rows


def print_acceptance(rows: list[dict]) -> None:
    print("\n## Acceptance: navigation against the best flat method (recall@5)")
    print("| set | docs | q | best flat | routed / best [95% CI] | verdict | nav-only / best [95% CI] | verdict | "
          "nav bytes ×ref | rounds p95 | calls/round max | predicted | measured |")
    print("|---|---:|---:|---|---|---|---|---|---:|---:|---:|---|---|")
    for row in rows:
        cells = []
        for run in TARGETS:
            c = row[run]
            cells.append(f"{c['recall@5']:.3f} / {row['best_flat_recall@5']:.3f} = {c['ratio']:.2f}x "
                         f"[{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}]")
            cells.append(f"{c['verdict']}; {'meets' if c['meets_target'] else 'misses'} ≥{c['target']}x")
        print(f"| {row['set']} | {row['documents']} | {row['questions']} | {row['best_flat']} | "
              f"{' | '.join(cells)} | {row['nav_bytes_per_reference']} | {row['rounds_p95']} | "
              f"{row['round_calls_max']} | {row['predicted'] or '—'} | "
              f"{row['measured']} |")
    met = all(row[run]["meets_target"] for row in rows for run in TARGETS)
    print(f"\nall targets met: {'yes' if met else 'no'} (routed ≥ {TARGETS['routed']}x and navigator-only ≥ "
          f"{TARGETS['navigator-only']}x the best flat method on every set; verdicts are paired bootstraps "
          f"of the difference, 10,000 resamples)")
    predicted = [row for row in rows if row["predicted"]]
    matched = sum(row["predicted"] == row["measured"] for row in predicted)
    print(f"diagnostics predicted the winner on {matched} of {len(predicted)} sets"
          + (f" (missed: {', '.join(row['set'] for row in predicted if row['predicted'] != row['measured'])})"
             if matched < len(predicted) else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2000, help="Debian documents sampled (deterministic stride)")
    ap.add_argument("--questions", type=int, default=100, help="questions per Debian question style")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--wixqa", type=Path, default=WIXQA, help="directory with corpus.jsonl and qa_dev.jsonl")
    ap.add_argument("--skip-wixqa", action="store_true")
    ap.add_argument("--recompile", action="store_true", help="compile even when a tree of the same corpus exists")
    ap.add_argument("--limit", type=int, help="questions per set (a quick run)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    cache = args.cache.resolve()
    data = cache / "data"
    files = {k: data / f"debian-dev-{k}.jsonl" for k in ("docs", "known-item", "faq", "faq-page")}
    try:
        corpus = build_corpus(files["docs"], min_docs=args.docs, limit=args.docs, sources=DEV_SOURCES,
                              questions=files["known-item"], n_questions=args.questions,
                              faq_questions=files["faq"], faq_page_questions=files["faq-page"])
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log(f"debian dev corpus: {corpus['docs']} docs {corpus['per_source']}, {corpus['questions']} known-item and "
        f"{corpus['faq_questions']} FAQ questions")

    debian_tree, *compiled = compile_tree(files["docs"], "debian-dev", cache, args.recompile)
    # Each set is predicted by the diagnostics' verdict for its style of question: known-item and
    # help-center questions ask what a document is about, FAQ questions from body text a detail.
    sets = [{"name": "debian known-item", "tree": debian_tree, "qa": files["known-item"], "style": "topic"},
            {"name": "debian faq", "tree": debian_tree, "qa": files["faq"], "style": "detail"},
            {"name": "debian faq-page", "tree": debian_tree, "qa": files["faq-page"], "page_level": True,
             "style": "detail"}]
    compiles = {"debian-dev": dict(zip(("seconds", "reused"), compiled))}
    if not args.skip_wixqa:
        wix_tree, *compiled = compile_tree(args.wixqa / "corpus.jsonl", "wixqa", cache, args.recompile)
        compiles["wixqa"] = dict(zip(("seconds", "reused"), compiled))
        sets.append({"name": "wixqa dev", "tree": wix_tree, "qa": args.wixqa / "qa_dev.jsonl", "style": "topic"})

    for s in sets:
        log(f"{s['name']}: evaluating {s['qa']}")
        s["report"] = evaluate(s["tree"], s["qa"], limit=args.limit, page_level=s.get("page_level", False))
        s["predicted"] = predicted_winner(s["tree"], s["style"])
        print(f"\n## {s['name']} ({s['qa'].name})")
        print_report(s["report"])
    rows = acceptance_rows(sets)
    print_acceptance(rows)
    print("compile seconds: " + ", ".join(
        f"{k} {'?' if c['seconds'] is None else round(c['seconds'])}{' (reused tree)' if c['reused'] else ''}"
        for k, c in compiles.items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "corpus": corpus, "compile_seconds": compiles, "acceptance": rows,
            "sets": [{"name": s["name"], "tree": str(s["tree"]), "qa": str(s["qa"]), "predicted": s["predicted"],
                      "report": s["report"]} for s in sets]}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
