"""Compile one corpus: launch the code location's ``compile_corpus`` job for its partition
against the persistent instance in the c2s home — an ordinary Dagster run, visible in the UI and
re-executable from failure there or with ``dagster job execute`` / :func:`reexecute_from_failure`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from dagster import (
    AssetCheckSeverity,
    DagsterEventType,
    DagsterInstance,
    ReexecutionOptions,
    execute_job,
    reconstructable,
)

from dagster._core.definitions.repository_definition import SINGLETON_REPOSITORY_NAME
from dagster._core.remote_origin import (
    ManagedGrpcPythonEnvCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from .automation import INTERRUPTED_TAG, JOB_NAME, compile_run_config, compile_tags, corpus_state
from .ingest import CorpusError
from c2s_core.layout import MANIFEST_FILE
from .definitions import compile_job_def
from .executors import compile_executor
from c2s_core.llm.clients import LLMError
from .locks import COMPILE_ID_TAG, HEARTBEAT_TAG, LockBusy, compile_lock, heartbeat
from c2s_core.atomic_publish import OutputError, check_output
from .resources import LLMResource
from .workspace import CorpusSpec, LLMSettings, RegistryError, Workspace

# The caller reports a failure itself (``failure_message``) and the run's event log keeps every
# detail, so Dagster's console logger stays silent: no stack trace for a clean stop (a spent
# budget, a bad corpus).
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
CODE_LOCATION = "c2s"  # workspace.yaml's location_name


class CompileError(RuntimeError):
    """A compile failed for a reason the user can act on; the message names it."""


class CompileInterrupted(CompileError):
    """The compile was interrupted (Ctrl-C); everything completed is cached, a rerun resumes."""

    def __init__(self, run_id: str):
        super().__init__(f"interrupted; rerun to resume (run {run_id})")
        self.run_id = run_id


def open_instance(workspace: Workspace) -> DagsterInstance:
    workspace.ensure_instance_config()
    os.environ["DAGSTER_HOME"] = str(workspace.home)
    return DagsterInstance.get()


def with_llm(spec: CorpusSpec, **overrides) -> CorpusSpec:
    """``spec`` with some LLM settings replaced (values of None keep the registered ones)."""
    chosen = {k: v for k, v in overrides.items() if v is not None}
    return spec.model_copy(update={"llm": LLMSettings.model_validate({**spec.llm.model_dump(), **chosen})})


def compile_corpus(spec: CorpusSpec, workspace: Workspace, instance: DagsterInstance | None = None,
                   full: bool = False, *, dry_run: bool = False, **llm) -> dict:
    """Register ``spec`` and run the compile job for its partition; return the manifest.

    An unchanged corpus costs no LLM call and no embedding; a changed one updates the published
    tree incrementally unless ``full`` (or the drift guard) asks for a rebuild. ``llm`` settings
    (provider, model, card_model, base_url, concurrency, max_cost) replace the registered ones and
    are registered with the corpus, so the sensor, the schedule and backfills compile it the same
    way. ``dry_run`` runs and registers nothing: it returns the estimate of calls, tokens and
    dollars per stage (``estimate.estimate_compile``) instead. S3 sources and targets use the
    usual AWS variables (AWS_ENDPOINT_URL, AWS_REGION, credentials), as every run does."""
    try:
        spec = with_llm(spec, **llm)
    except ValueError as exc:
        raise CompileError(str(exc).splitlines()[-1]) from exc
    if dry_run:
        from .estimate import estimate_compile, read_documents

        try:
            return estimate_compile(spec, workspace, LLMResource(), read_documents(spec, workspace))
        except (CorpusError, LLMError, ValueError) as exc:
            raise CompileError(str(exc)) from exc
    check_llm(spec.llm)
    try:
        compile_executor()  # a bad $C2S_EXECUTOR fails here in one line, not inside reconstructable()
    except ValueError as exc:
        raise CompileError(str(exc)) from exc
    try:
        check_output(Path(spec.out), spec.name)
    except OutputError as exc:
        raise CompileError(str(exc)) from exc
    from .assets.corpus import corpus_fingerprint
    from .partitions import corpus_partitions

    from dagster_aws.s3 import S3Resource

    instance = instance or open_instance(workspace)
    try:
        with compile_lock(workspace.home, spec, instance) as compile_id:
            workspace.register(spec)
            if not instance.has_dynamic_partition(corpus_partitions.name, spec.name):
                instance.add_dynamic_partitions(corpus_partitions.name, [spec.name])
            state = corpus_state(spec, corpus_fingerprint(spec, workspace.home, S3Resource()))
            tags = {**compile_tags(spec, "cli", state), COMPILE_ID_TAG: compile_id, "dagster/partition": spec.name}
            result = _execute(instance, {**compile_run_config(spec, workspace.home, full=full), **QUIET_LOGS}, tags)
    except (LockBusy, RegistryError) as exc:
        raise CompileError(str(exc)) from exc
    if not result.success:
        if interrupted(result):
            instance.add_run_tags(result.run_id, {INTERRUPTED_TAG: "true"})
            raise CompileInterrupted(result.run_id)
        raise CompileError(failure_message(result))
    return json.loads((Path(spec.out) / MANIFEST_FILE).read_text())


def code_location_origin() -> RemoteJobOrigin:
    """The compile job as the workspace's code location names it (workspace.yaml: location ``c2s``),
    recorded on the runs the CLI starts so the UI finds their job and offers re-execution."""
    target = LoadableTargetOrigin(executable_path=sys.executable, module_name="c2s_pipeline.definitions",
                                  working_directory=os.getcwd())
    repository = RemoteRepositoryOrigin(ManagedGrpcPythonEnvCodeLocationOrigin(target, CODE_LOCATION),
                                        SINGLETON_REPOSITORY_NAME)
    return RemoteJobOrigin(repository, JOB_NAME)


def _execute(instance: DagsterInstance, run_config: dict, tags: dict):
    """``execute_job`` in this process (progress bars, the shared encoder), with the run tied to
    the code location as if the UI had launched it."""
    from dagster._core.execution.api import execute_run

    job = reconstructable(compile_job_def)
    tags = {**tags, HEARTBEAT_TAG: str(int(time.time()))}
    run = instance.create_run_for_job(job_def=job.get_definition(), run_config=run_config, tags=tags,
                                      remote_job_origin=code_location_origin(),
                                      job_code_origin=job.get_python_origin())
    with heartbeat(instance, run.run_id):  # run monitoring fails the run if this process dies
        return execute_run(job, run, instance)


def reexecute_from_failure(run_id: str, instance: DagsterInstance):
    """Re-execute a failed compile run from its failed steps (what the UI's "From failure" does):
    only the failed steps and their downstream run, with the parent run's config and tags, and
    the per-item cache makes each step redo only the items that are missing."""
    parent = instance.get_run_by_id(run_id)
    if parent is None:
        raise CompileError(f"no run {run_id} in the instance at {instance.root_directory}")
    return execute_job(reconstructable(compile_job_def), instance, raise_on_error=False, tags=parent.tags,
                       reexecution_options=ReexecutionOptions.from_failure(run_id, instance))


def check_llm(settings: LLMSettings) -> None:
    """Fail before the run, in one line, when the LLM settings cannot work (no model, no API
    key): the run would only fail on its first LLM stage."""
    try:
        provider = LLMResource().build_provider(settings)
    except (LLMError, ValueError) as exc:
        raise CompileError(str(exc)) from exc
    close = getattr(provider, "close", None)
    if close is not None:
        close()


def interrupted(result) -> bool:
    """Whether a step of the run was stopped by Ctrl-C (Dagster's own error, or the Failure an
    LLM stage turns it into so that its RetryPolicy does not run it again)."""
    from .assets._stage import INTERRUPTED

    for event in result.all_events:
        if event.event_type != DagsterEventType.STEP_FAILURE:
            continue
        error, user = event.step_failure_data.error, event.step_failure_data.user_failure_data
        if (error and error.cls_name == "DagsterExecutionInterruptedError") or (
                user and INTERRUPTED in (user.metadata or {})):
            return True
    return False


def failure_message(result) -> str:
    """The failing step and its reason, without a traceback for errors the user can act on."""
    from .assets._stage import SELF_DESCRIBED

    failed_checks = [f"{e.check_name}: {e.description}" for e in
                     (event.event_specific_data for event in result.all_events
                      if event.event_type == DagsterEventType.ASSET_CHECK_EVALUATION)
                     if not e.passed and e.severity == AssetCheckSeverity.ERROR]
    for event in result.all_events:
        if event.event_type == DagsterEventType.STEP_FAILURE:
            error = event.step_failure_data.error
            if error and error.cls_name == "DagsterAssetCheckFailedError" and failed_checks:
                return (f"{event.step_key}: the rendered tree failed its checks and was not published (the "
                        f"previous tree keeps serving): {'; '.join(failed_checks)}")
            user = event.step_failure_data.user_failure_data
            reason = (user.description if user and user.description else None) or (
                error.cause.message if error and error.cause else error.message if error else "unknown error")
            if user and SELF_DESCRIBED in (user.metadata or {}):
                return reason.strip()
            trace = "" if user else f" (the trace is in the Dagster event log of run {result.run_id})"
            return f"{event.step_key}: {reason.strip()}{trace}"
    return f"the compile run {result.run_id} failed"
