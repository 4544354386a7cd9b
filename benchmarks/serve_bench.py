"""Serving cost of the offline navigator: latency per query and navigation bytes read per query,
against the O(p·log_p N) the method promises.

For each corpus the benchmark compiles it (offline compile provider, into ``--home`` or a
temporary home; a warm home reuses the compile), warms the encoder with one untimed query, then
answers every question with ``c2s_agent.answer(q, tree, navigator="offline")`` and reports:

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
    .venv/bin/python benchmarks/serve_bench.py --tree OUT --qa questions.jsonl     # a tree compiled before

It also reports what loading a tree costs: opening it (document store, manifest, skills), the
first question (its search and term indexes load on first use; the encoder is loaded before),
and the process's resident memory with the encoder alone, with the tree loaded and after the
questions.

With ``--mcp`` it measures ``c2s serve`` instead: one server process over streamable HTTP on
127.0.0.1, ``--clients`` concurrent MCP clients (the SDK's ``mcp.Client``) each calling the
``ask`` tool for ``--per-client`` questions, bounded by ``--mcp-seconds``, while the tree is
republished (by renames, as a compile publishes) ``--republish`` times mid-load. It reports
latency p50/p95, errors, how long each new tree took to be served, and the server's resident
memory after warm-up and after the load; the exit status is 1 on any failed call or a tree
that was never picked up::

    .venv/bin/python benchmarks/serve_bench.py --mcp                  # 50 clients × 10 questions
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


def rss_mb() -> dict:
    """This process's resident memory now and at its peak, in MB."""
    import resource

    with open("/proc/self/statm") as f:
        now = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return {"now": round(now, 1), "peak": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def bench(name: str, tree: Path, questions: list[dict], p: int) -> dict:
    from c2s_agent import answer
    from c2s_agent.evaluation.metrics import recall_at
    from c2s_core.navigation.scoring import embedder
    from c2s_core.tree import open_tree

    embedder()(["warm-up: the encoder loads before the tree is timed"])
    before = rss_mb()
    start = time.perf_counter()
    opened = open_tree(tree)
    n_docs = len(opened.store.ids())
    _ = opened.manifest, opened.skills
    open_s = time.perf_counter() - start
    start = time.perf_counter()
    answer(questions[0]["question"], opened, navigator="offline")  # the indexes load on first use
    first_s = time.perf_counter() - start
    loaded = rss_mb()
    rows = row_stats(tree)
    depth = max(1, math.ceil(math.log(n_docs, p)))
    reference = p * depth * rows["mean_row_bytes"]
    lat, nav, scanned, docs, nav_files, tool_calls, hits, routed5 = [], [], [], [], [], [], 0, []
    rounds, round_calls = [], []
    for i, q in enumerate(questions):
        result = answer(q["question"], opened, navigator="offline")
        u = result.usage
        lat.append(u["seconds"])
        nav.append(u["nav_bytes"])
        scanned.append(u["scanned_bytes"])
        docs.append(u["document_bytes"])
        nav_files.append(u["nav_files_read"])
        tool_calls.append(u["tool_calls"])
        rounds.append(result.turns)
        round_calls.append(max(u.get("calls_per_round") or [0]))
        gold = set(q.get("gold_ids") or [])
        hits += bool(gold & set(result.fetched))
        routed5.append(recall_at(result.fetched, list(gold), 5))
        if (i + 1) % 20 == 0:
            log(f"  [{name}] {i + 1}/{len(questions)}")
    mean = lambda xs: sum(xs) / max(1, len(xs))  # noqa: E731
    after = rss_mb()
    recall = {"routed": routed5, **flat_recall(opened, questions)}
    best = max(FLAT_METHODS, key=lambda m: mean(recall[m]))
    low, high = (round(x, 2) for x in ratio_interval(recall["routed"], recall[best]))
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
        "rounds": {"p50": percentile(rounds, 50), "p95": percentile(rounds, 95), "max": max(rounds)},
        "round_calls_max": max(round_calls),
        "ratio_nav_to_reference": round(mean(nav) / reference, 2),
        "ratio_scanned_to_reference": round(mean(scanned) / reference, 2),
        "gold_fetched": round(hits / max(1, len(questions)), 3),
        "recall@5": {k: round(mean(v), 4) for k, v in recall.items()}, "best_flat": best,
        "routed_to_best_flat": [round(mean(recall["routed"]) / (mean(recall[best]) or 1), 3), low, high],
        "load": {"open_s": round(open_s, 3), "first_question_s": round(first_s, 3),
                 "rss_mb_encoder_only": before["now"], "rss_mb_tree_loaded": loaded["now"],
                 "rss_mb_after": after["now"], "rss_mb_peak": after["peak"]},
    }


