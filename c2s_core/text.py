"""Text helpers shared by the extractive (offline) tasks: tokens, sentences, key phrases, slugs."""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from typing import Iterable, Sequence

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

# Help-center boilerplate words that say nothing about a topic.
_DOMAIN_STOPWORDS = {
    "click", "select", "choose", "learn", "note", "notes", "important", "tip", "tips", "step", "steps",
    "want", "need", "use", "using", "used", "make", "sure", "able", "also", "can", "may", "way", "like",
    "new", "just", "one", "two", "go", "going", "page", "option", "options", "section", "following",
    "information", "set", "get", "want", "want", "need", "needs", "allow", "allows", "let", "lets",
    "youre", "don", "doesn", "isn", "won", "ll", "ve", "re", "etc", "e.g", "i.e", "via", "within",
}
STOPWORDS = frozenset(ENGLISH_STOP_WORDS) | _DOMAIN_STOPWORDS

_TOKEN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_\-.']*[A-Za-z0-9])?")
_GLUED_SENTENCE = re.compile(r"(?<=[a-z])\.(?=[A-Z])")
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9_\-.']+")
# Sentence ends: punctuation then space, or punctuation glued to a capitalised word ("users.You").
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9*])|(?<=[a-z0-9][.!?])(?=[A-Z][a-z])|\n+")
# Underscores count as emphasis only at a word's edge (``_word_``); inside one they are part of an
# identifier (``dh_installxmlcatalogs``, ``MAX_FILE_BYTES``) that grep and title search must find.
_EDGE_UNDERSCORES = r"(?<!\w)_+|_+(?!\w)"
_EMPHASIS = re.compile(r"[*`]+|" + _EDGE_UNDERSCORES)
_MARKDOWN_NOISE = re.compile(r"[*`#>|]+|" + _EDGE_UNDERSCORES + r"|!\[[^\]]*\]\([^)]*\)|\[([^\]]*)\]\([^)]*\)")


# Characters that steer a terminal or an editor rather than print: C0/C1 controls (ANSI escapes,
# carriage returns that overwrite a line, NUL), the Unicode line and paragraph separators (which
# split a line for str.splitlines) and bidirectional overrides that reorder text.
UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str, keep: str = "\n\t") -> str:
    """``text`` with control and bidi-override characters shown as escapes (``\\x1b``,
    ``\\u202e``), except those in ``keep`` (newlines and tabs by default)."""
    def escape(match: re.Match) -> str:
        char = match.group()
        if char in keep:
            return char
        return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
    return UNPRINTABLE.sub(escape, text)


