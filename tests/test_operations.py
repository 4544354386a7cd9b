"""Operating c2s through Dagster: every launch path compiles a corpus with its registered
settings, a failed compile is re-executed from failure, the sensor and the schedule share one
rule (a failed corpus waits for a change, one run per corpus in flight), and one compile at a
time holds a corpus. Real providers run against the local fake Anthropic server."""

from __future__ import annotations

import datetime as dt
import shutil
import time
from pathlib import Path

import pytest
from dagster import (
    DagsterEventType,
    DagsterRunStatus,
    SkipReason,
    build_schedule_context,
    build_sensor_context,
    execute_job,
    instance_for_test,
    reconstructable,
)
from dagster_aws.s3 import S3Resource

from c2s_pipeline.automation import CORPUS_TAG, compile_decision, corpus_sensor, nightly_recompile
from c2s_pipeline.compiler import CompileError, compile_corpus, reexecute_from_failure
from c2s_pipeline.definitions import compile_job_def
from c2s_pipeline.locks import COMPILE_ID_TAG, compile_lock
from c2s_pipeline.resources import WorkspaceResource
from c2s_pipeline.workspace import CorpusSpec, LLMSettings, Workspace
from tests.fakes.compile_model import CompileModel, task_of
from tests.fakes.llm_servers import FakeLLMServer

from .conftest import SAMPLE_CORPUS
from .test_compile_llm import Outage, shared_encoder  # noqa: F401 - one loaded encoder for these compiles

MODEL = "claude-registered-model"
NIGHT = dt.datetime(2026, 12, 3, 2, 0)


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")


