"""How close a compile with a real LLM provider comes to the API's throughput bound.

Compiles the WixQA sample with ``--provider anthropic`` against the local fake Anthropic server
(``tests/fakes``), which answers every compile task with valid JSON after a fixed latency, then
compiles it again with the offline provider in the same process (fresh homes, cold caches both).

With ``concurrency`` calls in flight and ``latency`` seconds per call, no client can exceed
``concurrency / latency`` calls per second. Each LLM stage's rate is measured at the server,
from the stage's first request arriving to its last answer leaving (requests are assigned to
stages by the stage windows the progress listener sees). The headline ratio is the card stage's:
the only stage with many more items than ``concurrency``. A stage with n calls needs at least
``ceil(n/concurrency)`` waves of ``latency``, so small stages (18 level-1 summaries, one
repartition call) cannot reach the bound; they are reported with the share of the rate they could
reach as well.

It also reports the prompt cache, per stage: the share of each stage's prompt tokens read from
the cache (the manifest's ``cache_read_share``), with the fake server caching as the Anthropic API
documents each model's minimum cacheable prefix (``pricing.Price.cache_min_tokens``: 4,096 tokens
for Haiku 4.5, 1,024 for Sonnet), and again with a server that caches a prefix of any length (as
vLLM's automatic prefix caching does), which a third compile measures.

    .venv/bin/python benchmarks/llm_throughput_bench.py [--latency 0.3] [--concurrency 20] [--json]

The last line reads ``throughput_ratio=<value>`` (target ≥ 0.85).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_CORPUS = ROOT.parent / "shared" / "data" / "wixqa-sample" / "corpus.jsonl"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def timed_compile(name: str, source: Path, home: Path, **llm) -> tuple[float, dict]:
    from c2s_pipeline.compiler import compile_corpus
    from c2s_pipeline.workspace import CorpusSpec, Workspace

    spec = CorpusSpec(name=name, source=str(source), out=str(home / "trees" / name))
    started = time.perf_counter()
    manifest = compile_corpus(spec, Workspace(home), **llm)
    return time.perf_counter() - started, manifest


class StageClock:
    """A progress listener noting when each stage first and last reported (monotonic clock, as
    the fake server's request times)."""

    def __init__(self):
        self.windows: dict[str, list[float]] = {}

    def update(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        self.windows.setdefault(stage, [now, now])[1] = now

    def stage_of(self, started: float) -> str:
        return next((s for s, (a, b) in self.windows.items() if a <= started <= b), "?")


def stage_windows(requests, clock: StageClock, concurrency: int, latency: float) -> dict[str, dict]:
    """Per stage: calls, the server-side window from first arrival to last answer, calls/second,
    and that rate as a share of the bound and of what ``ceil(n/concurrency)`` waves allow."""
    groups = defaultdict(list)
    for r in requests:
        groups[clock.stage_of(r.started)].append(r)
    out = {}
    for stage in sorted(groups, key=lambda s: min(r.started for r in groups[s])):
        rs = groups[stage]
        window = max(r.finished for r in rs) - min(r.started for r in rs)
        rate = len(rs) / window
        reachable = len(rs) / (math.ceil(len(rs) / concurrency) * latency)
        out[stage] = {"calls": len(rs), "window_s": round(window, 3), "calls_per_s": round(rate, 2),
                     "ratio_to_bound": round(rate / (concurrency / latency), 3),
                     "ratio_to_reachable": round(rate / reachable, 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per fake API call")
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--card-model", default="claude-haiku-4-5", help="the cheaper model the cards use")
    parser.add_argument("--json", action="store_true", help="print the results as JSON before the last line")
    args = parser.parse_args()
    if not args.corpus.exists():
        sys.exit(f"corpus not found: {args.corpus}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        os.environ.pop(name, None)
    os.environ["ANTHROPIC_API_KEY"] = "sk-fake"  # the fake server accepts any key

    t = time.perf_counter()
    import anthropic
    import sentence_transformers  # noqa: F401
    from transformers.utils import logging as hf_logging

    import c2s_pipeline.definitions  # noqa: F401
    from c2s_pipeline import progress
    from c2s_core.llm import pricing
    from c2s_core.llm.clients import DEFAULT_MODELS
    from tests.fakes.compile_model import CompileModel
    from tests.fakes.llm_servers import FakeLLMServer

    hf_logging.disable_progress_bar()
    anthropic.AsyncAnthropic(api_key="sk-fake").messages  # the SDK builds its resources lazily, once

    log(f"imports {time.perf_counter() - t:.1f}s")
    bound = args.concurrency / args.latency
    with tempfile.TemporaryDirectory(prefix="c2s-llm-bench-") as tmp:
        tmp = Path(tmp)
        offline_s, offline = timed_compile("wixqa", args.corpus, tmp / "offline")
        log(f"offline compile {offline_s:.1f}s")
        clock = StageClock()
        progress.set_listener(clock)
        models = (DEFAULT_MODELS["anthropic"], args.card_model)
        minimums = {m: pricing.price_for(m).cache_min_tokens for m in models}
        with FakeLLMServer("anthropic", handler=CompileModel(cache_min_tokens=minimums), latency=args.latency) as server:
            llm_s, manifest = timed_compile("wixqa", args.corpus, tmp / "anthropic", provider="anthropic",
                                            base_url=server.base_url, concurrency=args.concurrency,
                                            card_model=args.card_model)
            requests = list(server.requests)
            max_in_flight = server.max_in_flight
        progress.set_listener(None)
        log(f"anthropic compile {llm_s:.1f}s, {len(requests)} calls")
        with FakeLLMServer("anthropic", handler=CompileModel(), latency=0.0) as server:
            _, any_length = timed_compile("wixqa", args.corpus, tmp / "any-length", provider="anthropic",
                                          base_url=server.base_url, concurrency=args.concurrency,
                                          card_model=args.card_model)
        log("anthropic compile, caching prefixes of any length: done")

    stages = stage_windows(requests, clock, args.concurrency, args.latency)
    for name, s in stages.items():  # the stage as a whole: reading inputs and writing results too
        s["stage_wall_s"] = manifest["stages"].get(name, {}).get("seconds")
    # The least time the LLM stages could take: each stage's calls in waves of `concurrency`.
    floor_s = sum(math.ceil(s["calls"] / args.concurrency) * args.latency for s in stages.values())
    llm_window = sum(s["window_s"] for s in stages.values())
    calls = sum(s["calls"] for s in stages.values())
    result = {
        "corpus": str(args.corpus), "documents": manifest["stats"]["documents"]["accepted"],
        "latency_s": args.latency, "concurrency": args.concurrency, "bound_calls_per_s": round(bound, 2),
        "max_in_flight": max_in_flight, "stages": stages,
        "overall": {"calls": calls, "window_s": round(llm_window, 3),
                    "ratio_to_bound": round(calls / llm_window / bound, 3),
                    "llm_stage_floor_s": round(floor_s, 2)},
        "compile_s": {"anthropic": round(llm_s, 2), "offline": round(offline_s, 2),
                      "difference": round(llm_s - offline_s, 2)},
        "stage_s": {name: {"anthropic": manifest["stages"][name]["seconds"], "offline": rec["seconds"]}
                    for name, rec in offline["stages"].items() if name in manifest["stages"]},
        "throughput_ratio": stages["doc_cards"]["ratio_to_bound"],
        "prompt_cache": {"minimums": minimums, "stages": cache_rows(manifest, any_length)},
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"corpus {result['corpus']}: {result['documents']} documents; fake API latency {args.latency * 1000:.0f} "
              f"ms, concurrency {args.concurrency}: bound {bound:.1f} calls/s; max in flight {max_in_flight}")
        print(f"{'stage':<20} {'calls':>5} {'window s':>9} {'calls/s':>8} {'of bound':>9} {'of reachable':>13} "
              f"{'stage s':>8}")
        for name, s in stages.items():
            print(f"{name:<20} {s['calls']:>5} {s['window_s']:>9.2f} {s['calls_per_s']:>8.1f} "
                  f"{s['ratio_to_bound']:>9.3f} {s['ratio_to_reachable']:>13.3f} {s['stage_wall_s'] or 0:>8.2f}")
        o = result["overall"]
        print(f"{'all LLM stages':<20} {o['calls']:>5} {o['window_s']:>9.2f} {o['calls'] / o['window_s']:>8.1f} "
              f"{o['ratio_to_bound']:>9.3f}")
        print("(\"of reachable\" assumes one round of calls; repartition stages make two dependent rounds - the "
              "verdicts, then the re-summaries they cause - and entities one per level, bottom-up)")
        print(f"compile: anthropic (fake, {args.latency * 1000:.0f} ms) {llm_s:.1f} s vs offline {offline_s:.1f} s "
              f"(+{llm_s - offline_s:.1f} s; the LLM stages cannot take less than {floor_s:.1f} s at this latency "
              "and concurrency)")
        print(f"\nprompt cache: share of each stage's prompt tokens read from the cache, at the models' "
              f"documented minimums ({', '.join(f'{m} {n:,}' for m, n in minimums.items())} tokens) and where "
              "any prefix is cached")
        print(f"{'stage':<20} {'calls':>5} {'prompt tokens':>14} {'shared/call':>12} {'read (minimums)':>16} "
              f"{'read (any length)':>18}")
        for row in result["prompt_cache"]["stages"]:
            print(f"{row['stage']:<20} {row['calls']:>5} {row['prompt_tokens']:>14,} {row['shared_per_call']:>12,} "
                  f"{row['read_at_minimums']:>16.1%} {row['read_any_length']:>18.1%}")
    print(f"throughput_ratio={result['throughput_ratio']:.3f}")


def cache_rows(manifest: dict, any_length: dict) -> list[dict]:
    """Per LLM stage: calls, prompt tokens, the shared instructions a call carries (the cached
    prefix where any length is cached), and the cache-read shares of the two compiles."""
    rows = []
    for name, u in manifest["stats"]["llm_usage"]["stages"].items():
        other = any_length["stats"]["llm_usage"]["stages"][name]
        prompt = u["input_tokens"] + u["cache_read_tokens"] + u["cache_write_tokens"]
        shared = (other["cache_read_tokens"] + other["cache_write_tokens"]) // max(1, other["calls"])
        rows.append({"stage": name, "calls": u["calls"], "prompt_tokens": prompt, "shared_per_call": shared,
                     "read_at_minimums": manifest["stats"]["llm_usage"]["cache_read_share"][name] or 0.0,
                     "read_any_length": any_length["stats"]["llm_usage"]["cache_read_share"][name] or 0.0})
    return rows


if __name__ == "__main__":
    main()
