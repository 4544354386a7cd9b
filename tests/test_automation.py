"""The corpus sensor and the nightly schedule request work only for new or changed corpora."""

import datetime as dt
import time

import pytest
from dagster import SkipReason, build_schedule_context, build_sensor_context, instance_for_test

from dagster_aws.s3 import S3Resource

from c2s_pipeline.automation import corpus_sensor, nightly_recompile
from c2s_pipeline.compiler import compile_corpus
from c2s_pipeline.resources import WorkspaceResource
from c2s_pipeline.workspace import CorpusSpec, Workspace


def make_corpus(folder, n=12):
    folder.mkdir(parents=True)
    topics = ["refund", "invoice", "domain", "calendar", "password", "payout"]
    for i in range(n):
        topic = topics[i % len(topics)]
        (folder / f"{topic}-{i}.md").write_text(f"# {topic.title()} question {i}\n\nHow the {topic} feature works, case {i}.")
    return folder


@pytest.fixture
def setup(tmp_path):
    with instance_for_test() as instance:
        workspace = Workspace(tmp_path / "home")
        for name in ("alpha", "beta"):
            source = make_corpus(tmp_path / name)
            workspace.register(CorpusSpec(name=name, source=str(source), out=str(tmp_path / "out" / name)))
        yield instance, workspace, tmp_path


def resources(workspace):
    return {"workspace": WorkspaceResource(home=str(workspace.home)), "s3": S3Resource()}


def evaluate_sensor(instance, workspace):
    with build_sensor_context(instance=instance, resources=resources(workspace)) as ctx:
        result = corpus_sensor(ctx)
    if isinstance(result, SkipReason):
        return [], [], result
    added = [key for req in result.dynamic_partitions_requests for key in req.partition_keys]
    return added, [r.partition_key for r in result.run_requests], result


def test_sensor_adds_partitions_and_requests_only_changed_corpora(setup):
    instance, workspace, tmp = setup
    added, runs, _ = evaluate_sensor(instance, workspace)
    assert added == ["alpha", "beta"] and runs == ["alpha", "beta"]
    instance.add_dynamic_partitions("corpus", added)

    # Compile alpha: its recorded fingerprint now matches its source, so only beta is pending.
    compile_corpus(workspace.corpus("alpha"), workspace, instance=instance)
    added, runs, _ = evaluate_sensor(instance, workspace)
    assert added == [] and runs == ["beta"]
    compile_corpus(workspace.corpus("beta"), workspace, instance=instance)
    _, runs, skip = evaluate_sensor(instance, workspace)
    assert runs == [] and "none needs a compile" in skip.skip_message

    # Editing one document of beta asks for beta alone, with a run key naming the new state.
    doc = tmp / "beta" / "refund-0.md"
    time.sleep(0.01)
    doc.write_text(doc.read_text() + "\nRefunds now take 3 days.")
    _, runs, result = evaluate_sensor(instance, workspace)
    assert runs == ["beta"] and result.run_requests[0].run_key.startswith("beta:")

    # The nightly schedule sees the same change, for known partitions only.
    with build_schedule_context(instance=instance, resources=resources(workspace),
                                scheduled_execution_time=dt.datetime(2026, 12, 3, 2, 0)) as ctx:
        requests = nightly_recompile(ctx)
    assert [r.partition_key for r in requests] == ["beta"]
    assert requests[0].run_key.startswith("nightly:2026-12-03:beta:")
