"""The c2s code location: compile stages as assets partitioned by corpus, with resources,
the compile job, the corpus sensor and the nightly schedule."""

from dagster import Definitions, in_process_executor

from .assets import compile_assets
from .automation import compile_job, corpus_sensor, nightly_recompile
from .resources import EncoderResource, LLMResource, WorkspaceResource

defs = Definitions(
    assets=compile_assets,
    jobs=[compile_job],
    sensors=[corpus_sensor],
    schedules=[nightly_recompile],
    resources={"workspace": WorkspaceResource(), "llm": LLMResource(), "encoder": EncoderResource()},
    # Steps are short and share the encoder and cache; in-process avoids a process spawn per step.
    executor=in_process_executor,
)