FLAT_METHODS = ("bm25", "dense", "hybrid")


def flat_recall(tree, questions: list[dict]) -> dict[str, list[float]]:
    """Recall@5 per question of each flat method (the evaluation's baselines) on the same tree."""
    from c2s_agent.evaluation.baselines import Baselines
    from c2s_agent.evaluation.metrics import recall_at

    flat = Baselines(tree)
    flat.prepare(FLAT_METHODS)
    return {m: [recall_at([flat.corpus.ids[i] for i in flat.search(m, q["question"], 5)], q.get("gold_ids") or [], 5)
                for q in questions] for m in FLAT_METHODS}


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank: a value some question actually took)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] if ordered else 0


def ratio_interval(a: list[float], b: list[float]) -> tuple[float, float]:
    """Paired percentile bootstrap 95% interval of mean(a) / mean(b): the same resampled
    questions for both runs, with the project's resample count and seed."""
    import numpy as np
    from c2s_agent.evaluation.metrics import ALPHA, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    idx = np.random.default_rng(BOOTSTRAP_SEED).integers(0, len(x), size=(BOOTSTRAP_RESAMPLES, len(x)))
    den = y[idx].mean(axis=1)
    ratios = x[idx].mean(axis=1)[den > 0] / den[den > 0]
    if not len(ratios):
        return (float("nan"), float("nan"))
    low, high = np.percentile(ratios, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    return (float(low), float(high))


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
        f"rounds         p50 {r['rounds']['p50']}   p95 {r['rounds']['p95']}   max {r['rounds']['max']}; "
        f"tool calls in one round at most {r['round_calls_max']}",
        "recall@5       " + ", ".join(f"{k} {v:.3f}" for k, v in r["recall@5"].items())
        + f"; routed / best flat ({r['best_flat']}) {r['routed_to_best_flat'][0]:.3f}x "
          f"[{r['routed_to_best_flat'][1]:.2f}, {r['routed_to_best_flat'][2]:.2f}]",
        f"tree load      open {r['load']['open_s']:.2f} s, first question (indexes loaded on use) "
        f"{r['load']['first_question_s']:.2f} s; RSS {r['load']['rss_mb_encoder_only']:,.0f} MB with the encoder alone, "
        f"{r['load']['rss_mb_tree_loaded']:,.0f} MB with the tree loaded, {r['load']['rss_mb_after']:,.0f} MB after "
        f"the questions (peak {r['load']['rss_mb_peak']:,.0f} MB)",
    ])


# -- MCP load (--mcp) ---------------------------------------------------------------------


