"""What every stage asset shares: its corpus, artifacts, task runner, and how it reports."""

from __future__ import annotations

import functools
import time
from functools import cached_property
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AssetExecutionContext,
    Backoff,
    DagsterExecutionInterruptedError,
    DataVersion,
    Failure,
    Jitter,
    MaterializeResult,
    MetadataValue,
    RetryPolicy,
)
from dagster._utils.interrupts import pop_captured_interrupt  # no public form (dagster is pinned)

from ..artifacts import CorpusArtifacts
from ..recipe import StageSpec, upstream_of
from c2s_core.encoder import EmbedStats
from c2s_core.llm.base import (
    BudgetExceededError,
    CallStats,
    CompileProvider,
    CompileTaskError,
    TaskRunner,
    usage_delta,
    usage_sum,
    usage_totals,
)
from ..progress import LLMProgress, reporter, shard_reporter, stage_started
from ..resources import LLMResource, WorkspaceResource
from ..workspace import CorpusSpec
from c2s_core.text import sha256_hex

# LLM-backed stages retry transient failures; the per-item cache makes a retry redo only what
# is missing. An item that failed for good, or a spent budget, is not retried (see StageRunner).
LLM_RETRY = RetryPolicy(max_retries=3, delay=2, backoff=Backoff.EXPONENTIAL, jitter=Jitter.PLUS_MINUS)

# Marks a Failure whose description is complete for the user (it names its stage already).
SELF_DESCRIBED = "c2s/self_described"
INTERRUPTED = "c2s/interrupted"  # marks the Failure of a step stopped by Ctrl-C


def stops_on_interrupt(compute):
    """Dagster retries an interrupted step under its RetryPolicy; for c2s a Ctrl-C stops the run
    (everything completed is cached, so a rerun resumes). ``compute`` is a generator of the
    step's events, as every stage asset's body is."""
    @functools.wraps(compute)
    def run(*args, **kwargs):
        try:
            yield from compute(*args, **kwargs)
        except (DagsterExecutionInterruptedError, KeyboardInterrupt) as exc:
            raise Failure(description="interrupted; rerun to resume", allow_retries=False,
                          metadata={SELF_DESCRIBED: True, INTERRUPTED: True}) from exc
    return run


@dataclass
class StageRunner(TaskRunner):
    """A ``TaskRunner`` whose final errors fail the step at once, with a message naming the
    stage and the item: retrying cannot fix an answer the model keeps getting wrong, nor a spent
    budget. Transient API errors (429, 5xx, timeouts) propagate, so the step's RetryPolicy applies."""

    stage: str = ""

    def run(self, *args: Any, **kwargs: Any):
        try:
            return super().run(*args, **kwargs)
        except BudgetExceededError as exc:
            raise Failure(description=exc.describe(self.stage), metadata={SELF_DESCRIBED: True},
                          allow_retries=False) from exc
        except CompileTaskError as exc:
            if exc.transient:
                raise
            raise Failure(description=f"{exc} (in {self.stage}; fix the cause and rerun — completed items are "
                                      "cached)", metadata={SELF_DESCRIBED: True}, allow_retries=False) from exc


@dataclass(frozen=True)
class Shard:
    """The documents ``[start, stop)`` one step of a sharded stage works on."""

    index: int
    start: int
    stop: int
    documents: int  # in the whole corpus: what the stage's progress counts up to

    def rows(self, frame):
        """This shard's rows of a table in document order."""
        return frame.slice(self.start, self.stop - self.start)


@dataclass(frozen=True)
class ShardReport:
    """What one shard step did (its results are in the item cache): the collecting step adds
    these up into the stage's counts."""

    shard: Shard
    seconds: float
    llm_calls: dict[str, int]
    embeddings: dict[str, int]
    llm_usage: dict | None


