"""The c2s code location: compile stages as assets partitioned by corpus, with resources,
the compile job, the corpus sensor and the nightly schedule."""

from dagster import Definitions, JobDefinition
from dagster_aws.s3 import S3Resource

from .assets import compile_assets
from .automation import compile_job, corpus_sensor, nightly_recompile
from .executors import compile_executor
from .resources import EncoderResource, LLMResource, WorkspaceResource

defs = Definitions(
    assets=compile_assets,
    jobs=[compile_job],
    sensors=[corpus_sensor],
    schedules=[nightly_recompile],
    # S3 is configured by the usual AWS variables (AWS_ENDPOINT_URL, AWS_REGION, credentials).
    resources={"workspace": WorkspaceResource(), "llm": LLMResource(), "encoder": EncoderResource(),
               "s3": S3Resource()},
    # $C2S_EXECUTOR: in_process (default: steps are short and share the encoder), multiprocess, celery, k8s.
    executor=compile_executor(),
)


def compile_job_def() -> JobDefinition:
    """The code location's compile job with the executor ``$C2S_EXECUTOR`` names: a target for
    ``reconstructable()``, which step workers (Celery, Kubernetes) rebuild the same way. Dagster
    keeps a reconstructed job for the life of the process, so the executor is the process's."""
    return defs.resolve_job_def("compile_corpus").with_executor_def(compile_executor())
