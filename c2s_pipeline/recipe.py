"""The compile's recipe in one table: every stage, in the order it runs, with what it reads and
writes, its LLM task, its versions and checks. The asset definitions, the artifacts, the dry-run
estimate and incremental planning all read it; adding a stage is one row here plus its compute
function (named by ``compute``, ``module:function`` under ``c2s_pipeline.assets``).

The lineage is the spine, the table's order::

    documents → doc_cards → doc_embeddings → clusters_l1 → summaries_l1 → repartition_l1
      → clusters_l2 → … → summaries_l5 → entities → staged_tree → skill_tree

Each stage declares one graph edge, from the stage before it. Its other reads (``reads``) are
stages further up the spine, and they need no edge of their own: every data version is hashed
from the stage's output *and* the data version of the stage before it, so a change anywhere up
the spine changes every version below it: Dagster, which compares an asset's direct
dependencies only, marks the first stage below a change stale, and each next one as soon as
the one before it reran, so no stage that reads the change stays fresh. One flow is no edge at all: the published tree is the
base the *next* run of the partition updates (``published/``), and ``clusters_l1`` reports
which build it updated.

This module imports neither Dagster nor the compute code, so light modules can read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The hierarchy's levels that exist as assets (≈ ceil(log_p N) are used; ~100k documents at
# p=k=10); a corpus needing more is refused with a message asking for a larger --p or --k.
MAX_LEVELS = 5
REPARTITION_LEVELS = (1, 2)  # levels whose clusters are verified and repartitioned by the LLM
LEVELS = range(1, MAX_LEVELS + 1)


@dataclass(frozen=True)
class Check:
    name: str
    description: str
    blocking: bool = True  # a failed blocking check fails its stage, so nothing downstream runs


@dataclass(frozen=True)
class StageSpec:
    name: str  # the asset key, its op and step, and the stage's name in records and messages
    group: str  # the phase the lineage boxes it in: ingest, level_L, publish
    compute: str  # "module:function" under c2s_pipeline.assets
    description: str
    reads: tuple[str, ...] = ()  # every earlier stage whose files it reads (documentation; no edges)
    writes: tuple[str, ...] = ()  # its files under the corpus's artifacts
    resources: tuple[str, ...] = ("workspace",)
    task: str | None = None  # its LLM task: runs in the "llm" pool, retried, stopped by Ctrl-C
    cache_version: str | None = None  # keys its per-item LLM cache entries (bump: recompute them)
    code_version: str = "1"  # bump when the same inputs give another output or data version
    level: int | None = None
    checks: tuple[Check, ...] = ()
    kinds: frozenset[str] = field(default_factory=frozenset)
    run_switches: bool = False  # takes the compile's run config (CompileConfig: full rebuild)
    # "module:function" doing the stage's work for one shard of the documents: the stage then runs
    # as one step per shard and a last step, ``compute``, that writes its artifact from the item
    # cache (c2s_pipeline/assets/_shards.py).
    shard: str | None = None

    @property
    def pool(self) -> str | None:
        return "llm" if self.task else None


def level_file(level: int, name: str) -> str:
    return f"level_{level}/{name}"


def clusters_stage(level: int) -> str:
    return f"clusters_l{level}"


def summaries_stage(level: int) -> str:
    return f"summaries_l{level}"


def repartition_stage(level: int) -> str:
    return f"repartition_l{level}"


def final_stage(level: int) -> str:
    """The stage whose output is a level's finished nodes."""
    return repartition_stage(level) if level in REPARTITION_LEVELS else summaries_stage(level)


def final_nodes_file(level: int) -> str:
    return level_file(level, "repartitioned.parquet" if level in REPARTITION_LEVELS else "summarised.parquet")


def final_placements_file(level: int) -> str:
    return level_file(level, "repartitioned_placements.parquet" if level in REPARTITION_LEVELS
                      else "clusters_placements.parquet")


