"""Dagster resources: the workspace (registry, artifacts, cache), the LLM provider, the encoder.

Providers swap by configuration: ``LLMResource(provider="offline")`` is the embedded default.
"""

from __future__ import annotations

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from .artifacts import CorpusArtifacts
from .encoder import BUNDLED_MODEL, Encoder
from .llm.base import CompileProvider
from .llm.offline import OfflineProvider
from .workspace import CorpusSpec, Workspace, default_home

PROVIDERS = ("offline",)


class WorkspaceResource(ConfigurableResource):
    """The c2s home: corpus registry (corpora.yaml), stage artifacts, per-item cache."""

    home: str = Field(default_factory=lambda: str(default_home()))

    _workspace: Workspace | None = PrivateAttr(default=None)

    @property
    def workspace(self) -> Workspace:
        if self._workspace is None:
            self._workspace = Workspace(self.home)
        return self._workspace

    def corpus(self, name: str) -> CorpusSpec:
        return self.workspace.corpus(name)

    def artifacts(self, name: str) -> CorpusArtifacts:
        return CorpusArtifacts(self.workspace.artifacts(name))


class LLMResource(ConfigurableResource):
    """Which LLM does the compile tasks (cards, summaries, repartition, entities)."""

    provider: str = Field("offline", description="offline (extractive, no network)")
    model: str = Field("", description="model name for real providers")

    _provider: CompileProvider | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        if self.provider not in PROVIDERS:
            raise ValueError(f"unknown LLM provider {self.provider!r}; choose one of: {', '.join(PROVIDERS)}")
        self._provider = OfflineProvider()

    @property
    def compile_provider(self) -> CompileProvider:
        if self._provider is None:
            self.setup_for_execution(None)  # direct use outside a run
        return self._provider


class EncoderResource(ConfigurableResource):
    """The sentence encoder; the bundled all-MiniLM-L6-v2 loads offline, and only when needed."""

    model: str = Field(BUNDLED_MODEL, description="'bundled:all-MiniLM-L6-v2' or a local model directory")
    batch_size: int = 64
    device: str = "cpu"

    _encoder: Encoder | None = PrivateAttr(default=None)

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = Encoder(self.model, self.batch_size, self.device)
        return self._encoder
