"""The bottom-up hierarchy, one asset per stage and level: clusters_lL → summaries_lL
(→ repartition_lL on levels 1 and 2) → clusters_l{L+1} …

The number of levels a corpus needs is data-dependent (≈ ceil(log_p N)), so the graph holds a
fixed maximum of levels and a level above the top one materializes as "unused" and passes
through. The lineage graph thus shows the method's real order of work: a level's summaries feed
the next level's embeddings.

What differs between levels lives in :class:`Level` (a level above the documents: its items
are the finished nodes below) and :class:`DocumentLevel` (level 1: its items are documents,
and it decides the build, full or incremental).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
from dagster import Failure, MetadataValue

from .. import hierarchy, incremental
from ..artifacts import CorpusArtifacts, matrix_version, table_version
from c2s_core.encoder import embed_with_cache
from ..incremental import RunMode
from c2s_core.llm.schemas import (
    ClusterInput,
    ClusterSummary,
    MemberExcerpt,
    RepartitionCluster,
    RepartitionInput,
    RepartitionVerdict,
    SimilarPair,
)
from ..cards import read_cards
from ..recipe import MAX_LEVELS
from ..subgroups import fits_one_leaf, fitting_parts, leanest_group_row_bytes, leanest_row_bytes
from ..resources import EncoderResource, LLMResource, WorkspaceResource
from c2s_core.text import clip
from ._stage import Stage, markdown_table

LEVEL1_MEMBERS, LEVEL1_CHARS = 15, 600  # level-1 summaries read ≤15 documents × 600 chars
UPPER_MEMBERS, UPPER_CHARS = 20, 300  # higher levels read ≤20 child summaries × 300 chars
REPARTITION_BATCH = 60
# A repartition prompt lists member titles (never texts) so the model can name id-level moves;
# clipped and capped so ≤60 clusters stay within a prompt budget whatever their sizes.
REPARTITION_TITLE_CHARS, REPARTITION_TITLES_PER_CLUSTER = 80, 40
NEXT_LEVEL_EXCERPTS = 3  # member excerpts embedded with a cluster's summary for the next level
# ... and that text's embedding averaged, at this share, with the centroid of the documents below
# the cluster: what its members say, beside how its summary restates them. An extractive summary is
# a list of terms, and clusters grouped on it alone put a language's threads, Unicode, maths and
# compression under one skill. Leave-one-corpus-out over the development corpora chose 0.5 among
# 0, 0.5, 0.75 and 1 (benchmarks/README.md, "What the levels above the first cluster on").
CENTROID_SHARE = 0.5


# -- levels: what gets clustered at each level, and how -------------------------------------------

class Level:
    """A level above the documents: its items are the finished nodes of the level below,
    embedded as their summaries with a few member excerpts, averaged with the centroids of
    their documents (:data:`CENTROID_SHARE`)."""

    members, chars = UPPER_MEMBERS, UPPER_CHARS  # what a summary reads of its members

    def __init__(self, number: int):
        self.number = number

    @staticmethod
    def of(number: int) -> "Level":
        return DocumentLevel(number) if number == 1 else Level(number)

    @property
    def below(self) -> "Level":
        return Level.of(self.number - 1)

    def items(self, art: CorpusArtifacts) -> tuple[list[str], list[str]]:
        """(item ids, item titles) of the level."""
        nodes = art.final_nodes(self.number - 1)
        return nodes["node_id"].to_list(), nodes["title"].to_list()

    def row_bytes(self, art: CorpusArtifacts, item_ids: list[str]) -> list[int]:
        """Each item's row in its parent's nav file at the leanest (:func:`~..subgroups.fits_one_leaf`
        judges a cluster by them): a child node's link and size."""
        nodes = art.final_nodes(self.number - 1)
        label = dict(zip(nodes["node_id"], nodes["label"]))
        size = dict(zip(nodes["node_id"], nodes["size"]))
        return leanest_group_row_bytes([label[i] for i in item_ids], [size[i] for i in item_ids])

    def item_lines(self, art: CorpusArtifacts) -> dict[str, str]:
        """Each item as one line of its parent's embedding text."""
        nodes = art.final_nodes(self.number - 1)
        return {n: f"{t}: {d}" for n, t, d in nodes.select("node_id", "title", "description").iter_rows()}

    def item_texts(self, art: CorpusArtifacts) -> tuple[dict[str, tuple[str, str]], dict[str, int]]:
        """What a summary reads of each item, (title, text), and each item's size in documents."""
        nodes = art.final_nodes(self.number - 1)
        info = {n: (t, s) for n, t, s in nodes.select("node_id", "title", "summary").iter_rows()}
        return info, dict(zip(nodes["node_id"], nodes["size"]))

    def node_texts(self, art: CorpusArtifacts) -> list[str]:
        """The level's finished nodes as the next level embeds them: summary + member excerpts."""
        excerpt = self.item_lines(art)
        return [
            f"{title}. {summary}\n" + "\n".join(excerpt[m] for m in members[:NEXT_LEVEL_EXCERPTS])
            for title, summary, members in art.final_nodes(self.number).select("title", "summary", "members").iter_rows()
        ]

    def unused_because(self, art: CorpusArtifacts) -> str | None:
        below = art.level_status(self.number - 1)
        if not below["used"] or below["top"]:
            return f"level {self.number - 1} is the top level" if below["used"] else below["why"]
        return None

    def run_mode(self, stage: Stage, llm: LLMResource, encoder: EncoderResource, full: bool) -> RunMode:
        return RunMode.load(stage.artifacts)

    def item_vectors(self, stage: Stage, workspace: WorkspaceResource, encoder: EncoderResource) -> np.ndarray:
        """Each item's text (:meth:`node_texts`) embedded, averaged with its documents' centroid
        (:data:`CENTROID_SHARE`)."""
        art = stage.artifacts
        texts = embed_with_cache(encoder.encoder, workspace.workspace.cache, self.below.node_texts(art),
                                 stage.embeddings, stage.progress)
        if not CENTROID_SHARE:
            return texts
        row = art.document_rows()
        documents = hierarchy.centroids(hierarchy.normalise(art.read_matrix("doc_vectors.npy")),
                                        [[row[d] for d in docs] for docs in self.item_documents(art)])
        return hierarchy.normalise((1 - CENTROID_SHARE) * hierarchy.normalise(texts) + CENTROID_SHARE * documents)

    def item_documents(self, art: CorpusArtifacts) -> list[list[str]]:
        """The documents below each item (a node of the level below), in :meth:`items` order."""
        below: dict[str, list[str]] = {}
        for number in range(1, self.number):
            nodes = art.final_nodes(number)
            below = {node: list(members) if number == 1 else [d for child in members for d in below[child]]
                     for node, members in zip(nodes["node_id"], nodes["members"])}
        return [below[item] for item in self.items(art)[0]]

    def update(self, art: CorpusArtifacts, item_ids: list[str], vectors: np.ndarray, mode: RunMode,
               p: int) -> incremental.LevelUpdate:
        """The published clusters of this level with the level below's changes applied."""
        previous = incremental.previous_groups(art, self.number)
        known = {m for _, members in previous for m in members}
        below = art.read_json(art.level(self.number - 1, "changes.json"))
        # A parent absorbs a change when a child's summary (its routing text) was rewritten.
        rewritten = art.read_json(art.level(self.number - 1, "summary_changes.json"))["resummarised"]
        return incremental.update_level(previous, item_ids, vectors, leave=set(below["removed"]),
                                        insert=[m for m in item_ids if m not in known],
                                        touched_items=set(rewritten), split_above=None)

    def settle(self, stage: Stage, mode: RunMode, update: incremental.LevelUpdate | None, vectors: np.ndarray,
               item_ids: list[str]) -> tuple[RunMode, incremental.LevelUpdate | None]:
        """The build mode and update this level goes on with (level 1 may fall back to full)."""
        return mode, update

    def build_metadata(self, mode: RunMode, changes: dict) -> dict:
        return {}