def _below(level: int) -> tuple[str, ...]:
    """What a level's items and their texts are read from: documents and cards at level 1, the
    level below's finished nodes above."""
    return ("documents", "doc_cards") if level == 1 else (final_stage(level - 1),)


def _level_rows(level: int) -> list[StageSpec]:
    group = f"level_{level}"
    below = _below(level)
    rows = [
        StageSpec(
            clusters_stage(level), group, "levels:clusters", level=level, code_version="clusters-8",
            description=(f"Level {level}'s items embedded"
                         + (" (each cluster below as its summary averaged with its documents' centroid)"
                            if level > 1 else "")
                         + " and clustered (K-Means into ceil(n/p), soft assignment"
                         + ("; a cluster too crowded for one leaf's nav file split into siblings that fit"
                            if level == 1 else "") + "), "
                         "or the published clusters updated in place; unused above the corpus's top level."
                         + (" Decides the build: full or incremental." if level == 1 else "")),
            reads=("documents", "doc_cards", "doc_embeddings") if level == 1 else tuple(dict.fromkeys((
                final_stage(level - 1), clusters_stage(level - 1), summaries_stage(level - 1), clusters_stage(1),
                # the documents below each item: their vectors, and the final nodes of every level down to them
                "documents", "doc_embeddings", *(final_stage(lower) for lower in range(level - 2, 0, -1)),
                *(("doc_cards",) if level == 2 else ())))),
            writes=tuple(level_file(level, f) for f in ("status.json", "items.npy", "clusters.parquet",
                                                        "clusters_placements.parquet", "changes.json", "row_bytes.parquet"))
            + (("run_mode.json",) if level == 1 else ()),
            resources=("workspace", "encoder", "llm"),
            kinds=frozenset({"scikitlearn"}), run_switches=level == 1),
        StageSpec(
            summaries_stage(level), group, "levels:summaries", level=level, code_version="summaries-2",
            description=f"A title, description, summary, label and key terms for each level-{level} cluster.",
            reads=(clusters_stage(level), *below),
            writes=(level_file(level, "summarised.parquet"), level_file(level, "summary_changes.json")),
            resources=("workspace", "llm"), task="summary", cache_version="summaries-1"),
    ]
    if level in REPARTITION_LEVELS:
        rows.append(StageSpec(
            repartition_stage(level), group, "levels:repartition", level=level, code_version="repartition-6",
            description=(f"Level {level}'s siblings judged in batches of ≤60 for confusable pairs and mixed "
                         "clusters; touched clusters re-summarised."),
            reads=(summaries_stage(level), clusters_stage(level), *below),
            writes=(level_file(level, "repartitioned.parquet"), level_file(level, "repartitioned_placements.parquet")),
            resources=("workspace", "llm"), task="repartition", cache_version="repartition-1"))
    return rows


_EVERY_LEVEL = tuple(dict.fromkeys(s for level in LEVELS for s in (clusters_stage(level), summaries_stage(level),
                                                                       final_stage(level))))

STAGED_TREE_CHECKS = (
    Check("every_document_placed_once", "every accepted document is a primary row of exactly one leaf"),
    Check("frontmatter_valid", "nav-file frontmatter passes the Agent Skills rules"),
    Check("nav_file_sizes", "nav-file sizes; warns above the 4 KB design, median against a typical 2 KB",
          blocking=False),
    Check("depth_within_bound", "tree depth ≤ ceil(log_p N) + 1 (a crowded leaf's sub-groups lie below it)"),
    Check("no_empty_cluster", "every nav file lists documents or sub-groups"),
    Check("sibling_labels_unique", "labels unique among siblings"),
    Check("term_index_rows", "every place in term_index.txt is a document row of its leaf"),
)

