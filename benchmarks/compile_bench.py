"""Compile time per stage, against the encoder alone on the same texts.

For each corpus the benchmark

1. compiles it cold, in a fresh temporary c2s home (nothing cached), timing the whole
   ``compile_corpus`` call and reading each stage's own seconds from the manifest;
2. compiles it again in the same home (warm: every LLM call and embedding cached);
3. rebuilds, from the cold compile's artifacts, exactly the strings the compile embedded
   (document cards + text via ``embedding_text``, and each upper level's node texts via
   ``Level.node_texts``), deduplicated as ``embed_with_cache`` does, and times a fresh
   ``Encoder().encode`` on them (the model load is timed separately and excluded);
4. prints ``cold compile seconds / encoder seconds``: how much the compile costs beyond the
   unavoidable encoding; beside it the same ratio at equal speed (:class:`SpeedReference`: the
   same 300 documents encoded before the compile, between it and the encoder pass, and after);
5. with ``--change``, applies a day's change to the corpus (1% added, 0.5% edited, 0.5% deleted:
   :func:`day_change`) and recompiles it in the same home, the incremental update, against the
   cold compile: LLM calls and wall time as shares of the cold compile's. ``--change-home`` runs
   this step alone on a home an earlier ``--keep`` run left, against that run's ``--json``.

Corpora: (a) the WixQA sample (``../shared/data/wixqa-sample/corpus.jsonl``, relative to
the repository root) and (b) a real corpus of ≥5,000 Debian documentation pages assembled
at benchmark time by ``benchmarks/debian_corpus.py`` (cached in ``benchmarks/.cache/``).

    .venv/bin/python benchmarks/compile_bench.py --skip-large          # WixQA only
    .venv/bin/python benchmarks/compile_bench.py --json results.json   # both corpora
    .venv/bin/python benchmarks/compile_bench.py --limit 1000          # smaller Debian sample

Module imports (Dagster, the asset graph, sentence-transformers/torch) are paid once, before
any timing, and reported on their own, so each corpus's cold compile measures the same work:
the model load (the compile's encoder resource is fresh per compile), every LLM task (the
offline provider unless ``--provider`` says otherwise), every embedding and the publish.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WIXQA = ROOT.parent / "shared" / "data" / "wixqa-sample" / "corpus.jsonl"
CACHE = HERE / ".cache"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the measurements ------------------------------------------------------------------------------

def preload() -> dict:
    """Import what a compile and the encoder import, before any timing."""
    t = time.perf_counter()
    import c2s_pipeline.definitions  # noqa: F401  (Dagster and the asset graph)
    t_dagster = time.perf_counter() - t
    t = time.perf_counter()
    import sentence_transformers  # noqa: F401
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the "Loading weights" bar would clutter stderr
    t_torch = time.perf_counter() - t
    # First model load and first inferences of the process (lazy imports, kernel selection,
    # allocator growth) are one-time costs of neither the compile nor the encoder: pay them here.
    from c2s_core.encoder import Encoder

    t = time.perf_counter()
    Encoder().encode([("warm-up text " * n)[:2000] for n in range(1, 129)])
    t_warm = time.perf_counter() - t
    return {"dagster_s": round(t_dagster, 2), "sentence_transformers_s": round(t_torch, 2),
            "encoder_warmup_s": round(t_warm, 2), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__}


# -- the machine's speed, before, between and after (a shared machine's speed drifts) -----------

REFERENCE_DOCS = 300  # documents encoded as the speed reference: about 10 s


class SpeedReference:
    """The same few hundred of the corpus's documents encoded before the cold compile, between it
    and the encoder pass, and after that pass. The compile and the encoder pass run one after the
    other for up to an hour each, and a shared machine's speed drifts over that time (one
    52,971-document run's encoder pass ran 1.3x slower than the same pass an earlier day). Each
    phase's speed is taken as the mean of the references on either side of it, and the ratio is
    also reported at equal speed."""

    def __init__(self, source: Path):
        from incremental_bench import read_jsonl

        docs = read_jsonl(source)
        step = max(1, len(docs) // REFERENCE_DOCS)
        self.texts = [f"{d.get('title', '')}. \n{d.get('text', '')[:2000]}" for d in docs[::step][:REFERENCE_DOCS]]
        self.seconds: dict[str, float] = {}

    def measure(self, when: str) -> None:
        from c2s_core.encoder import Encoder

        encoder = Encoder()  # loaded for the measurement alone: the compile's peak memory stays its own
        encoder.encode(["warm-up: load the model"])
        t = time.perf_counter()
        encoder.encode(self.texts)
        self.seconds[when] = round(time.perf_counter() - t, 3)
        del encoder
        log(f"  speed reference {when}: {self.seconds[when]:.1f} s for {len(self.texts)} documents")

    def _pace(self, start: str, end: str) -> float | None:
        """A phase's reference time: the mean of the references taken at its start and its end."""
        if start not in self.seconds or end not in self.seconds:
            return None
        return (self.seconds[start] + self.seconds[end]) / 2

    def _at_equal_speed(self, a_s: float, a_phase: tuple[str, str], b_s: float, b_phase: tuple[str, str],
                        digits: int) -> float | None:
        """``a_s / b_s``, each divided by its phase's reference time."""
        a_pace, b_pace = self._pace(*a_phase), self._pace(*b_phase)
        return round((a_s / a_pace) / (b_s / b_pace), digits) if a_pace and b_pace else None

    def at_equal_speed(self, cold_s: float, encoder_s: float) -> float | None:
        """cold / encoder, each divided by the mean reference time around it."""
        return self._at_equal_speed(cold_s, ("before", "between"), encoder_s, ("between", "after"), 3)

    def change_at_equal_speed(self, change_s: float, cold_s: float) -> float | None:
        """The day's change's time over the cold compile's, each divided by the mean reference
        time around it (the change runs after the encoder pass)."""
        return self._at_equal_speed(change_s, ("after", "after the change"), cold_s, ("before", "between"), 4)