class DocumentLevel(Level):
    """Level 1: its items are the documents, embedded by ``doc_embeddings``; it decides whether
    this compile updates the published tree or rebuilds it, and guards against drift."""

    members, chars = LEVEL1_MEMBERS, LEVEL1_CHARS

    def items(self, art: CorpusArtifacts) -> tuple[list[str], list[str]]:
        cards = art.read_table("cards.parquet")
        return cards["doc_id"].to_list(), cards["title"].to_list()

    def row_bytes(self, art: CorpusArtifacts, item_ids: list[str]) -> list[int]:
        cards = read_cards(art)
        return leanest_row_bytes([cards[d] for d in item_ids])

    def item_lines(self, art: CorpusArtifacts) -> dict[str, str]:
        cards = art.read_table("cards.parquet")
        return {d: f"{t}: {o}" for d, t, o in cards.select("doc_id", "title", "one_line").iter_rows()}

    def item_texts(self, art: CorpusArtifacts) -> tuple[dict[str, tuple[str, str]], dict[str, int]]:
        docs = art.read_table("documents.parquet")
        cards = art.read_table("cards.parquet")
        text = dict(zip(docs["doc_id"], docs["text"]))
        info = {d: (t, f"{o} {x}") for d, t, o, x in zip(cards["doc_id"], cards["title"], cards["one_line"],
                                                          (text[d] for d in cards["doc_id"]))}
        return info, {d: 1 for d in info}

    def unused_because(self, art: CorpusArtifacts) -> str | None:
        return None

    def run_mode(self, stage: Stage, llm: LLMResource, encoder: EncoderResource, full: bool) -> RunMode:
        fingerprint = incremental.build_fingerprint(stage.corpus, llm.for_corpus(stage.corpus), encoder.model)
        return incremental.decide(stage.artifacts, stage.artifacts.read_table("documents.parquet"), fingerprint,
                                  force_full=full)

    def item_vectors(self, stage: Stage, workspace: WorkspaceResource, encoder: EncoderResource) -> np.ndarray:
        return stage.artifacts.read_matrix("doc_vectors.npy")

    def update(self, art: CorpusArtifacts, item_ids: list[str], vectors: np.ndarray, mode: RunMode,
               p: int) -> incremental.LevelUpdate:
        edited = set(mode.edited)
        return incremental.update_level(incremental.previous_groups(art, 1), item_ids, vectors,
                                        leave=set(mode.removed) | edited, insert=sorted(set(mode.added) | edited),
                                        touched_items=edited, split_above=2 * p)

    def settle(self, stage: Stage, mode: RunMode, update: incremental.LevelUpdate | None, vectors: np.ndarray,
               item_ids: list[str]) -> tuple[RunMode, incremental.LevelUpdate | None]:
        art = stage.artifacts
        if update:
            now = float(np.mean(hierarchy.cohesion(vectors, _index_groups(update.groups, item_ids))))
            before = incremental.published_meta(art)["cohesion_l1"]
            if now < before - incremental.COHESION_DROP:
                mode = RunMode("full", f"level-1 cohesion fell from {before:.3f} to {now:.3f}",
                               mode.added, mode.removed, mode.edited)
                update = None
        mode.save(art)
        stage.context.log.info(f"{mode.mode} compile: {mode.reason}")
        return mode, update

    def build_metadata(self, mode: RunMode, changes: dict) -> dict:
        return {**mode.counts(), "reason": mode.reason, "clusters_changed": len(changes["changed"])}


