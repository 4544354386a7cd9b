"""The shape of the compile graph: every asset's key and every artifact it reads, so the
lineage Dagster shows is the real data flow (an asset reading another's files declares it).

    documents → doc_cards → doc_embeddings → clusters/level_1 → summaries/level_1 → repartition/level_1
      → clusters/level_2 → … → entities → staged_tree (checks) → skill_tree (published)

One flow cannot be an edge: the published tree is the base the *next* run of the same
partition updates (``published/`` in the artifacts), and a graph edge from skill_tree back to
clusters/level_1 would be a cycle. clusters/level_1 reports which build it updated instead.
"""

from __future__ import annotations

from dagster import AssetKey

from ..artifacts import MAX_LEVELS, REPARTITION_LEVELS

DOCUMENTS, DOC_CARDS, DOC_EMBEDDINGS = AssetKey("documents"), AssetKey("doc_cards"), AssetKey("doc_embeddings")
ENTITIES, STAGED_TREE, SKILL_TREE = AssetKey("entities"), AssetKey("staged_tree"), AssetKey("skill_tree")


def clusters_key(level: int) -> AssetKey:
    return AssetKey(["clusters", f"level_{level}"])


def summaries_key(level: int) -> AssetKey:
    return AssetKey(["summaries", f"level_{level}"])


def repartition_key(level: int) -> AssetKey:
    return AssetKey(["repartition", f"level_{level}"])


def final_key(level: int) -> AssetKey:
    """The asset whose output is a level's finished nodes."""
    return repartition_key(level) if level in REPARTITION_LEVELS else summaries_key(level)


LEVELS = range(1, MAX_LEVELS + 1)


def _level_inputs(level: int) -> list[AssetKey]:
    """What a level's items and their summary inputs are read from."""
    return [DOCUMENTS, DOC_CARDS] if level == 1 else [final_key(level - 1)]


def _reads(name: str) -> list[AssetKey]:
    kind, _, level_text = name.partition("/level_")
    if level_text:
        level = int(level_text)
        if kind == "clusters":
            if level == 1:
                return [DOCUMENTS, DOC_CARDS, DOC_EMBEDDINGS]
            # the level below's nodes, its status and change files, the run mode decided at level 1,
            # and what the level below's nodes are embedded with (its members' texts)
            below = [final_key(level - 1), clusters_key(level - 1), summaries_key(level - 1), clusters_key(1)]
            return below + ([DOC_CARDS] if level == 2 else [final_key(level - 2)])
        if kind == "summaries":
            return [clusters_key(level), *_level_inputs(level)]
        if kind == "repartition":
            return [summaries_key(level), clusters_key(level), *_level_inputs(level)]
    every_level = [k for level in LEVELS for k in (clusters_key(level), summaries_key(level), final_key(level))]
    return {
        "documents": [],
        "doc_cards": [DOCUMENTS],
        "doc_embeddings": [DOCUMENTS, DOC_CARDS],
        "entities": [DOCUMENTS, DOC_CARDS, *every_level],
        # renders everything and reports every stage's record in the manifest
        "staged_tree": [DOCUMENTS, DOC_CARDS, DOC_EMBEDDINGS, *every_level, ENTITIES],
        # publishes the staged tree and keeps the nodes, staleness and entities as the next base
        "skill_tree": [STAGED_TREE, DOCUMENTS, *every_level, ENTITIES],
    }[name]


def upstream_of(name: str) -> list[AssetKey]:
    """The assets ``name`` reads, each once, in a stable order."""
    return list(dict.fromkeys(_reads(name)))