# -- instruments around a compile (the pipeline code itself is untouched) -----------------------

class EncodeMeter:
    """Time spent inside ``Encoder.encode`` while a compile runs, in total and per stage (the
    stage that last reported progress: ``embed_with_cache`` reports before it encodes), by
    wrapping the class's methods for the duration. Model loads are counted apart."""

    def __init__(self):
        self.encode_s = self.load_s = 0.0
        self.calls = self.texts = 0
        self.stage = "?"
        self.by_stage: dict[str, float] = {}
        self.rss_by_stage: dict[str, float] = {}  # set by RssSampler's owner once the compile ends

    def __enter__(self):
        from c2s_core.encoder import Encoder

        self._orig = (Encoder.encode, Encoder._load)
        orig_encode, orig_load = self._orig
        meter = self

        def encode(enc, texts):
            load_before = meter.load_s
            t = time.perf_counter()
            try:
                return orig_encode(enc, texts)
            finally:
                spent = time.perf_counter() - t - (meter.load_s - load_before)  # the load happens inside
                meter.encode_s += spent
                meter.by_stage[meter.stage] = meter.by_stage.get(meter.stage, 0.0) + spent
                meter.calls += 1
                meter.texts += len(texts)

        def load(enc):
            t = time.perf_counter()
            try:
                return orig_load(enc)
            finally:
                meter.load_s += time.perf_counter() - t

        Encoder.encode, Encoder._load = encode, load
        return self

    def __exit__(self, *exc):
        from c2s_core.encoder import Encoder

        Encoder.encode, Encoder._load = self._orig

    def as_dict(self) -> dict:
        return {"encode_s": round(self.encode_s, 3), "model_load_s": round(self.load_s, 3),
                "rss_mb_by_stage": self.rss_by_stage,
                "calls": self.calls, "texts": self.texts,
                "by_stage": {k: round(v, 3) for k, v in self.by_stage.items()}}


class RssSampler:
    """The process's resident memory sampled every ``every_s`` seconds while a compile runs, the
    highest per stage (the stage the meter last heard of): which stage a peak belongs to. A
    sample can miss a spike shorter than its interval; the process's true peak is ``ru_maxrss``."""

    def __init__(self, meter: EncodeMeter, every_s: float = 0.25):
        self.meter, self.every_s = meter, every_s
        self.by_stage: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    @staticmethod
    def rss_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            stage, mb = self.meter.stage, self.rss_mb()
            if mb > self.by_stage.get(stage, 0.0):
                self.by_stage[stage] = mb

    def __enter__(self):
        if os.path.exists("/proc/self/statm"):
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def as_dict(self) -> dict:
        return {k: round(v, 1) for k, v in self.by_stage.items()}


class StageTicker:
    """The compile's progress listener: tells the meter which stage runs and, unless quiet,
    prints each stage as it starts and its progress at most every ``every_s`` seconds."""

    def __init__(self, corpus: str, meter: EncodeMeter, verbose: bool, every_s: float = 15.0):
        self.corpus, self.meter, self.verbose, self.every_s = corpus, meter, verbose, every_s
        self.since = time.perf_counter()
        self.stage: str | None = None
        self.last = 0.0

    def started(self, stage: str) -> None:  # before the stage's first count: its time and memory are its own
        self.meter.stage = stage

    def update(self, stage: str, done: int, total: int) -> None:
        self.meter.stage = stage
        now = time.perf_counter()
        if self.verbose and (stage != self.stage or now - self.last >= self.every_s):
            log(f"  [{self.corpus} +{now - self.since:7.1f}s] {stage}: {done}/{total}")
            self.last = now
        self.stage = stage


def timed_compile(spec, home: Path, provider: str, model: str, progress: bool,
                  meter: EncodeMeter) -> tuple[float, dict | None, str | None]:
    from c2s_pipeline import progress as stage_progress
    from c2s_pipeline.compiler import CompileError, compile_corpus
    from c2s_pipeline.workspace import Workspace

    stage_progress.set_listener(StageTicker(spec.name, meter, progress))
    t = time.perf_counter()
    try:
        with meter, RssSampler(meter) as rss:
            try:
                manifest = compile_corpus(spec, Workspace(home), provider=provider, model=model)
            finally:
                meter.rss_by_stage = rss.as_dict()
        return time.perf_counter() - t, manifest, None
    except CompileError as exc:
        return time.perf_counter() - t, None, str(exc)
    finally:
        stage_progress.set_listener(None)