def cluster_inputs(art: CorpusArtifacts, level: int, groups: list[tuple[str, list[str]]],
                   vectors: np.ndarray, item_index: dict[str, int]) -> list[ClusterInput]:
    """What a summary reads: members nearest the centroid first, within the level's budget."""
    shape = Level.of(level)
    info, sizes = shape.item_texts(art)
    inputs = []
    for node_id, members in groups:
        idx = [item_index[m] for m in members]
        centre = hierarchy.centroids(vectors, [idx])[0]
        order = [members[i] for i in np.argsort(-(vectors[idx] @ centre), kind="stable")]
        inputs.append(ClusterInput(
            cluster_id=node_id,
            level=level,
            size=sum(sizes[m] for m in members),
            members=[MemberExcerpt(item_id=m, title=info[m][0], text=clip(info[m][1], shape.chars))
                     for m in order[:shape.members]],
            member_titles=[info[m][0] for m in order],
        ))
    return inputs


def summary_rows(groups: list[tuple[str, list[str]]], inputs: list[ClusterInput],
                 summaries: list[ClusterSummary]) -> pl.DataFrame:
    return pl.DataFrame({
        "node_id": [g[0] for g in groups],
        "members": [g[1] for g in groups],
        "size": [i.size for i in inputs],
        "title": [s.title for s in summaries],
        "description": [s.description for s in summaries],
        "summary": [s.summary for s in summaries],
        "label": [s.label for s in summaries],
        "key_terms": [s.key_terms for s in summaries],
    }, schema={"node_id": pl.String, "members": pl.List(pl.String), "size": pl.Int64, "title": pl.String,
               "description": pl.String, "summary": pl.String, "label": pl.String, "key_terms": pl.List(pl.String)})


