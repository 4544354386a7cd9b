"""What every stage asset shares: its corpus, artifacts, task runner, and how it reports."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from dagster import AssetExecutionContext, Backoff, DataVersion, Jitter, MaterializeResult, MetadataValue, RetryPolicy

from ..artifacts import CorpusArtifacts
from ..encoder import EmbedStats
from ..llm.base import CallStats, TaskRunner
from ..progress import reporter
from ..resources import LLMResource, WorkspaceResource
from ..workspace import CorpusSpec

# LLM-backed stages retry transient failures; the per-item cache makes a retry redo only what
# is missing.
LLM_RETRY = RetryPolicy(max_retries=3, delay=2, backoff=Backoff.EXPONENTIAL, jitter=Jitter.PLUS_MINUS)


@dataclass
class Stage:
    name: str
    context: AssetExecutionContext
    workspace: WorkspaceResource
    started: float = field(default_factory=time.perf_counter)
    llm_calls: CallStats = field(default_factory=CallStats)
    embeddings: EmbedStats = field(default_factory=EmbedStats)

    @property
    def corpus(self) -> CorpusSpec:
        return self.workspace.corpus(self.context.partition_key)

    @property
    def artifacts(self) -> CorpusArtifacts:
        return self.workspace.artifacts(self.context.partition_key)

    def runner(self, llm: LLMResource, version: str) -> TaskRunner:
        return TaskRunner(llm.compile_provider, self.workspace.workspace.cache, version, self.llm_calls,
                          on_progress=self.progress)

    def progress(self, done: int, total: int) -> None:
        reporter(self.name)(done, total)

    def done(self, data_version: str, metadata: dict | None = None, **extra) -> MaterializeResult:
        stats = self.artifacts.record_stage(
            self.name, self.started, llm_calls=self.llm_calls.as_dict(), embeddings=self.embeddings.as_dict()
        )
        meta = {
            "seconds": MetadataValue.float(stats["seconds"]),
            "llm_calls_made": self.llm_calls.made,
            "llm_calls_cached": self.llm_calls.cached,
            "embeddings_computed": self.embeddings.computed,
            "embeddings_cached": self.embeddings.cached,
            **(metadata or {}),
        }
        self.context.log.info(f"{self.name}: {stats['seconds']:.2f}s, llm {self.llm_calls.as_dict()}, "
                              f"embeddings {self.embeddings.as_dict()}")
        return MaterializeResult(metadata=meta, data_version=DataVersion(data_version), **extra)


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
