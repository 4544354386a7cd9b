"""Incremental recompilation: keep the published hierarchy and apply the corpus's change to it.

Added documents go to the nearest leaf centroid (a leaf that grows past 2p splits locally),
deleted ones leave, edited ones are re-carded, re-embedded and re-placed. Every nav file lists
its current members at once; a cluster's summary, label and entities are rewritten when a
material share of its members (:data:`RESUMMARY_SHARE`) changed since they were written, and a
rewritten summary counts as a change for its parent. Every surviving cluster keeps its name, so
paths into the tree stay valid. A drift guard falls back to a full rebuild
when the accumulated change, or the loss of cluster cohesion, says the old shape no longer fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from . import hierarchy
from .artifacts import CorpusArtifacts
from .recipe import LEVELS, level_stages
from c2s_core.llm.base import TASKS

PUBLISHED = "published"
DRIFT_SHARE = 0.2  # share of documents changed since the last full build that forces a rebuild
COHESION_DROP = 0.05  # mean level-1 cohesion this far below the full build's forces a rebuild
# A kept cluster's summary (label, description, entities) is rewritten once this share of its
# members changed since it was written: one new page in a ten-page leaf is listed in the leaf's
# INDEX.md at once but does not change what the leaf is about; accumulated change does.
RESUMMARY_SHARE = 0.25


@dataclass
class RunMode:
    mode: str  # "full" or "incremental"
    reason: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)

    @property
    def incremental(self) -> bool:
        return self.mode == "incremental"

    def counts(self) -> dict[str, int]:
        return {"documents_added": len(self.added), "documents_changed": len(self.edited),
                "documents_removed": len(self.removed)}

    def save(self, art: CorpusArtifacts) -> None:
        art.write_json("run_mode.json", self.__dict__)

    @classmethod
    def load(cls, art: CorpusArtifacts) -> "RunMode":
        return cls(**art.read_json("run_mode.json"))


def build_fingerprint(spec, provider, encoder_model: str) -> dict:
    """What a published tree depends on besides the documents: if any of it changes, rebuild.
    That includes the code versions of the stages that group the documents: a compiler that groups
    them otherwise rebuilds the tree on its first compile instead of placing changes into a
    grouping it would no longer make."""
    return {"p": spec.p, "k": spec.k, "tau": spec.tau, "provider": provider.name, "model": provider.model,
            "prompts": {t: provider.prompt_version(t) for t in TASKS},
            "encoder": encoder_model,
            "grouping": {s.name: s.code_version for level in LEVELS for s in level_stages(level)}}


def published_meta(art: CorpusArtifacts) -> dict | None:
    path = art.root / PUBLISHED / "meta.json"
    return art.read_json(f"{PUBLISHED}/meta.json") if path.exists() else None


def decide(art: CorpusArtifacts, docs: pl.DataFrame, fingerprint: dict, force_full: bool) -> RunMode:
    if force_full:  # before reading the published base, so --full recovers from a damaged one
        return RunMode("full", "a full rebuild was requested")
    meta = published_meta(art)
    if meta is None:
        return RunMode("full", "no published tree to update")
    if meta["build"] != fingerprint:
        changed = sorted(k for k in fingerprint if fingerprint[k] != meta["build"].get(k))
        return RunMode("full", f"compile settings changed since the published tree: {', '.join(changed)}")
    before = dict(art.read_table(f"{PUBLISHED}/docs.parquet").iter_rows())
    now = dict(docs.select("doc_id", "content_hash").iter_rows())
    mode = RunMode(
        "incremental", "",
        added=sorted(set(now) - set(before)),
        removed=sorted(set(before) - set(now)),
        edited=sorted(d for d in set(now) & set(before) if now[d] != before[d]),
    )
    change = len(mode.added) + len(mode.removed) + len(mode.edited)
    accumulated = meta["changed_since_full"] + change
    share = accumulated / max(meta["full_build_documents"], 1)
    if share > DRIFT_SHARE:
        return RunMode("full", f"{accumulated} documents changed since the last full build "
                       f"({share:.0%} > {DRIFT_SHARE:.0%})", mode.added, mode.removed, mode.edited)
    mode.reason = f"{change} document(s) changed; {share:.1%} changed since the last full build"
    return mode


def previous_groups(art: CorpusArtifacts, level: int) -> list[tuple[str, list[str]]]:
    frame = art.read_table(f"{PUBLISHED}/level_{level}.parquet")
    return list(zip(frame["node_id"].to_list(), frame["members"].to_list()))


def previous_nodes(art: CorpusArtifacts, level: int) -> dict[str, dict]:
    frame = art.read_table(f"{PUBLISHED}/level_{level}.parquet")
    return {row["node_id"]: row for row in frame.iter_rows(named=True)}


def previous_staleness(art: CorpusArtifacts, level: int) -> dict[str, int]:
    """Member changes each published node of ``level`` has absorbed since its summary was written."""
    path = art.root / PUBLISHED / f"staleness_{level}.json"
    return art.read_json(f"{PUBLISHED}/staleness_{level}.json") if path.exists() else {}


def previous_entities(art: CorpusArtifacts) -> dict[str, dict]:
    path = art.root / PUBLISHED / "entities.parquet"
    if not path.exists():
        return {}
    return {row["node_id"]: row for row in art.read_table(f"{PUBLISHED}/entities.parquet").iter_rows(named=True)}


def previous_names(art: CorpusArtifacts) -> dict[str, str]:
    path = art.root / PUBLISHED / "names.json"
    return art.read_json(f"{PUBLISHED}/names.json") if path.exists() else {}


@dataclass
class LevelUpdate:
    groups: list[tuple[str, list[str]]]
    changed: list[str]  # surviving or new nodes whose members or member content changed
    removed: list[str]  # nodes that lost every member
    split: list[str]  # nodes created by a local split
    delta: dict[str, int] = field(default_factory=dict)  # node -> members added, removed or touched


def needs_summary(stale: int, size: int) -> bool:
    """Whether a kept cluster's summary is due: enough of its members changed since it was written."""
    return stale >= max(1, math.ceil(RESUMMARY_SHARE * size))


