"""Extractive answers: the most relevant sentences (or numbered steps) of the retrieved
documents, each followed by its ``[doc_id]`` citation, in the method's answer format: the direct
answer first; factual answers ≤ 80 words, procedures as numbered steps ≤ 150 words."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import numpy as np

from c2s_core.text import sentences, strip_markdown

from c2s_core.text import terms
from .tools import Page

FACTUAL_WORDS = 80
PROCEDURAL_WORDS = 150
MAX_STEPS = 8
RERANK = 10  # sentences re-ranked by embedding (encoding is most of an answer's cost)
RERANK_CHARS = 240  # a sentence's gist is in its opening; shorter inputs encode faster
NOT_FOUND = "I could not find this in the documents."

_PROCEDURAL = re.compile(
    r"\b(how (do|can|to|would|should|does) |how i |steps? (to|for)|what steps|walk me through|"
    r"where (do|can) i (find|set|change|turn|add|enable|go))", re.I)
_STEP = re.compile(r"^\s*(\d{1,2})[.)]\s+(.*\S)")
_HEADING = re.compile(r"^\s*#{1,6}\s+(.*\S)")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}")
_BULLET = re.compile(r"^[-*+]\s+")
_MENU = re.compile(r"(?<=\S) > (?=\S)")
_SUB_BULLET = re.compile(r"^\s+[-*+]\s+(.*\S)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:!?])(?=\s|$)")


def is_procedural(question: str) -> bool:
    return bool(_PROCEDURAL.search(question))


def compose_answer(question: str, pages: Sequence[Page], qterms: Sequence[str],
                   embed: Callable[[Sequence[str]], np.ndarray] | None = None) -> str:
    """An extractive answer from ``pages`` (best first); NOT_FOUND (uncited) without any.
    With ``embed`` (texts -> unit vectors) the best lexical sentences are re-ranked by meaning."""
    pages = [p for p in pages if p.text.strip()]
    if not pages:
        return NOT_FOUND
    pool = [(s, rank, i) for rank, p in enumerate(pages) for i, s in enumerate(_sentences(p.text))
            if 3 <= len(s.split()) <= 90]
    if not pool:
        return NOT_FOUND
    weight = _term_weights(qterms, [s for s, _, _ in pool])

    def score(item: tuple[str, int, int]) -> float:
        s, rank, i = item
        found = set(terms(s))
        match = sum(w for t, w in weight.items() if t in found)
        # Prefer the best document, and a document's opening (help articles lead with the answer).
        return match / (1.0 + 0.35 * rank) + (0.15 if i == 0 and rank == 0 else 0.0)

    ranked = sorted(pool, key=lambda item: -score(item))
    if embed is not None:
        ranked = _rerank(question, ranked, score, embed)
    lead = ranked[0]
    if is_procedural(question):
        steps = _steps(pages[0].text, weight) or _following(pages[0].text, lead if lead[1] == 0 else None)
        if len(steps) >= 2:  # introduced by the article's opening, which says what it does
            opening = next((item for item in pool if item[1] == 0), lead)
            return _procedure(opening, steps, pages)
    return _factual(ranked, pages)


def _rerank(question: str, ranked: list, score: Callable, embed: Callable) -> list:
    """Blend lexical match with cosine similarity for the top sentences (few: encoding is the
    cost), so a sentence that answers in other words can lead."""
    head = ranked[:RERANK]
    vectors = embed([question] + [s[:RERANK_CHARS] for s, _, _ in head])
    cosine = vectors[1:] @ vectors[0]
    top = max(score(item) for item in head) or 1.0
    blended = [score(item) / top + 2.0 * float(c) - 0.1 * item[1] for item, c in zip(head, cosine)]
    order = sorted(range(len(head)), key=lambda i: -blended[i])
    return [head[i] for i in order] + ranked[RERANK:]


def _term_weights(qterms: Sequence[str], pool: Sequence[str]) -> dict[str, float]:
    n = len(pool)
    bags = [set(terms(s)) for s in pool]
    return {t: math.log(1.0 + n / (1 + sum(t in b for b in bags))) for t in dict.fromkeys(qterms)}


def _factual(ranked: list[tuple[str, int, int]], pages: Sequence[Page]) -> str:
    parts, words = [], 0
    for s, rank, _ in ranked[:6]:
        n = len(s.split())
        if parts and (words + n > FACTUAL_WORDS or len(parts) == 3):
            break
        if parts and s in {p for p, _ in parts}:
            continue
        parts.append((_clip(s, FACTUAL_WORDS), pages[rank].doc_id))
        words += n
    return " ".join(f"{text} [{doc_id}]" for text, doc_id in parts)


def _procedure(lead: tuple[str, int, int], steps: list[str], pages: Sequence[Page]) -> str:
    doc_id = pages[0].doc_id
    intro = lead[0] if lead[0] not in steps else ""
    budget = PROCEDURAL_WORDS - len(intro.split())
    lines = [f"{_clip(intro, 60)} [{pages[lead[1]].doc_id}]"] if intro else []
    for k, step in enumerate(steps[:MAX_STEPS], 1):
        n = len(step.split())
        if n > budget:
            if k > 2:
                break
            step, n = _clip(step, max(budget, 8)), max(budget, 8)
        lines.append(f"{k}. {step}")
        budget -= n
    lines[-1] += f" [{doc_id}]"
    return "\n".join(lines)


def _steps(text: str, weight: dict[str, float]) -> list[str]:
    """The numbered list in ``text`` that best matches the question (with its heading)."""
    runs: list[tuple[str, list[str]]] = []
    heading = ""
    for line in text.splitlines():
        if m := _HEADING.match(line):
            heading = m[1]
        elif m := _STEP.match(line):
            if m[1] == "1" or not runs:
                runs.append((heading, []))
            runs[-1][1].append(_plain(m[2]))
        elif runs and runs[-1][1] and (m := _SUB_BULLET.match(line)):
            # a step's options ("choose:" then indented bullets) belong to the step
            step = runs[-1][1][-1]
            runs[-1][1][-1] = f"{step}{' ' if step.endswith(':') else '; '}{_plain(m[1])}"
    best, best_score = [], -1.0
    for heading, items in runs:
        found = set(terms(heading + " " + " ".join(items)))
        s = sum(w for t, w in weight.items() if t in found)
        if len(items) >= 2 and s > best_score:
            best, best_score = items, s
    return best


def _following(text: str, lead: tuple[str, int, int] | None) -> list[str]:
    """No numbered list: the sentences from the best one on, as steps."""
    start = lead[2] if lead else 0
    return [s for s in _sentences(text)[start:] if len(s.split()) >= 3][:5]


def _sentences(text: str) -> list[str]:
    """Sentences of a document, with markdown structure turned into prose first: headings are
    dropped (fragments, not answers), list markers go, and a table row becomes "a: b; c"."""
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if _HEADING.match(stripped) or _TABLE_RULE.match(stripped):
            continue
        if stripped.startswith("|"):
            cells = [c.strip() for c in stripped.strip("|").split("|") if c.strip()]
            stripped = f"{cells[0]}: {'; '.join(cells[1:])}." if len(cells) > 1 else " ".join(cells)
        lines.append(_BULLET.sub("", stripped))
    return [_tidy(s) for s in sentences(_menu_arrows("\n".join(lines)))]


def _plain(markdown: str) -> str:
    return _tidy(" ".join(strip_markdown(_menu_arrows(markdown)).split()))


def _tidy(text: str) -> str:
    # Square brackets in quoted text would read as [doc_id] citations: make them parentheses.
    return _SPACE_BEFORE_PUNCT.sub(r"\1", text).replace("[", "(").replace("]", ")")


def _menu_arrows(text: str) -> str:
    """'Settings > Billing' is a menu path, not a blockquote marker that stripping would eat."""
    return _MENU.sub(" → ", text)


def _clip(text: str, words: int) -> str:
    parts = text.split()
    return text if len(parts) <= words else " ".join(parts[:words]).rstrip(",;:") + "…"
