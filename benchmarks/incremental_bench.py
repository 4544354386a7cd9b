"""Incremental recompile against a full rebuild, on a real corpus of ≥5,000 documents.

1. Assembles the Debian documentation corpus (``debian_corpus.py``, cached) and its fixed
   question set (one gold document per question).
2. Holds 1% of the documents out, compiles the rest cold in a fresh c2s home: the published tree.
3. Applies a day's change to the source: the held-out 1% added, 0.5% edited (a paragraph
   dropped, a sentence added), 0.5% deleted (never a question's gold document, so every
   question stays answerable), and recompiles in the same home: the incremental update.
4. Compiles the changed corpus again, cold, in a second fresh home: the full rebuild that a
   compiler without incremental updates would have to run.
5. Asks every question of the offline navigator on both trees (recall@5 of the gold document).

It prints the three ratios the incremental path is held to, measured side by side in one run:
LLM calls (incremental / full rebuild), wall time (incremental / full rebuild) and navigator
recall@5 (incremental minus full rebuild).

    .venv/bin/python benchmarks/incremental_bench.py                      # the whole corpus
    .venv/bin/python benchmarks/incremental_bench.py --limit 1500         # a quicker sample
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
sys.path.insert(0, str(HERE))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ADDED, EDITED, DELETED = 0.01, 0.005, 0.005
TARGETS = {"calls_ratio": 0.03, "wall_ratio": 0.10, "recall_drop": 0.02}  # a 1% change: ≤ 3% of the calls, ≤ 10% of the time


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)


def edited(doc: dict, rng: random.Random) -> dict:
    """A routine revision: the last paragraph goes (when there are several), a sentence is added."""
    paragraphs = [p for p in doc["text"].split("\n\n") if p.strip()]
    if len(paragraphs) > 2:
        paragraphs.pop()
    note = (f"Revised {rng.choice(['behaviour', 'defaults', 'wording', 'examples'])}: see the release notes "
            f"for {doc['title']} for what changed in this version.")
    return {**doc, "text": "\n\n".join(paragraphs + [note])}


def plan_change(docs: list[dict], questions: list[dict], seed: int) -> dict:
    """Which documents are held out (then added), edited and deleted; deterministic for a seed."""
    rng = random.Random(seed)
    gold = {g for q in questions for g in q.get("gold_ids", [])}
    ids = [d["id"] for d in docs]
    n = len(ids)
    added = set(rng.sample(ids, max(1, round(n * ADDED))))
    base = [i for i in ids if i not in added]
    deletable = [i for i in base if i not in gold]
    deleted = set(rng.sample(deletable, max(1, round(n * DELETED))))
    editable = [i for i in base if i not in deleted]
    edits = set(rng.sample(editable, max(1, round(n * EDITED))))
    return {"added": added, "deleted": deleted, "edited": edits, "rng": rng}


def compile_once(name: str, source: Path, home: Path, out: Path, p: int | None) -> tuple[float, dict]:
    from c2s_pipeline.compiler import compile_corpus
    from c2s_pipeline.workspace import CorpusSpec, Workspace

    os.environ["DAGSTER_HOME"] = str(home)
    spec = CorpusSpec(name=name, source=str(source), out=str(out), **({"p": p} if p else {}))
    start = time.perf_counter()
    manifest = compile_corpus(spec, Workspace(home))
    return time.perf_counter() - start, manifest


def navigator_recall(tree: Path, questions: list[dict], k: int = 5) -> dict:
    from c2s_agent import answer

    hits, fetched_any, seconds = 0, 0, []
    for i, q in enumerate(questions):
        result = answer(q["question"], tree, navigator="offline")
        gold = set(q["gold_ids"])
        hits += bool(gold & set(result.fetched[:k]))
        fetched_any += bool(gold & set(result.fetched))
        seconds.append(result.usage.get("seconds", 0.0))
        if (i + 1) % 25 == 0:
            log(f"    {i + 1}/{len(questions)} questions")
    n = max(1, len(questions))
    return {"recall@5": round(hits / n, 4), "gold_fetched": round(fetched_any / n, 4),
            "mean_seconds": round(sum(seconds) / n, 3)}


def summary(manifest: dict, seconds: float) -> dict:
    st = manifest["stats"]
    return {"seconds": round(seconds, 2), "llm_calls": st["llm_calls"]["made"],
            "llm_calls_cached": st["llm_calls"]["cached"], "embeddings": st["embeddings"]["computed"],
            "documents": st["documents"], "levels": st["levels"], "skills": st["skills"],
            "nav_files": st["nav_files"], "build": manifest.get("build", {}),
            "stage_calls": {s: r["llm_calls"]["made"] for s, r in manifest["stages"].items() if r["llm_calls"]["made"]}}


def nav_paths(tree: Path) -> set[str]:
    return {str(p.relative_to(tree)) for p in (tree / "skills").rglob("*.md")}


def run(args) -> dict:
    from debian_corpus import build_corpus

    source_all = CACHE / ("debian-docs.jsonl" if not args.limit else f"debian-docs-{args.limit}.jsonl")
    questions_path = source_all.with_name(source_all.stem + "-questions.jsonl")
    if not source_all.exists() or not questions_path.exists():
        log(f"assembling the Debian corpus into {source_all} ...")
        build_corpus(source_all, min_docs=args.min_docs, limit=args.limit, questions=questions_path)
    docs, questions = read_jsonl(source_all), read_jsonl(questions_path)
    if args.questions:
        questions = questions[: args.questions]
    change = plan_change(docs, questions, args.seed)
    work = Path(tempfile.mkdtemp(prefix="c2s-incremental-bench-", dir=args.tmp_dir))
    source = work / "corpus.jsonl"
    result: dict = {"corpus": str(source_all), "documents": len(docs), "questions": len(questions),
                    "change": {"added": len(change["added"]), "edited": len(change["edited"]),
                               "deleted": len(change["deleted"])}, "work": str(work)}
    try:
        base = [d for d in docs if d["id"] not in change["added"]]
        write_jsonl(source, base)
        log(f"[1/4] full compile of the base corpus ({len(base)} docs) ...")
        s, m = compile_once("debian", source, work / "home", work / "tree", args.p)
        result["base"] = summary(m, s)
        before = nav_paths(work / "tree")
        log(f"      {s:.1f}s, {result['base']['llm_calls']} calls")

        rng = change["rng"]
        changed = [edited(d, rng) if d["id"] in change["edited"] else d
                   for d in docs if d["id"] not in change["deleted"]]
        write_jsonl(source, changed)
        log(f"[2/4] incremental recompile: +{len(change['added'])} ~{len(change['edited'])} "
            f"-{len(change['deleted'])} ...")
        s, m = compile_once("debian", source, work / "home", work / "tree", args.p)
        result["incremental"] = summary(m, s)
        after = nav_paths(work / "tree")
        result["incremental"]["nav_paths_kept"] = round(len(before & after) / max(1, len(before)), 4)
        log(f"      {s:.1f}s, {result['incremental']['llm_calls']} calls, mode {m['build'].get('mode')}")

        log("[3/4] full rebuild of the changed corpus in a fresh home ...")
        s, m = compile_once("debian", source, work / "full-home", work / "full-tree", args.p)
        result["full"] = summary(m, s)
        log(f"      {s:.1f}s, {result['full']['llm_calls']} calls")

        log(f"[4/4] navigator on {len(questions)} questions, both trees ...")
        result["incremental"]["navigator"] = navigator_recall(work / "tree", questions)
        result["full"]["navigator"] = navigator_recall(work / "full-tree", questions)
        inc, full = result["incremental"], result["full"]
        result["ratios"] = {
            "calls_ratio": round(inc["llm_calls"] / max(1, full["llm_calls"]), 4),
            "wall_ratio": round(inc["seconds"] / max(1e-9, full["seconds"]), 4),
            "recall_drop": round(full["navigator"]["recall@5"] - inc["navigator"]["recall@5"], 4),
        }
        result["targets_met"] = {k: result["ratios"][k] <= v for k, v in TARGETS.items()}
        return result
    finally:
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def report(r: dict) -> str:
    inc, full, base, ratios = r["incremental"], r["full"], r["base"], r["ratios"]
    c = r["change"]
    lines = [
        f"corpus: {r['documents']} documents ({r['corpus']}); change: +{c['added']} added, ~{c['edited']} edited, "
        f"-{c['deleted']} deleted; {r['questions']} questions",
        f"{'':22}{'seconds':>10}{'llm calls':>12}{'embeddings':>12}{'recall@5':>10}",
        f"{'base (full, cold)':22}{base['seconds']:>10.1f}{base['llm_calls']:>12}{base['embeddings']:>12}{'':>10}",
        f"{'incremental':22}{inc['seconds']:>10.1f}{inc['llm_calls']:>12}{inc['embeddings']:>12}"
        f"{inc['navigator']['recall@5']:>10.3f}",
        f"{'full rebuild (cold)':22}{full['seconds']:>10.1f}{full['llm_calls']:>12}{full['embeddings']:>12}"
        f"{full['navigator']['recall@5']:>10.3f}",
        f"incremental build: {inc['build'].get('mode')} ({inc['build'].get('reason')}); "
        f"nav paths kept {inc['nav_paths_kept']:.1%}; calls by stage {inc['stage_calls']}",
    ]
    for key, target in TARGETS.items():
        ok = "ok" if r["targets_met"][key] else "MISSED"
        lines.append(f"{key:14} {ratios[key]:>8.4f}   target ≤ {target}   {ok}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, help="an evenly strided sample of this many documents")
    ap.add_argument("--min-docs", type=int, default=5000, help="the full corpus must have at least this many")
    ap.add_argument("--questions", type=int, help="at most this many questions")
    ap.add_argument("--p", type=int, help="branching factor (default: the compiler's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tmp-dir", help="where the temporary homes go")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary homes and trees")
    args = ap.parse_args(argv)
    r = run(args)
    print(report(r))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(r, indent=2, default=str), encoding="utf-8")
    return 0 if all(r["targets_met"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
