"""Compile one corpus: launch the code location's ``compile_corpus`` job for its partition
against the persistent instance in the c2s home — an ordinary Dagster run, visible in the UI and
re-executable from failure there or with ``dagster job execute`` / :func:`reexecute_from_failure`.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path

from dagster import (
    AssetCheckSeverity,
    DagsterEventType,
    DagsterInstance,
    ReexecutionOptions,
    RunsFilter,
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

from .automation import IN_FLIGHT, JOB_NAME, compile_run_config, compile_tags, corpus_state, runs_in_flight
from .ingest import CorpusError
from .layout import MANIFEST_FILE
from .llm.clients import LLMError
from .publish import OutputError, check_output
from .resources import LLMResource
from .workspace import CorpusSpec, LLMSettings, Workspace

# The caller reports a failure itself (``failure_message``) and the run's event log keeps every
# detail, so Dagster's console logger stays silent: no stack trace for a clean stop (a spent
# budget, a bad corpus).
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
CODE_LOCATION = "c2s"  # workspace.yaml's location_name
COMPILE_ID_TAG = "c2s/compile_id"  # ties a CLI run to the lock its process holds


class CompileError(RuntimeError):
    """A compile failed for a reason the user can act on; the message names it."""


def open_instance(workspace: Workspace) -> DagsterInstance:
    workspace.ensure_instance_config()
    os.environ["DAGSTER_HOME"] = str(workspace.home)
    return DagsterInstance.get()


def compile_job():
    """The code location's compile job, reconstructable in any process (executors, re-execution)."""
    from .definitions import defs

    return defs.resolve_job_def("compile_corpus")


def with_llm(spec: CorpusSpec, **overrides) -> CorpusSpec:
    """``spec`` with some LLM settings replaced (values of None keep the registered ones)."""
    chosen = {k: v for k, v in overrides.items() if v is not None}
    return spec.model_copy(update={"llm": LLMSettings.model_validate({**spec.llm.model_dump(), **chosen})})


def compile_corpus(spec: CorpusSpec, workspace: Workspace, instance: DagsterInstance | None = None,
                   full: bool = False, s3=None, *, dry_run: bool = False, **llm) -> dict:
    """Register ``spec`` and run the compile job for its partition; return the manifest.

    An unchanged corpus costs no LLM call and no embedding; a changed one updates the published
    tree incrementally unless ``full`` (or the drift guard) asks for a rebuild. ``llm`` settings
    (provider, model, card_model, base_url, concurrency, max_cost) replace the registered ones and
    are registered with the corpus, so the sensor, the schedule and backfills compile it the same
    way. ``dry_run`` runs and registers nothing: it returns the estimate of calls, tokens and
    dollars per stage (``estimate.estimate_compile``) instead."""
    try:
        spec = with_llm(spec, **llm)
    except ValueError as exc:
        raise CompileError(str(exc).splitlines()[-1]) from exc
    if dry_run:
        from .estimate import estimate_compile, read_documents

        try:
            return estimate_compile(spec, workspace, LLMResource(), read_documents(spec, workspace, s3))
        except (CorpusError, LLMError, ValueError) as exc:
            raise CompileError(str(exc)) from exc
    check_llm(spec.llm)
    try:
        check_output(Path(spec.out), spec.name)
    except OutputError as exc:
        raise CompileError(str(exc)) from exc
    from .assets.corpus import corpus_fingerprint
    from .partitions import corpus_partitions

    from dagster_aws.s3 import S3Resource

    instance = instance or open_instance(workspace)
    with compile_lock(workspace, spec, instance) as compile_id:
        workspace.register(spec)
        if not instance.has_dynamic_partition(corpus_partitions.name, spec.name):
            instance.add_dynamic_partitions(corpus_partitions.name, [spec.name])
        state = corpus_state(spec, corpus_fingerprint(spec, workspace.home, s3 or S3Resource()))
        tags = {**compile_tags(spec, "cli", state), COMPILE_ID_TAG: compile_id, "dagster/partition": spec.name}
        result = _execute(instance, {**compile_run_config(spec, workspace.home, full=full), **QUIET_LOGS}, tags)
    if not result.success:
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

    job = reconstructable(compile_job)
    run = instance.create_run_for_job(job_def=job.get_definition(), run_config=run_config, tags=tags,
                                      remote_job_origin=code_location_origin(),
                                      job_code_origin=job.get_python_origin())
    return execute_run(job, run, instance)


def reexecute_from_failure(run_id: str, instance: DagsterInstance):
    """Re-execute a failed compile run from its failed steps (what the UI's "From failure" does):
    only the failed steps and their downstream run, with the parent run's config and tags, and
    the per-item cache makes each step redo only the items that are missing."""
    parent = instance.get_run_by_id(run_id)
    if parent is None:
        raise CompileError(f"no run {run_id} in the instance at {instance.root_directory}")
    return execute_job(reconstructable(compile_job), instance, raise_on_error=False, tags=parent.tags,
                       reexecution_options=ReexecutionOptions.from_failure(run_id, instance))


@contextmanager
def compile_lock(workspace: Workspace, spec: CorpusSpec, instance: DagsterInstance):
    """Hold the corpus's and its output folder's compile lock for the length of a compile.

    A second compile of the same corpus (or into the same folder) fails at once, naming the run
    in flight. A run whose compile process died without finishing (killed) is failed here, so it
    does not stay STARTED forever."""
    folder = workspace.home / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    out_key = Path(spec.out).resolve().as_posix().replace("/", "_").strip("_")
    handles = []
    try:
        for name in (f"corpus-{spec.name}", f"out-{out_key}"[:200]):
            handle = open(folder / f"{name}.lock", "a+")
            handles.append(handle)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "?"
                busy = _runs_of(instance, holder) or runs_in_flight(instance, spec.name)
                run = busy[0].run_id if busy else "starting"
                raise CompileError(f"another compile of {spec.name} is running (run {run}); wait for it or "
                                   "stop it, then rerun") from None
            handle.seek(0)
            _fail_abandoned(instance, handle.read().strip())
        busy = [r for r in runs_in_flight(instance, spec.name) if COMPILE_ID_TAG not in r.tags]
        if busy:
            raise CompileError(f"another compile of {spec.name} is running (run {busy[0].run_id}); wait for it or "
                               "stop it, then rerun")
        compile_id = uuid.uuid4().hex
        for handle in handles:
            handle.seek(0)
            handle.truncate()
            handle.write(compile_id)
            handle.flush()
        yield compile_id
    finally:
        for handle in handles:
            handle.close()  # closing releases the lock


def _runs_of(instance: DagsterInstance, compile_id: str) -> list:
    if not compile_id:
        return []
    return list(instance.get_runs(RunsFilter(tags={COMPILE_ID_TAG: compile_id}, statuses=IN_FLIGHT)))


def _fail_abandoned(instance: DagsterInstance, compile_id: str) -> None:
    """The lock was free, so the process that last held it is gone: its unfinished runs died."""
    for run in _runs_of(instance, compile_id):
        instance.report_run_failed(run, "the c2s compile process running this run exited without finishing "
                                        "(killed?); rerun the compile, or re-execute this run from failure")


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
