"""Development corpora for navigation against flat retrieval, and their acceptance table.

Builds the project's development corpora from public text (the Python documentation is left
out: its reference with FAQ questions is held out for evaluation, so nothing here is tuned on
it), compiles each with the offline default, and runs ``nav_bench.evaluate`` on each of
their question sets. The corpora are of different kinds, so a constant chosen on them is
chosen leave-one-corpus-out (``loco.py``), never on one:

| corpus | kind | documents | question sets |
|---|---|---|---|
| ``debian-dev`` | reference documentation | a 2,000-document sample of ``DEV_SOURCES`` | known-item (titles), FAQ from body text (section and page gold) |
| ``wixqa`` | help center | the shared WixQA sample (173) | its 80 expert questions |
| ``help`` | tech-support articles | GNOME's desktop help and its applications' (``HELP_PACKAGES``) | FAQ from body text, page gold |
| ``commands`` | command reference | the man pages of ``COMMAND_PACKAGES`` | known-item from each page's NAME line and headings |
| ``perl`` | a language's reference | Perl's manual pages and its core modules' documentation | Perl's own FAQ (real questions), the pages each answer links to as gold |
| ``scale-20k`` | 20,000 documents | a 20,000-document sample of ``SCALE_SOURCES`` (mostly Java API members) | known-item |

It prints one acceptance table: per set, routed and navigator-only recall@5 as a ratio of
the best flat method's (paired bootstrap 95% intervals; targets 1.0x and 0.95x), the paired
verdicts, nav bytes per query against the ``p · ceil(log_p N)`` reference, and, where the
compiled tree's manifest carries ``navigability``, the predicted winner beside the measured one
(the diagnostics' verdict for the set's style of question: ``topic`` for known-item and WixQA
questions, ``detail`` for FAQ questions drawn from body text).

    .venv/bin/python benchmarks/nav_dev.py [--corpora debian-dev,help] [--json results/nav-dev.json]

Corpora, question files, the c2s home (DAGSTER_HOME) and compiled trees live under
``benchmarks/.cache/nav-dev`` (gitignored); a tree is recompiled when its corpus file or the
compiler's code (``COMPILER_CODE``) changed since it was compiled, or with ``--recompile``: a table
is never read off a tree an older compiler built.
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

from dataclasses import dataclass  # noqa: E402

from debian_corpus import DEV_SOURCES, SCALE_SOURCES, CorpusError, build_corpus  # noqa: E402
from nav_bench import evaluate, print_report  # noqa: E402

CACHE = HERE / ".cache" / "nav-dev"
WIXQA = ROOT.parent / "shared" / "data" / "wixqa-sample"
TARGETS = {"routed": 1.0, "navigator-only": 0.95}  # share of the best flat method's recall@5


@dataclass(frozen=True)
class DevSet:
    """One question set over a corpus: ``questions`` names its file (``<corpus>-<questions>.jsonl``
    of the built corpus, or a file of an external corpus's directory); ``style`` is the kind of
    question the diagnostics' prediction is read for; ``page_level`` scores pages, not sections."""

    name: str
    questions: str
    style: str
    page_level: bool = False


@dataclass(frozen=True)
class DevCorpus:
    """A development corpus: built from Debian packages' documentation (``sources``) or read as
    is (``external``: a directory with ``corpus.jsonl`` and its question files)."""

    name: str
    kind: str
    sets: tuple[DevSet, ...]
    sources: tuple[str, ...] = ()
    limit: int | None = None
    min_docs: int = 1
    n_questions: int = 100
    external: Path | None = None


CORPORA: tuple[DevCorpus, ...] = (
    DevCorpus("debian-dev", "reference documentation", (
        DevSet("debian known-item", "known-item", "topic"), DevSet("debian faq", "faq", "detail"),
        DevSet("debian faq-page", "faq-page", "detail", page_level=True)),
        sources=DEV_SOURCES, limit=2000, min_docs=2000),
    DevCorpus("wixqa", "help center", (DevSet("wixqa dev", "qa_dev.jsonl", "topic"),), external=WIXQA),
    DevCorpus("help", "tech-support articles", (DevSet("help faq-page", "faq-page", "detail", page_level=True),),
              sources=("gnome-help",), min_docs=500, n_questions=120),
    DevCorpus("commands", "command reference", (DevSet("commands known-item", "known-item", "topic"),),
              sources=("commands",), min_docs=1000, n_questions=120),
    DevCorpus("perl", "language reference", (DevSet("perl faq", "perlfaq", "detail", page_level=True),),
              sources=("perl",), min_docs=2000),
    DevCorpus("scale-20k", "20,000 documents", (DevSet("scale-20k known-item", "known-item", "topic"),),
              sources=SCALE_SOURCES, limit=20000, min_docs=20000),
)
BY_NAME = {c.name: c for c in CORPORA}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _sha(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


# What a compiled tree depends on besides its corpus: the packages the compile runs (the shared
# core holds the probe's navigation engine) and the pinned dependencies.
COMPILER_CODE = ("c2s_core", "c2s_pipeline", "c2s_cli", "pyproject.toml")


def compiler_digest(root: Path = ROOT) -> str:
    """One hash of the compiler's source files, by path and content."""
    digest = hashlib.sha1()
    for entry in COMPILER_CODE:
        path = root / entry
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(f"{file.relative_to(root)}\0".encode() + file.read_bytes() + b"\0")
    return digest.hexdigest()


def reusable(tree: Path, stamp: Path, digests: list[str]) -> float | None:
    """The seconds the compile of ``tree`` took, if it was compiled from the corpus and by the
    compiler code that ``digests`` name (its stamp says so); else None: it is compiled again."""
    recorded = stamp.read_text().split() if stamp.exists() else []
    if not (tree / "manifest.json").exists() or len(recorded) != 3 or recorded[:2] != digests:
        return None
    return float(recorded[2])


def compile_tree(corpus: Path, name: str, cache: Path, recompile: bool) -> tuple[Path, float, bool]:
    """``c2s compile`` in a subprocess with its own DAGSTER_HOME; returns the tree, the
    compile's wall seconds and whether the tree was reused: compiled from this exact corpus file
    by this compiler code (its stamp keeps both hashes and the seconds the compile took)."""
    tree = cache / "trees" / name
    stamp = cache / "trees" / f"{name}.source-sha1"
    digests = [_sha(corpus), compiler_digest()]
    if not recompile and (recorded := reusable(tree, stamp, digests)) is not None:
        log(f"{name}: reusing {tree}")
        return tree, recorded, True
    home = cache / "home"
    home.mkdir(parents=True, exist_ok=True)
    logfile = cache / f"compile-{name}.log"
    # --full: the tree a first compile of this corpus builds (the caches keep it cheap), never one
    # updated in place from an earlier structure
    cmd = [sys.executable, "-m", "c2s_cli", "compile", str(corpus), "--corpus", name, "--out", str(tree), "--full"]
    log(f"{name}: compiling {corpus} (log: {logfile})")
    start = time.perf_counter()
    with logfile.open("w", encoding="utf-8") as fh:
        proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "DAGSTER_HOME": str(home), "COLUMNS": "100"},
                              stdout=fh, stderr=subprocess.STDOUT, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{name}: c2s compile failed (exit {proc.returncode}); see {logfile}")
    stamp.write_text(f"{' '.join(digests)} {seconds:.1f}")
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
        row = {"set": s["name"], "corpus": s.get("corpus"), "documents": r["documents"], "questions": r["questions"],
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
    contradicted = [row["set"] for row in predicted if contradicts(row["measured"], row["predicted"])]
    print(f"diagnostics predicted the winner on {matched} of {len(predicted)} sets"
          + (f" (missed: {', '.join(row['set'] for row in predicted if row['predicted'] != row['measured'])})"
             if matched < len(predicted) else "")
          + f"; the measurement contradicts the prediction on {len(contradicted)}"
          + (f" ({', '.join(contradicted)})" if contradicted else ""))


def contradicts(measured: str, predicted: str) -> bool:
    """Whether a set's measurement rules its prediction out: a measured win for the side not
    predicted to win, or any win where a tie was. A measured tie (the set's questions too few to
    tell the two apart) rules out no prediction."""
    return measured != "either" and measured != predicted


def build(corpus: DevCorpus, data: Path) -> tuple[Path, dict[str, Path], dict]:
    """The corpus file, its question files by ``DevSet.questions`` and a summary."""
    if corpus.external is not None:
        files = {s.questions: corpus.external / s.questions for s in corpus.sets}
        return corpus.external / "corpus.jsonl", files, {"docs": sum(1 for _ in (corpus.external / "corpus.jsonl").open())}
    kinds = {s.questions for s in corpus.sets}
    files = {k: data / f"{corpus.name}-{k}.jsonl" for k in ("docs", "known-item", "faq", "faq-page", "perlfaq")}
    summary = build_corpus(files["docs"], min_docs=corpus.min_docs, limit=corpus.limit, sources=corpus.sources,
                           questions=files["known-item"] if "known-item" in kinds else None,
                           n_questions=corpus.n_questions,
                           faq_questions=files["faq"] if "faq" in kinds else None,
                           faq_page_questions=files["faq-page"] if "faq-page" in kinds else None,
                           perlfaq_questions=files["perlfaq"] if "perlfaq" in kinds else None)
    return files["docs"], {k: files[k] for k in kinds}, summary


def prepare(names: list[str], cache: Path, recompile: bool) -> tuple[list[dict], dict, dict]:
    """Build and compile each named corpus; returns its sets (``name``, ``corpus``, ``tree``,
    ``qa``, ``style``, ``page_level``), the corpus summaries and the compile seconds."""
    sets, summaries, compiles = [], {}, {}
    for name in names:
        corpus = BY_NAME[name]
        docs, questions, summaries[name] = build(corpus, cache / "data")
        log(f"{name} ({corpus.kind}): {summaries[name]['docs']} docs")
        tree, *compiled = compile_tree(docs, name, cache, recompile)
        compiles[name] = dict(zip(("seconds", "reused"), compiled))
        sets += [{"name": s.name, "corpus": name, "tree": tree, "qa": questions[s.questions], "style": s.style,
                  "page_level": s.page_level} for s in corpus.sets]
    return sets, summaries, compiles


def evaluate_sets(sets: list[dict], limit: int | None = None, quiet: bool = False) -> None:
    """Each set's ``report`` and ``predicted`` winner, in place."""
    for s in sets:
        log(f"{s['name']}: evaluating {s['qa']}")
        s["report"] = evaluate(s["tree"], s["qa"], limit=limit, page_level=s["page_level"])
        s["predicted"] = predicted_winner(s["tree"], s["style"])
        if not quiet:
            print(f"\n## {s['name']} ({s['qa'].name})")
            print_report(s["report"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default=",".join(BY_NAME), help=f"comma list from {','.join(BY_NAME)}")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--recompile", action="store_true", help="compile even when a tree of the same corpus exists")
    ap.add_argument("--limit", type=int, help="questions per set (a quick run)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    names = [n.strip() for n in args.corpora.split(",") if n.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        ap.error(f"unknown corpora {unknown}; known: {', '.join(BY_NAME)}")
    try:
        sets, summaries, compiles = prepare(names, args.cache.resolve(), args.recompile)
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    evaluate_sets(sets, args.limit)
    rows = acceptance_rows(sets)
    print_acceptance(rows)
    print("compile seconds: " + ", ".join(
        f"{k} {round(c['seconds'])}{' (reused tree)' if c['reused'] else ''}"
        for k, c in compiles.items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "corpora": summaries, "compile_seconds": compiles, "acceptance": rows,
            "sets": [{"name": s["name"], "corpus": s["corpus"], "tree": str(s["tree"]), "qa": str(s["qa"]),
                      "predicted": s["predicted"], "report": s["report"]} for s in sets]}, indent=2) + "\n",
            encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
