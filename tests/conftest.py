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


@pytest.fixture(scope="session")
def sample_tree(dagster_home) -> Compiled:
    return compile_into(dagster_home, "sample", SAMPLE_CORPUS)


@pytest.fixture(scope="session")
def wixqa_tree(dagster_home) -> Compiled:
    requires_wixqa()
    return compile_into(dagster_home, "wixqa", WIXQA / "corpus.jsonl")


@pytest.fixture(scope="session")
def wixqa_questions() -> list[dict]:
    requires_wixqa()
    return [json.loads(line) for line in (WIXQA / "qa_dev.jsonl").read_text().splitlines() if line.strip()]
