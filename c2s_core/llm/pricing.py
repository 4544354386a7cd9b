"""What LLM calls used (``Usage``) and what they cost: a per-model price table in US dollars per million tokens.

``Usage.input_tokens`` counts uncached input only (the Anthropic convention; the OpenAI client
subtracts cached tokens from ``prompt_tokens``), so the four token kinds never overlap and
``cost`` is a plain weighted sum. Cache writes are priced at the 5-minute TTL rate (1.25× input).

Models not in the table (local vLLM / Ollama / llama.cpp servers, anything new) cost nothing by
default; ``price_for(model).known`` tells whether a price was found, and ``register_price``
adds or overrides one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Tokens of one or more calls. ``input_tokens`` is uncached input only, so the four kinds
    never overlap; ``total_input_tokens`` adds the cache reads and writes back."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
                     self.cache_read_tokens + other.cache_read_tokens, self.cache_write_tokens + other.cache_write_tokens)

    def __radd__(self, other: Any) -> "Usage":
        if other == 0:  # sum(usages)
            return self
        return self.__add__(other)

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def as_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens, "cache_write_tokens": self.cache_write_tokens}



@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    known: bool = True
    # The shortest prefix the provider caches: a marked prefix shorter than this is billed in
    # full on every call (Anthropic's documented minimum cacheable prompt length per model;
    # OpenAI caches prompts from 1,024 tokens on its own).
    cache_min_tokens: int = 1024


FREE = Price(0.0, 0.0, 0.0, 0.0, known=False)


def _claude(input_: float, output: float, cache_min_tokens: int = 1024) -> Price:
    # Anthropic: cache reads bill at 0.1× input, 5-minute cache writes at 1.25× input.
    return Price(input_, output, round(input_ * 0.1, 4), round(input_ * 1.25, 4), cache_min_tokens=cache_min_tokens)


PRICES: dict[str, Price] = {
    # Claude (Anthropic list prices).
    "claude-opus-4-6": _claude(5.0, 25.0, 4096),
    "claude-opus-4-5": _claude(5.0, 25.0, 4096),
    "claude-opus-4-1": _claude(15.0, 75.0),
    "claude-opus-4-0": _claude(15.0, 75.0),
    "claude-opus-4": _claude(15.0, 75.0),
    "claude-sonnet-4-6": _claude(3.0, 15.0),
    "claude-sonnet-4-5": _claude(3.0, 15.0),
    "claude-sonnet-4-0": _claude(3.0, 15.0),
    "claude-sonnet-4": _claude(3.0, 15.0),
    "claude-3-7-sonnet": _claude(3.0, 15.0),
    "claude-haiku-4-5": _claude(1.0, 5.0, 4096),
    "claude-3-5-haiku": _claude(0.8, 4.0, 2048),
    # OpenAI (cached input bills at the discounted rate; no separate write charge).
    "gpt-4o": Price(2.5, 10.0, 1.25, 0.0),
    "gpt-4o-mini": Price(0.15, 0.6, 0.075, 0.0),
    "gpt-4.1": Price(2.0, 8.0, 0.5, 0.0),
    "gpt-4.1-mini": Price(0.4, 1.6, 0.1, 0.0),
    "gpt-4.1-nano": Price(0.1, 0.4, 0.025, 0.0),
}

# Dated snapshots and aliases: "claude-haiku-4-5-20251001", "claude-sonnet-4-5@20250929",
# "gpt-4o-2024-08-06", "anthropic/claude-sonnet-4-6" all resolve to their base name.
_DATED = re.compile(r"(?:[-@]\d{8}|-\d{4}-\d{2}-\d{2}|-latest)$")


def register_price(model: str, price: Price) -> None:
    PRICES[model] = price


def price_for(model: str) -> Price:
    name = model.strip().lower().rsplit("/", 1)[-1]
    for candidate in (name, _DATED.sub("", name)):
        if candidate in PRICES:
            return PRICES[candidate]
    return FREE


def cost(model: str, usage: Usage) -> float:
    """US dollars for ``usage`` on ``model`` (0.0 for a model without a known price)."""
    p = price_for(model)
    return (usage.input_tokens * p.input + usage.output_tokens * p.output
            + usage.cache_read_tokens * p.cache_read + usage.cache_write_tokens * p.cache_write) / 1_000_000
