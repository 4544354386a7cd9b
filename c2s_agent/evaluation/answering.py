"""One answer from retrieved documents, the same way for every retrieval method.

Offline, the answer is composed extractively from the best :data:`COMPOSE_DOCS` pages, exactly
as the offline navigator answers, so an offline comparison isolates retrieval. With an LLM
(``anthropic`` or ``openai``) it is one chat call over the documents in context, each clipped so
the prompt stays bounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from c2s_core.llm.clients import ChatClient
from c2s_core.text import query_terms

from ..compose import compose_answer
from c2s_core.navigation.scoring import embedder
from ..tools import Page

ANSWERING = ("offline", "anthropic", "openai")  # who answers: extractive (no LLM) or an LLM
COMPOSE_DOCS = 3  # the offline navigator composes from its best three
DOC_CHARS = 6_000  # per document in an answer prompt (one get_document page)
try:  # the navigator's cap on query terms, so every method composes from the same terms
    from ..offline_navigator import MAX_TERMS
except ImportError:  # pragma: no cover
    MAX_TERMS = 12

ANSWER_SYSTEM = (
    "You answer questions about a company's documentation using only the documents provided. "
    "Cite every document you use as [doc_id]. If the documents do not answer the question, say so "
    "briefly instead of guessing."
)


@dataclass
class Answered:
    text: str
    usage: dict[str, Any] = field(default_factory=dict)  # llm_calls, tokens, cost_usd
    flags: list[str] = field(default_factory=list)  # refusal / truncation


class Answerer:
    """Answers a question from pages (best first) with one ``llm`` of :data:`ANSWERING`:
    ``offline`` (extractive, no LLM), ``anthropic`` or ``openai`` (one chat call; keys and base
    URLs as for ``c2s ask``)."""

    def __init__(self, llm: str = "offline", model: str | None = None, base_url: str | None = None,
                 api_key: str | None = None, retry: Any = None):
        if llm not in ANSWERING:
            raise ValueError(f"unknown answering LLM {llm!r}; choose from {', '.join(ANSWERING)}")
        self.llm = llm
        self._client: ChatClient | None = None
        if llm != "offline":
            from ..llm_navigator import client_for

            self._client = client_for(llm, model=model, base_url=base_url, api_key=api_key, retry=retry)

    @property
    def model(self) -> str:
        return self._client.model if self._client is not None else "offline"

    @property
    def client(self) -> ChatClient | None:
        """The chat client (None offline), for other callers of the same LLM to share."""
        return self._client

    def answer(self, question: str, pages: Sequence[Page]) -> Answered:
        if self._client is None:
            text = compose_answer(question, list(pages)[:COMPOSE_DOCS], query_terms(question)[:MAX_TERMS], embedder())
            return Answered(text, {"llm_calls": 0})
        documents = "\n\n".join(f'<document id="{p.doc_id}" title="{p.title}">\n{p.text[:DOC_CHARS]}\n</document>'
                                for p in pages)
        prompt = f"{documents}\n\nQuestion: {question}" if documents else f"(no documents found)\n\nQuestion: {question}"
        result = self._client.complete([{"role": "user", "content": prompt}], system=ANSWER_SYSTEM, max_tokens=1024)
        flags = ["refusal: the model declined to answer"] if result.refused else (
            [f"truncated: the answer was cut off ({result.stop_reason})"] if result.truncated else [])
        return Answered(result.text.strip(), {"llm_calls": 1, **result.usage.as_dict(),
                                              "cost_usd": round(result.cost, 6), "model": self.model}, flags)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
