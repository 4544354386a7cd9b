"""Dagster resources: the workspace (registry, artifacts, cache), the LLM provider, the encoder.

Providers swap by configuration: ``LLMResource(provider="offline")`` is the embedded default.
"""

from __future__ import annotations

import os

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from .artifacts import CorpusArtifacts
from .encoder import BUNDLED_MODEL, Encoder
from .llm.base import CompileProvider
from .llm.offline import OfflineProvider
from .workspace import CorpusSpec, Workspace, default_home

PROVIDERS = ("offline", "anthropic", "openai")

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
    """Which LLM does the compile tasks (cards, summaries, repartition, entities).

    ``offline`` needs nothing. ``anthropic`` reads ANTHROPIC_API_KEY (or ``api_key``, e.g.
    ``EnvVar("ANTHROPIC_API_KEY")``); ``openai`` reads OPENAI_API_KEY and, with ``base_url`` (or
    OPENAI_BASE_URL), serves any OpenAI-compatible server such as vLLM, Ollama or llama.cpp."""

    provider: str = Field("offline", description="offline (extractive, no network) | anthropic | openai")
    model: str = Field("", description="model for the compile tasks (anthropic default: claude-sonnet-4-6; "
                                       "openai: required)")
    card_model: str | None = Field(None, description="a cheaper model for the per-document cards "
                                                        "(default: model)")
    base_url: str | None = Field(None, description="API endpoint (default: ANTHROPIC_BASE_URL / OPENAI_BASE_URL, "
                                                      "else the provider's own)")
    api_key: str | None = Field(None, description="API key, e.g. EnvVar('ANTHROPIC_API_KEY') (default: the "
                                                     "provider's environment variable)")
    concurrency: int = Field(20, description="LLM calls in flight at once")
    timeout: float = Field(300.0, description="seconds before one HTTP request times out")
    max_retries: int = Field(5, description="retries of one request on 429 / 5xx / overloaded / timeouts")
    max_cost: float | None = Field(None, description="US dollars one run may spend; the run stops cleanly "
                                                     "(resumable from the cache) before crossing it")

    _provider: CompileProvider | None = PrivateAttr(default=None)

    def build_provider(self, require_key: bool = True) -> CompileProvider:
        """A provider from this configuration; raises a one-line ``LLMError``/``ValueError`` when it
        is unusable (e.g. no API key). ``require_key=False`` builds one that names the provider,
        model and prompt versions (cache keys, prices) but must not call the API: a dry run."""
        if self.provider not in PROVIDERS:
            raise ValueError(f"unknown LLM provider {self.provider!r}; choose one of: {', '.join(PROVIDERS)}")
        if self.provider == "offline":
            return OfflineProvider()
        from .llm.clients import CLIENTS, make_client
        from .llm.remote import RemoteProvider

        api_key = self.api_key or None
        if not require_key and not api_key and not os.environ.get(CLIENTS[self.provider].key_env):
            api_key = "unused-by-a-dry-run"
        client = make_client(self.provider, self.model or None, api_key=api_key, base_url=self.base_url or None,
                             timeout=self.timeout, max_retries=self.max_retries)
        return RemoteProvider(client, card_model=self.card_model or None, concurrency=self.concurrency,
                              max_cost=self.max_cost)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._provider = self.build_provider()

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        close = getattr(self._provider, "close", None)
        if close is not None:
            close()

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
