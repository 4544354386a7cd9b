"""Compile-side hardening: what a compile reads (HTML within a memory budget), what it writes
(escaped nav rows, identifiers kept whole, only folders it owns, never a mount point, no staging
left behind), the state it keeps (corrupted artifacts, cache and registry named and recovered
from) and how its runs are operated (no rejected tree published, dead runs failed by the
instance, a killed run retried once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from c2s_core.atomic_publish import MARKER_FILE, OutputError, check_output, publish, staged_path, swap_in
from c2s_core.navrows import parse_nav_file
from c2s_core.text import UNPRINTABLE, printable, strip_emphasis, strip_markdown, terms
from c2s_pipeline.compiler import CompileError, compile_corpus
from c2s_pipeline.workspace import CorpusSpec, Workspace

from .test_compile_llm import shared_encoder  # noqa: F401 - one loaded encoder for these compiles
from .fakes.checks import fail_check
from .test_ingest import write


def notes(folder: Path, n: int = 12) -> Path:
    for i in range(n):
        write(folder / f"note-{i}.md", f"# Note {i}\n\nHow refunds work for account case {i}, step by step.")
    return folder


def spec_for(tmp_path: Path, source: Path, name: str = "notes", out: Path | None = None) -> CorpusSpec:
    return CorpusSpec(name=name, source=str(source), out=str(out or tmp_path / "trees" / name))


def nav_files(tree: Path) -> dict[str, str]:
    return {p.relative_to(tree).as_posix(): p.read_text(encoding="utf-8") for p in tree.rglob("*.md")}


# -- 9: nav rows never carry raw control characters ---------------------------------------------


def test_printable_shows_control_and_bidi_characters_as_escapes():
    assert printable("a\x1b[2Jb\tc\nd\u202ee\x85f\u2028") == "a\\x1b[2Jb\tc\nd\\u202ee\\x85f\\u2028"
    assert printable("tab\there\n", keep="") == "tab\\x09here\\x0a"
    assert printable("plain text, ünïcode ✓") == "plain text, ünïcode ✓"


def test_titles_with_control_characters_render_as_escaped_single_rows(tmp_path):
    hostile = "Reset \x1b[2J the\x1e screen \u202eevil\x85 now"
    records = [{"id": f"doc-{i}", "title": hostile if i == 0 else f"Refund case {i}",
                "text": f"How refunds work for account case {i}, step by step. Press \x1b[31m red."}
               for i in range(12)]
    records.append({"id": "bad\x85id", "text": "an id with a C1 control"})
    source = write(tmp_path / "records.jsonl", "\n".join(json.dumps(r) for r in records) + "\n")
    spec = spec_for(tmp_path, source)
    manifest = compile_corpus(spec, Workspace(tmp_path / "home"))

    assert [r["reason"] for r in manifest["rejected"] if r["source"].endswith(":13")] == [
        "invalid id 'bad\\x85id': needs 1-512 chars, no control chars or backticks"]
    files = nav_files(Path(spec.out))
    for rel, text in files.items():
        assert not UNPRINTABLE.search(text.replace("\n", "")), rel
    leaf = manifest["doc_paths"]["doc-0"]
    row = next(c for c in parse_nav_file(files[leaf], leaf).cards if c.doc_id == "doc-0")
    assert row.title == printable(" ".join(hostile.split()))
    assert "\\x1b[2J" in row.title and "\\u202e" in row.title


def test_row_parser_splits_rows_at_newlines_only():
    text = ("---\nname: leaf\ndescription: d\n---\n# Leaf\n\n## Documents (2)\n"
            "- `a` **one\x1etwo\u2028three** — first\n- `b` **second** — row\n")
    cards = parse_nav_file(text, "skills/leaf/SKILL.md").cards
    assert [(c.doc_id, c.title) for c in cards] == [("a", "one\x1etwo\u2028three"), ("b", "second")]


# -- 11: identifiers keep their underscores --------------------------------------------------------


def test_markdown_helpers_keep_underscores_inside_identifiers():
    assert strip_emphasis("**dh_installxmlcatalogs** _now_ `MAX_FILE_BYTES`") == (
        "dh_installxmlcatalogs now MAX_FILE_BYTES")
    assert strip_markdown("Run _dh_installxmlcatalogs_ | see [pg_dump](x)") == "Run dh_installxmlcatalogs see pg_dump"


def test_offline_titles_and_rows_keep_identifiers_grep_can_find(tmp_path):
    source = notes(tmp_path / "corpus")
    write(source / "catalogs.md", "# dh_installxmlcatalogs\n\nThe dh_installxmlcatalogs helper registers "
                                  "XML catalogs; set DH_VERBOSE to see each step it takes.")
    spec = spec_for(tmp_path, source)
    manifest = compile_corpus(spec, Workspace(tmp_path / "home"))
    leaf = manifest["doc_paths"]["catalogs.md"]
    text = (Path(spec.out) / leaf).read_text(encoding="utf-8")
    row = next(c for c in parse_nav_file(text, leaf).cards if c.doc_id == "catalogs.md")
    assert row.title == "dh_installxmlcatalogs"
    assert "dhinstallxmlcatalogs" not in text
    # Title search finds the row by the identifier's (stemmed) term.
    title_terms = [line.split()[0] for line in (Path(spec.out) / "term_index.txt").read_text().splitlines()
                   if line.startswith("=")]
    assert f"={terms('dh_installxmlcatalogs')[0]}" in title_terms


# -- 12: only a folder with the marker is c2s's ---------------------------------------------------


def test_a_manifest_without_the_marker_does_not_make_a_folder_replaceable(tmp_path):
    out = tmp_path / "out"
    write(out / "manifest.json", json.dumps({"corpus": "notes", "c2s_version": "0.1.0"}))
    precious = write(out / "precious.txt", "keep me")
    with pytest.raises(OutputError, match=f"no {MARKER_FILE}"):
        check_output(out, "notes")
    stage = write(tmp_path / ".out.staged" / "manifest.json", "{}").parent
    with pytest.raises(OutputError):
        publish(stage, out, "notes")
    assert precious.read_text() == "keep me" and not stage.exists()

    with pytest.raises(CompileError, match=f"no {MARKER_FILE}"):
        compile_corpus(spec_for(tmp_path, notes(tmp_path / "corpus"), out=out), Workspace(tmp_path / "home"))
    assert precious.read_text() == "keep me"
    assert not (tmp_path / "home" / "artifacts" / "notes").exists()  # refused before any stage ran


# -- 13: a mount point is refused up front, and no staging is left behind -------------------------


@pytest.fixture
def mount_point(tmp_path):
    target = tmp_path / "mnt"
    target.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(target)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs needs privileges this run lacks: {done.stderr.decode().strip()}")
    yield target
    subprocess.run(["umount", str(target)], check=True)


def test_a_mount_point_as_out_is_refused_before_any_stage(tmp_path, mount_point):
    assert os.path.ismount(mount_point) and not any(mount_point.iterdir())
    with pytest.raises(CompileError, match="is a mount point"):
        compile_corpus(spec_for(tmp_path, notes(tmp_path / "corpus"), out=mount_point), Workspace(tmp_path / "home"))
    assert not (tmp_path / "home" / "artifacts" / "notes").exists()
    assert not staged_path(mount_point).exists()

    # Renaming a mount point fails (EBUSY): the staged tree goes, the mount keeps its content.
    write(mount_point / "kept.txt", "still here")
    stage = write(staged_path(mount_point) / "SKILL.md", "new").parent
    with pytest.raises(OSError):
        swap_in(stage, mount_point)
    assert not stage.exists() and (mount_point / "kept.txt").read_text() == "still here"


def test_a_failed_swap_puts_the_old_tree_back_and_removes_the_staging(tmp_path, monkeypatch):
    out = write(tmp_path / "out" / MARKER_FILE, json.dumps({"corpus": "notes"})).parent
    write(out / "SKILL.md", "old tree")
    stage = write(staged_path(out) / "SKILL.md", "new tree").parent
    real_replace, calls = os.replace, []

    def replace(src, dst):
        calls.append((Path(src), Path(dst)))
        if Path(src) == stage:
            raise OSError(16, "Device or resource busy")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OutputError, match="could not publish into .*Device or resource busy"):
        publish(stage, out, "notes")
    assert (out / "SKILL.md").read_text() == "old tree"
    assert not stage.exists() and [p.name for p in tmp_path.iterdir()] == ["out"]


# -- 14: damaged state names its file; --full and a set-aside cache recover -----------------------


def test_a_corrupted_cache_is_set_aside_with_a_warning_and_rebuilt(tmp_path, caplog):
    from c2s_core.cache import ItemCache

    path = tmp_path / "cache.sqlite"
    cache = ItemCache(path)
    cache.put_json("cards", {f"k{i}": "x" * 200 for i in range(2000)})
    cache._con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cache.close()
    with open(path, "r+b") as handle:  # the header survives: the damage shows on the first read
        handle.seek(8192)
        handle.write(os.urandom(40000))
    cache = ItemCache(path)
    with caplog.at_level("WARNING"):
        assert cache.get_json("cards", ["k1", "k2"]) == {}
    aside = cache.set_aside
    assert aside is not None and aside.exists() and aside.name.startswith("cache.sqlite.corrupt-")
    assert f"{path} is corrupted (database disk image is malformed); it was moved to {aside}" in caplog.text
    cache.put_json("cards", {"k1": 1})
    assert cache.get_json("cards", ["k1"]) == {"k1": 1}

    cache.close()
    for part in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        part.unlink(missing_ok=True)
    path.write_bytes(os.urandom(5000))  # a header that is not SQLite's: set aside on opening
    reopened = ItemCache(path)
    assert reopened.set_aside is not None and reopened.get_json("cards", ["k1"]) == {}


def test_damaged_artifacts_name_the_file_and_full_rebuilds(tmp_path):
    home = tmp_path / "home"
    spec = spec_for(tmp_path, notes(tmp_path / "corpus"))
    first = compile_corpus(spec, Workspace(home))
    # The run let go of the cache: an open connection would checkpoint its WAL over the damage below.
    held = [os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")]
    assert not [h for h in held if h.startswith(str(home / "cache.sqlite"))], held
    artifacts = home / "artifacts" / spec.name
    damaged = [p for p in artifacts.rglob("*") if p.suffix in (".json", ".parquet", ".npy")]
    assert len(damaged) > 20
    for path in damaged:
        path.write_bytes(os.urandom(100))
    (home / "cache.sqlite").write_bytes(os.urandom(5000))
    for extra in ("cache.sqlite-wal", "cache.sqlite-shm"):
        (home / extra).unlink(missing_ok=True)

    with pytest.raises(CompileError, match=rf"artifact {artifacts}/\S+ is unreadable \(.*\); rerun the compile "
                                           "with --full"):
        compile_corpus(spec, Workspace(home))
    rebuilt = compile_corpus(spec, Workspace(home), full=True)
    # Set aside by whichever run opened it first (the failed one, when its first step used the cache).
    assert list(home.glob("cache.sqlite.corrupt-*")), "the damaged cache was set aside"
    assert rebuilt["build"]["mode"] == "full" and rebuilt["doc_paths"].keys() == first["doc_paths"].keys()
    assert "skill_tree" not in rebuilt["stages"]  # the manifest holds this run's stages only


# Fixed bytes, not random ones: a test's id (and what it reads) is the same in every run and worker.
@pytest.mark.parametrize("garbage", [bytes(range(0x80, 0xc0)) + b"\xff", b"- just\n- a list\n", b"corpora: {x: 5}\n",
                                     b"corpora: {x: {source: 1}}\n", b"a: b: c\n"],
                         ids=["not-utf8", "a-list", "corpus-not-a-mapping", "source-not-text", "not-yaml"])
def test_a_garbage_registry_names_the_file(tmp_path, garbage):
    home = tmp_path / "home"
    write(home / "corpora.yaml", garbage)
    with pytest.raises(CompileError, match=rf"{home / 'corpora.yaml'} is not a valid corpus registry"):
        compile_corpus(spec_for(tmp_path, notes(tmp_path / "corpus")), Workspace(home))


# -- 15: a tree that failed its checks is never published, whatever is materialized ---------------


@pytest.fixture
def instance(tmp_path, monkeypatch):
    from dagster import instance_for_test

    home = tmp_path / "home"
    write(home / "dagster.yaml", "telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with instance_for_test(temp_dir=str(home)) as instance:
        yield instance


def test_a_tree_that_failed_a_blocking_check_is_neither_materialized_nor_published(tmp_path, instance,
                                                                                   monkeypatch):
    from dagster import AssetCheckKey, AssetKey, AssetRecordsFilter, execute_job, reconstructable

    from c2s_pipeline.automation import compile_run_config
    from c2s_pipeline.compiler import failure_message
    from c2s_pipeline.definitions import compile_job_def

    home = tmp_path / "home"
    spec = spec_for(tmp_path, notes(tmp_path / "corpus"))
    compile_corpus(spec, Workspace(home), instance=instance)
    live = Path(spec.out) / "manifest.json"
    good = live.read_text()

    fail_check(monkeypatch, "every_document_placed_once", "note-3.md is a primary row of 2 leaves")
    with pytest.raises(CompileError, match="failed its checks and was not published.*every_document_placed_once: "
                                           "note-3.md is a primary row of 2 leaves"):
        compile_corpus(spec, Workspace(home), instance=instance)
    monkeypatch.undo()

    def materializations(key: str) -> int:
        return len(instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(key), asset_partitions=[spec.name]), limit=10).records)

    assert materializations("staged_tree") == 1  # the first, passing run's only
    # The failed check is recorded for the UI all the same: the second run's evaluation failed.
    history = instance.event_log_storage.get_asset_check_execution_history(
        AssetCheckKey(AssetKey("staged_tree"), "every_document_placed_once"), limit=5)
    assert [r.event.asset_check_evaluation.passed for r in history] == [False, True]

    # "Materialize selected" on skill_tree alone finds nothing checked to publish.
    def skill_tree_alone():
        return execute_job(reconstructable(compile_job_def), instance, raise_on_error=False,
                           asset_selection=[AssetKey("skill_tree")], run_config=compile_run_config(spec, home),
                           tags={"dagster/partition": spec.name})

    result = skill_tree_alone()
    assert not result.success and "no checked tree is staged for 'notes'" in failure_message(result)
    assert live.read_text() == good and materializations("skill_tree") == 1

    # Nor does a staged tree whose manifest records a failed check (one left by an older c2s).
    staged = staged_path(Path(spec.out))
    manifest = json.loads((staged / "manifest.json").read_text())
    assert not manifest["checks"]["every_document_placed_once"]["passed"]
    write(home / "artifacts" / spec.name / "staged.json", json.dumps({"staged": str(staged)}))
    result = skill_tree_alone()
    assert not result.success and "refusing to publish the staged tree" in failure_message(result)
    assert "it failed every_document_placed_once" in failure_message(result)
    assert live.read_text() == good and materializations("skill_tree") == 1


# -- 16, 17: a killed c2s compile is failed by run monitoring, and retried once -------------------


@pytest.fixture
def monitored(tmp_path, monkeypatch):
    """An instance with the shipped settings (the c2s launcher, run monitoring), a short heartbeat
    timeout, and the sensor and schedule off: nothing but run monitoring looks at the runs."""
    import yaml
    from dagster import DagsterInstance

    from .conftest import ROOT

    home = tmp_path / "home"
    config = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    config["run_launcher"]["config"]["heartbeat_timeout_seconds"] = 4
    write(home / "dagster.yaml", yaml.safe_dump(config))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with DagsterInstance.from_config(str(home)) as instance:
        yield home, instance


def _wait_for(predicate, seconds: float, what: str):
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def test_run_monitoring_fails_a_killed_compile_and_the_sensor_retries_it_once(tmp_path, monitored):
    import logging
    import signal
    import time

    from dagster import DagsterRunStatus, RunsFilter
    from dagster._daemon.monitoring.run_monitoring import monitor_started_run
    from dagster_aws.s3 import S3Resource

    from c2s_pipeline.automation import RETRY_OF_TAG, compile_decision
    from c2s_pipeline.definitions import compile_job_def
    from c2s_pipeline.locks import CORPUS_TAG, HEARTBEAT_TAG, KILLED_TAG, fail_killed_run, runs_in_flight

    from .conftest import ROOT

    home, instance = monitored
    spec = spec_for(tmp_path, notes(tmp_path / "corpus", 40))
    script = ("import sys; from c2s_pipeline.compiler import compile_corpus; "
              "from c2s_pipeline.workspace import CorpusSpec, Workspace; "
              "compile_corpus(CorpusSpec.model_validate_json(sys.argv[1]), Workspace(sys.argv[2]))")
    env = {**os.environ, "DAGSTER_HOME": str(home), "C2S_HEARTBEAT_SECONDS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", script, spec.model_dump_json(), str(home)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        first_beat: dict[str, str] = {}

        def beating_run():  # started, and its heartbeat has changed since first seen
            runs = instance.get_runs(RunsFilter(tags={CORPUS_TAG: spec.name}, statuses=[DagsterRunStatus.STARTED]))
            if not runs:
                return None
            beat = first_beat.setdefault(runs[0].run_id, runs[0].tags[HEARTBEAT_TAG])
            return runs[0] if runs[0].tags[HEARTBEAT_TAG] != beat else None

        run = _wait_for(beating_run, 120, "the compile's run to start and beat")
        record = instance.get_run_record_by_id(run.run_id)
        monitor_started_run(instance, None, record, logging.getLogger("test"))  # alive: left alone
        assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.STARTED
        proc.send_signal(signal.SIGKILL)  # what the OOM killer sends
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert runs_in_flight(instance, spec.name), "the dead run still holds its corpus"
    time.sleep(5)  # past the heartbeat timeout
    monitor_started_run(instance, None, instance.get_run_record_by_id(run.run_id), logging.getLogger("test"))
    dead = instance.get_run_by_id(run.run_id)
    assert dead.status == DagsterRunStatus.FAILURE and dead.tags[KILLED_TAG] == "true"
    assert not runs_in_flight(instance, spec.name)  # a queued run of the corpus may go ahead
    failure = instance.all_logs(run.run_id)[-1].message
    assert "stopped its heartbeat" in failure and "killed" in failure

    # A killed compile is retried once, whatever its trigger; a killed retry waits for a change.
    registered = Workspace(home).corpus(spec.name)
    decision = compile_decision(registered, home, instance, S3Resource())
    assert decision.needed and decision.retry_of == run.run_id and "was killed; retrying it once" in decision.reason
    retry = instance.create_run_for_job(job_def=compile_job_def(), tags={
        CORPUS_TAG: spec.name, "c2s/state": decision.state, RETRY_OF_TAG: run.run_id,
        "dagster/partition": spec.name})
    fail_killed_run(instance, retry, "killed again")
    decision = compile_decision(registered, home, instance, S3Resource())
    assert not decision.needed and "killed again on its retry" in decision.reason


# -- 4: HTML is parsed as a stream, within an element budget -------------------------------------


_MEASURE = """
import json, resource, sys, time
from pathlib import Path
from c2s_pipeline.ingest import read_corpus
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
result = read_corpus(Path(sys.argv[1]))
print(json.dumps({"peak_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024,
                  "seconds": time.perf_counter() - started,
                  "accepted": {d.doc_id: [d.title, len(d.text)] for d in result.documents},
                  "rejected": {r.source: r.reason for r in result.rejected}}))
"""


def test_html_ingest_memory_and_time_stay_bounded(tmp_path):
    from .conftest import ROOT

    corpus = tmp_path / "corpus"
    write(corpus / "tags.html", "<html><body>" + "<b>" * (10 * 1024 * 1024 // 3) + "</body></html>")
    paragraphs = "".join(f"<p>Paragraph {i} on refunds &amp; payouts.</p>\n" for i in range(100_000))
    write(corpus / "long.html", f"<html><head><title>Long page</title></head><body>{paragraphs}</body></html>")
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(corpus)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout)
    assert measured["rejected"] == {"tags.html": "HTML page has more than 500,000 elements; split it into smaller "
                                                 "pages (parsing it would cost too much memory and time)"}
    title, chars = measured["accepted"]["long.html"]
    assert title == "Long page" and chars > 3_000_000  # 4.4 MB of markup, every paragraph kept
    # BeautifulSoup took 2.37 GB and 73 s for the 10 MB page alone.
    assert measured["peak_mib"] < 200, measured
    assert measured["seconds"] < 60, measured
