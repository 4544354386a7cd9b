"""An LLM judge of answers (``--judge anthropic|openai``): per (question, method) it grades
factuality against the gold answer, faithfulness to the context, context recall and context
precision, each a 1-5 integer scaled to 0-1 as ``(s - 1) / 4``; an answer whose faithfulness is
below :data:`HALLUCINATION_BELOW` counts as a hallucination.

Every method is judged on the same standardised context: the last :data:`CONTEXT_DOCS` documents
it put in context, concatenated and cut to :data:`CONTEXT_CHARS` characters in all. The judge
answers with a JSON object (validated with pydantic); a malformed reply is re-asked up to
:data:`MAX_REASKS` times, then recorded as the query's ``judge_error``. Verdicts are cached on
disk, keyed by judge model, prompt version, question, answer, context and gold answer, so a
re-run costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from c2s_core.llm.clients import ChatClient, LLMError, Usage

from .baselines import CONTEXT_DOCS, Corpus

JUDGES = ("none", "anthropic", "openai")
PROMPT_VERSION = "judge-1"
CONTEXT_CHARS = 8_000  # the standardised context, all documents together
MAX_REASKS = 2
HALLUCINATION_BELOW = 0.6  # scaled faithfulness
JUDGED = ("factuality", "faithfulness", "judge_context_recall", "judge_context_precision", "hallucination")

Score = Annotated[int, Field(ge=1, le=5, strict=True)]

SYSTEM = ("You grade answers to questions about a company's documentation. Be strict and consistent. "
          "Reply with one JSON object and nothing else.")
SCALES = {
    "factuality": "does the ANSWER state the facts of the REFERENCE answer without contradicting it? "
                  "5 = the same facts, nothing contradicting; 3 = partly; 1 = wrong or missing",
    "faithfulness": "is every claim of the ANSWER supported by the CONTEXT? 5 = all supported; "
                    "3 = about half; 1 = mostly unsupported or contradicted (a refusal that says the "
                    "context does not answer counts as supported)",
    "context_recall": "does the CONTEXT hold the information the REFERENCE answer needs? 5 = all of it; "
                      "3 = some; 1 = none",
    "context_precision": "how much of the CONTEXT is relevant to the QUESTION? 5 = nearly all; "
                         "3 = about half; 1 = none",
}
NEEDS_GOLD = ("factuality", "context_recall")


class Verdict(BaseModel):
    """The judge's reply; ``factuality`` and ``context_recall`` only when there is a gold answer."""

    model_config = ConfigDict(extra="ignore")
    factuality: Score | None = None
    faithfulness: Score
    context_recall: Score | None = None
    context_precision: Score


class JudgeReplyError(ValueError):
    """A judge reply that is not the JSON verdict asked for."""


def scale(score: int) -> float:
    return (score - 1) / 4


def standard_context(corpus: Corpus, doc_ids: Sequence[str]) -> str:
    """The last CONTEXT_DOCS documents in context, concatenated, cut to CONTEXT_CHARS."""
    parts = []
    for doc_id in list(doc_ids)[-CONTEXT_DOCS:]:
        i = corpus.positions.get(doc_id)
        if i is not None:
            parts.append(f"[{doc_id}] {' '.join(corpus.titles[i].split())}\n{corpus.texts[i]}")
    return "\n\n".join(parts)[:CONTEXT_CHARS]


def prompt(question: str, answer: str, context: str, gold: str | None) -> str:
    keys = [k for k in SCALES if gold is not None or k not in NEEDS_GOLD]
    scales = "\n".join(f"- {k}: {SCALES[k]}" for k in keys)
    shape = "{" + ", ".join(f'"{k}": <1-5>' for k in keys) + "}"
    reference = f"REFERENCE ANSWER:\n{gold}\n\n" if gold is not None else ""
    return (f"Grade the ANSWER on these integer scales from 1 to 5:\n{scales}\n\n"
            f"QUESTION:\n{question}\n\n{reference}CONTEXT (the documents the answer was given):\n"
            f"<context>\n{context or '(no documents)'}\n</context>\n\nANSWER:\n<answer>\n{answer or '(empty)'}\n"
            f"</answer>\n\nReply with only the JSON object {shape}.")


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def parse_verdict(text: str, has_gold: bool) -> Verdict:
    """The verdict in a judge reply; raises :class:`JudgeReplyError` saying what is wrong."""
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise JudgeReplyError("no JSON object in the reply")
    try:
        data = json.loads(body[start:end + 1])
    except json.JSONDecodeError as e:
        raise JudgeReplyError(f"not valid JSON ({e.msg})") from None
    try:
        verdict = Verdict.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'reply'}: {err['msg']}" for err in e.errors())
        raise JudgeReplyError(problems) from None
    missing = [k for k in NEEDS_GOLD if has_gold and getattr(verdict, k) is None]
    if missing:
        raise JudgeReplyError(f"{', '.join(missing)}: Field required")
    return verdict


