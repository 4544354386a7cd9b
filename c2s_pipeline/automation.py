"""Keeping compiled trees current: a sensor that adds and recompiles changed corpora, and a
nightly schedule that recompiles whatever changed since the last compile.

Both compare each registered corpus's source fingerprint with the one its last compile
recorded, so an unchanged corpus never gets a run; ``run_key`` makes a change request one run.
"""

import os

from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    define_asset_job,
    schedule,
    sensor,
)

from dagster_aws.s3 import S3Resource

from .assets import compile_assets
from .assets.corpus import corpus_fingerprint
from .partitions import corpus_partitions
from .resources import WorkspaceResource

NIGHTLY_CRON = os.environ.get("C2S_NIGHTLY_CRON", "0 2 * * *")

compile_job = define_asset_job(
    "compile_corpus", selection=AssetSelection.assets(*compile_assets), partitions_def=corpus_partitions,
    description="Compile one corpus partition into its skill tree.",
)


def changed_corpora(workspace: WorkspaceResource, s3: S3Resource, log) -> dict[str, str]:
    """Registered corpora whose source differs from what their last compile read: name → fingerprint."""
    changed = {}
    for name, spec in sorted(workspace.workspace.corpora().items()):
        current = corpus_fingerprint(spec.source, s3)
        if current == "missing":
            log.warning(f"corpus '{name}': source {spec.source} does not exist; skipped")
            continue
        recorded = workspace.artifacts(name).root / "source_fingerprint.json"
        last = workspace.artifacts(name).read_json("source_fingerprint.json")["fingerprint"] if recorded.exists() else None
        if current != last:
            changed[name] = current
    return changed


@sensor(job=compile_job, minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING,
        description="Adds each corpus registered in $DAGSTER_HOME/corpora.yaml as a partition and "
                    "requests a compile when its source changes.")
def corpus_sensor(context: SensorEvaluationContext, workspace: WorkspaceResource, s3: S3Resource):
    known = set(context.instance.get_dynamic_partitions(corpus_partitions.name))
    registered = set(workspace.workspace.corpora())
    new = sorted(registered - known)
    changed = changed_corpora(workspace, s3, context.log)
    requests = [RunRequest(partition_key=name, run_key=f"{name}:{fp}", tags={"c2s/trigger": "sensor"})
                for name, fp in changed.items()]
    if not new and not requests:
        return SkipReason(f"{len(registered)} corpora registered, none changed")
    return SensorResult(run_requests=requests,
                        dynamic_partitions_requests=[corpus_partitions.build_add_request(new)] if new else [])


@schedule(job=compile_job, cron_schedule=NIGHTLY_CRON, default_status=DefaultScheduleStatus.RUNNING,
          description="Nightly recompile of every corpus whose source changed (cron: $C2S_NIGHTLY_CRON).")
def nightly_recompile(context: ScheduleEvaluationContext, workspace: WorkspaceResource, s3: S3Resource):
    known = set(context.instance.get_dynamic_partitions(corpus_partitions.name))
    changed = {n: fp for n, fp in changed_corpora(workspace, s3, context.log).items() if n in known}
    if not changed:
        return SkipReason("no registered corpus changed since its last compile")
    stamp = context.scheduled_execution_time.strftime("%Y-%m-%d") if context.scheduled_execution_time else ""
    return [RunRequest(partition_key=name, run_key=f"nightly:{stamp}:{name}:{fp}", tags={"c2s/trigger": "nightly"})
            for name, fp in changed.items()]
