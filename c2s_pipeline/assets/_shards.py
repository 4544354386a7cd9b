"""A sharded stage: one asset whose per-document work runs as many Dagster steps, so an executor
that spreads steps (Celery workers, Kubernetes Jobs) spreads one corpus's cards and embeddings.

The asset is backed by a graph of three ops (``doc_cards`` shown; ``doc_embeddings`` alike)::

    doc_cards_shards ──► doc_cards_shard[0000] ─┐
     (plans shards of    doc_cards_shard[0001] ─┼─► doc_cards_collect
      N documents)       …                     ─┘   (writes cards.parquet, materializes doc_cards)

A shard step computes its documents through the per-item cache, so a retried shard redoes only
what it had not finished, and hands on only its counts: its results stay in the cache (large
values never go through an IO manager). The collecting step then runs the stage's own compute
function, as the unsharded stage did, which finds every item in the cache and writes the
artifact in document order: the same bytes, whatever the shard size or the workers.
"""

import os
import warnings

from dagster import (
    AssetIn,
    AssetKey,
    AssetsDefinition,
    BetaWarning,
    Config,
    DynamicOut,
    DynamicOutput,
    Failure,
    In,
    Nothing,
    OpExecutionContext,
    Out,
    Output,
    config_mapping,
    graph_asset,
    op,
)
from pydantic import Field

from .. import progress
from ..partitions import corpus_partitions
from ..recipe import StageSpec, upstream_of
from ._stage import LLM_RETRY, SELF_DESCRIBED, Shard, ShardReport, Stage, stops_on_interrupt

DEFAULT_SHARD_SIZE = 2000
SHARD_SIZE_ENV = "C2S_SHARD_SIZE"


class ShardConfig(Config):
    """Run config of a sharded stage: ``ops: {doc_cards: {config: {documents_per_shard: 500}}}``."""

    documents_per_shard: int | None = Field(
        default=None, description=f"documents per shard step; unset: ${SHARD_SIZE_ENV}, else {DEFAULT_SHARD_SIZE}")


def shard_size(config: ShardConfig) -> int:
    """The shard size the run config sets, else ``$C2S_SHARD_SIZE``, else the default."""
    if config.documents_per_shard is not None:
        size, origin = config.documents_per_shard, "documents_per_shard in the run config"
    else:
        raw = os.environ.get(SHARD_SIZE_ENV, "").strip()
        if not raw:
            return DEFAULT_SHARD_SIZE
        try:
            size = int(raw)
        except ValueError:
            size = 0
        origin = f"${SHARD_SIZE_ENV}={raw!r}"
    if size < 1:
        raise Failure(description=f"{origin} is not a shard size: give a whole number of documents, 1 or more",
                      metadata={SELF_DESCRIBED: True}, allow_retries=False)
    return size


def plan_shards(documents: int, size: int) -> list[Shard]:
    """Consecutive slices of ``size`` documents (the last one shorter); one, possibly empty, at least."""
    starts = range(0, max(documents, 1), size)
    return [Shard(i, start, min(start + size, documents), documents) for i, start in enumerate(starts)]


def sharded_stage_asset(spec: StageSpec, collect_compute, shard_compute) -> AssetsDefinition:
    """The graph-backed asset of a sharded recipe row: ``shard_compute`` does a shard's documents,
    ``collect_compute`` (the row's ``compute``) writes the stage's artifact and materializes it."""
    before = upstream_of(spec.name)
    if spec.checks or spec.run_switches or before is None:
        raise ValueError(f"stage {spec.name}: a sharded stage follows another stage and takes no checks and no "
                         "run switches (c2s_pipeline/recipe.py)")
    resources = set(spec.resources)

    def stage_for(context: OpExecutionContext, **extra) -> tuple[Stage, dict]:
        given = {name: getattr(context.resources, name) for name in spec.resources}
        return Stage(spec, context, given["workspace"], **extra), given

    @op(name=f"{spec.name}_shards", required_resource_keys={"workspace"}, ins={"after": In(Nothing)},
        out=DynamicOut(Shard), description=f"Plans {spec.name}'s shards of the corpus's documents.")
    def plan(context: OpExecutionContext, config: ShardConfig):
        stage = Stage(spec, context, context.resources.workspace)
        documents, size = stage.artifacts.document_count(), shard_size(config)
        shards = plan_shards(documents, size)
        context.log.info(f"{spec.name}: {documents} documents in {len(shards)} shards of ≤{size}")
        progress.start_shards(spec.name, documents)
        for shard in shards:
            yield DynamicOutput(shard, mapping_key=f"{shard.index:04d}")

    def run_shard(context: OpExecutionContext, shard: Shard):
        stage, given = stage_for(context, shard=shard)
        shard_compute(stage, **given)
        yield Output(stage.shard_report())

    def collect(context: OpExecutionContext, reports: list[ShardReport]):
        reports = sorted(reports, key=lambda r: r.shard.index)
        stops = [0, *(r.shard.stop for r in reports)]
        if not reports or [r.shard.start for r in reports] != stops[:-1] or stops[-1] != reports[0].shard.documents:
            raise Failure(description=f"{spec.name}: the shards collected do not cover the documents "
                                      f"({[(r.shard.start, r.shard.stop) for r in reports]})")
        stage, given = stage_for(context, shard_reports=reports)
        result = collect_compute(stage, **given)
        with warnings.catch_warnings():  # data_version on Output is beta; it is what @asset's result carries
            warnings.simplefilter("ignore", BetaWarning)
            yield Output(None, metadata=result.metadata, data_version=result.data_version)

    if spec.task:  # a Ctrl-C stops the run instead of being retried; LLM steps share the llm pool
        run_shard, collect = stops_on_interrupt(run_shard), stops_on_interrupt(collect)
    shard_op = op(name=f"{spec.name}_shard", required_resource_keys=resources, pool=spec.pool,
                  retry_policy=LLM_RETRY if spec.task else None, out=Out(ShardReport),
                  description=f"{spec.name} for one shard's documents, through the per-item cache.")(run_shard)
    # Collecting computes what a lost cache entry left missing, so it keeps the stage's retries too.
    collect_op = op(name=f"{spec.name}_collect", required_resource_keys=resources, pool=spec.pool,
                    retry_policy=LLM_RETRY if spec.task else None, out=Out(Nothing),
                    description=f"Joins {spec.name}'s shards in document order and writes its artifact.")(collect)

    @config_mapping(config_schema=ShardConfig.to_config_schema())
    def shard_config(config: dict) -> dict:
        return {plan.name: {"config": config}}

    def graph(upstream):
        return collect_op(plan(upstream).map(shard_op).collect())

    graph.__name__ = spec.name
    return graph_asset(
        key=AssetKey(spec.name), group_name=spec.group, description=spec.description,
        partitions_def=corpus_partitions, ins={"upstream": AssetIn(key=AssetKey(before), dagster_type=Nothing)},
        code_version=spec.code_version, kinds=set(spec.kinds) or None, config=shard_config,
    )(graph)
