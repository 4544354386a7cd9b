"""What a compile would cost, before it spends anything: LLM calls, tokens and dollars per stage.

Nothing here calls an LLM. Stage sizes follow the compile's own arithmetic: a card per document,
``ceil(n/p)`` clusters per level until fewer than ``k`` remain, a repartition call per sibling
batch of ≤60 on levels 1 and 2, entities per cluster. Prompt tokens come from the real prompt
builders (``prompts.build``) on the actual documents: exactly for the cards, and for the cluster
tasks on stand-in clusters (documents in corpus order, cached or extractive cards for titles),
since the real clusters only exist once the documents are embedded. Output tokens are each task's
full output budget, so the output side is an upper bound. Cards already in the per-item cache
are subtracted (their cache key is known before the run); for the other stages it is not.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from pydantic import BaseModel

from .assets.corpus import card_input
from .assets.levels import (
    LEVEL1_CHARS,
    LEVEL1_MEMBERS,
    REPARTITION_BATCH,
    UPPER_CHARS,
    UPPER_MEMBERS,
    repartition_members,
)
from .assets.publish import ENTITY_CHARS, ENTITY_TEXTS
from .hierarchy import cluster_count
from .ingest import CorpusError, Document, read_corpus
from .subgroups import leanest_row_bytes, split_to_fit
from c2s_core.llm import pricing, prompts
from c2s_core.llm.base import CompileProvider, TaskRunner
from c2s_core.llm.clients import Usage
from c2s_core.llm.offline import make_card
from c2s_core.llm.schemas import (
    MAX_ENTITIES,
    Card,
    ClusterInput,
    EntitiesInput,
    MemberExcerpt,
    RepartitionCluster,
    RepartitionInput,
    SimilarPair,
)
from .recipe import MAX_LEVELS, StageSpec, level_stages, stage
from .resources import LLMResource
from c2s_core.navrows import DocCard
from c2s_core.text import clip
from .workspace import CorpusSpec, Workspace

# Clusters re-summarised after verify-and-repartition: it depends on the model's verdicts, so an
# assumed share (each cluster is touched at most once).
RESUMMARY_SHARE = 0.1
SUMMARY_CHARS = 1000  # a cluster summary's length as the prompts ask for it


@dataclass
class StageEstimate:
    stage: str
    items: int  # items the stage computes: documents, clusters or sibling batches (repartition)
    cached: int | None  # of them already in the per-item cache (None: not knowable before the run)
    calls: int  # LLM calls, re-asks not included
    input_tokens: int  # all of it, cache reads included
    output_tokens: int  # the output budgets: an upper bound
    cost_usd: float
    note: str = ""
    cache_read_tokens: int = 0  # of input_tokens, the shared instructions read from the prompt cache


@dataclass
class _Node:
    """A stand-in cluster: what its summary, repartition and entities prompts would read."""

    node_id: str
    level: int
    title: str
    member_ids: list[str]
    member_titles: list[str]
    excerpts: list[MemberExcerpt]  # what its summary reads
    entity_texts: list[str]  # what its entities task reads
    summary: str


def estimate_compile(spec: CorpusSpec, workspace: Workspace, llm: LLMResource, documents: Sequence[Document]) -> dict:
    """Per-stage and total estimates for compiling ``documents`` as ``spec`` with ``llm``."""
    if not documents:
        raise CorpusError(f"no documents accepted from {spec.source}")
    if len(documents) < spec.p:
        raise CorpusError(f"corpus '{spec.name}' has {len(documents)} documents, fewer than the branching ratio "
                          f"p={spec.p}: nothing to cluster; lower --p or add documents")
    provider = llm.build_provider(llm.settings(spec.llm), require_key=False)
    try:
        return _Estimator(spec, workspace, provider).run(list(documents))
    finally:
        close = getattr(provider, "close", None)
        if close is not None:
            close()


def read_documents(spec: CorpusSpec, workspace: Workspace, s3=None) -> list[Document]:
    """The corpus's accepted documents, read as the ``documents`` asset reads them."""
    from .storage import download_prefix, is_s3

    local = Path(spec.source)
    if is_s3(spec.source):
        from dagster_aws.s3 import S3Resource

        local = download_prefix((s3 or S3Resource()).get_client(), spec.source,
                                workspace.artifacts(spec.name) / "source")
    result = read_corpus(local, **spec.read_options(workspace.home))
    if not result.documents:
        raise CorpusError(result.nothing_accepted(spec.source))
    return result.documents