def embedded_texts(art) -> tuple[list[str], list[str]]:
    """The strings the compile embedded: (documents, upper-level nodes), each deduplicated in
    first-seen order as ``embed_with_cache`` computes them (one encode per distinct text)."""
    from c2s_pipeline.assets.corpus import embedding_text
    from c2s_pipeline.assets.levels import Level
    from c2s_pipeline.recipe import MAX_LEVELS

    docs = art.read_table("documents.parquet")
    cards = art.read_table("cards.parquet")
    assert docs["doc_id"].to_list() == cards["doc_id"].to_list(), "cards are not in document order"
    doc_texts = [embedding_text(c["title"], c["one_line"], c["phrases"], text)
                 for c, text in zip(cards.iter_rows(named=True), docs["text"])]
    level_texts: list[str] = []
    for level in range(2, MAX_LEVELS + 1):  # clusters_lL embeds level L-1's finished nodes
        status_file = art.root / art.level(level - 1, "status.json")
        if not status_file.exists():
            break
        below = art.level_status(level - 1)
        if not below["used"] or below["top"]:
            break
        level_texts += Level.of(level - 1).node_texts(art)
    doc_unique = list(dict.fromkeys(doc_texts))
    seen = set(doc_unique)
    level_unique = [t for t in dict.fromkeys(level_texts) if t not in seen]
    return doc_unique, level_unique


def time_encoder(doc_texts: list[str], level_texts: list[str], repeats: int = 1) -> dict:
    """A fresh Encoder on the compile's texts; with repeats, the fastest run counts (the least
    disturbed by other work on the machine) and every run is reported."""
    from c2s_core.encoder import Encoder

    encoder = Encoder()  # fresh object: its own model load, like the compile's
    t = time.perf_counter()
    encoder.encode(["warm-up: load the model"])
    load_s = time.perf_counter() - t
    runs = []
    for _ in range(max(1, repeats)):
        t = time.perf_counter()
        encoder.encode(doc_texts)
        docs_s = time.perf_counter() - t
        t = time.perf_counter()
        if level_texts:
            encoder.encode(level_texts)
        runs.append((docs_s, time.perf_counter() - t))
    docs_s, levels_s = min(runs, key=sum)
    return {"model_load_s": round(load_s, 3), "docs_s": round(docs_s, 3), "levels_s": round(levels_s, 3),
            "seconds": round(docs_s + levels_s, 3), "runs_s": [round(sum(r), 3) for r in runs],
            "texts": len(doc_texts) + len(level_texts),
            "doc_texts": len(doc_texts), "level_texts": len(level_texts),
            "doc_text_chars": sum(map(len, doc_texts)), "level_text_chars": sum(map(len, level_texts))}


def day_change(docs: list[dict], seed: int = 0) -> tuple[list[dict], dict]:
    """A day's change to a corpus, in ``incremental_bench``'s shares and revisions: 0.5% of the
    documents deleted, 0.5% edited, and 1% added as revised copies of others under new ids (new
    pages like their neighbours, whose cards and embeddings nothing has computed before).
    Deterministic for a seed."""
    from incremental_bench import ADDED, DELETED, EDITED, edited

    rng = random.Random(seed)
    ids = [d["id"] for d in docs]
    by_id = {d["id"]: d for d in docs}
    n = len(ids)
    deleted = set(rng.sample(ids, max(1, round(n * DELETED))))
    kept = [i for i in ids if i not in deleted]
    edits = set(rng.sample(kept, max(1, round(n * EDITED))))
    # Copied from pages left as they are, so no added page repeats an edited page's new text.
    # (On a corpus changed before, not a page whose revised copy it already holds.)
    originals = rng.sample([i for i in kept if i not in edits and f"{i}~revised" not in by_id],
                           max(1, round(n * ADDED)))
    changed = [edited(d, rng) if d["id"] in edits else d for d in docs if d["id"] not in deleted]
    changed += [{**edited(by_id[i], rng), "id": f"{i}~revised"} for i in originals]
    return changed, {"added": len(originals), "edited": len(edits), "deleted": len(deleted)}


