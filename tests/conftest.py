"""Shared fixtures: compiled trees of the bundled sample corpus and of the real WixQA sample."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Parallel workers share the cores: each takes its share of threads for torch and BLAS (and passes
# it to the processes it starts), since workers each running a thread per core spin against one
# another (two compiles side by side took 77 s each that way, 49 s with a thread each).
if (workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))) > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_CORPUS = ROOT / "c2s_pipeline" / "sample_corpus"
SHARED_DATA = ROOT.parent / "shared" / "data"
WIXQA = SHARED_DATA / "wixqa-sample"


@dataclass
class Compiled:
    home: Path
    out: Path
    manifest: dict
    source: Path


def compile_into(home: Path, name: str, source: Path, **params) -> Compiled:
    from c2s_pipeline.compiler import compile_corpus
    from c2s_pipeline.workspace import CorpusSpec, Workspace

    out = home / "trees" / name
    manifest = compile_corpus(CorpusSpec(name=name, source=str(source), out=str(out), **params), Workspace(home))
    return Compiled(home, out, manifest, source)


def requires_wixqa():
    if not (WIXQA / "corpus.jsonl").exists():
        pytest.skip(f"shared data not present at {WIXQA} (the WixQA sample lives outside the repository)")


@pytest.fixture(scope="session")
def dagster_home(tmp_path_factory) -> Path:
    """One instance for the session's compiles, as a user's $DAGSTER_HOME would be, stored in a
    real PostgreSQL server (as a shared deployment would be) started for the session."""
    from .postgres import PostgresUnavailable, shared_server, stop_shared, write_instance_config

    try:
        server = shared_server()
    except PostgresUnavailable as exc:
        pytest.fail(f"the test instance needs PostgreSQL: {exc}", pytrace=False)
    home = tmp_path_factory.mktemp("c2s-home")
    write_instance_config(home, server.create_database("c2s_session"))
    os.environ["DAGSTER_HOME"] = str(home)
    yield home
    stop_shared()


def compile_shared(tmp_path_factory, home: Path, name: str, source: Path) -> Compiled:
    """A session tree, compiled by each test worker into its own home and instance. The first
    worker to compile ``name`` leaves its item cache (cards, summaries, vectors) for the others,
    which then compile the same tree without the encoder and the LLM tasks: every worker of a run
    needs both session trees, and compiling them took each worker about a minute."""
    import shutil
    import sqlite3

    from filelock import FileLock

    if not os.environ.get("PYTEST_XDIST_WORKER"):  # one process: nothing to share
        return compile_into(home, name, source)
    run_root = tmp_path_factory.getbasetemp().parent  # the run's folder, above each worker's
    seed = run_root / f"session-cache-{name}.sqlite"
    cache = home / "cache.sqlite"
    with FileLock(f"{seed}.lock"):
        if seed.exists():
            if not cache.exists():
                shutil.copyfile(seed, cache)
            else:  # the home's cache already holds the other session tree's items
                with sqlite3.connect(cache) as db:
                    db.execute("ATTACH DATABASE ? AS seed", (str(seed),))
                    db.execute("INSERT OR IGNORE INTO items SELECT * FROM seed.items")
                db.close()
        compiled = compile_into(home, name, source)
        if not seed.exists():
            with sqlite3.connect(cache) as db, sqlite3.connect(seed) as out:
                db.backup(out)  # a consistent copy, the write-ahead log included
            db.close()
            out.close()
    return compiled


@pytest.fixture(scope="session")
def sample_tree(dagster_home, tmp_path_factory) -> Compiled:
    return compile_shared(tmp_path_factory, dagster_home, "sample", SAMPLE_CORPUS)


@pytest.fixture(scope="session")
def wixqa_tree(dagster_home, tmp_path_factory) -> Compiled:
    requires_wixqa()
    return compile_shared(tmp_path_factory, dagster_home, "wixqa", WIXQA / "corpus.jsonl")


@pytest.fixture(scope="session")
def wixqa_questions() -> list[dict]:
    requires_wixqa()
    return [json.loads(line) for line in (WIXQA / "qa_dev.jsonl").read_text().splitlines() if line.strip()]
