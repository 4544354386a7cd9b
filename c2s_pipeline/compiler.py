"""Compile one corpus by materializing the asset graph in-process for its partition: the very
same assets ``dagster dev`` shows, against the persistent instance in the c2s home."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, materialize
from dagster_aws.s3 import S3Resource

from .incremental import FULL_TAG
from .ingest import CorpusError
from .layout import MANIFEST_FILE
from .llm.clients import LLMError
from .resources import EncoderResource, LLMResource, WorkspaceResource
from .workspace import CorpusSpec, Workspace

# The caller reports a failure itself (``failure_message``) and the run's event log keeps every
# detail, so Dagster's console logger stays silent: no stack trace for a clean stop (a spent
# budget, a bad corpus).
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


class CompileError(RuntimeError):
    """A compile failed for a reason the user can act on; the message names it."""


def open_instance(workspace: Workspace) -> DagsterInstance:
    workspace.ensure_instance_config()
    os.environ["DAGSTER_HOME"] = str(workspace.home)
    return DagsterInstance.get()


def compile_corpus(spec: CorpusSpec, workspace: Workspace, provider: str = "offline", model: str = "",
                   instance: DagsterInstance | None = None, full: bool = False, s3: S3Resource | None = None, *,
                   card_model: str | None = None, base_url: str | None = None, concurrency: int = 20,
                   max_cost: float | None = None, dry_run: bool = False) -> dict:
    """Register ``spec``, materialize every compile asset for its partition, return the manifest.

    An unchanged corpus costs no LLM call and no embedding; a changed one updates the published
    tree incrementally unless ``full`` (or the drift guard) asks for a rebuild. The LLM settings
    configure the ``llm`` resource (API keys come from the provider's environment variable);
    ``max_cost`` stops the run, resumably, before it spends more dollars than that. ``dry_run``
    runs nothing and registers nothing: it returns the estimate of calls, tokens and dollars per
    stage (``estimate.estimate_compile``) instead of the manifest."""
    llm = LLMResource(provider=provider, model=model, card_model=card_model or None, base_url=base_url or None,
                      concurrency=concurrency, max_cost=max_cost)
    if dry_run:
        from .estimate import estimate_compile, read_documents

        try:
            return estimate_compile(spec, workspace, llm, read_documents(spec, workspace, s3))
        except (CorpusError, LLMError, ValueError) as exc:
            raise CompileError(str(exc)) from exc
    check_llm(llm)
    from .assets import compile_assets
    from .partitions import corpus_partitions

    workspace.register(spec)
    instance = instance or open_instance(workspace)
    if not instance.has_dynamic_partition(corpus_partitions.name, spec.name):
        instance.add_dynamic_partitions(corpus_partitions.name, [spec.name])
    result = materialize(
        compile_assets,
        partition_key=spec.name,
        instance=instance,
        resources={
            "workspace": WorkspaceResource(home=str(workspace.home)),
            "llm": llm,
            "encoder": EncoderResource(),
            "s3": s3 or S3Resource(),
        },
        run_config=QUIET_LOGS,
        raise_on_error=False,
        tags={"c2s/corpus": spec.name, **({FULL_TAG: "true"} if full else {})},
    )
    if not result.success:
        raise CompileError(failure_message(result))
    return json.loads((Path(spec.out) / MANIFEST_FILE).read_text())


def check_llm(llm: LLMResource) -> None:
    """Fail before the run, in one line, when the LLM settings cannot work (unknown provider, no
    model, no API key): the run would only fail on its first LLM stage."""
    try:
        provider = llm.build_provider()
    except (LLMError, ValueError) as exc:
        raise CompileError(str(exc)) from exc
    close = getattr(provider, "close", None)
    if close is not None:
        close()


def failure_message(result) -> str:
    """The failing step and its reason, without a traceback for errors the user can act on."""
    from .assets._stage import SELF_DESCRIBED

    for event in result.all_events:
        if event.event_type == DagsterEventType.STEP_FAILURE:
            error = event.step_failure_data.error
            user = event.step_failure_data.user_failure_data
            reason = (user.description if user and user.description else None) or (
                error.cause.message if error and error.cause else error.message if error else "unknown error")
            if user and SELF_DESCRIBED in (user.metadata or {}):
                return reason.strip()
            trace = "" if user else f" (the trace is in the Dagster event log of run {result.run_id})"
            return f"{event.step_key}: {reason.strip()}{trace}"
    return "the compile run failed"