def incremental_step(name: str, home: Path, source: Path, args, cold: dict,
                     reference: SpeedReference | None = None) -> dict:
    """Apply :func:`day_change` to ``source``'s documents and recompile in ``home`` (the cold
    compile's): seconds, LLM calls and embeddings as shares of the cold compile's (``cold``: its
    result); with the run's ``reference``, the time's share also at equal speed."""
    from incremental_bench import read_jsonl, write_jsonl

    from c2s_pipeline.workspace import CorpusSpec

    changed, counts = day_change(read_jsonl(source), args.seed)
    changed_source = home / "changed-corpus.jsonl"
    write_jsonl(changed_source, changed)
    spec = CorpusSpec(name=name, source=str(changed_source), out=str(home / "out" / name),
                      **{k: v for k, v in cold["parameters"].items() if k in ("p", "k")})
    log(f"[{name}] a day's change: +{counts['added']} ~{counts['edited']} -{counts['deleted']}; "
        f"incremental recompile ...")
    reset_peak_rss()  # the change's own peak, not the cold compile's or the encoder pass's before it
    seconds, manifest, error = timed_compile(spec, home, args.provider, args.model, not args.quiet, EncodeMeter())
    result = {"change": counts, "seconds": round(seconds, 3)}
    if reference:
        reference.measure("after the change")
    if error:
        log(f"[{name}] incremental recompile FAILED: {error}")
        return {**result, "error": error}
    st, cold_st = manifest["stats"], cold["stats"]
    result.update(
        build=manifest.get("build", {}), llm_calls=st["llm_calls"]["made"], embeddings=st["embeddings"]["computed"],
        stage_seconds={s: r["seconds"] for s, r in manifest["stages"].items()},
        wall_ratio=round(seconds / cold["cold_s"], 4),
        wall_ratio_at_equal_speed=reference.change_at_equal_speed(seconds, cold["cold_s"]) if reference else None,
        calls_ratio=round(st["llm_calls"]["made"] / max(1, cold_st["llm_calls"]["made"]), 4),
        embeddings_ratio=round(st["embeddings"]["computed"] / max(1, cold_st["embeddings"]["computed"]), 4),
        peak_rss_mb=peak_rss_mb())
    log(f"[{name}] incremental {seconds:.1f}s ({result['wall_ratio']:.1%} of cold), "
        f"{result['llm_calls']} calls ({result['calls_ratio']:.1%}), mode {result['build'].get('mode')}")
    return result


def change_only(args) -> dict:
    """``--change-home``: the change step alone on a home kept by an earlier run, whose result
    (``--cold-json``) holds the cold compile it is measured against; on a home changed before,
    another day's change on top of the last."""
    runs = json.loads(args.cold_json.read_text(encoding="utf-8"))["results"]
    home = args.change_home.resolve()
    cold = next((r for r in runs if Path(r["home"]).resolve() == home and "error" not in r), None)
    if cold is None:
        raise SystemExit(f"{args.cold_json}: no successful run in home {home}")
    # The corpus as the home last compiled it: a home changed before changes again from there.
    changed = home / "changed-corpus.jsonl"
    source = changed if changed.exists() else Path(cold["source"])
    return {**cold, "incremental": incremental_step(cold["corpus"], home, source, args, cold)}


def stage_order(stages: dict) -> list[str]:
    """Stages in the recipe's order, then anything unknown."""
    from c2s_pipeline.recipe import STAGES

    order = list(STAGES)
    return [s for s in order if s in stages] + sorted(s for s in stages if s not in order)


