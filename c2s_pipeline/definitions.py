"""The c2s code location: compile stages as assets partitioned by corpus, with resources."""

from dagster import Definitions, in_process_executor

from .assets.corpus import doc_cards, doc_embeddings, documents
from .assets.levels import level_assets
from .assets.publish import entities, skill_tree
from .resources import EncoderResource, LLMResource, WorkspaceResource

compile_assets = [documents, doc_cards, doc_embeddings, *level_assets(), entities, skill_tree]

defs = Definitions(
    assets=compile_assets,
    resources={"workspace": WorkspaceResource(), "llm": LLMResource(), "encoder": EncoderResource()},
    # Steps are short and share the encoder and cache; in-process avoids a process spawn per step.
    executor=in_process_executor,
)
