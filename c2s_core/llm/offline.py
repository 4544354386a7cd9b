"""The embedded default provider: every compile task done extractively and deterministically.

Cards come from the document alone; cluster summaries name what is distinctive of each cluster
against its siblings (class-based TF-IDF) plus member titles, which is what routing needs;
repartition reads the embedding evidence the pipeline attaches; entities come from patterns.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from typing import Callable, Sequence, TypeVar

from pydantic import BaseModel

from .. import patterns
from ..identifiers import extract_identifiers
from ..text import candidate_phrases, class_tfidf, clip, key_phrases, sentences, sha256_hex, slugify, strip_emphasis
from .base import OnResult
from .schemas import (
    MAX_DOC_TYPES,
    MAX_ENTITIES,
    Card,
    CardInput,
    ClusterInput,
    ClusterSummary,
    Entities,
    EntitiesInput,
    RepartitionInput,
    RepartitionVerdict,
)

# Bumped when the output for the same input changes (card-6, summary-5, entities-3: identifiers
# keep their inner underscores), so cached results from before are not reused.
PROMPT_VERSIONS = {"card": "offline-card-6", "summary": "offline-summary-5", "repartition": "offline-repartition-2",
                   "entities": "offline-entities-3"}
T = TypeVar("T")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)

# Thresholds on the embedding evidence. Sibling centroids this close read as one topic, and a
# cluster whose members sit this far below the level's typical cohesion reads as several topics.
CONFUSABLE_SIMILARITY = 0.9
MIXED_COHESION_MADS = 3.0


class OfflineProvider:
    name = "offline"
    model = "extractive"

    def __init__(self) -> None:
        # The last batch of summaries' terms, by item: repartition re-summarises the clusters it
        # touched right after its level's summaries, against the same siblings, so only the
        # touched clusters' terms are new. One level's worth is held at a time.
        self._last_terms: dict[str, Counter[str]] = {}

    def prompt_version(self, task: str) -> str:
        return PROMPT_VERSIONS[task]

    def batch_context(self, task: str, items: Sequence[BaseModel]) -> str:
        # A summary's distinctive terms are measured against its siblings, so they key it too.
        if task == "summary":
            return sha256_hex(*(item.model_dump_json() for item in items))
        return ""

    # -- cards -------------------------------------------------------------------------------
    def cards(self, items: Sequence[CardInput], only: Sequence[int], on_result: OnResult | None = None) -> dict[int, Card]:
        return _each(only, lambda i: make_card(items[i]), on_result)

    # -- cluster summaries ---------------------------------------------------------------------
    def summaries(self, items: Sequence[ClusterInput], only: Sequence[int],
                  on_result: OnResult | None = None) -> dict[int, ClusterSummary]:
        keys = [sha256_hex(item.model_dump_json()) for item in items]
        terms = {key: self._last_terms[key] if key in self._last_terms else _cluster_terms(item)
                 for key, item in zip(keys, items)}
        self._last_terms = terms
        classes = [terms[key] for key in keys]
        # A term every sibling uses (the product's own name, say) tells siblings apart by nothing.
        everywhere = set.intersection(*(set(c) for c in classes)) if len(classes) > 1 else set()
        weights = class_tfidf([Counter({t: n for t, n in c.items() if t not in everywhere}) for c in classes])
        return _each(only, lambda i: _summarise(items[i], weights[i]), on_result)

    # -- verify and repartition ----------------------------------------------------------------
    def repartitions(self, items: Sequence[RepartitionInput], only: Sequence[int],
                     on_result: OnResult | None = None) -> dict[int, RepartitionVerdict]:
        return _each(only, lambda i: _judge_partition(items[i]), on_result)

    # -- entities ------------------------------------------------------------------------------
    def entities(self, items: Sequence[EntitiesInput], only: Sequence[int],
                 on_result: OnResult | None = None) -> dict[int, Entities]:
        return _each(only, lambda i: Entities(
            entities=patterns.rank_entities([items[i].summary, *items[i].texts], MAX_ENTITIES),
            doc_types=patterns.doc_types(items[i].texts, MAX_DOC_TYPES),
        ), on_result)

    # -- accounting ----------------------------------------------------------------------------
    def report(self) -> dict:
        """No API, no tokens, no cost."""
        return {"provider": self.name, "model": self.model, "card_model": self.model, "tasks": {}, "cost_usd": 0.0,
                "priced": True}


def _each(only: Sequence[int], make: Callable[[int], T], on_result: OnResult | None) -> dict[int, T]:
    """Results for ``only``, each reported as it is made."""
    out = {}
    for i in only:
        out[i] = make(i)
        if on_result is not None:
            on_result(i, out[i])
    return out


def make_card(item: CardInput) -> Card:
    text = item.text
    heading = _HEADING.search(text)
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    title = item.title or (heading.group(1) if heading else first_line)
    title = clip(strip_emphasis(title), 120) or item.doc_id
    body = _HEADING.sub("", text, count=1) if heading and not item.title else text
    one_line = clip(_lead_sentence(body, title) or title, 200)
    # Identifiers come from the whole document: the ones that matter often sit deep in it.
    identifiers = extract_identifiers(f"{text}\n{item.tail}", exclude=f"{title}\n{one_line}")
    return Card(title=title, one_line=one_line, phrases=key_phrases(title, body), identifiers=identifiers)


def _lead_sentence(body: str, title: str) -> str:
    """The first real sentence: skips the title repeated, notes like 'Important:', and fragments."""
    for sentence in sentences(body)[:12]:
        sentence = re.sub(r"^(important|note|tip|warning)\s*:\s*", "", sentence, flags=re.I)
        if sentence.lower() == title.lower() or len(sentence.split()) < 5 or sentence.startswith("|"):
            continue
        return sentence
    return ""


# The summary template's own words: higher levels read child summaries, where these say nothing.
_TEMPLATE_WORDS = {"topic", "area", "answers", "covers", "key", "terms", "questions", "documents", "topics"}
_QUESTION_TYPES = re.compile(r"Question types: [^.]*\.")


def _cluster_terms(item: ClusterInput) -> Counter[str]:
    counts: Counter[str] = Counter()
    sources = [(title, 3) for title in item.member_titles]
    sources += [(_QUESTION_TYPES.sub(" ", m.text), 1) for m in item.members]
    for text, weight in sources:
        for phrase in candidate_phrases(text, max_words=2):
            if not _TEMPLATE_WORDS & set(phrase.split()):
                counts[phrase] += weight
    return counts


def _top_terms(weights: dict[str, float], limit: int) -> list[str]:
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    chosen: list[str] = []
    for term, _ in ranked:
        # Skip a word already inside a chosen phrase, and a phrase repeating chosen words.
        if any(term in c.split() or set(term.split()) <= set(c.split()) for c in chosen):
            continue
        chosen = [c for c in chosen if not set(c.split()) < set(term.split())] + [term]
        if len(chosen) == limit:
            break
    return chosen


def _summarise(item: ClusterInput, weights: dict[str, float]) -> ClusterSummary:
    terms = _top_terms(weights, 12)
    head = terms[:3] or [item.member_titles[0].lower()]
    titles = [clip(t, 70) for t in item.member_titles]
    kinds = patterns.doc_types([m.text for m in item.members], 3)
    noun = "documents" if item.level == 1 else "topics"
    description = clip(
        f"{_join(head).capitalize()}: {len(item.member_titles)} {noun} on {', '.join(terms[3:7] or head)}"
        f"; e.g. {'; '.join(titles[:3])}.",
        380,
    )
    summary = clip(
        " ".join(
            part
            for part in (
                f"Topic area: {_join(head)}.",
                f"Question types: {', '.join(kinds)}." if kinds else "",
                f"Key terms: {', '.join(terms)}.",
                # A leaf lists its documents right below; higher nodes name what they hold here.
                f"Covers: {'; '.join(titles[:8])}." if item.level > 1 else "",
            )
            if part
        ),
        1000,
    )
    return ClusterSummary(
        title=clip(", ".join(t.capitalize() if i == 0 else t for i, t in enumerate(head)), 110),
        description=description,
        summary=summary,
        label=slugify("-".join(head[:3]), 50) or "group",
        key_terms=terms,
    )


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _judge_partition(item: RepartitionInput) -> RepartitionVerdict:
    """Confusable: sibling centroids nearly identical. Mixed: cohesion far below the level's
    median. The pipeline resolves both (merge or re-split) and re-summarises what it touched."""
    confusable = [(p.a, p.b) for p in item.similar_pairs if p.similarity >= CONFUSABLE_SIMILARITY]
    cohesions = [c.cohesion for c in item.clusters]
    mixed: list[str] = []
    if len(cohesions) >= 3:
        median = statistics.median(cohesions)
        mad = statistics.median(abs(c - median) for c in cohesions) or 0.01
        floor = median - MIXED_COHESION_MADS * max(mad, 0.02)
        mixed = [c.cluster_id for c in item.clusters if c.cohesion < floor and c.size >= 4]
    notes = f"{len(confusable)} confusable pair(s), {len(mixed)} mixed cluster(s) by embedding evidence"
    return RepartitionVerdict(confusable=confusable, mixed=mixed, notes=notes)