def bench_corpus(name: str, source: Path, args, info: dict | None = None) -> dict:
    from c2s_pipeline.artifacts import CorpusArtifacts
    from c2s_pipeline.workspace import CorpusSpec

    home = Path(tempfile.mkdtemp(prefix=f"c2s-bench-{name}-", dir=args.tmp_dir))
    spec = CorpusSpec(name=name, source=str(source), out=str(home / "out" / name),
                      **{k: v for k, v in (("p", args.p), ("k", args.k)) if v is not None})
    result: dict = {"corpus": name, "source": str(source), "home": str(home), "corpus_info": info or {},
                    "parameters": {"p": spec.p, "k": spec.k, "tau": spec.tau}, "provider": args.provider}
    art = CorpusArtifacts(home / "artifacts" / name)
    try:
        reference = None if args.skip_encoder else SpeedReference(source)
        if reference:
            reference.measure("before")
        log(f"[{name}] cold compile in {home} ...")
        meter = EncodeMeter()
        result["load_before"] = [round(x, 2) for x in os.getloadavg()]
        cold_s, cold, error = timed_compile(spec, home, args.provider, args.model, not args.quiet, meter)
        result["cold_s"] = round(cold_s, 3)
        result["peak_rss_mb"] = peak_rss_mb()
        result["encoder_in_compile"] = meter.as_dict()
        if error:
            stages = art.stage_records() if (art.root / "stages").exists() else {}
            result.update(error=error, stages_completed={s: stages[s] for s in stage_order(stages)})
            log(f"[{name}] cold compile FAILED after {cold_s:.1f}s: {error}")
            return result
        warm = None
        if args.skip_warm:
            result["warm_s"] = None
        else:
            log(f"[{name}] cold compile {cold_s:.1f}s; warm compile ...")
            warm_s, warm, error = timed_compile(spec, home, args.provider, args.model, False, EncodeMeter())
            result["warm_s"] = round(warm_s, 3)
            if error:
                result["warm_error"] = error
                log(f"[{name}] warm compile FAILED: {error}")
        enc = None
        if not args.skip_encoder:
            log(f"[{name}] compiles done; encoder alone ...")
            doc_texts, level_texts = embedded_texts(art)
            reference.measure("between")
            reset_peak_rss()
            enc = time_encoder(doc_texts, level_texts, args.encoder_repeats)
            enc["peak_rss_mb"] = peak_rss_mb()["process"]
            log(f"[{name}] encoder {enc['seconds']:.1f}s on {enc['texts']} texts")
            reference.measure("after")
            enc["matches_compile"] = enc["texts"] == cold["stats"]["embeddings"]["computed"]
        result["load_after"] = [round(x, 2) for x in os.getloadavg()]
        result.update(
            stats=cold["stats"],
            checks=cold["checks"],
            stages_cold=cold["stages"],
            stages_warm=warm["stages"] if warm else {},
            warm_totals={"llm_calls": warm["stats"]["llm_calls"], "embeddings": warm["stats"]["embeddings"]}
            if warm else {},
            encoder=enc,
            stage_sum_s=round(sum(s["seconds"] for s in cold["stages"].values()), 3),
            ratio=round(cold_s / enc["seconds"], 2) if enc and enc["seconds"] else None,
            ratio_in_compile=round(cold_s / meter.encode_s, 2) if meter.encode_s else None,
            ratio_to_own_encoding=round(cold_s / own, 3) if (own := same_texts_encode_s(meter.by_stage)) else None,
            speed_reference_s=reference.seconds if reference else None,
            ratio_at_equal_speed=reference.at_equal_speed(cold_s, enc["seconds"]) if enc and enc["seconds"] else None,
        )
        if args.change:  # last: it rewrites the artifacts the encoder pass reads
            result["incremental"] = incremental_step(name, home, source, args, result, reference)
        return result
    finally:
        if args.keep:
            log(f"[{name}] kept {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


def same_texts_encode_s(by_stage: dict[str, float]) -> float:
    """The compile's own encoding of the texts the encoder pass encodes (documents' and nodes'
    texts: ``doc_embeddings`` and ``clusters_l*``; not the navigability probe's questions, rows
    and cards), timed while the compile ran: a ratio to it is untouched by the machine's speed
    drifting between the compile and the encoder pass."""
    return sum(s for stage, s in by_stage.items() if stage == "doc_embeddings" or stage.startswith("clusters_l"))


def reset_peak_rss() -> bool:
    """Start this process's peak resident memory afresh (Linux: ``/proc/self/clear_refs``), so
    the next :func:`peak_rss_mb` is one phase's (the encoder pass, the change) and not the
    highest of everything the process ran before it. False where the kernel cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> dict:
    """Peak resident memory in MB: this process's (the compile runs in it) since it started or
    since :func:`reset_peak_rss` (``VmHWM``; ``ru_maxrss``, the whole life, where there is no
    /proc), and the largest of its finished child processes' (steps a multiprocess executor ran)."""
    import resource

    kb = {who: resource.getrusage(flag).ru_maxrss for who, flag in
          (("process", resource.RUSAGE_SELF), ("children", resource.RUSAGE_CHILDREN))}
    try:
        status = Path("/proc/self/status").read_text()
        kb["process"] = int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)[1])
    except (OSError, TypeError):
        pass
    return {who: round(v / 1024, 1) for who, v in kb.items()}


# -- report ----------------------------------------------------------------------------------------

def fmt_table(headers: list[str], rows: list[list], align: str) -> str:
    cells = [[str(c) for c in r] for r in [headers] + rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r):
        return "  ".join(c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(r, widths, align))

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths)] + [line(r) for r in cells[1:]])


