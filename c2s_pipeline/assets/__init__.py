"""The compile stages as Dagster assets, partitioned by corpus, in pipeline order."""

from .corpus import doc_cards, doc_embeddings, documents
from .levels import level_assets
from .publish import entities, skill_tree, staged_tree

compile_assets = [documents, doc_cards, doc_embeddings, *level_assets(), entities, staged_tree, skill_tree]