@pytest.fixture
def corpus(tmp_path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    for path in sorted(SAMPLE_CORPUS.rglob("*.md"))[::7][:24]:
        shutil.copy(path, root / path.name)
    return root


@pytest.fixture
def server():
    with FakeLLMServer("anthropic", handler=CompileModel(move_one=False)) as fake:
        yield fake


@pytest.fixture
def instance(tmp_path, monkeypatch):
    """The instance in the c2s home, as in a deployment: a run launched with no config (a
    backfill) finds the corpus registry in $DAGSTER_HOME."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with instance_for_test(temp_dir=str(home)) as instance:
        yield instance


def registered(tmp_path: Path, corpus: Path, server: FakeLLMServer, name: str = "handbook", **params) -> CorpusSpec:
    llm = LLMSettings(provider="anthropic", model=MODEL, base_url=server.base_url, concurrency=4)
    return CorpusSpec(name=name, source=str(corpus), out=str(tmp_path / "trees" / name), llm=llm, **params)


def resources(workspace: Workspace) -> dict:
    return {"workspace": WorkspaceResource(home=str(workspace.home)), "s3": S3Resource()}


def launch(instance, request=None, *, partition: str | None = None, tags: dict | None = None):
    """Run the compile job as the daemon launches a sensor's or schedule's request (its run config
    and tags), or, with no request, as a backfill or the launchpad does (a partition, no config)."""
    run_tags = {**(request.tags if request else {}), **(tags or {}),
                "dagster/partition": request.partition_key if request else partition}
    return execute_job(reconstructable(compile_job_def), instance, raise_on_error=False,
                       run_config=request.run_config if request else None, tags=run_tags)


def notes(folder: Path, n: int, topic: str, start: int = 0) -> Path:
    folder.mkdir(exist_ok=True)
    for i in range(start, start + n):
        (folder / f"note-{i}.md").write_text(f"# Note {i}\n\nHow {topic} work, case {i}.")
    return folder


def edit(corpus: Path, note: str) -> None:
    doc = sorted(corpus.glob("*.md"))[0]
    time.sleep(0.01)
    doc.write_text(doc.read_text() + f"\n\n{note}\n")


def models_since(server: FakeLLMServer, start: int) -> set:
    return {r.body["model"] for r in server.requests[start:]}


def test_every_launch_path_compiles_with_the_registered_settings(tmp_path, corpus, server, instance):
    workspace = Workspace(tmp_path / "home")
    spec = registered(tmp_path, corpus, server)
    manifest = compile_corpus(spec, workspace, instance=instance)
    assert manifest["provider"]["name"] == "anthropic" and manifest["provider"]["model"] == MODEL
    assert server.requests and models_since(server, 0) == {MODEL}
    assert workspace.corpus("handbook").llm == spec.llm  # the registration carries the settings

    # The sensor's request, launched as the daemon launches it: the registration as run config.
    edit(corpus, "Refunds now take three days.")
    with build_sensor_context(instance=instance, resources=resources(workspace)) as ctx:
        request, = corpus_sensor(ctx).run_requests
    assert request.run_config["resources"]["llm"]["config"]["model"] == MODEL
    seen = len(server.requests)
    assert launch(instance, request).success
    assert models_since(server, seen) == {MODEL} and len(server.requests) > seen

    # The nightly schedule's request.
    edit(corpus, "Payouts now run on Fridays.")
    with build_schedule_context(instance=instance, resources=resources(workspace), scheduled_execution_time=NIGHT) as ctx:
        request, = nightly_recompile(ctx)
    seen = len(server.requests)
    assert launch(instance, request).success and models_since(server, seen) == {MODEL}

    # A backfill (or the UI launchpad) sends no config: the resources read the registration.
    edit(corpus, "Invoices can be sent in batches.")
    seen = len(server.requests)
    result = launch(instance, partition="handbook", tags={"dagster/backfill": "bf1"})
    assert result.success and models_since(server, seen) == {MODEL} and len(server.requests) > seen
    manifest = (Path(spec.out) / "manifest.json").read_text()
    assert '"name": "anthropic"' in manifest and '"name": "offline"' not in manifest


def test_a_failed_summary_stage_is_reexecuted_from_failure_with_no_repeated_requests(
        tmp_path, corpus, server, instance):
    # The server fails every summary request after the first, through the client's attempts and
    # every step retry: summaries_l1 fails for good.
    outage = Outage(CompileModel(move_one=False), after=1, failures=10**6)
    server.handler = outage
    workspace = Workspace(tmp_path / "home")
    with pytest.raises(CompileError, match="summaries_l1"):
        compile_corpus(registered(tmp_path, corpus, server), workspace, instance=instance)
    failed = instance.get_runs(limit=1)[0]
    assert failed.status == DagsterRunStatus.FAILURE and failed.remote_job_origin.location_name == "c2s"
    cards = sum(task_of(r) == "card" for r in server.requests)

    outage.left = 0  # the provider recovers
    result = reexecute_from_failure(failed.run_id, instance)
    assert result.success
    run = instance.get_run_by_id(result.run_id)
    assert run.parent_run_id == failed.run_id and run.tags["dagster/partition"] == "handbook"
    ran = {e.step_key for e in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_SUCCESS)}
    assert "summaries_l1" in ran and "skill_tree" in ran
    assert not ran & {"documents", "doc_cards", "doc_embeddings", "clusters_l1"}
    # Nothing already done was asked again: no card request, each summary prompt answered once.
    assert sum(task_of(r) == "card" for r in server.requests) == cards
    assert len(outage.answered) == len(set(outage.answered))
    assert (Path(tmp_path / "trees" / "handbook") / "manifest.json").exists()


def test_a_failed_corpus_waits_for_a_change_and_runs_in_flight_block_new_ones(tmp_path, instance):
    workspace = Workspace(tmp_path / "home")
    source = notes(tmp_path / "small", 4, "refunds")
    spec = CorpusSpec(name="small", source=str(source), out=str(tmp_path / "trees" / "small"))
    with pytest.raises(CompileError, match="fewer than the branching ratio"):
        compile_corpus(spec, workspace, instance=instance)

    def sensor_runs():
        with build_sensor_context(instance=instance, resources=resources(workspace)) as ctx:
            result = corpus_sensor(ctx)
        return ([] if isinstance(result, SkipReason) else [r.partition_key for r in result.run_requests]), result

    runs, skip = sensor_runs()
    assert runs == [] and "its last compile failed" in skip.skip_message
    with build_schedule_context(instance=instance, resources=resources(workspace), scheduled_execution_time=NIGHT) as ctx:
        assert isinstance(nightly_recompile(ctx), SkipReason)

    notes(source, 8, "invoices", start=4)  # the source changes: the corpus is requested again
    runs, _ = sensor_runs()
    assert runs == ["small"]

    # A run of the corpus in flight (whoever launched it): neither the sensor nor the schedule adds one.
    job = compile_job_def()
    busy = instance.create_run_for_job(job_def=job, status=DagsterRunStatus.STARTED, tags={CORPUS_TAG: "small"})
    decision = compile_decision(workspace.corpus("small"), workspace.home, instance, S3Resource())
    assert not decision.needed and busy.run_id in decision.reason
    runs, skip = sensor_runs()
    assert runs == [] and "in flight" in skip.skip_message
    with build_schedule_context(instance=instance, resources=resources(workspace), scheduled_execution_time=NIGHT) as ctx:
        assert "in flight" in nightly_recompile(ctx).skip_message
    # A backfill's or the UI's run carries only its partition: it counts as in flight too.
    instance.report_run_canceled(busy)
    backfill = instance.create_run_for_job(job_def=job, status=DagsterRunStatus.STARTED,
                                           tags={"dagster/partition": "small", "dagster/backfill": "b1"})
    decision = compile_decision(workspace.corpus("small"), workspace.home, instance, S3Resource())
    assert not decision.needed and backfill.run_id in decision.reason


def test_a_second_compile_fails_at_once_and_a_killed_compile_is_failed(tmp_path, instance):
    workspace = Workspace(tmp_path / "home")
    source = notes(tmp_path / "notes", 12, "payouts")
    spec = CorpusSpec(name="notes", source=str(source), out=str(tmp_path / "trees" / "notes"))
    with compile_lock(workspace.home, spec, instance):
        with pytest.raises(CompileError, match="another compile of notes is running"):
            compile_corpus(spec, workspace, instance=instance)

    # A compile process that died mid-run left its run STARTED and its id in the (free) lock.
    dead = instance.create_run_for_job(job_def=compile_job_def(), status=DagsterRunStatus.STARTED,
                                       tags={CORPUS_TAG: "notes", COMPILE_ID_TAG: "dead-compile"})
    (workspace.home / "locks" / "corpus-notes.lock").write_text("dead-compile")
    manifest = compile_corpus(spec, workspace, instance=instance)
    assert manifest["corpus"] == "notes"
    died = instance.get_run_by_id(dead.run_id)
    assert died.status == DagsterRunStatus.FAILURE

    # The sensor finds such a run too, so a killed compile never holds the corpus forever.
    edit(source, "Payouts moved to Fridays.")
    dead = instance.create_run_for_job(job_def=compile_job_def(), status=DagsterRunStatus.STARTED,
                                       tags={CORPUS_TAG: "notes", COMPILE_ID_TAG: "killed-compile"})
    (workspace.home / "locks" / "corpus-notes.lock").write_text("killed-compile")
    decision = compile_decision(workspace.corpus("notes"), workspace.home, instance, S3Resource())
    assert decision.needed, decision.reason
    assert instance.get_run_by_id(dead.run_id).status == DagsterRunStatus.FAILURE


def test_a_view_that_cannot_be_written_does_not_fail_the_published_compile(tmp_path, instance):
    from dagster import AssetKey, AssetRecordsFilter

    workspace = Workspace(tmp_path / "home")
    spec = CorpusSpec(name="viewless", source=str(notes(tmp_path / "notes", 12, "refunds")),
                      out=str(tmp_path / "trees" / "viewless"))
    blocker = workspace.artifacts("viewless") / "view"
    blocker.write_text("a file where the view folder would go")
    manifest = compile_corpus(spec, workspace, instance=instance)
    assert manifest["corpus"] == "viewless" and (Path(spec.out) / "manifest.json").exists()
    record, = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("skill_tree"), asset_partitions=["viewless"]), limit=1).records
    metadata = record.asset_materialization.metadata
    assert "view" not in metadata and "is a file; choose a folder for the view" in metadata["view_error"].value
    assert "source_state" in metadata  # the compile counts as done for the sensor and the schedule