def placement_rows(placements: list[hierarchy.Placement], item_ids: list[str], node_ids: list[str]) -> pl.DataFrame:
    """One row per placed item: its cluster, its runner-up (an @see stub) if within tau, and its
    nearest other cluster whatever the distance (what placing it again after repartition reuses)."""
    def node(index: int | None) -> str | None:
        return node_ids[index] if index is not None else None

    return pl.DataFrame({
        "item_id": [item_ids[p.item] for p in placements],
        "node_id": [node_ids[p.primary] for p in placements],
        "similarity": [p.similarity for p in placements],
        "runner_up": [node(p.runner_up) for p in placements],
        "runner_up_similarity": [p.runner_up_similarity for p in placements],
        "nearest": [node(p.nearest) for p in placements],
        "nearest_similarity": [p.nearest_similarity for p in placements],
    }, schema={"item_id": pl.String, "node_id": pl.String, "similarity": pl.Float64,
               "runner_up": pl.String, "runner_up_similarity": pl.Float64,
               "nearest": pl.String, "nearest_similarity": pl.Float64})


def place_after_repartition(vectors: np.ndarray, before: list[tuple[str, list[str]]],
                            after: list[tuple[str, list[str]]], placed_before: pl.DataFrame,
                            item_index: dict[str, int], tau: float) -> list[hierarchy.Placement]:
    """The soft assignment of the repartitioned clusters, from the clusters stage's: only the
    clusters repartition changed are new centroids (:func:`~..hierarchy.place_again`)."""
    members_before = {node_id: set(members) for node_id, members in before}
    kept = [set(members) == members_before.get(node_id) for node_id, members in after]
    position = {node_id: g for g, ((node_id, _), unchanged) in enumerate(zip(after, kept)) if unchanged}
    nearest = np.full(len(item_index), -1, dtype=np.int64)
    similarity = np.full(len(item_index), -np.inf)
    for item, node_id, sim in placed_before.select("item_id", "nearest", "nearest_similarity").iter_rows():
        if node_id in position:
            nearest[item_index[item]], similarity[item_index[item]] = position[node_id], sim
    groups = [[item_index[m] for m in members] for _, members in after]
    return hierarchy.place_again(vectors, groups, tau, kept, nearest, similarity)


def _unused(stage: Stage, why: str):
    stage.artifacts.write_json(CorpusArtifacts.level(stage.level, "status.json"), {"used": False, "why": why})
    return stage.done(f"unused-{stage.level}", {"used": False, "why": why})


def _groups_of(frame: pl.DataFrame) -> list[tuple[str, list[str]]]:
    return list(zip(frame["node_id"].to_list(), frame["members"].to_list()))


def _index_groups(groups: list[tuple[str, list[str]]], item_ids: list[str]) -> list[list[int]]:
    index = {m: i for i, m in enumerate(item_ids)}
    return [[index[m] for m in members] for _, members in groups]


# -- the stages (rows of the recipe) ---------------------------------------------------------------

