"""Pattern-based entity and document-type extraction for the offline provider."""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

from .text import STOPWORDS, strip_markdown

FILE_FORMATS = {
    "csv", "tsv", "xlsx", "xls", "pdf", "json", "jsonl", "xml", "html", "ics", "ical", "vcf", "png",
    "jpg", "jpeg", "gif", "svg", "webp", "mp4", "mp3", "zip", "docx", "txt", "md", "yaml", "sql",
}
_ERROR_CODE = re.compile(r"\b(?:[A-Z]{1,5}[-_]\d{2,6}|E\d{3,5}|[A-Z][A-Z_]{3,}_[A-Z_]+|(?:HTTP|error|status)\s+[1-5]\d\d)\b")
_CAMEL = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z0-9]+)+\b|\b[a-z]+[A-Z][A-Za-z]+\b")
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,7}s?\b")
_EXTENSION = re.compile(r"(?<![\w/])\.([a-z0-9]{2,5})\b")
_PROPER = re.compile(r"(?<=[a-z0-9,;:)] )([A-Z][a-z0-9]+(?:[ -](?:[A-Z][a-z0-9]+|[0-9]+)){1,3})")
_NOT_ACRONYMS = {"I", "A", "OK", "AM", "PM", "FAQ", "TO", "ON", "IN", "OR", "AND", "THE", "IF", "IS", "IT", "NO", "NOT", "YES", "ID", "IDS", "US", "UI", "NOTE", "FAQS"}

# Cue words for document types; a type needs a few cues before it is claimed.
DOC_TYPE_CUES = {
    "how-to": ("how to", "step ", "steps", "go to", "click", "select", "to set up", "to add", "to create"),
    "troubleshooting": ("error", "troubleshoot", "not working", "issue", "fix", "fails", "failed", "problem", "can't", "cannot"),
    "reference": ("table", "limit", "limits", "list of", "supported", "parameters", "fields", "values", "syntax"),
    "policy": ("policy", "terms", "agreement", "must not", "prohibited", "compliance", "liable", "retention"),
    "billing": ("invoice", "refund", "charge", "billing", "payment", "subscription", "plan", "price", "fee"),
    "faq": ("?", "faq", "frequently asked", "can i", "do i", "why"),
    "concept": ("overview", "about", "what is", "introduction", "understand"),
}


def _is_brand_like(word: str) -> bool:
    """QuickBooks, PayPal, eCommerce: yes. "startedCreate" (two sentences glued by a lost
    newline, common in scraped help centers): no."""
    head = re.match(r"[A-Za-z][a-z0-9]*", word).group(0)
    return len(head) <= 5 and len(word) <= 14


def entity_mentions(text: str) -> Counter[str]:
    """Named things in a text: error codes, file formats, CamelCase and multi-word product or
    feature names, acronyms. Keys are canonical surface forms."""
    text = strip_markdown(text)
    found: Counter[str] = Counter()
    for m in _ERROR_CODE.finditer(text):
        found[" ".join(m.group(0).split())] += 1
    for m in _EXTENSION.finditer(text):
        if m.group(1) in FILE_FORMATS:
            found[m.group(1).upper()] += 1
    for m in _CAMEL.finditer(text):
        if _is_brand_like(m.group(0)):
            found[m.group(0)] += 1
    for m in _ACRONYM.finditer(text):
        word = m.group(0)
        if word not in _NOT_ACRONYMS and not word.isdigit() and not re.fullmatch(r"[A-Z]\d+", word):
            found[word] += 1
    for m in _PROPER.finditer(text):
        phrase = m.group(1)
        words = phrase.split()
        if all(w.lower() not in STOPWORDS for w in words[:1]) and words[-1].lower() not in STOPWORDS:
            found[phrase] += 1
    return found


def rank_entities(texts: Iterable[str], limit: int) -> list[str]:
    """Entities by salience: the number of texts naming them, then total mentions; a name must
    appear in two texts or twice in one, and shorter forms inside a longer kept name are dropped."""
    doc_freq: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for text in texts:
        mentions = entity_mentions(text)
        total.update(mentions)
        doc_freq.update(mentions.keys())
    ranked = sorted(
        (name for name in total if doc_freq[name] >= 2 or total[name] >= 2),
        key=lambda n: (-doc_freq[n], -total[n], -len(n.split()), n),
    )
    chosen: list[str] = []
    for name in ranked:
        if any(name != c and re.search(rf"\b{re.escape(name)}\b", c) for c in chosen):
            continue
        chosen.append(name)
        if len(chosen) == limit:
            break
    return chosen


def doc_types(texts: Iterable[str], limit: int) -> list[str]:
    scores: Counter[str] = Counter()
    for text in texts:
        lowered = text.lower()
        for kind, cues in DOC_TYPE_CUES.items():
            hits = sum(lowered.count(cue) for cue in cues)
            if hits >= 2:
                scores[kind] += 1
    return [kind for kind, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))][:limit]