def report(r: dict) -> str:
    out = [f"=== {r['corpus']}  ({r['source']})"]
    if r.get("corpus_info"):
        ci = r["corpus_info"]
        out.append(f"corpus built in {ci.get('seconds')}s: {ci.get('docs')} docs, {ci.get('mb')} MB, "
                   f"per source {ci.get('per_source')}")
    if "error" in r:
        out.append(f"COMPILE FAILED after {r['cold_s']:.1f}s: {r['error']}")
        done = r.get("stages_completed", {})
        if done:
            out.append("stages that finished before the failure:")
            out.append(fmt_table(["stage", "seconds"], [[s, f"{v['seconds']:.2f}"] for s, v in done.items()], "lr"))
        return "\n".join(out)
    st = r["stats"]
    d = st["documents"]
    nb = st["nav_bytes"]
    out.append(f"documents {d['accepted']} (rejected {d['rejected']}, duplicate {d['duplicate']}); "
               f"levels {st['levels']}; skills {st['skills']}; nav files {st['nav_files']}; "
               f"nav bytes max {nb['max']} p95 {nb['p95']} total {nb['total']}; "
               f"@see stubs {st['see_stubs']}; entity index entries {st['entity_index_entries']}")
    out.append(f"p={r['parameters']['p']} k={r['parameters']['k']} tau={r['parameters']['tau']}, "
               f"provider {r['provider']}; cold llm calls {st['llm_calls']}, embeddings {st['embeddings']}")
    cold, warm = r["stages_cold"], r["stages_warm"]
    in_stage = r["encoder_in_compile"]["by_stage"]
    rss = r["encoder_in_compile"].get("rss_mb_by_stage", {})
    rows = []
    for s in stage_order(cold):
        c = cold[s]
        w = warm.get(s, {})
        e = in_stage.get(s, 0.0)
        rows.append([s, f"{c['seconds']:.2f}", f"{100 * c['seconds'] / r['cold_s']:.1f}",
                     f"{e:.2f}" if e else "", f"{c['seconds'] - e:.2f}" if e else "",
                     f"{w['seconds']:.2f}" if w else "-",
                     f"{c['llm_calls']['made']}/{c['llm_calls']['cached']}",
                     f"{c['embeddings']['computed']}/{c['embeddings']['cached']}",
                     f"{rss[s]:,.0f}" if s in rss else "-"])
    out.append(fmt_table(["stage", "cold s", "% cold", "encode s", "non-encode s", "warm s", "llm made/cached",
                          "emb computed/cached", "RSS MB"], rows, "lrrrrrrrr"))
    enc = r["encoder"]
    wt = r.get("warm_totals") or {}
    out.append(f"total cold (wall)     {r['cold_s']:8.2f} s   (stages sum {r['stage_sum_s']:.2f} s; "
               f"Dagster/run overhead {r['cold_s'] - r['stage_sum_s']:.2f} s)")
    if r.get("warm_s") is not None:
        out.append(f"total warm (wall)     {r['warm_s']:8.2f} s   (llm calls {wt.get('llm_calls')}, "
                   f"embeddings {wt.get('embeddings')})")
    if enc is None:
        out.append("encoder only          not timed (--skip-encoder)")
    else:
        repeats = f"fastest of {len(enc['runs_s'])} runs {enc['runs_s']}; " if len(enc["runs_s"]) > 1 else ""
        same = "same count as" if enc["matches_compile"] else "DIFFERENT count from"
        out.append(f"encoder only          {enc['seconds']:8.2f} s   ({enc['doc_texts']} document texts "
                   f"{enc['docs_s']:.2f} s + {enc['level_texts']} node texts {enc['levels_s']:.2f} s; "
                   f"model load {enc['model_load_s']:.2f} s excluded; {repeats}"
                   f"{same} the compile's {st['embeddings']['computed']} computed embeddings)")
    inc = r["encoder_in_compile"]
    out.append(f"encoder inside cold   {inc['encode_s']:8.2f} s   ({inc['calls']} encode calls, {inc['texts']} texts, "
               f"plus model load {inc['model_load_s']:.2f} s; the rest of the cold compile: "
               f"{r['cold_s'] - inc['encode_s'] - inc['model_load_s']:.2f} s)")
    out.append(f"ratio compile/encoder {_num(r['ratio'], '8.2f')}   (cold wall / encoder only; against the encode "
               f"time measured inside the same cold compile: {r['ratio_in_compile']:.2f})")
    if r.get("ratio_to_own_encoding"):
        out.append(f"ratio to own encoding {r['ratio_to_own_encoding']:6.2f}   (cold wall / the compile's own encoding of "
                   f"the documents' and nodes' texts, {same_texts_encode_s(inc['by_stage']):.1f} s, timed inside it)")
    if r.get("ratio_at_equal_speed"):
        ref = r["speed_reference_s"]
        out.append(f"speed reference     {ref['before']:.1f} / {ref['between']:.1f} / {ref['after']:.1f} s   (the same "
                   f"{REFERENCE_DOCS} documents encoded before the compile / between / after the encoder pass); "
                   f"ratio at equal speed: {r['ratio_at_equal_speed']:.2f}")
    if "peak_rss_mb" in r:
        out.append(f"peak RSS after the cold compile: {r['peak_rss_mb']['process']:,.0f} MB (benchmark process, "
                   f"the compile in it), {r['peak_rss_mb']['children']:,.0f} MB (largest child process)"
                   + (f"; the encoder pass alone {r['encoder']['peak_rss_mb']:,.0f} MB"
                      if (r.get("encoder") or {}).get("peak_rss_mb") else ""))
    out.append(f"load average before/after: {r.get('load_before')} / {r.get('load_after')} "
               f"(other work on the machine inflates every figure)")
    failed = {k: v for k, v in r["checks"].items() if not v["passed"]}
    out.append("checks: " + ("all passed" if not failed else
                             "; ".join(f"{k} FAILED: {v['description']}" for k, v in failed.items())))
    if "warm_error" in r:
        out.append(f"WARM COMPILE FAILED: {r['warm_error']}")
    if "incremental" in r:
        out.append(incremental_line(r["incremental"]))
    return "\n".join(out)


def incremental_line(inc: dict) -> str:
    c = inc["change"]
    head = f"a day's change (+{c['added']} ~{c['edited']} -{c['deleted']} documents): "
    if "error" in inc:
        return head + f"INCREMENTAL RECOMPILE FAILED after {inc['seconds']:.1f}s: {inc['error']}"
    build = inc["build"]
    equal = inc.get("wall_ratio_at_equal_speed")
    return (head + f"{build.get('mode')} recompile {inc['seconds']:.1f} s = {inc['wall_ratio']:.1%} of the cold "
            f"compile (target 10%{f'; at equal speed {equal:.1%}' if equal else ''}), {inc['llm_calls']} LLM calls = {inc['calls_ratio']:.1%} (target 3%), "
            f"{inc['embeddings']} embeddings = {inc['embeddings_ratio']:.1%}; peak RSS {inc['peak_rss_mb']['process']:,.0f} MB; "
            f"{build.get('reason')}")


