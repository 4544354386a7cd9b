"""Serving cost of the offline navigator: latency per query and navigation bytes read per query,
against the O(p·log_p N) the method promises.

For each corpus the benchmark compiles it (offline provider, into ``--home`` or a temporary
home; a warm home reuses the compile), warms the encoder with one untimed query, then answers
every question with ``c2s_agent.answer(q, tree, provider="offline")`` and reports:

- latency per query: p50 / p95 / mean / max (seconds, wall clock of ``answer``);
- navigation bytes per query, from ``usage``: ``nav_bytes`` (tool output the navigator saw of
  SKILL.md / INDEX.md / entity-index / grep listings) and ``scanned_bytes`` (tree file content
  its commands read, grep scans included), plus document bytes read with get_document;
- the reference ``p · ceil(log_p N)`` rows × mean row bytes (a row: one ``- [group]`` or
  ``- `doc_id``` line of a nav file) and the ratio of each byte count to it;
- gold recall: the share of questions whose gold document is among the fetched ones.

    .venv/bin/python benchmarks/serve_bench.py                      # WixQA sample
    .venv/bin/python benchmarks/serve_bench.py --large --home /tmp/c2s-serve-home   # + Debian ≥5,000 docs
    .venv/bin/python benchmarks/serve_bench.py --json serve.json --limit 40
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
WIXQA = ROOT.parent / "shared" / "data" / "wixqa-sample"
CACHE = BENCH / ".cache"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def compile_tree(home: Path, name: str, source: Path, p: int) -> tuple[Path, dict, float]:
    os.environ["DAGSTER_HOME"] = str(home)
    from c2s_pipeline.compiler import compile_corpus
    from c2s_pipeline.workspace import CorpusSpec, Workspace

    out = home / "trees" / name
    start = time.perf_counter()
    manifest = compile_corpus(CorpusSpec(name=name, source=str(source), out=str(out), p=p), Workspace(home))
    return out, manifest, time.perf_counter() - start


def row_stats(tree: Path) -> dict:
    """Rows (sub-group and document lines) of the tree's nav files: count and mean bytes."""
    sizes, files = [], 0
    for path in glob.glob(f"{tree}/skills/**/*.md", recursive=True):
        if not path.endswith(("SKILL.md", "INDEX.md")):
            continue
        files += 1
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.startswith(("- [", "- `")):
                sizes.append(len(line.encode("utf-8")) + 1)
    return {"nav_files": files, "rows": len(sizes), "mean_row_bytes": sum(sizes) / max(1, len(sizes))}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return 0.0
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def bench(name: str, tree: Path, questions: list[dict], p: int) -> dict:
    from c2s_agent import answer
    from c2s_agent.tree import open_tree

    n_docs = len(open_tree(tree).store.ids())
    rows = row_stats(tree)
    depth = max(1, math.ceil(math.log(n_docs, p)))
    reference = p * depth * rows["mean_row_bytes"]
    answer(questions[0]["question"], tree, provider="offline")  # warm: encoder load, tree caches
    lat, nav, scanned, docs, nav_files, tool_calls, hits = [], [], [], [], [], [], 0
    for i, q in enumerate(questions):
        result = answer(q["question"], tree, provider="offline")
        u = result.usage
        lat.append(u["seconds"])
        nav.append(u["nav_bytes"])
        scanned.append(u["scanned_bytes"])
        docs.append(u["document_bytes"])
        nav_files.append(u["nav_files_read"])
        tool_calls.append(u["tool_calls"])
        gold = set(q.get("gold_ids") or [])
        hits += bool(gold & set(result.fetched))
        if (i + 1) % 20 == 0:
            log(f"  [{name}] {i + 1}/{len(questions)}")
    mean = lambda xs: sum(xs) / max(1, len(xs))  # noqa: E731
    return {
        "corpus": name, "documents": n_docs, "queries": len(questions), "p": p,
        "ceil_log_p_N": depth, **rows, "reference_bytes": round(reference),
        "latency_s": {"p50": round(pct(lat, 0.5), 3), "p95": round(pct(lat, 0.95), 3),
                      "mean": round(mean(lat), 3), "max": round(max(lat), 3)},
        "nav_bytes": {"p50": round(pct(nav, 0.5)), "p95": round(pct(nav, 0.95)), "mean": round(mean(nav))},
        "scanned_bytes": {"p50": round(pct(scanned, 0.5)), "p95": round(pct(scanned, 0.95)),
                          "mean": round(mean(scanned))},
        "document_bytes_mean": round(mean(docs)),
        "nav_files_read_mean": round(mean(nav_files), 1),
        "tool_calls_mean": round(mean(tool_calls), 1),
        "ratio_nav_to_reference": round(mean(nav) / reference, 2),
        "ratio_scanned_to_reference": round(mean(scanned) / reference, 2),
        "gold_fetched": round(hits / max(1, len(questions)), 3),
    }