def clusters(stage: Stage, workspace: WorkspaceResource, encoder: EncoderResource, llm: LLMResource,
             config=None):
    """K-Means into ceil(n/p) clusters (a cluster too crowded for one nav file split into
    siblings that fit: :func:`~..subgroups.fitting_parts`) with soft assignment
    — or, on an incremental compile, the published clusters updated in place."""
    level, number = Level.of(stage.level), stage.level
    spec, art = stage.corpus, stage.artifacts
    mode = level.run_mode(stage, llm, encoder, full=bool(config and config.full))
    why = level.unused_because(art)
    if why:
        return _unused(stage, why)
    vectors = level.item_vectors(stage, workspace, encoder)
    item_ids, _ = level.items(art)
    update = level.update(art, item_ids, vectors, mode, spec.p) if mode.incremental else None
    mode, update = level.settle(stage, mode, update, vectors, item_ids)
    if update:
        groups = update.groups
        top = number == max(incremental.published_meta(art)["levels"])
        changes = {"changed": update.changed, "removed": update.removed, "split": update.split,
                   "delta": update.delta}
    else:
        n_clusters = hierarchy.cluster_count(len(item_ids), spec.p, spec.k)
        top = n_clusters <= spec.k  # k is the most top-level skills a tree has
        if number == MAX_LEVELS and not top:
            raise Failure(description=f"corpus '{spec.name}' needs more than {MAX_LEVELS} levels at p={spec.p}, "
                          f"k={spec.k} ({len(item_ids)} items at level {number}); raise --p or --k")
        labels = hierarchy.kmeans(vectors, n_clusters)
        found = hierarchy.members_by_label(labels, n_clusters)
        # A cluster too crowded for one nav file (at level 1 its documents' rows, above its
        # children's): siblings that each fit.
        unit = hierarchy.normalise(vectors)
        row_bytes = level.row_bytes(art, item_ids)
        # Repartition keeps its clusters within one nav file by the same rows.
        art.write_table(art.level(number, "row_bytes.parquet"),
                        pl.DataFrame({"item_id": item_ids, "row_bytes": row_bytes},
                                     schema={"item_id": pl.String, "row_bytes": pl.Int64}))
        found = [part for members in found for part in fitting_parts(members, row_bytes, unit)]
        top = len(found) <= spec.k
        groups = [(f"L{number}-{c:04d}", [item_ids[i] for i in members]) for c, members in enumerate(found)]
        changes = {"changed": [g[0] for g in groups], "removed": [], "split": []}
    node_ids = [g[0] for g in groups]
    idx_groups = _index_groups(groups, item_ids)
    place_frame = placement_rows(hierarchy.place(vectors, idx_groups, spec.tau), item_ids, node_ids)
    frame = pl.DataFrame({"node_id": node_ids, "members": [g[1] for g in groups]},
                         schema={"node_id": pl.String, "members": pl.List(pl.String)})
    art.write_matrix(art.level(number, "items.npy"), vectors)
    art.write_table(art.level(number, "clusters.parquet"), frame)
    art.write_table(art.level(number, "clusters_placements.parquet"), place_frame)
    art.write_json(art.level(number, "changes.json"), changes)
    status = {"used": True, "top": top, "items": len(item_ids), "clusters": len(groups), "mode": mode.mode,
              "cohesion": round(float(np.mean(hierarchy.cohesion(vectors, idx_groups))), 6)}
    art.write_json(art.level(number, "status.json"), status)
    sizes = [len(g) for g in idx_groups]
    return stage.done(
        table_version(frame, place_frame, extra=matrix_version(vectors)),
        {**status, **level.build_metadata(mode, changes),
         "soft_assigned": int(place_frame["runner_up"].is_not_null().sum()),
         "largest_cluster": max(sizes), "smallest_cluster": min(sizes)},
    )