def summary_line(r: dict) -> str:
    if "error" in r:
        return f"{r['corpus']}: FAILED cold_s={r['cold_s']:.1f} error={r['error']!r}"
    return (f"{r['corpus']}: docs={r['stats']['documents']['accepted']} cold_s={r['cold_s']:.2f} "
            f"warm_s={r['warm_s'] if r.get('warm_s') is None else round(r['warm_s'], 2)} "
            f"encoder_s={_num(_encoder_s(r), '.2f')} ratio={_num(r['ratio'], '.2f')} "
            f"peak_rss_mb={r['peak_rss_mb']['process']:.0f} "
            f"(in-compile encode_s={r['encoder_in_compile']['encode_s']:.2f} ratio={r['ratio_in_compile']:.2f})")


def _encoder_s(r: dict) -> float | None:
    """The encoder-alone seconds of a run (None where ``--skip-encoder`` left it out)."""
    return r["encoder"]["seconds"] if r.get("encoder") else None


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def growth_exponent(n1: float, t1: float | None, n2: float, t2: float | None) -> float | None:
    """``a`` in t ∝ N^a between two sizes."""
    if t1 is None or t2 is None or min(n1, n2, t1, t2) <= 0 or n1 == n2:
        return None
    return math.log(t2 / t1) / math.log(n2 / n1)


def growth_report(paths: list[Path]) -> str:
    """Several runs' JSON (one size each, smallest first): time and memory per stage at each size,
    with the growth exponent between consecutive sizes beside N log N's over the same step."""
    runs = []
    for path in paths:
        for r in json.loads(path.read_text(encoding="utf-8"))["results"]:
            if "error" not in r:
                runs.append(r)
    runs.sort(key=lambda r: r["stats"]["documents"]["accepted"])
    if len(runs) < 2:
        return "growth: needs at least two successful runs of different sizes"
    sizes = [r["stats"]["documents"]["accepted"] for r in runs]
    steps = list(zip(range(len(runs)), range(1, len(runs))))
    nlogn = [growth_exponent(sizes[a], sizes[a] * math.log(sizes[a]), sizes[b], sizes[b] * math.log(sizes[b]))
             for a, b in steps]

    def exps(values: list[float]) -> list[str]:
        out = []
        for (a, b), ref in zip(steps, nlogn):
            e = growth_exponent(sizes[a], values[a], sizes[b], values[b])
            out.append("-" if e is None else f"{e:.2f}" + (" !" if e > ref + 0.25 else ""))
        return out

    step_names = [f"a {sizes[a] // 1000}k→{sizes[b] // 1000}k" for a, b in steps]
    out = [f"=== growth over {', '.join(f'{n:,}' for n in sizes)} documents "
           f"(a: t ∝ N^a between sizes; N log N gives a = {', '.join(f'{e:.2f}' for e in nlogn)}; "
           f"'!' marks a above N log N's by more than 0.25)"]
    head = ["", *[f"{n:,} docs" for n in sizes], *step_names]
    rows = [
        ["cold compile s", *[f"{r['cold_s']:.0f}" for r in runs], *exps([r["cold_s"] for r in runs])],
        ["encoder alone s", *[_num(_encoder_s(r), ".0f") for r in runs], *exps([_encoder_s(r) for r in runs])],
        ["ratio compile / encoder", *[_num(r["ratio"], ".2f") for r in runs], *[""] * len(steps)],
        ["ratio (encode inside)", *[f"{r['ratio_in_compile']:.2f}" for r in runs], *[""] * len(steps)],
        ["ratio at equal speed", *[_num(r.get("ratio_at_equal_speed"), ".2f") for r in runs], *[""] * len(steps)],
        ["ratio to own encoding", *[_num(r.get("ratio_to_own_encoding"), ".2f") for r in runs], *[""] * len(steps)],
        ["peak RSS MB", *[f"{r['peak_rss_mb']['process']:,.0f}" for r in runs],
         *exps([r["peak_rss_mb"]["process"] for r in runs])],
        ["load average before/after", *[f"{r.get('load_before', ['?'])[0]}/{r.get('load_after', ['?'])[0]}" for r in runs],
         *[""] * len(steps)],
    ]
    if any("wall_ratio" in r.get("incremental", {}) for r in runs):
        def each(key: str, fmt: str) -> list[str]:
            return [format(r["incremental"][key], fmt) if key in r.get("incremental", {}) else "-" for r in runs]

        rows += [["a day's change: recompile s", *each("seconds", ".0f"), *[""] * len(steps)],
                 ["  its time / cold", *each("wall_ratio", ".1%"), *[""] * len(steps)],
                 ["  at equal speed", *[_num(r.get("incremental", {}).get("wall_ratio_at_equal_speed"), ".1%")
                                        for r in runs], *[""] * len(steps)],
                 ["  its LLM calls / cold", *each("calls_ratio", ".1%"), *[""] * len(steps)],
                 ["  its peak RSS MB", *[_num(r.get("incremental", {}).get("peak_rss_mb", {}).get("process"), ",.0f")
                                         for r in runs], *[""] * len(steps)]]
    out.append(fmt_table(head, rows, "l" + "r" * (len(head) - 1)))
    stages = stage_order({s: None for r in runs for s in r["stages_cold"]})
    rows = []
    for s in stages:
        secs = [r["stages_cold"].get(s, {}).get("seconds", 0.0) for r in runs]
        rss = [r["encoder_in_compile"].get("rss_mb_by_stage", {}).get(s) for r in runs]
        rows.append([s, *[f"{t:.1f}" for t in secs], *exps(secs),
                     *[f"{m:,.0f}" if m else "-" for m in rss]])
    out.append(fmt_table(["stage (cold s)", *[f"{n:,}" for n in sizes], *step_names,
                          *[f"RSS MB {n // 1000}k" for n in sizes]], rows, "l" + "r" * (2 * len(sizes) + len(steps))))
    return "\n".join(out)