@dataclass
class Stage:
    spec: StageSpec
    context: AssetExecutionContext
    workspace: WorkspaceResource
    started: float = field(default_factory=time.perf_counter)
    shard: Shard | None = None  # the documents of this step, in a shard step of a sharded stage
    shard_reports: list[ShardReport] | None = None  # in the step that collects a sharded stage
    llm_calls: CallStats = field(default_factory=CallStats)
    embeddings: EmbedStats = field(default_factory=EmbedStats)
    _provider: CompileProvider | None = field(default=None, init=False, repr=False)
    _usage_before: dict | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        # A Ctrl-C that lands while Dagster is between steps is only recorded, and Dagster drops
        # the record when the run ends: the run would go on to finish. Every stage starts by
        # taking it up, as if the signal had landed in the stage itself.
        if pop_captured_interrupt():
            raise DagsterExecutionInterruptedError(f"interrupted before {self.name}")
        stage_started(self.name)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def level(self) -> int:
        return self.spec.level

    @cached_property
    def corpus(self) -> CorpusSpec:
        return self.workspace.corpus(self.context.partition_key)

    @property
    def artifacts(self) -> CorpusArtifacts:
        return self.workspace.artifacts(self.context.partition_key)

    def runner(self, llm: LLMResource) -> TaskRunner:
        """Runs this stage's LLM tasks, cached per item under the stage's cache version."""
        provider = llm.for_corpus(self.corpus)
        if self._provider is None:
            # The run shares one provider; what it spends during this stage is this stage's.
            self._provider, self._usage_before = provider, usage_totals(provider.report())
        return StageRunner(provider, self.workspace.workspace.cache, self.spec.cache_version, self.llm_calls,
                           on_progress=self.progress, stage=self.name)

    @property
    def llm_usage(self) -> dict | None:
        """Calls, re-asks, retries, tokens and dollars of this stage (None: it used no LLM)."""
        if self._provider is None:
            return None
        return usage_delta(self._usage_before, usage_totals(self._provider.report()))

    def progress(self, done: int, total: int) -> None:
        llm = None
        if self._provider is not None:
            calls, usage = self._totals()[:2]
            llm = LLMProgress(calls.made, calls.cached, self.llm_calls.failed, usage["cost_usd"])
        report = shard_reporter(self.name, self.shard.index, self.shard.documents) if self.shard else reporter(self.name)
        report(done, total, llm)

    def shard_report(self) -> ShardReport:
        """What this shard step did, for the step that collects the stage."""
        seconds = time.perf_counter() - self.started
        self.context.log.info(f"{self.name} shard {self.shard.index} (documents {self.shard.start}-"
                              f"{self.shard.stop - 1}): {seconds:.2f}s, llm {self.llm_calls.as_dict()}, "
                              f"embeddings {self.embeddings.as_dict()}")
        return ShardReport(self.shard, seconds, self.llm_calls.as_dict(), self.embeddings.as_dict(), self.llm_usage)

    def _totals(self) -> tuple[CallStats, dict | None, EmbedStats, float]:
        """The stage's calls, usage, embeddings and start: this step's own, or, in the step that
        collects a sharded stage, its shards' (the collecting step reads their results back from
        the item cache, so its own cache hits are not counted again) plus anything it computed."""
        reports = self.shard_reports
        if reports is None:
            return self.llm_calls, self.llm_usage, self.embeddings, self.started
        calls = CallStats(made=self.llm_calls.made + sum(r.llm_calls["made"] for r in reports),
                          cached=sum(r.llm_calls["cached"] for r in reports))
        embeddings = EmbedStats(computed=self.embeddings.computed + sum(r.embeddings["computed"] for r in reports),
                                cached=sum(r.embeddings["cached"] for r in reports))
        usages = [u for u in (self.llm_usage, *(r.llm_usage for r in reports)) if u is not None]
        # Its seconds are the shards' work plus its own (shards may have run side by side).
        return calls, usage_sum(*usages) if usages else None, embeddings, self.started - sum(r.seconds for r in reports)

    def done(self, output_version: str, metadata: dict | None = None, **extra) -> MaterializeResult:
        """Record the stage and hand Dagster its metadata and data version: the hash of its output
        (``output_version``) chained with the data version of the stage before it on the spine,
        so the stages it reads further up are covered without edges of their own."""
        before = upstream_of(self.name)
        data_version = sha256_hex(output_version, self.artifacts.recorded_version(before) if before else "")[:24]
        self.artifacts.record_version(self.name, data_version)
        calls, usage, embeddings, started = self._totals()
        stats = self.artifacts.record_stage(
            self.name, started, llm_calls=calls.as_dict(), embeddings=embeddings.as_dict(),
            **({"llm_usage": usage} if usage is not None else {}),
        )
        meta = {
            "seconds": MetadataValue.float(stats["seconds"]),
            "llm_calls_made": calls.made,
            "llm_calls_cached": calls.cached,
            "embeddings_computed": embeddings.computed,
            "embeddings_cached": embeddings.cached,
            **({"shards": len(self.shard_reports)} if self.shard_reports is not None else {}),
            **(usage_metadata(usage) if usage is not None else {}),
            **(metadata or {}),
        }
        self.context.log.info(f"{self.name}: {stats['seconds']:.2f}s, llm {calls.as_dict()}, "
                              f"embeddings {embeddings.as_dict()}"
                              + (f", ${usage['cost_usd']:.4f}" if usage else ""))
        return MaterializeResult(metadata=meta, data_version=DataVersion(data_version), **extra)


def usage_metadata(usage: dict) -> dict:
    """A stage's LLM usage as Dagster metadata: API calls (re-asks included), HTTP retries,
    tokens by kind, dollars."""
    return {
        "llm_api_calls": int(usage["calls"]),
        "llm_reasks": int(usage["reasks"]),
        "llm_retries": int(usage["retries"]),
        "llm_input_tokens": int(usage["input_tokens"]),
        "llm_output_tokens": int(usage["output_tokens"]),
        "llm_cache_read_tokens": int(usage["cache_read_tokens"]),
        "llm_cache_write_tokens": int(usage["cache_write_tokens"]),
        "llm_cost_usd": MetadataValue.float(float(usage["cost_usd"])),
    }


def markdown_table(rows: list[dict], limit: int = 20) -> MetadataValue:
    if not rows:
        return MetadataValue.md("_none_")
    headers = list(rows[0])
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows[:limit]:
        lines.append("| " + " | ".join(str(row[h]).replace("|", "\\|") for h in headers) + " |")
    if len(rows) > limit:
        lines.append(f"\n… and {len(rows) - limit} more")
    return MetadataValue.md("\n".join(lines))
