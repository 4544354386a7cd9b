"""Compile one corpus by materializing the asset graph in-process for its partition: the very
same assets ``dagster dev`` shows, against the persistent instance in the c2s home."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, materialize
from dagster_aws.s3 import S3Resource

from .incremental import FULL_TAG
from .layout import MANIFEST_FILE
from .resources import EncoderResource, LLMResource, WorkspaceResource
from .workspace import CorpusSpec, Workspace

QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


class CompileError(RuntimeError):
    """A compile failed for a reason the user can act on; the message names it."""


def open_instance(workspace: Workspace) -> DagsterInstance:
    workspace.ensure_instance_config()
    os.environ["DAGSTER_HOME"] = str(workspace.home)
    return DagsterInstance.get()


def compile_corpus(spec: CorpusSpec, workspace: Workspace, provider: str = "offline", model: str = "",
                   instance: DagsterInstance | None = None, full: bool = False, s3: S3Resource | None = None) -> dict:
    """Register ``spec``, materialize every compile asset for its partition, return the manifest.

    An unchanged corpus costs no LLM call and no embedding; a changed one updates the published
    tree incrementally unless ``full`` (or the drift guard) asks for a rebuild."""
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
            "llm": LLMResource(provider=provider, model=model),
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



def failure_message(result) -> str:
    """The failing step and its reason, without a traceback for errors the user can act on."""
    for event in result.all_events:
        if event.event_type == DagsterEventType.STEP_FAILURE:
            error = event.step_failure_data.error
            user = event.step_failure_data.user_failure_data
            reason = (user.description if user and user.description else None) or (
                error.cause.message if error and error.cause else error.message if error else "unknown error")
            return f"{event.step_key}: {reason.strip()}"
    return "the compile run failed"