def report(r: dict) -> str:
    lat, nav, sc = r["latency_s"], r["nav_bytes"], r["scanned_bytes"]
    return "\n".join([
        f"== {r['corpus']}: {r['documents']:,} docs, {r['queries']} queries, p={r['p']}, "
        f"ceil(log_p N)={r['ceil_log_p_N']}, {r['nav_files']} nav files, mean row {r['mean_row_bytes']:.0f} B",
        f"latency        p50 {lat['p50']:.3f} s   p95 {lat['p95']:.3f} s   mean {lat['mean']:.3f} s   max {lat['max']:.3f} s",
        f"nav bytes      p50 {nav['p50']:,}   p95 {nav['p95']:,}   mean {nav['mean']:,}  "
        f"(×{r['ratio_nav_to_reference']} of reference {r['reference_bytes']:,} B = p·ceil(log_p N) rows)",
        f"scanned bytes  p50 {sc['p50']:,}   p95 {sc['p95']:,}   mean {sc['mean']:,}  "
        f"(×{r['ratio_scanned_to_reference']} of reference)",
        f"per query      {r['nav_files_read_mean']} nav files, {r['tool_calls_mean']} tool calls, "
        f"{r['document_bytes_mean']:,} document bytes; gold fetched {r['gold_fetched']:.1%}",
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, help="c2s home to compile into / reuse (default: a temporary one)")
    ap.add_argument("--large", action="store_true", help="also the ≥5,000-doc Debian corpus (cold compile ~8 min)")
    ap.add_argument("--limit", type=int, help="at most this many questions per corpus")
    ap.add_argument("--p", type=int, default=10, help="branching ratio to compile with")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = None
    if args.home is None:
        tmp = tempfile.TemporaryDirectory(prefix="c2s-serve-bench-")
        args.home = Path(tmp.name)
    args.home.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        corpora = [("wixqa", WIXQA / "corpus.jsonl", WIXQA / "qa_dev.jsonl")]
        if args.large:
            sys.path.insert(0, str(BENCH))
            from debian_corpus import build_corpus

            src, qs = CACHE / "debian-docs.jsonl", CACHE / "debian-questions.jsonl"
            if not (src.exists() and qs.exists()):
                log("building the Debian corpus ...")
                build_corpus(src, questions=qs)
            corpora.append(("debian", src, qs))
        for name, source, qfile in corpora:
            log(f"compiling {name} into {args.home} ...")
            tree, _, seconds = compile_tree(args.home, name, source, args.p)
            log(f"  compiled in {seconds:.1f} s")
            questions = [json.loads(line) for line in qfile.read_text().splitlines() if line.strip()]
            questions = questions[: args.limit] if args.limit else questions
            r = bench(name, tree, questions, args.p)
            r["compile_seconds"] = round(seconds, 1)
            results.append(r)
            print(report(r), flush=True)
    finally:
        if tmp is not None:
            tmp.cleanup()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