def summaries(stage: Stage, workspace: WorkspaceResource, llm: LLMResource):
    """A summary per cluster; on an incremental compile, kept clusters keep theirs until enough
    of their members changed."""
    level = stage.level
    art = stage.artifacts
    status = art.level_status(level)
    if not status["used"]:
        return stage.done(f"unused-{level}", {"used": False})
    item_ids, _ = Level.of(level).items(art)
    vectors = art.read_matrix(art.level(level, "items.npy"))
    groups = _groups_of(art.read_table(art.level(level, "clusters.parquet")))
    inputs = cluster_inputs(art, level, groups, vectors, {m: i for i, m in enumerate(item_ids)})
    runner = stage.runner(llm)
    if status.get("mode") == "incremental":
        # Kept clusters keep their published summaries (and so their routing text) until
        # enough of their members changed; new clusters are always summarised.
        delta = art.read_json(art.level(level, "changes.json")).get("delta", {})
        old, stale_before = incremental.previous_nodes(art, level), incremental.previous_staleness(art, level)
        stale = {g[0]: stale_before.get(g[0], 0) + delta.get(g[0], 0) for g in groups}
        targets = [i for i, (node_id, members) in enumerate(groups)
                   if node_id not in old or incremental.needs_summary(stale[node_id], len(members))]
        fresh = dict(zip(targets, runner.run("summary", inputs, ClusterSummary, targets=targets)))
        found = [fresh.get(i) or _kept_summary(old[g[0]]) for i, g in enumerate(groups)]
    else:
        targets, stale = list(range(len(groups))), {}
        found = runner.run("summary", inputs, ClusterSummary)
    rewritten = [groups[i][0] for i in targets]
    kept = set(stale) - set(rewritten)
    art.write_json(art.level(level, "summary_changes.json"), {
        "resummarised": rewritten, "staleness": {g[0]: stale[g[0]] if g[0] in kept else 0 for g in groups}})
    frame = summary_rows(groups, inputs, found)
    art.write_table(art.level(level, "summarised.parquet"), frame)
    preview = [{"node": r["node_id"], "label": r["label"], "docs": r["size"], "description": r["description"][:120]}
               for r in frame.iter_rows(named=True)]
    return stage.done(table_version(frame), {"clusters": frame.height, "summaries_rewritten": len(rewritten),
                                             "summaries_kept": len(groups) - len(rewritten),
                                             "summaries": markdown_table(preview)})


def repartition(stage: Stage, workspace: WorkspaceResource, llm: LLMResource):
    """Verify-and-repartition: siblings judged in batches of ≤60 for confusable pairs and mixed
    clusters; each cluster is touched at most once, and touched clusters are re-summarised."""
    level = stage.level
    spec, art = stage.corpus, stage.artifacts
    status = art.level_status(level)
    if not status["used"]:
        return stage.done(f"unused-{level}", {"used": False})
    if status.get("mode") == "incremental":
        # An incremental compile keeps the published partition: repartitioning would move paths.
        frame = art.read_table(art.level(level, "summarised.parquet"))
        place_frame = art.read_table(art.level(level, "clusters_placements.parquet"))
        art.write_table(art.level(level, "repartitioned.parquet"), frame)
        art.write_table(art.level(level, "repartitioned_placements.parquet"), place_frame)
        return stage.done(table_version(frame, place_frame), {"skipped": "incremental compile", "clusters": frame.height})
    item_ids, item_titles = Level.of(level).items(art)
    item_index = {m: i for i, m in enumerate(item_ids)}
    vectors = art.read_matrix(art.level(level, "items.npy"))
    summarised = art.read_table(art.level(level, "summarised.parquet"))
    groups = _groups_of(summarised)
    idx_groups = [[item_index[m] for m in members] for _, members in groups]
    requests = _repartition_requests(spec.p, level, summarised, vectors, idx_groups,
                                     dict(zip(item_ids, item_titles)))
    runner = stage.runner(llm)
    verdicts = runner.run("repartition", requests, RepartitionVerdict)
    # Clusters stay within one nav file, by the rows the clusters stage measured.
    rows = art.read_table(art.level(level, "row_bytes.parquet"))
    if rows["item_id"].to_list() != item_ids:
        raise Failure(description=f"{stage.name}: the clusters stage's row sizes are of other items; "
                      f"rematerialize clusters_l{level}")
    row_bytes = rows["row_bytes"].to_list()
    outcome = apply_verdicts(groups, verdicts, vectors, item_index, spec.p,
                             max_clusters=spec.k if status["top"] else None, row_bytes=row_bytes)
    for warning in outcome.ignored:
        stage.context.log.warning(f"{stage.name}: ignored {warning}")
    final_groups = outcome.groups
    inputs = cluster_inputs(art, level, final_groups, vectors, item_index)
    old = {r["node_id"]: r for r in summarised.iter_rows(named=True)}
    touched = [i for i, (node_id, members) in enumerate(final_groups)
               if node_id in outcome.touched or node_id not in old]
    fresh = dict(zip(touched, runner.run("summary", inputs, ClusterSummary, targets=touched)))
    found = [fresh.get(i) or _kept_summary(old[g[0]]) for i, g in enumerate(final_groups)]
    frame = summary_rows(final_groups, inputs, found)
    node_ids = [g[0] for g in final_groups]
    placements = place_after_repartition(vectors, groups, final_groups,
                                         art.read_table(art.level(level, "clusters_placements.parquet")),
                                         item_index, spec.tau)
    place_frame = placement_rows(placements, item_ids, node_ids)
    art.write_table(art.level(level, "repartitioned.parquet"), frame)
    art.write_table(art.level(level, "repartitioned_placements.parquet"), place_frame)
    report = outcome.report()
    return stage.done(table_version(frame, place_frame),
                      {**report, "clusters": frame.height,
                       "soft_assigned": int(place_frame["runner_up"].is_not_null().sum()),
                       "notes": MetadataValue.md("\n".join(f"- {v.notes}" for v in verdicts if v.notes) or "_none_")})