def server_memory(pid: int) -> dict:
    """Resident memory of a process, MiB (Linux /proc): now and peak."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    except OSError:
        return {}
    def mib(key: str) -> float | None:
        return round(int(fields[key].split()[0]) / 1024, 1) if key in fields else None

    return {"rss_mib": mib("VmRSS"), "peak_mib": mib("VmHWM")}


def republish(out: Path, corpus: str, version: int) -> tuple[str, str]:
    """Publish a copy of ``out`` with one nav file changed, by renames as a compile does;
    returns (nav file, the line added to it)."""
    import shutil

    from c2s_core.atomic_publish import publish, staged_path

    stage = staged_path(out)
    shutil.rmtree(stage, ignore_errors=True)
    shutil.copytree(out, stage, symlinks=True)
    nav = min((stage / "skills").glob("*/SKILL.md"))
    line = f"republished as version {version}"
    nav.write_text(nav.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    publish(stage, out, corpus)
    return nav.relative_to(stage).as_posix(), line


def start_server(tree: Path, token: str, ask_concurrency: int | None = None):
    import re
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "c2s_cli", "serve", "--tree", str(tree), "--transport", "http",
                             "--host", "127.0.0.1", "--port", "0"]
                            + (["--ask-concurrency", str(ask_concurrency)] if ask_concurrency else []), cwd=ROOT, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "C2S_SERVE_TOKEN": token})
    line = proc.stderr.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+/mcp", line)
    if not found:
        proc.kill()
        raise RuntimeError(f"c2s serve did not start: {line}{proc.stderr.read()}")
    return proc, found.group()


def mcp_load(name: str, tree: Path, questions: list[dict], *, clients: int = 50, per_client: int = 10,
             seconds: float = 480.0, republishes: int = 2, ask_concurrency: int | None = None) -> dict:
    import secrets

    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    corpus = json.loads((tree / "manifest.json").read_text())["corpus"]
    token = secrets.token_urlsafe(16)
    proc, url = start_server(tree, token, ask_concurrency)
    planned = clients * per_client
    latencies: list[float] = []
    errors: list[str] = []
    pickups: list[float] = []
    state = {"done": 0, "started": 0.0}

    def connect():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        return http, Client(streamable_http_client(url, http_client=http))

    async def ask(client, question: str) -> None:
        start = time.perf_counter()
        try:
            result = await client.call_tool("ask", {"question": question})
            problem = (result.content[0].text if result.is_error else
                       None if (result.structured_content or {}).get("answer") else "empty answer")
        except Exception as e:  # a failed call is what this measures
            problem = f"{type(e).__name__}: {e}"
        latencies.append(time.perf_counter() - start)
        state["done"] += 1
        if problem:
            errors.append(problem[:200])

    async def one_client(i: int) -> None:
        http, client = connect()
        try:
            async with http, client:
                for j in range(per_client):
                    await ask(client, questions[(i * per_client + j) % len(questions)]["question"])
        except Exception as e:  # a connection that could not even be opened
            errors.append(f"client {i}: {type(e).__name__}: {e}"[:200])

    async def republisher() -> None:
        http, client = connect()
        async with http, client:
            for k in range(1, republishes + 1):
                while state["done"] < planned * k / (republishes + 1):
                    await anyio.sleep(0.05)
                at = state["done"]
                nav, line = await anyio.to_thread.run_sync(republish, tree, corpus, k + 1)
                published = time.perf_counter()
                with anyio.move_on_after(30):
                    while True:
                        seen = await client.call_tool("code_execution", {"command": f"tail -n 1 {nav}"})
                        if not seen.is_error and seen.content[0].text.strip() == line:
                            pickups.append(time.perf_counter() - published)
                            break
                        await anyio.sleep(0.02)
                log(f"  [{name}] republished version {k + 1} after {at}/{planned} calls")

    async def warm() -> None:
        # Every distinct question once, at the load's concurrency: the encoder is loaded, the
        # navigator's embedding memo and the worker threads exist before memory is measured.
        pending = iter(questions)

        async def worker() -> None:
            http, client = connect()
            async with http, client:
                for q in pending:
                    await client.call_tool("ask", {"question": q["question"]})

        async with anyio.create_task_group() as tg:
            for _ in range(min(clients, len(questions))):
                tg.start_soon(worker)

    async def load() -> bool:
        with anyio.move_on_after(seconds) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(republisher)
                for i in range(clients):
                    tg.start_soon(one_client, i)
        return not scope.cancelled_caught

    try:
        log(f"  [{name}] warming up: {len(questions)} questions ...")
        warm_start = time.perf_counter()
        anyio.run(warm)
        warm_s = time.perf_counter() - warm_start
        before = server_memory(proc.pid)
        log(f"  [{name}] {clients} MCP clients × {per_client} questions against {url} ...")
        start = time.perf_counter()
        finished = anyio.run(load)
        wall = time.perf_counter() - start
        after = server_memory(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
    return {
        "corpus": name, "clients": clients, "per_client": per_client, "planned_calls": planned,
        "ask_concurrency": ask_concurrency, "calls": len(latencies), "errors": len(errors),
        "error_samples": errors[:5],
        "finished_in_time": finished, "wall_s": round(wall, 1), "warmup_s": round(warm_s, 1),
        "calls_per_s": round(len(latencies) / wall, 2) if wall else 0.0,
        "latency_s": {"p50": round(pct(latencies, 0.5), 3), "p95": round(pct(latencies, 0.95), 3),
                      "max": round(max(latencies, default=0.0), 3)},
        "republished": republishes, "picked_up": len(pickups),
        "pickup_s": [round(p, 3) for p in pickups],
        "server_memory_mib": {"after_warmup": before, "after_load": after},
    }


def mcp_report(r: dict) -> str:
    lat, mem = r["latency_s"], r["server_memory_mib"]

    def rss(m: dict) -> str:
        return f"{m.get('rss_mib')} MiB (peak {m.get('peak_mib')})" if m else "n/a"

    lines = [
        f"== {r['corpus']} over MCP: {r['clients']} clients × {r['per_client']} questions, "
        f"{r['calls']}/{r['planned_calls']} calls in {r['wall_s']} s ({r['calls_per_s']} calls/s; "
        f"warm-up {r['warmup_s']} s)"
        + ("" if r["finished_in_time"] else " — stopped at the time bound"),
        f"latency        p50 {lat['p50']:.3f} s   p95 {lat['p95']:.3f} s   max {lat['max']:.3f} s",
        f"errors         {r['errors']}" + "".join(f"\n  {e}" for e in r["error_samples"]),
        f"republished    {r['republished']} times mid-load, picked up {r['picked_up']} "
        f"(after {', '.join(f'{p:.2f} s' for p in r['pickup_s']) or '-'})",
        f"server RSS     after warm-up {rss(mem['after_warmup'])}, after the load {rss(mem['after_load'])}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, help="c2s home to compile into / reuse (default: a temporary one)")
    ap.add_argument("--tree", type=Path, help="serve this compiled tree instead of compiling (with --qa)")
    ap.add_argument("--qa", type=Path, help="--tree: its questions (JSONL with question and gold_ids)")
    ap.add_argument("--large", action="store_true", help="also the ≥5,000-doc Debian corpus (cold compile ~8 min)")
    ap.add_argument("--limit", type=int, help="at most this many questions per corpus")
    ap.add_argument("--p", type=int, default=10, help="branching ratio to compile with")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--mcp", action="store_true", help="load-test c2s serve over MCP instead (see above)")
    ap.add_argument("--clients", type=int, default=50, help="--mcp: concurrent MCP clients")
    ap.add_argument("--per-client", type=int, default=10, help="--mcp: questions each client asks")
    ap.add_argument("--mcp-seconds", type=float, default=480.0, help="--mcp: time bound of the load")
    ap.add_argument("--republish", type=int, default=2, help="--mcp: republishes of the tree mid-load")
    ap.add_argument("--ask-concurrency", type=int, help="--mcp: the server's --ask-concurrency (default: its own)")
    args = ap.parse_args(argv)
    if bool(args.tree) != bool(args.qa) or (args.tree and (args.mcp or args.large)):
        ap.error("--tree and --qa go together, without --mcp or --large")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = None
    if args.home is None:
        tmp = tempfile.TemporaryDirectory(prefix="c2s-serve-bench-")
        args.home = Path(tmp.name)
    args.home.mkdir(parents=True, exist_ok=True)
    results, failed = [], False
    try:
        corpora = [("wixqa", WIXQA / "corpus.jsonl", WIXQA / "qa_dev.jsonl")]
        if args.tree:  # a tree compiled before: served as it is
            questions = [json.loads(line) for line in args.qa.read_text().splitlines() if line.strip()]
            r = bench(args.tree.name, args.tree, questions[: args.limit] if args.limit else questions, args.p)
            results.append(r)
            print(report(r), flush=True)
            corpora = []
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
            if args.mcp:
                r = mcp_load(name, tree, questions, clients=args.clients, per_client=args.per_client,
                             seconds=args.mcp_seconds, republishes=args.republish,
                             ask_concurrency=args.ask_concurrency)
                failed = failed or bool(r["errors"]) or r["picked_up"] < r["republished"]
            else:
                r = bench(name, tree, questions, args.p)
            r["compile_seconds"] = round(seconds, 1)
            results.append(r)
            print(mcp_report(r) if args.mcp else report(r), flush=True)
    finally:
        if tmp is not None:
            tmp.cleanup()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
