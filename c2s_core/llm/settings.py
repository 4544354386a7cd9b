"""Which LLM does the compile tasks (``LLMSettings``) and the provider built from them, the one
way every caller builds it: the compiler's Dagster resource and the RAPTOR baseline alike."""

from __future__ import annotations

import os

from pydantic import BaseModel, Field, field_validator

from .base import CompileProvider
from .offline import OfflineProvider

PROVIDERS = ("offline", "anthropic", "openai")


class LLMSettings(BaseModel):
    """Which LLM does a corpus's compile tasks; API keys never live here (they stay in the
    environment: ANTHROPIC_API_KEY / OPENAI_API_KEY)."""

    provider: str = Field("offline", description="offline (extractive, no network) | anthropic | openai")
    model: str = Field("", description="model for the compile tasks (anthropic default: claude-sonnet-4-6; "
                                       "openai: required)")
    card_model: str | None = Field(None, description="a cheaper model for the per-document cards (default: model)")
    base_url: str | None = Field(None, description="API endpoint (default: the provider's own)")
    concurrency: int = Field(20, ge=1, description="LLM calls in flight at once")
    max_cost: float | None = Field(None, ge=0.0, description="US dollars one run may spend")

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, provider: str) -> str:
        if provider not in PROVIDERS:
            raise ValueError(f"unknown LLM provider {provider!r}; choose one of: {', '.join(PROVIDERS)}")
        return provider


def build_provider(settings: LLMSettings, api_key: str | None = None, timeout: float = 300.0,
                   max_retries: int = 5, require_key: bool = True) -> CompileProvider:
    """A provider for ``settings``; raises a one-line ``LLMError``/``ValueError`` when it is
    unusable (e.g. no API key). ``require_key=False`` builds one that names the provider, model
    and prompt versions (cache keys, prices) but must not call the API: a dry run."""
    if settings.provider == "offline":
        return OfflineProvider()
    from .clients import CLIENTS, make_client
    from .remote import RemoteProvider

    if not require_key and not api_key and not os.environ.get(CLIENTS[settings.provider].key_env):
        api_key = "unused-by-a-dry-run"
    client = make_client(settings.provider, settings.model or None, api_key=api_key,
                         base_url=settings.base_url or None, timeout=timeout, max_retries=max_retries)
    return RemoteProvider(client, card_model=settings.card_model or None, concurrency=settings.concurrency,
                          max_cost=settings.max_cost)