class Judge:
    """Grades answers with one LLM (``anthropic`` or ``openai``), caching verdicts under
    ``cache_dir/judge``."""

    def __init__(self, provider: str, corpus: Corpus, *, model: str | None = None, base_url: str | None = None,
                 cache_dir: Path | None = None, api_key: str | None = None, retry: Any = None,
                 client: ChatClient | None = None):
        if provider not in JUDGES or provider == "none":
            raise ValueError(f"unknown judge {provider!r}; choose from {', '.join(JUDGES)}")
        from ..llm_navigator import client_for

        self.provider = provider
        self.corpus = corpus
        self.client = client or client_for(provider, model=model, base_url=base_url, api_key=api_key, retry=retry)
        self.cache = (cache_dir / "judge") if cache_dir else None
        self.calls = 0
        self.cache_hits = 0
        self.errors = 0
        self.usage = Usage()
        self.cost = 0.0

    @property
    def model(self) -> str:
        return self.client.model

    def key(self, question: str, answer: str, context: str, gold: str | None) -> str:
        payload = json.dumps([self.model, PROMPT_VERSION, question, answer, context, gold], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def assess(self, question: str, answer: str, context_ids: Sequence[str], gold: str | None) -> dict[str, Any]:
        """The scaled scores of one answer (keys of :data:`JUDGED`), or ``judge_error``."""
        context = standard_context(self.corpus, context_ids)
        key = self.key(question, answer, context, gold)
        path = self.cache / f"{key}.json" if self.cache else None
        if path and path.is_file():
            try:
                verdict = Verdict.model_validate_json(path.read_text(encoding="utf-8"))
                self.cache_hits += 1
                return {**self.scores(verdict), "judge_cached": True}
            except (OSError, ValidationError):
                pass  # an unreadable entry is judged again
        try:
            verdict = self._ask(prompt(question, answer, context, gold), gold is not None)
        except (JudgeReplyError, LLMError) as e:
            self.errors += 1
            return {k: None for k in JUDGED} | {"judge_error": f"{type(e).__name__}: {e}"}
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(verdict.model_dump_json(), encoding="utf-8")
            tmp.replace(path)
        return {**self.scores(verdict), "judge_cached": False}

    def _ask(self, text: str, has_gold: bool) -> Verdict:
        messages: list[dict[str, Any]] = [{"role": "user", "content": text}]
        for attempt in range(MAX_REASKS + 1):
            result = self.client.complete(messages, system=SYSTEM, max_tokens=300, json_mode=True, temperature=0.0)
            self.calls += 1
            self.usage = self.usage + result.usage
            self.cost += result.cost
            try:
                return parse_verdict(result.text, has_gold)
            except JudgeReplyError as e:
                if attempt == MAX_REASKS:
                    raise JudgeReplyError(f"{e} (after {MAX_REASKS} re-asks)") from None
                messages += [{"role": "assistant", "content": result.text or "(empty reply)"},
                             {"role": "user", "content": f"That reply is not usable: {e}. Reply with only the "
                                                         "JSON object asked for, integers from 1 to 5."}]
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def scores(verdict: Verdict) -> dict[str, float | None]:
        faithful = scale(verdict.faithfulness)
        return {
            "factuality": scale(verdict.factuality) if verdict.factuality is not None else None,
            "faithfulness": faithful,
            "judge_context_recall": scale(verdict.context_recall) if verdict.context_recall is not None else None,
            "judge_context_precision": scale(verdict.context_precision),
            "hallucination": float(faithful < HALLUCINATION_BELOW),
        }

    def summary(self) -> dict[str, Any]:
        return {"provider": self.provider, "model": self.model, "prompt_version": PROMPT_VERSION,
                "calls": self.calls, "cache_hits": self.cache_hits, "errors": self.errors,
                **self.usage.as_dict(), "cost_usd": round(self.cost, 6)}

    def close(self) -> None:
        self.client.close()