RECIPE: tuple[StageSpec, ...] = (
    StageSpec(
        "documents", "ingest", "corpus:documents", code_version="documents-1", kinds=frozenset({"polars"}),
        description=("Every input file or record: accepted documents with stable ids and content hashes, plus each "
                     "rejected input with its file, line and reason, and duplicate texts."),
        writes=("documents.parquet", "rejected.parquet", "duplicates.parquet", "ingest.json", "source_state.json"),
        resources=("workspace", "s3")),
    StageSpec(
        "doc_cards", "ingest", "corpus:doc_cards", code_version="doc_cards-3",
        description=("One summary card per document: title, one-line description, ≤4 key phrases, ≤6 identifiers; "
                     "it is embedded with the text and becomes the document's row in INDEX.md."),
        reads=("documents",), writes=("cards.parquet",), resources=("workspace", "llm"),
        task="card", cache_version="doc_cards-2", shard="corpus:doc_cards_shard"),
    StageSpec(
        "doc_embeddings", "ingest", "corpus:doc_embeddings", code_version="doc_embeddings-2",
        kinds=frozenset({"numpy"}),
        description="Each document's card + truncated text embedded and L2-normalised (rows in document order).",
        reads=("documents", "doc_cards"), writes=("doc_vectors.npy",), resources=("workspace", "encoder"),
        shard="corpus:doc_embeddings_shard"),
    *(row for level in LEVELS for row in _level_rows(level)),
    StageSpec(
        "entities", "publish", "publish:entities", code_version="entities-2",
        description=("≤12 named entities and ≤4 document types per cluster, bottom-up; the top-level skills' "
                     "related skills by entity Jaccard overlap."),
        reads=("documents", "doc_cards", *_EVERY_LEVEL), writes=("entities.parquet", "related.json"),
        resources=("workspace", "llm"), task="entities", cache_version="entities-1"),
    StageSpec(
        "staged_tree", "publish", "publish:staged_tree", code_version="staged_tree-16",
        kinds=frozenset({"markdown"}), checks=STAGED_TREE_CHECKS,
        description=("The rendered forest (SKILL.md / INDEX.md; a leaf too crowded for one nav file split into "
                     "sub-groups), entity_index.json, term_index.txt, the document "
                     "store, the flat search index (stemmed BM25 and doc_embeddings' vectors) and manifest.json "
                     "(with the tree's navigability diagnostics), written to a staging folder beside the corpus's "
                     "output path and checked there; a failed blocking check fails this step, so skill_tree never "
                     "publishes the tree."),
        reads=("documents", "doc_cards", "doc_embeddings", *_EVERY_LEVEL, "entities"),
        writes=("staged.json", "subgroups.json"),
        resources=("workspace", "llm", "encoder")),
    StageSpec(
        "skill_tree", "publish", "publish:skill_tree", code_version="skill_tree-3", kinds=frozenset({"markdown"}),
        description=("The checked tree swapped in atomically at the corpus's output path (and, when the corpus "
                     "names an S3 target, published there as a new release); records what it published as the "
                     "base of the next incremental compile, the source state it compiled and its HTML view."),
        reads=("staged_tree", "documents", *_EVERY_LEVEL, "entities"), writes=("published/", "view/"),
        resources=("workspace", "s3")),
)

STAGES: dict[str, StageSpec] = {spec.name: spec for spec in RECIPE}
_RANK = {name: i for i, name in enumerate(STAGES)}


def stage(name: str) -> StageSpec:
    try:
        return STAGES[name]
    except KeyError:
        raise KeyError(f"no stage named {name!r} in the recipe (c2s_pipeline/recipe.py)") from None


def upstream_of(name: str) -> str | None:
    """The stage ``name`` follows on the spine: its one graph edge."""
    rank = _RANK[stage(name).name]
    return RECIPE[rank - 1].name if rank else None


def stage_rank(name: str) -> int:
    """A stage's place in the order of work (documents first, skill_tree last)."""
    return _RANK[name]


def level_stages(level: int) -> list[StageSpec]:
    return [spec for spec in RECIPE if spec.level == level]