def update_level(previous: list[tuple[str, list[str]]], item_ids: list[str], vectors: np.ndarray,
                 leave: set[str], insert: list[str], touched_items: set[str], split_above: int | None) -> LevelUpdate:
    """Apply one level's item changes to its previous membership.

    ``leave`` items are taken out, ``insert`` items go to the nearest remaining centroid,
    ``touched_items`` mark their cluster changed even if they stay; with ``split_above`` a
    cluster that grew past it (and past its previous size) is split in two locally."""
    index = {m: i for i, m in enumerate(item_ids)}
    present = set(item_ids)
    members = {node: [m for m in ms if m in present and m not in leave] for node, ms in previous}
    before = {node: set(ms) for node, ms in previous}
    alive = [node for node, _ in previous if members[node]]
    if insert:
        if not alive:
            raise ValueError("every cluster lost all of its members; a full rebuild is needed")
        cents = hierarchy.centroids(vectors, [[index[m] for m in members[n]] for n in alive])
        sims = vectors[[index[m] for m in insert]] @ cents.T
        for item, row in zip(insert, sims):
            members[alive[int(np.argmax(row))]].append(item)
    changed = {n for n in alive if set(members[n]) != before[n] or touched_items & set(members[n])}
    removed = [node for node, _ in previous if not members[node]]
    order = list(alive)
    split: list[str] = []
    if split_above is not None:
        taken = {node for node, _ in previous}
        for node in list(order):
            if len(members[node]) > max(split_above, len(before[node])):
                new = hierarchy.new_node_id(taken)
                ids = {index[m]: m for m in members[node]}
                keep, move = hierarchy.split_in_two(vectors, list(ids))
                members[node], members[new] = [ids[i] for i in keep], [ids[i] for i in move]
                order.append(new)
                changed.add(new)
                split.append(new)
    delta = {n: len(set(members[n]) ^ before.get(n, set())) + len(touched_items & set(members[n]) & before.get(n, set()))
             for n in order}
    return LevelUpdate([(n, members[n]) for n in order], sorted(changed), removed, split,
                       {n: d for n, d in delta.items() if d})


def save_published(art: CorpusArtifacts, docs: pl.DataFrame, levels: dict[int, pl.DataFrame], names: dict[str, str],
                   fingerprint: dict, mode: RunMode, cohesion_l1: float, llm_tasks: int) -> None:
    """Record what was just published: the base the next incremental compile starts from.
    ``llm_tasks``: the LLM tasks this compile ran (made or from the cache); a full build's count
    is what later incremental compiles report their savings against."""
    meta = published_meta(art) if mode.incremental else None
    change = len(mode.added) + len(mode.removed) + len(mode.edited)
    art.write_table(f"{PUBLISHED}/docs.parquet", docs.select("doc_id", "content_hash"))
    for old in [*(art.root / PUBLISHED).glob("level_*.parquet"), *(art.root / PUBLISHED).glob("staleness_*.json")]:
        old.unlink()
    for level, frame in levels.items():
        art.write_table(f"{PUBLISHED}/level_{level}.parquet", frame)
        art.write_json(f"{PUBLISHED}/staleness_{level}.json",
                       art.read_json(art.level(level, "summary_changes.json"))["staleness"])
    art.write_table(f"{PUBLISHED}/entities.parquet", art.read_table("entities.parquet"))
    art.write_json(f"{PUBLISHED}/names.json", names)
    art.write_json(f"{PUBLISHED}/meta.json", {
        "build": fingerprint,
        "levels": sorted(levels),
        "full_build_documents": meta["full_build_documents"] if meta else docs.height,
        "changed_since_full": meta["changed_since_full"] + change if meta else 0,
        "cohesion_l1": meta["cohesion_l1"] if meta else cohesion_l1,
        "full_build_llm_tasks": meta.get("full_build_llm_tasks", 0) if meta else llm_tasks,
    })


def llm_calls_saved(art: CorpusArtifacts, mode: RunMode, made: int) -> int | None:
    """LLM calls an incremental compile avoided: the last full build's tasks minus this run's calls."""
    meta = published_meta(art) if mode.incremental else None
    if not meta or not meta.get("full_build_llm_tasks"):
        return None
    return max(0, meta["full_build_llm_tasks"] - made)