def _kept_summary(row: dict) -> ClusterSummary:
    return ClusterSummary(**{k: row[k] for k in ClusterSummary.model_fields})


def _repartition_requests(p: int, level: int, summarised: pl.DataFrame, vectors: np.ndarray,
                          idx_groups: list[list[int]], titles: dict[str, str]) -> list[RepartitionInput]:
    """Every sibling cluster, in batches of ≤60 neighbours: its summary, its members' titles
    (documents' card titles at level 1, child nodes' titles above) and the embedding evidence
    (cohesion, nearest sibling centroids)."""
    cohesion = hierarchy.cohesion(vectors, idx_groups)
    pairs = hierarchy.similar_pairs(vectors, idx_groups)
    rows = list(summarised.iter_rows(named=True))
    batches = hierarchy.proximity_batches(vectors, idx_groups, REPARTITION_BATCH)
    # A pair is shown in the batch holding both its clusters, if one does (one pass over the pairs).
    batch_of = {i: b for b, batch in enumerate(batches) for i in batch}
    pairs_in: list[list[tuple[int, int, float]]] = [[] for _ in batches]
    for a, b, s in pairs:
        if batch_of[a] == batch_of[b]:
            pairs_in[batch_of[a]].append((a, b, s))
    requests = []
    for batch, batch_pairs in zip(batches, pairs_in):
        requests.append(RepartitionInput(
            level=level,
            branching=p,
            clusters=[RepartitionCluster(cluster_id=rows[i]["node_id"], title=rows[i]["title"],
                                         summary=rows[i]["summary"], size=len(idx_groups[i]),
                                         cohesion=round(cohesion[i], 4),
                                         **repartition_members(rows[i]["members"], titles)) for i in batch],
            similar_pairs=[SimilarPair(a=rows[a]["node_id"], b=rows[b]["node_id"], similarity=round(s, 4))
                           for a, b, s in batch_pairs],
        ))
    return requests


def repartition_members(members: list[str], titles: dict[str, str]) -> dict[str, list[str]]:
    """Member ids and titles as a repartition prompt lists them: the first ones, titles clipped."""
    shown = members[:REPARTITION_TITLES_PER_CLUSTER]
    return {"member_ids": list(members), "member_titles": [clip(titles[m], REPARTITION_TITLE_CHARS) for m in shown]}


class RepartitionOutcome:
    def __init__(self, groups: list[tuple[str, list[str]]]):
        self.groups = groups
        self.touched: set[str] = set()
        self.ignored: list[str] = []
        self.counts = {"moves": 0, "merges": 0, "splits": 0, "rebalanced_pairs": 0, "fitted": 0}

    def report(self) -> dict:
        return {**self.counts, "touched_clusters": len(self.touched), "ignored_instructions": len(self.ignored)}


