"""The compile stages as Dagster assets, partitioned by corpus: one asset per row of the recipe
(``c2s_pipeline/recipe.py``), each depending on the stage before it; a sharded row's asset is a
graph of shard steps (``_shards.py``)."""

import importlib
import inspect

from dagster import AssetCheckSpec, AssetExecutionContext, AssetKey, AssetsDefinition, Config, asset

from ..partitions import corpus_partitions
from ..recipe import RECIPE, StageSpec, upstream_of
from ._shards import sharded_stage_asset
from ._stage import LLM_RETRY, Stage, stops_on_interrupt


class CompileConfig(Config):
    """Run switches of one compile, given to ``clusters_l1`` (where the build mode is decided) as
    run config: ``ops: {clusters_l1: {config: {full: true}}}``."""

    full: bool = False  # rebuild from scratch instead of updating the published tree


def compute_of(spec: StageSpec, name: str | None = None):
    """The function a recipe row names (``module:function`` under this package): its ``compute``,
    or ``name`` (its ``shard``)."""
    named = name or spec.compute
    module, _, function = named.partition(":")
    try:
        return getattr(importlib.import_module(f"{__name__}.{module}"), function)
    except (ImportError, AttributeError) as exc:
        raise LookupError(f"stage {spec.name}: no compute function {named!r} in c2s_pipeline.assets "
                          f"({exc})") from exc


def stage_asset(spec: StageSpec) -> AssetsDefinition:
    compute = compute_of(spec)
    if spec.shard:
        return sharded_stage_asset(spec, compute, compute_of(spec, spec.shard))
    before = upstream_of(spec.name)

    def run(context: AssetExecutionContext):
        resources = {name: getattr(context.resources, name) for name in spec.resources}
        stage = Stage(spec, context, resources["workspace"])
        if spec.run_switches:
            resources["config"] = CompileConfig(**context.op_execution_context.op_config)
        # A stage returns its result, or yields events first (staged_tree records its check
        # results before it fails on a blocking one); Dagster sees one generator either way.
        result = compute(stage, **resources)
        if inspect.isgenerator(result):
            yield from result
        else:
            yield result

    if spec.task:
        run = stops_on_interrupt(run)
    run.__name__ = spec.name
    return asset(
        key=AssetKey(spec.name), group_name=spec.group, description=spec.description,
        partitions_def=corpus_partitions, deps=[AssetKey(before)] if before else [],
        required_resource_keys=set(spec.resources), code_version=spec.code_version, kinds=set(spec.kinds) or None,
        pool=spec.pool, retry_policy=LLM_RETRY if spec.task else None,
        config_schema=CompileConfig.to_config_schema() if spec.run_switches else None,
        check_specs=[AssetCheckSpec(c.name, asset=spec.name, description=c.description, blocking=c.blocking)
                     for c in spec.checks] or None,
    )(run)


compile_assets = [stage_asset(spec) for spec in RECIPE]