def sha256_hex(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8") if isinstance(part, str) else part)
        h.update(b"\x1f")
    return h.hexdigest()


def strip_markdown(text: str) -> str:
    """Markdown to plain prose: links keep their text, emphasis and table bars go."""
    text = _MARKDOWN_NOISE.sub(lambda m: m.group(1) or " ", text)
    return re.sub(r"[ \t]+", " ", text)


def strip_emphasis(text: str) -> str:
    """Markdown emphasis and code marks (``*``, backticks, edge underscores) removed; words and
    identifiers kept whole."""
    return _EMPHASIS.sub("", text)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; identifiers such as ``tw-4012`` or ``hmac-sha256`` stay whole."""
    text = _GLUED_SENTENCE.sub(". ", text)
    return [t.lower().strip(".'") for t in _TOKEN.findall(text)]


def content_tokens(text: str) -> list[str]:
    return [t for t in tokens(text) if t not in STOPWORDS and len(t) > 1 and not t.isdigit()]

# Question words that carry no topic, on top of the stop words: what a question is asked with.
QUESTION_WORDS = frozenset(
    "how what why when where which who whom whose does did do is are was were can could would "
    "should will shall possible anyone someone something anything please thanks thank hi hello "
    "help want wanted trying tried try know wondering question questions able unable".split())


def stem(token: str) -> str:
    """A deliberately light stemmer (plural and -ing/-ed forms) so 'payments' meets 'payment'."""
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if token.endswith(suffix) and len(token) - len(suffix) >= 4 and not token.endswith("ss"):
            return token[: -len(suffix)] + keep
    return token


def inflections_pattern(term: str) -> str:
    """A regular expression (ERE, lower case) for the words :func:`stem` maps to ``term``: the
    term with the endings it strips ('read' -> reads, readed, reading; 'library' -> libraries),
    and no other words ('reader', 'readline'), so a grep for a term's words prints those alone."""
    forms = re.escape(term) + "(s|es|ed|ing)?"
    if term.endswith("y") and len(term) >= 5:
        forms = f"({forms}|{re.escape(term[:-1])}ies)"
    return forms


def terms(text: str) -> list[str]:
    """Stemmed content terms of ``text``, in order (duplicates kept): what a question and a
    nav row are matched on, by the navigator and by the compiler's navigability probe alike."""
    return [stem(t) for t in content_tokens(text) if t not in QUESTION_WORDS]


def query_terms(text: str) -> list[str]:
    return list(dict.fromkeys(terms(text)))


def title_match(question_terms: Sequence[str], title_terms: Iterable[str], weights: dict[str, float]) -> float:
    """How closely a title (its :func:`terms`) restates the question: the share of the question's
    term weight the title holds, times the share of the title's terms the question holds. A
    question that names a document ("Where can I read about the password file?") restates its
    title ("The Password File") more closely than the titles of documents that merely use its
    words ("getpwent — get password file entry"). ``weights``: the question terms' weights
    (idf); 0 where absent."""
    own = set(title_terms)
    asked = set(question_terms)
    shared = own & asked
    total = sum(weights.get(t, 0.0) for t in asked)
    if not shared or not total:
        return 0.0
    return len(shared) / len(own) * sum(weights.get(t, 0.0) for t in shared) / total



def sentences(text: str) -> list[str]:
    out = []
    for raw in _SENTENCE_END.split(strip_markdown(text)):
        s = " ".join(raw.split())
        if s:
            out.append(s)
    return out


def clip(text: str, limit: int) -> str:
    """Cut at a word boundary and mark the cut, so a clipped line never ends mid-word."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:-")
    return cut + "…"


def slugify(text: str, max_len: int = 50) -> str:
    """Filesystem-safe name: lowercase, runs of non-alphanumerics to one hyphen, ≤ max_len."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if len(slug) > max_len:
        slug = slug[:max_len].rsplit("-", 1)[0] if "-" in slug[:max_len] else slug[:max_len]
    return slug.strip("-")


def candidate_phrases(text: str, max_words: int = 3) -> Iterable[str]:
    """Runs of content words (split at stopwords and punctuation), as 1..max_words-grams."""
    for chunk in re.split(r"[.,;:!?()\[\]{}\"\n|/>]+", strip_markdown(text)):
        run: list[str] = []
        for word in _WORD_SPLIT.split(chunk):
            w = word.lower().strip(".'-")
            if not w or w in STOPWORDS or w.isdigit() or len(w) < 2:
                yield from _ngrams(run, max_words)
                run = []
            else:
                run.append(w)
        yield from _ngrams(run, max_words)


def _ngrams(run: Sequence[str], max_words: int) -> Iterable[str]:
    for n in range(1, max_words + 1):
        for i in range(len(run) - n + 1):
            yield " ".join(run[i : i + n])


def key_phrases(title: str, body: str, limit: int = 4) -> list[str]:
    """A document's most salient phrases, from the document alone (so a card never depends on
    the rest of the corpus): frequent multi-word runs score higher, title words count triple."""
    counts: Counter[str] = Counter()
    for phrase in candidate_phrases(body):
        counts[phrase] += 1
    for phrase in candidate_phrases(title):
        counts[phrase] += 3
    scored = []
    for phrase, count in counts.items():
        n = phrase.count(" ") + 1
        if n > 1 and count < 2:
            continue  # a multi-word run seen once is usually an accident of wording
        scored.append((count * (1.0 + 0.6 * (n - 1)), phrase))
    scored.sort(key=lambda x: (-x[0], x[1]))
    chosen: list[str] = []
    for _, phrase in scored:
        if any(phrase in c or c in phrase for c in chosen):
            continue
        chosen.append(phrase)
        if len(chosen) == limit:
            break
    return chosen


def class_tfidf(classes: Sequence[Counter[str]]) -> list[dict[str, float]]:
    """Class-based TF-IDF (one 'document' per cluster): what is distinctive of each cluster
    against its siblings. weight = tf(t, c) * log(1 + A / f(t)), A = mean class size."""
    totals: Counter[str] = Counter()
    for counts in classes:
        totals.update(counts)
    mean_size = sum(totals.values()) / max(len(classes), 1)
    out = []
    for counts in classes:
        size = sum(counts.values()) or 1
        out.append({t: (c / size) * math.log(1.0 + mean_size / totals[t]) for t, c in counts.items()})
    return out