def apply_verdicts(groups: list[tuple[str, list[str]]], verdicts: list[RepartitionVerdict], vectors: np.ndarray,
                   item_index: dict[str, int], p: int, max_clusters: int | None,
                   row_bytes: Sequence[int] | None = None) -> RepartitionOutcome:
    """Apply id-level moves, re-split mixed clusters, merge (or rebalance) confusable pairs.
    A cluster is touched at most once per compile; instructions naming unknown ids are ignored
    and reported, never guessed at. ``row_bytes`` (each item's leanest row in its parent's nav
    file, by ``item_index``): a merge that would not fit one nav file rebalances the pair instead,
    and a cluster a move or rebalance left too crowded is split into parts that fit
    (:func:`~..subgroups.fitting_parts`), while the top level stays within ``max_clusters``."""
    def fits(ms: list[str]) -> bool:
        return row_bytes is None or fits_one_leaf([row_bytes[item_index[m]] for m in ms])

    members = {node_id: list(m) for node_id, m in groups}
    order = [node_id for node_id, _ in groups]
    outcome = RepartitionOutcome([])
    taken = set(order)
    where = {m: node_id for node_id, ms in members.items() for m in ms}
    for verdict in verdicts:
        touched_now: set[str] = set()
        for move in verdict.moves:
            source = where.get(move.item_id)
            if source is None or move.to_cluster not in members:
                outcome.ignored.append(f"move of unknown item or to unknown cluster: {move.item_id} → {move.to_cluster}")
                continue
            if source == move.to_cluster or {source, move.to_cluster} & outcome.touched or len(members[source]) == 1:
                continue
            members[source].remove(move.item_id)
            members[move.to_cluster].append(move.item_id)
            where[move.item_id] = move.to_cluster
            touched_now |= {source, move.to_cluster}
            outcome.counts["moves"] += 1
        for node_id in verdict.mixed:
            if node_id not in members:
                outcome.ignored.append(f"mixed verdict for unknown cluster {node_id}")
                continue
            if node_id in outcome.touched or node_id in touched_now or len(members[node_id]) < 4:
                continue
            if max_clusters is not None and len(members) + 1 > max_clusters:
                continue  # a split would push the top level to k clusters or more
            keep, split = hierarchy.split_in_two(vectors, [item_index[m] for m in members[node_id]])
            new_id = hierarchy.new_node_id(taken)
            ids = {item_index[m]: m for m in members[node_id]}
            members[node_id] = [ids[i] for i in keep]
            members[new_id] = [ids[i] for i in split]
            order.append(new_id)
            for m in members[new_id]:
                where[m] = new_id
            touched_now |= {node_id, new_id}
            outcome.counts["splits"] += 1
        for a, b in verdict.confusable:
            if a not in members or b not in members:
                outcome.ignored.append(f"confusable pair with unknown cluster: {a}, {b}")
                continue
            if {a, b} & outcome.touched or {a, b} & touched_now or a == b:
                continue
            union = members[a] + members[b]
            if len(union) <= 2 * p and fits(union):
                members[a] = union
                del members[b]
                order.remove(b)
                for m in union:
                    where[m] = a
                outcome.counts["merges"] += 1
            else:
                ids = {item_index[m]: m for m in union}
                first, second = hierarchy.split_in_two(vectors, list(ids))
                members[a], members[b] = [ids[i] for i in first], [ids[i] for i in second]
                for node_id in (a, b):
                    for m in members[node_id]:
                        where[m] = node_id
                outcome.counts["rebalanced_pairs"] += 1
            touched_now |= {a, b}
        outcome.touched |= touched_now
    crowded = [n for n in order if members.get(n) and not fits(members[n])]
    unit = hierarchy.normalise(vectors) if crowded else vectors
    for node_id in crowded:
        ids = {item_index[m]: m for m in members[node_id]}
        parts = fitting_parts(list(ids), row_bytes or [], unit)
        if max_clusters is not None and len(members) + len(parts) - 1 > max_clusters:
            continue  # the top level keeps k clusters at most: the leaf is split at render time
        members[node_id] = [ids[i] for i in parts[0]]
        outcome.touched.add(node_id)
        for part in parts[1:]:
            new_id = hierarchy.new_node_id(taken)
            members[new_id] = [ids[i] for i in part]
            order.append(new_id)
            outcome.touched.add(new_id)
        outcome.counts["fitted"] += 1
    outcome.groups = [(node_id, members[node_id]) for node_id in order if members.get(node_id)]
    outcome.touched &= {g[0] for g in outcome.groups}
    return outcome


