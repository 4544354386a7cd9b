"""What a compile run of one corpus is, and when one is needed.

Every launch path — ``c2s compile``, the corpus sensor, the nightly schedule, a backfill, the UI
— runs the one ``compile_corpus`` job, and the paths c2s launches itself build the run from the
corpus registration with :func:`compile_run_config` and :func:`compile_tags`. A run that comes
with no config (a backfill, the launchpad) reads the same registration in its resources.

One rule, :func:`compile_decision`, says whether a corpus needs a run: its *state* (source
fingerprint + registered settings) differs from the state its last successful ``skill_tree``
materialization recorded, no run of it is in flight, and the last run of that very state did
not fail (a failed corpus waits for its source or settings to change; a run interrupted by Ctrl-C
is requested again, and a killed one, by SIGKILL or the OOM killer, is retried once).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    AssetSelection,
    DagsterInstance,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
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
from .assets.corpus import corpus_fingerprint, corpus_state
from .assets.publish import STATE_METADATA
from .locks import CORPUS_TAG, KILLED_TAG, fail_abandoned_runs, runs_in_flight
from .partitions import corpus_partitions
from .recipe import RECIPE
from .resources import WorkspaceResource
from .workspace import CorpusSpec

NIGHTLY_CRON = os.environ.get("C2S_NIGHTLY_CRON", "0 2 * * *")
JOB_NAME = "compile_corpus"
STATE_TAG = "c2s/state"
TRIGGER_TAG = "c2s/trigger"
INTERRUPTED_TAG = "c2s/interrupted"
SKILL_TREE = AssetKey("skill_tree")
RETRY_OF_TAG = "c2s/retry_of"  # a run retrying a killed one; a killed retry is not retried again

compile_job = define_asset_job(
    JOB_NAME, selection=AssetSelection.assets(*compile_assets), partitions_def=corpus_partitions,
    description="Compile one corpus partition into its skill tree, with the settings it was registered with.",
)


def compile_run_config(spec: CorpusSpec, home: str | Path, full: bool = False) -> dict:
    """The registration as run config, so the run shows (and a re-execution reuses) its settings."""
    config: dict = {"resources": {"workspace": {"config": {"home": str(home)}},
                                  "llm": {"config": spec.llm.model_dump(exclude_none=True)}}}
    if full:
        config["ops"] = {spec.name: {"config": {"full": True}} for spec in RECIPE if spec.run_switches}
    return config


def compile_tags(spec: CorpusSpec, trigger: str, state: str | None = None) -> dict[str, str]:
    return {CORPUS_TAG: spec.name, TRIGGER_TAG: trigger, **({STATE_TAG: state} if state else {})}


@dataclass(frozen=True)
class Decision:
    needed: bool
    reason: str
    state: str | None = None
    retry_of: str | None = None  # the killed run this one retries


def compiled_state(instance: DagsterInstance, corpus: str) -> str | None:
    """The state the corpus's last successful compile recorded, if any."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=SKILL_TREE, asset_partitions=[corpus]), limit=1).records
    if not records:
        return None
    entry = records[0].asset_materialization.metadata.get(STATE_METADATA)
    return entry.value if entry is not None else None


def compile_decision(spec: CorpusSpec, home: Path, instance: DagsterInstance, s3: S3Resource) -> Decision:
    """Whether ``spec`` needs a compile run now, and why (the one rule the sensor and the
    schedule share)."""
    fingerprint = corpus_fingerprint(spec, home, s3)
    if fingerprint == "missing":
        return Decision(False, f"source {spec.source} does not exist")
    state = corpus_state(spec, fingerprint)
    fail_abandoned_runs(home, spec, instance)  # a killed `c2s compile` must not hold the corpus forever
    busy = runs_in_flight(instance, spec.name)
    if busy:
        return Decision(False, f"a compile is in flight (run {busy[0].run_id})", state)
    if compiled_state(instance, spec.name) == state:
        return Decision(False, "up to date", state)
    last = list(instance.get_runs(RunsFilter(tags={CORPUS_TAG: spec.name, STATE_TAG: state}), limit=1))
    # An interrupted compile (Ctrl-C) did not fail on the corpus: it may be requested again.
    if last and last[0].status == DagsterRunStatus.FAILURE and INTERRUPTED_TAG not in last[0].tags:
        # A killed one (the OOM killer, SIGKILL) may not have either: it is retried once.
        if KILLED_TAG in last[0].tags and RETRY_OF_TAG not in last[0].tags:
            return Decision(True, f"its last compile (run {last[0].run_id}) was killed; retrying it once", state,
                            retry_of=last[0].run_id)
        return Decision(False, f"its last compile failed (run {last[0].run_id}"
                               + (", killed again on its retry" if KILLED_TAG in last[0].tags else "")
                               + "); waiting for its source or settings to change", state)
    return Decision(True, "source or settings changed since the last compile", state)


def _requests(context, workspace: WorkspaceResource, s3: S3Resource, trigger: str, run_key, known: set[str]):
    requests, skipped = [], []
    for name, spec in sorted(workspace.workspace.corpora().items()):
        if name not in known:
            continue
        decision = compile_decision(spec, workspace.workspace.home, context.instance, s3)
        if not decision.needed:
            skipped.append(f"{name}: {decision.reason}")
            continue
        retry = {RETRY_OF_TAG: decision.retry_of} if decision.retry_of else {}
        key = run_key(name, decision.state) + (f":retry-of:{decision.retry_of}" if decision.retry_of else "")
        requests.append(RunRequest(partition_key=name, run_key=key,
                                   run_config=compile_run_config(spec, workspace.workspace.home),
                                   tags={**compile_tags(spec, trigger, decision.state), **retry}))
    for line in skipped:
        context.log.info(f"no run for corpus {line}")
    return requests, skipped


@sensor(job=compile_job, minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING,
        description="Adds each corpus registered in $DAGSTER_HOME/corpora.yaml as a partition and "
                    "requests a compile when its source or settings change.")
def corpus_sensor(context: SensorEvaluationContext, workspace: WorkspaceResource, s3: S3Resource):
    known = set(context.instance.get_dynamic_partitions(corpus_partitions.name))
    registered = set(workspace.workspace.corpora())
    new = sorted(registered - known)
    requests, skipped = _requests(context, workspace, s3, "sensor", lambda name, state: f"{name}:{state}",
                                  known | set(new))
    if not new and not requests:
        return SkipReason(f"{len(registered)} corpora registered, none needs a compile"
                          + (f" ({'; '.join(skipped)})" if skipped else ""))
    return SensorResult(run_requests=requests,
                        dynamic_partitions_requests=[corpus_partitions.build_add_request(new)] if new else [])


@schedule(job=compile_job, cron_schedule=NIGHTLY_CRON, default_status=DefaultScheduleStatus.RUNNING,
          description="Nightly recompile of every corpus whose source or settings changed "
                      "(cron: $C2S_NIGHTLY_CRON).")
def nightly_recompile(context: ScheduleEvaluationContext, workspace: WorkspaceResource, s3: S3Resource):
    known = set(context.instance.get_dynamic_partitions(corpus_partitions.name))
    stamp = context.scheduled_execution_time.strftime("%Y-%m-%d") if context.scheduled_execution_time else ""
    requests, skipped = _requests(context, workspace, s3, "nightly",
                                  lambda name, state: f"nightly:{stamp}:{name}:{state}", known)
    if not requests:
        return SkipReason("no registered corpus needs a compile" + (f" ({'; '.join(skipped)})" if skipped else ""))
    return requests