def write_results(path: Path, environment: dict, results: list[dict]) -> None:
    """The ``--json`` file: what ``--growth`` and ``--cold-json`` read back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"environment": environment, "results": results}, indent=2))
    log(f"wrote {path}")


# -- main ------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip-large", action="store_true", help="only the WixQA sample")
    ap.add_argument("--skip-wixqa", action="store_true", help="only the Debian corpus")
    ap.add_argument("--limit", type=int, default=None, help="Debian corpus: evenly strided sample of N docs")
    ap.add_argument("--sources", default=None, help="Debian corpus: comma-separated sources (default: all)")
    ap.add_argument("--wixqa", type=Path, default=WIXQA, help="WixQA corpus.jsonl")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--p", type=int, default=None, help="branching ratio (default: CorpusSpec's)")
    ap.add_argument("--k", type=int, default=None, help="top-level threshold (default: CorpusSpec's)")
    ap.add_argument("--encoder-repeats", type=int, default=1,
                    help="time the encoder-only pass N times and keep the fastest (default 1)")
    ap.add_argument("--skip-encoder", action="store_true",
                    help="no encoder-alone pass (a stage growth run: the ratio to the encoder is left out)")
    ap.add_argument("--provider", default="offline")
    ap.add_argument("--model", default="")
    ap.add_argument("--tmp-dir", default=None, help="where the temporary c2s homes go")
    ap.add_argument("--keep", action="store_true", help="keep the temporary homes (paths on stderr)")
    ap.add_argument("--quiet", action="store_true", help="no stage progress on stderr")
    ap.add_argument("--skip-warm", action="store_true", help="no warm recompile (large corpora: saves its time)")
    ap.add_argument("--change", action="store_true",
                    help="then recompile a day's change (1%% added, 0.5%% edited, 0.5%% deleted) incrementally")
    ap.add_argument("--change-home", type=Path, default=None, metavar="HOME",
                    help="only the change step, on a home an earlier --keep run left (needs --cold-json)")
    ap.add_argument("--cold-json", type=Path, default=None, metavar="JSON", help="that earlier run's --json")
    ap.add_argument("--seed", type=int, default=0, help="the change's random choices")
    ap.add_argument("--growth", type=Path, nargs="+", metavar="JSON",
                    help="print the growth table of earlier runs' --json files (one size each) and exit")
    args = ap.parse_args(argv)
    if args.growth:
        print(growth_report(args.growth))
        return 0
    sys.path.insert(0, str(HERE))  # debian_corpus, incremental_bench
    if args.change_home:
        if not args.cold_json:
            ap.error("--change-home needs --cold-json")
        result = change_only(args)
        print(incremental_line(result["incremental"]))
        if args.json:
            write_results(args.json, {"change_only": True}, [result])
        return 1 if "error" in result["incremental"] else 0

    env = {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine()}
    env["imports"] = preload()
    log(f"imports: {env['imports']}")
    results = []

    if not args.skip_wixqa:
        if not args.wixqa.exists():
            log(f"WixQA sample not found at {args.wixqa}; skipping it")
        else:
            results.append(bench_corpus("wixqa", args.wixqa, args))

    if not args.skip_large:
        from debian_corpus import CorpusError, build_corpus

        suffix = f"-limit{args.limit}" if args.limit else ""
        out = CACHE / f"compile-bench-debian{suffix}.jsonl"
        sources = args.sources.split(",") if args.sources else None
        log(f"[debian] assembling corpus into {out} ...")
        try:
            info = build_corpus(out, min_docs=5000, limit=args.limit, sources=sources)
        except CorpusError as exc:
            log(f"[debian] cannot assemble the corpus: {exc}")
            info = None
        if info:
            log(f"[debian] {info['docs']} docs, {info['mb']} MB in {info['seconds']}s")
            results.append(bench_corpus("debian" + suffix.replace("-limit", "-"), out, args, info))

    env_line = (f"python {env['python']}, {env['cpus']} CPUs, torch {env['imports']['torch']} "
                f"({env['imports']['torch_threads']} threads); imports before timing: Dagster+graph "
                f"{env['imports']['dagster_s']} s, sentence-transformers {env['imports']['sentence_transformers_s']} s, "
                f"first model load + encoder warm-up {env['imports']['encoder_warmup_s']} s")
    print(env_line)
    for r in results:
        print()
        print(report(r))
    print()
    for r in results:
        print(summary_line(r))
    if args.json:
        write_results(args.json, env, results)
    failed = [r for r in results if "error" in r or "error" in r.get("incremental", {})]
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