class _Estimator:
    def __init__(self, spec: CorpusSpec, workspace: Workspace, provider: CompileProvider):
        self.spec, self.workspace, self.provider = spec, workspace, provider
        self.remote = provider.name != "offline"  # the offline provider sends no prompt and costs nothing
        self.stages: list[StageEstimate] = []
        self.notes: list[str] = []

    def run(self, documents: list[Document]) -> dict:
        cards = self._cards(documents)
        level, nodes = 1, self._level_one(documents, cards)
        all_nodes = list(nodes)
        while True:
            for spec in level_stages(level):  # the level's LLM stages, as the recipe lists them
                if spec.task == "summary":
                    self._summaries(spec, nodes)
                elif spec.task == "repartition":
                    self._repartition(spec, nodes)
            if len(nodes) <= self.spec.k:
                break
            if level == MAX_LEVELS:
                self.notes.append(f"the compile will stop: {len(nodes)} clusters remain at level {MAX_LEVELS}, "
                                  f"the most the graph holds; raise --p or --k")
                break
            level, nodes = level + 1, self._upper_level(level + 1, nodes)
            all_nodes += nodes
        self._entities(all_nodes)
        total = {k: sum(getattr(s, k) for s in self.stages)
                 for k in ("calls", "input_tokens", "output_tokens", "cache_read_tokens")}
        total["cost_usd"] = round(sum(s.cost_usd for s in self.stages), 4)
        per = 1000 / max(1, len(documents))  # the figure a hosted compile is quoted by
        total["per_1000_documents"] = {"input_tokens": round(total["input_tokens"] * per),
                                       "output_tokens": round(total["output_tokens"] * per),
                                       "cost_usd": round(total["cost_usd"] * per, 4)}
        return {
            "corpus": self.spec.name,
            "provider": self.provider.name,
            "model": self.provider.model,
            "card_model": getattr(self.provider, "card_model", self.provider.model),
            "priced": not self.remote or all(pricing.price_for(m).known for m in self._models()),
            "documents": len(documents),
            "levels": level,
            "stages": [asdict(s) for s in self.stages],
            "total": total,
            "notes": self.notes + self._standing_notes(),
        }

    # -- stages ----------------------------------------------------------------------------------
    def _cards(self, documents: list[Document]) -> dict[str, Card]:
        items = [card_input(d.doc_id, d.title, d.text) for d in documents]
        cards = stage("doc_cards")
        hits = TaskRunner(self.provider, self.workspace.cache, cards.cache_version).cached(cards.task, items)
        todo = [item for i, item in enumerate(items) if i not in hits]
        self._add(cards.name, cards.task, len(items), len(hits), todo)
        if items and len(hits) == len(items):
            self.notes.append("every card is in the cache: if the corpus and settings are unchanged since the last "
                              "compile, the other stages come from the cache too and the run costs nothing")
        # Cluster prompts show card titles: the cached card where there is one, else an extractive stand-in.
        return {item.doc_id: Card.model_validate(hits[i]) if i in hits else make_card(item)
                for i, item in enumerate(items)}

    def _level_one(self, documents: list[Document], cards: dict[str, Card]) -> list[_Node]:
        listed = [cards[d.doc_id] for d in documents]
        rows = dict(zip((d.doc_id for d in documents), leanest_row_bytes(
            [DocCard(d.doc_id, c.title, c.one_line, c.phrases, c.identifiers) for d, c in zip(documents, listed)])))
        # As the compile's level 1: a group too crowded for one leaf's file is split until its parts fit.
        groups = [part for group in _split(documents, cluster_count(len(documents), self.spec.p, self.spec.k))
                  for part in _fitting(group, [rows[d.doc_id] for d in group])]
        nodes = []
        for c, group in enumerate(groups):
            titles = [cards[d.doc_id].title for d in group]
            excerpts = [MemberExcerpt(item_id=d.doc_id, title=cards[d.doc_id].title,
                                      text=clip(f"{cards[d.doc_id].one_line} {d.text}", LEVEL1_CHARS))
                        for d in group[:LEVEL1_MEMBERS]]
            entity_texts = [f"{cards[d.doc_id].title}. {cards[d.doc_id].one_line} {clip(d.text, ENTITY_CHARS)}"
                            for d in group[:ENTITY_TEXTS]]
            nodes.append(_Node(f"L1-{c:04d}", 1, titles[0], [d.doc_id for d in group], titles, excerpts,
                               entity_texts, _stand_in_summary(titles)))
        return nodes

    def _upper_level(self, level: int, below: list[_Node]) -> list[_Node]:
        nodes = []
        for c, group in enumerate(_split(below, cluster_count(len(below), self.spec.p, self.spec.k))):
            excerpts = [MemberExcerpt(item_id=n.node_id, title=n.title, text=clip(n.summary, UPPER_CHARS))
                        for n in group[:UPPER_MEMBERS]]
            titles = [n.title for n in group]
            entity_texts = [f"{n.title}. {n.summary} Entities: {_stand_in_entities(n)}" for n in group]
            nodes.append(_Node(f"L{level}-{c:04d}", level, titles[0], [n.node_id for n in group], titles, excerpts,
                               entity_texts, _stand_in_summary(titles)))
        return nodes

    def _summaries(self, spec: StageSpec, nodes: list[_Node]) -> None:
        self._add(spec.name, spec.task, len(nodes), None, [self._summary_input(spec.level, n) for n in nodes])

    def _summary_input(self, level: int, node: _Node) -> ClusterInput:
        return ClusterInput(cluster_id=node.node_id, level=level, size=len(node.member_ids), members=node.excerpts,
                            member_titles=node.member_titles)

    def _repartition(self, spec: StageSpec, nodes: list[_Node]) -> None:
        level = spec.level
        n_batches = math.ceil(len(nodes) / REPARTITION_BATCH)
        size = math.ceil(len(nodes) / n_batches)
        requests = []
        for batch in (nodes[i : i + size] for i in range(0, len(nodes), size)):
            titles = {m: t for n in batch for m, t in zip(n.member_ids, n.member_titles)}
            clusters = [RepartitionCluster(cluster_id=n.node_id, title=n.title, summary=n.summary,
                                           size=len(n.member_ids), cohesion=0.5,
                                           **repartition_members(n.member_ids, titles)) for n in batch]
            pairs = [SimilarPair(a=a.node_id, b=b.node_id, similarity=0.8) for a, b in zip(batch, batch[1:])]
            requests.append(RepartitionInput(level=level, branching=self.spec.p, clusters=clusters,
                                             similar_pairs=pairs * 2))
        touched = math.ceil(RESUMMARY_SHARE * len(nodes))
        resummaries = [self._summary_input(level, n) for n in nodes[:touched]]
        self._add(spec.name, spec.task, len(requests), None, requests,
                  extra=("summary", resummaries),
                  note=f"includes {touched} re-summaries (assumes {RESUMMARY_SHARE:.0%} of clusters touched)")

    def _entities(self, nodes: list[_Node]) -> None:
        inputs = [EntitiesInput(cluster_id=n.node_id, level=n.level, title=n.title, summary=n.summary,
                                texts=n.entity_texts) for n in nodes]
        entities = stage("entities")
        self._add(entities.name, entities.task, len(inputs), None, inputs)

    # -- accounting ------------------------------------------------------------------------------
    def _add(self, stage: str, task: str, items: int, cached: int | None, todo: Sequence[BaseModel],
             extra: tuple[str, Sequence[BaseModel]] | None = None, note: str = "") -> None:
        calls = input_tokens = output_tokens = cache_read = 0
        cost = 0.0
        for t, inputs in [(task, todo)] + ([extra] if extra else []):
            calls += len(inputs)
            if not self.remote or not inputs:
                continue
            model = self.provider.model_for(t)
            usage = Usage(output_tokens=len(inputs) * prompts.MAX_TOKENS[t])
            built = [prompts.build(t, item) for item in inputs]  # (system, user) once per item
            for system, n_calls in Counter(system for system, _ in built).items():
                usage += self._cached_prefix(t, model, prompts.estimate_tokens(system), n_calls)
            usage += Usage(input_tokens=sum(prompts.estimate_tokens(user) for _, user in built))
            input_tokens += usage.total_input_tokens
            output_tokens += usage.output_tokens
            cache_read += usage.cache_read_tokens
            cost += pricing.cost(model, usage)
        self.stages.append(StageEstimate(stage, items, cached, calls, input_tokens, output_tokens, round(cost, 4), note,
                                         cache_read))

    def _cached_prefix(self, task: str, model: str, tokens: int, calls: int) -> Usage:
        """The shared instructions (``tokens`` long) of ``calls`` calls: written to the prompt cache
        once and read from it after, when the model caches a prefix that short; else billed in
        full every time (and said so once per task)."""
        minimum = pricing.price_for(model).cache_min_tokens
        if tokens < minimum:
            note = (f"{task}: its shared instructions ({tokens:,} tokens) are under {model}'s {minimum:,}-token "
                    "minimum cacheable prefix, so every call pays for them in full")
            if note not in self.notes:
                self.notes.append(note)
            return Usage(input_tokens=tokens * calls)
        return Usage(cache_write_tokens=tokens, cache_read_tokens=tokens * (calls - 1))

    def _models(self) -> set[str]:
        return {self.provider.model, getattr(self.provider, "card_model", self.provider.model)}

    def _standing_notes(self) -> list[str]:
        if not self.remote:
            return ["the offline provider calls no API: no tokens, no cost"]
        notes = ["output tokens are each task's full budget (an upper bound); each task's shared instructions are "
                 "priced as prompt-cache reads where the model caches a prefix that long; re-asks are not counted",
                 "cluster prompts are measured on stand-in clusters (documents in corpus order): the real "
                 "clusters exist only after embedding"]
        unpriced = sorted(m for m in self._models() if not pricing.price_for(m).known)
        if unpriced:
            notes.append(f"no price known for {', '.join(unpriced)}: counted as $0")
        return notes


