"""Dagster resources: the workspace (registry, artifacts, cache), the LLM provider, the encoder.

Providers swap by configuration: the ``offline`` provider is the embedded default.
"""

from __future__ import annotations

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from .artifacts import CorpusArtifacts
from c2s_core.encoder import BATCH_SIZE, BUNDLED_MODEL, Encoder
from c2s_core.llm.base import CompileProvider
from c2s_core.llm.settings import build_provider
from .workspace import CorpusSpec, LLMSettings, Workspace, default_home


class WorkspaceResource(ConfigurableResource):
    """The c2s home: corpus registry (corpora.yaml), stage artifacts, per-item cache."""

    home: str | None = Field(None, description="the c2s home (default: $DAGSTER_HOME, else ./.c2s)")

    _workspace: Workspace | None = PrivateAttr(default=None)

    @property
    def workspace(self) -> Workspace:
        if self._workspace is None:
            self._workspace = Workspace(self.home or default_home())
        return self._workspace

    def corpus(self, name: str) -> CorpusSpec:
        return self.workspace.corpus(name)

    def artifacts(self, name: str) -> CorpusArtifacts:
        return CorpusArtifacts(self.workspace.artifacts(name))

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        # A step lets go of the SQLite cache when it ends, not whenever the garbage collector runs:
        # a connection left open keeps the old WAL mapped and hides what later happens to the file.
        if self._workspace is not None:
            self._workspace.close()


class LLMResource(ConfigurableResource):
    """Which LLM does the compile tasks (cards, summaries, repartition, entities).

    A field left unset takes the corpus registration's value (``LLMSettings`` in corpora.yaml),
    so a run launched with no config — a backfill, the UI launchpad — compiles a corpus exactly
    as the runs that the CLI, the sensor and the schedule launch, which pass the registration
    as this resource's run config. API keys come from the environment: ANTHROPIC_API_KEY /
    OPENAI_API_KEY (or ``api_key``, e.g. ``EnvVar("ANTHROPIC_API_KEY")``)."""

    provider: str | None = Field(None, description="offline (extractive, no network) | anthropic | openai")
    model: str | None = Field(None, description="model for the compile tasks (anthropic default: "
                                                "claude-sonnet-4-6; openai: required)")
    card_model: str | None = Field(None, description="a cheaper model for the per-document cards (default: model)")
    base_url: str | None = Field(None, description="API endpoint (default: ANTHROPIC_BASE_URL / OPENAI_BASE_URL, "
                                                   "else the provider's own)")
    api_key: str | None = Field(None, description="API key, e.g. EnvVar('ANTHROPIC_API_KEY') (default: the "
                                                  "provider's environment variable)")
    concurrency: int | None = Field(None, description="LLM calls in flight at once")
    max_cost: float | None = Field(None, description="US dollars one run may spend; the run stops cleanly "
                                                     "(resumable from the cache) before crossing it")
    timeout: float = Field(300.0, description="seconds before one HTTP request times out")
    max_retries: int = Field(5, description="retries of one request on 429 / 5xx / overloaded / timeouts")

    _providers: dict[str, CompileProvider] = PrivateAttr(default_factory=dict)

    def settings(self, registered: LLMSettings | None = None) -> LLMSettings:
        """The registration's settings with this run's configured fields on top."""
        base = (registered or LLMSettings()).model_dump()
        chosen = {name: getattr(self, name) for name in LLMSettings.model_fields if getattr(self, name) is not None}
        return LLMSettings.model_validate({**base, **chosen})

    def for_corpus(self, spec: CorpusSpec) -> CompileProvider:
        """The run's provider for ``spec``: one per settings, shared by every stage of the run."""
        return self._shared(self.settings(spec.llm))

    @property
    def compile_provider(self) -> CompileProvider:
        """The provider of this resource's own fields, for direct use outside a corpus run."""
        return self._shared(self.settings())

    def _shared(self, settings: LLMSettings) -> CompileProvider:
        key = settings.model_dump_json()
        if key not in self._providers:
            self._providers[key] = self.build_provider(settings)
        return self._providers[key]

    def build_provider(self, settings: LLMSettings | None = None, require_key: bool = True) -> CompileProvider:
        """A provider for ``settings`` (default: this resource's own fields); raises a one-line
        ``LLMError``/``ValueError`` when it is unusable (e.g. no API key). ``require_key=False``
        builds one that names the provider, model and prompt versions (cache keys, prices) but
        must not call the API: a dry run."""
        return build_provider(settings or self.settings(), api_key=self.api_key or None, timeout=self.timeout,
                              max_retries=self.max_retries, require_key=require_key)

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        for provider in self._providers.values():
            close = getattr(provider, "close", None)
            if close is not None:
                close()
        self._providers.clear()


class EncoderResource(ConfigurableResource):
    """The sentence encoder; the bundled all-MiniLM-L6-v2 loads offline, and only when needed."""

    model: str = Field(BUNDLED_MODEL, description="'bundled:all-MiniLM-L6-v2' or a local model directory")
    batch_size: int = Field(BATCH_SIZE, description="texts the model runs at once (memory grows with it)")
    device: str = "cpu"

    _encoder: Encoder | None = PrivateAttr(default=None)

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = Encoder(self.model, self.batch_size, self.device)
        return self._encoder
