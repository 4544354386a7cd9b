"""Identifiers in a document's text: error codes, API and function names, options, config keys,
environment variables, file paths - the exact strings a user types that prose summaries lose.

Extraction is by shape, deterministic and per document (so a card stays cacheable on its own
content): each candidate is matched by a pattern that only code-like strings fit, then ranked by
how identifier-like its shape is, whether the text sets it as code, and how often it recurs.
A plain English word never qualifies, whatever its case or markup.

    extract_identifiers(text, exclude=title)   # ['pg_dump', '--no-verify', 'PGDATA', ...]
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from collections import Counter
from typing import Iterable, Sequence

from .encoder import bundled_model_dir
from .text import STOPWORDS

MAX_IDENTIFIERS = 6
MAX_IDENTIFIER_CHARS = 80  # all of a card's identifiers together
MAX_ONE_IDENTIFIER = 40

_URL = re.compile(r"\b(?:[a-z][a-z0-9+.-]*://|www\.|mailto:)\S+", re.IGNORECASE)
_LINK_TARGET = re.compile(r"(?<=\])\([^)\s]*\)")  # [text](other-page.md): where a link goes, not what it names
_CODE_SPAN = re.compile(r"`([^`\n]{2,60})`")
_SHELL_PROMPT = re.compile(r"^\s*\$\s+(?:sudo\s+)?([a-z][\w.+-]*(?:\s+[a-z][\w-]*[a-z0-9])?)", re.MULTILINE)

# (weight, pattern, group): higher weights are shapes that only identifiers have.
_SHAPES: list[tuple[int, re.Pattern[str], int]] = [
    (6, re.compile(r"\bSQLSTATE\s+[0-9A-Z]{5}\b"), 0),
    (6, re.compile(r"\b(?:[A-Z]{1,4}\d{3,5}|[A-Z]{2,6}-\d{2,6})\b"), 0),  # E0425, TS2304, ORA-00942
    (5, re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*[a-z0-9]"), 0),  # --no-verify
    (5, re.compile(r"\b[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*\(\)"), 0),  # os.path.join()
    (5, re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"), 0),  # ERR_CONNECTION_REFUSED
    (4, re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"), 0),  # max_connections
    (4, re.compile(r"\$\{?([A-Z][A-Z0-9_]{2,})\}?"), 1),  # $PGDATA
    (4, re.compile(r"(?<![\w/.~-])(?:~|\.{1,2})?/(?:[\w.+@-]+/)*[\w.+@-]*[A-Za-z][\w.+@-]*"), 0),  # /etc/fstab
    (4, re.compile(r"(?<![\w.])[A-Za-z][\w-]*(?:/[\w.-]+)+\.[a-z]{1,5}\b"), 0),  # Documentation/git-psuh.txt
    (3, re.compile(r"\b[a-z][\w.+-]*\(\d[a-z]*\)"), 0),  # setsockopt(2)
    (3, re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b"), 0),  # socket.SOCK_STREAM, log.level
    (2, re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b|\b[a-z]+[A-Z][A-Za-z0-9]*\b"), 0),  # SSLContext
    (2, re.compile(r"\b[A-Z][A-Z0-9]{3,}\b"), 0),  # PGDATA, EADDRINUSE
]
_CODE_START = re.compile(r"[\w.$<~/-]")
_CODE_CHAR = re.compile(r"[-_=./:$<>\[\]{}|\d]")  # what prose in backticks (`Save changes`) lacks
_CODE_BONUS = 2  # set as code (`...`) or typed at a shell prompt
_CODE_WEIGHT = 3  # a code span that no shape above matches, e.g. `git rev-parse`

# Headings that documentation writes in capitals and the word list below lacks.
_SHOUTED = {"SYNOPSIS", "CONFORMING", "DEPRECATED", "TODO", "FIXME"}
_SUFFIXES = ("s", "es", "ed", "d", "ing", "ly", "er", "ers")
_GENERIC = {"--help", "--version", "--no", "null", "true", "false", "none", "e.g", "i.e", "etc", "a.m", "p.m"}
_FILE_EXTENSION = re.compile(r"\.[a-z0-9]{1,5}$")


@dataclass
class _Candidate:
    text: str
    weight: int
    count: int
    first: int
    code: bool = False

    def score(self) -> tuple:
        return (-(self.weight + (_CODE_BONUS if self.code else 0)), -min(self.count, 3), self.first)


def extract_identifiers(text: str, exclude: str = "", limit: int = MAX_IDENTIFIERS,
                        max_chars: int = MAX_IDENTIFIER_CHARS) -> list[str]:
    """The most distinctive identifiers in ``text``, best first; none that ``exclude`` (say, the
    title a row already shows) contains."""
    text = _URL.sub(" ", _LINK_TARGET.sub("", text))
    lowered_words = set(re.findall(r"\b[a-z]{3,}\b", text))
    found: dict[str, _Candidate] = {}

    def add(raw: str, weight: int, at: int, code: bool = False) -> None:
        value = _normalise(raw)
        if not _acceptable(value, lowered_words):
            return
        key = _key(value)
        seen = found.get(key)
        if seen is None:
            found[key] = _Candidate(value, weight, 1, at, code)
            return
        seen.count += 1
        seen.code = seen.code or code
        if weight > seen.weight or (weight == seen.weight and len(value) > len(seen.text)):
            seen.weight, seen.text = weight, value  # os.path.join() over os.path.join

    for m in _CODE_SPAN.finditer(text):
        span = m.group(1).strip()
        shaped = [(w, s.group(g), s.start(g)) for w, pattern, g in _SHAPES for s in pattern.finditer(span)]
        for weight, value, start in shaped:
            add(value, weight, m.start() + start, code=True)
        # The span whole too (`git rev-parse HEAD`); it yields to a shaped part it contains.
        if len(span.split()) <= 3 and _CODE_START.match(span) and _CODE_CHAR.search(span) \
                and span.count("(") == span.count(")"):
            add(span, _CODE_WEIGHT, m.start(), code=True)  # `git rev-parse`, `ls -la`
    for m in _SHELL_PROMPT.finditer(text):
        add(m.group(1), _CODE_WEIGHT, m.start(1), code=True)
    prose = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)  # spans are counted above
    for weight, pattern, group in _SHAPES:
        for m in pattern.finditer(prose):
            add(m.group(group), weight, m.start(group))
    # Scraped text loses newlines: "automationAny", "policy.You" are two words glued, unless the
    # text sets them as code or repeats them.
    kept = [c for c in found.values() if c.code or c.count >= 2 or not _maybe_glued(c.text)]
    return cap_identifiers((c.text for c in sorted(kept, key=_Candidate.score)), exclude, limit, max_chars)


def cap_identifiers(values: Iterable[str], exclude: str = "", limit: int = MAX_IDENTIFIERS,
                    max_chars: int = MAX_IDENTIFIER_CHARS) -> list[str]:
    """``values`` in order, cleaned, without repeats, without those ``exclude`` contains or that a
    kept one contains (``SO_REUSEADDR`` beside ``socket.SO_REUSEADDR``), within both caps."""
    excluded = exclude.lower()
    kept: list[str] = []
    used = 0
    for value in values:
        value = _normalise(value)
        low = _key(value)
        if not value or len(value) > MAX_ONE_IDENTIFIER or low in excluded:
            continue
        if any(low in _key(k) or _key(k) in low for k in kept):
            continue
        if used + len(value) > max_chars:
            continue  # a shorter one further down may still fit
        kept.append(value)
        used += len(value)
        if len(kept) == limit:
            break
    return kept


def by_rarity(lists: Sequence[Sequence[str]]) -> list[list[str]]:
    """Each list reordered rarest first across ``lists`` (a corpus's cards): ``size_t`` on
    hundreds of cards tells them apart less than ``SO_REUSEADDR`` on three. Ties keep order."""
    freq = Counter(_key(v) for values in lists for v in set(values))
    return [sorted(values, key=lambda v: freq[_key(v)]) for values in lists]


def _normalise(value: str) -> str:
    value = " ".join(value.replace("`", "").split())
    return value.strip(".,;:!?\"'")


def _key(value: str) -> str:
    return value.lower().removesuffix("()")


def _maybe_glued(value: str) -> bool:
    if re.search(r"[a-z]\.[A-Z]", value):
        return True
    humps = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", value)
    if not value.isalpha() or len(humps) < 2:
        return False
    # "indexWix", "EditorStudio": a word, then the next sentence's first word
    return is_english(humps[0]) if len(humps) == 2 else all(is_english(h) for h in humps)


def _acceptable(value: str, lowered_words: set[str]) -> bool:
    if not 3 <= len(value) <= MAX_ONE_IDENTIFIER or value.lower() in _GENERIC or len(set(value)) == 1:
        return False
    if not re.search(r"[A-Za-z]", value):
        return False  # a number or version is not a name
    words = re.findall(r"[A-Za-z]+", value)
    if value.isalpha():
        if value.islower() or value.istitle() or is_english(value):
            return False  # a plain word, whatever its case
        # Capitals: a name (PGDATA) unless the text uses the word in lower case too.
        return not value.isupper() or (value not in _SHOUTED and value.lower() not in lowered_words)
    if "." in value and "/" not in value and not value.endswith("()") and " " not in value:
        parts = value.split(".")
        if any(len(p) < 2 for p in parts):
            return False  # e.g, i.e, a.m
        # "end.The": two sentences glued, not a dotted name
        if all(p.isalpha() and (p.islower() or p.istitle()) for p in parts) and any(p.istitle() for p in parts[1:]):
            return False
        if all(p.isalpha() and p.islower() and p in STOPWORDS for p in parts):
            return False
    if "/" in value and " " not in value:
        segments = [s for s in value.split("/") if s]
        # "and/or", "read/write": words joined by a slash, not a path
        if not value.startswith(("/", "~", ".")) and not _FILE_EXTENSION.search(value):
            return False
        if value.startswith("/") and len(segments) < 2 and not _FILE_EXTENSION.search(value):
            return value.lower() in {"/etc", "/usr", "/var", "/tmp", "/opt", "/dev", "/proc", "/sys", "/home"}
    return bool(words)


@functools.lru_cache(maxsize=1 << 16)
def is_english(word: str) -> bool:
    """Whether ``word`` (any case) is a plain English word: a stop word, or in the English word
    list of the bundled encoder's tokenizer, itself or with or without a common suffix."""
    low = word.lower()
    if low in STOPWORDS:
        return True
    words = _english_words()
    if low in words or any(low + s in words for s in _SUFFIXES):  # "delete" is listed as "deleted"
        return True
    return any(low.endswith(s) and (low[:-len(s)] in words or low[:-len(s)] + "e" in words)
               for s in _SUFFIXES if len(low) > len(s) + 2)


@functools.cache
def _english_words() -> frozenset[str]:
    # WordPiece keeps whole tokens for the ~20k most common words; "##" pieces and names with
    # digits or capitals are not words.
    vocab = Path(bundled_model_dir()) / "vocab.txt"
    try:
        lines = vocab.read_text(encoding="utf-8").split()
    except OSError:
        return frozenset()
    return frozenset(w for w in lines if w.isalpha() and w.islower() and len(w) > 1)