def _fitting(group: list, row_bytes: list[int]) -> list[list]:
    """``group`` in consecutive parts whose rows (``row_bytes``, in order) each fit one leaf's
    file, as :func:`~.subgroups.split_to_fit` splits a level-1 cluster (without its vectors)."""
    return [[group[i] for i in part] for part in split_to_fit(list(range(len(group))), row_bytes, _split)]


def _split(items: list, n_groups: int) -> list[list]:
    """``items`` in ``n_groups`` consecutive groups of near-equal size."""
    size, extra = divmod(len(items), n_groups)
    groups, start = [], 0
    for g in range(n_groups):
        end = start + size + (1 if g < extra else 0)
        groups.append(items[start:end])
        start = end
    return groups


def _stand_in_entities(node: _Node) -> str:
    """A child's entity list as its parent's entities prompt shows it: up to 12 short names."""
    words = [w for t in node.member_titles for w in t.split() if w[:1].isupper()]
    return ", ".join(dict.fromkeys(words[:MAX_ENTITIES]))


def _stand_in_summary(titles: list[str]) -> str:
    """A summary of typical length made of the members' titles (what "Covers: ..." lists)."""
    text = "Topic area, questions answered and key terms. Covers: " + "; ".join(titles)
    while len(text) < SUMMARY_CHARS:
        text += " " + text
    return clip(text, SUMMARY_CHARS)
