"""FAQ-style questions drawn from documents' body text, deterministically (no LLM).

Known-item questions built from titles test whether a reader can find a page by its name;
real questions are asked about what a page *says*. This module turns instructional sentences
of a document's body into the questions they answer:

- "To X, use/run/set ... Y."          -> "How do I X?"
- "Use Y to X."                        -> "How do I X?"
- "Y allows you to X." / "Y lets you X" -> "How can I X?"
- "Y is used to X." / "Y can be used to X." -> "What is used to X?"
- "If you want to X, Y."                -> "How do I X?"
- "If X, Y."                            -> "What happens if X?"
- "To X:" (steps follow)               -> "How do I X?"
- "You can X by clicking/using ... Y." -> "How can I X?"

A sentence becomes a question only when its key content (the words the question keeps) is
distinctive: the question's content terms occur together in exactly one document of the
corpus, at least two of them are rare, and the question does not mostly repeat the title.
Vague sentences ("To do this, ...", "If it is set, ...") are skipped. Picks are ranked by a
hash of the document id, so the selection is stable across runs and spread over the corpus.

Each question has a section-level gold (the document it came from) and a page-level gold
(every document of the same page: ids that share the part before ``#``).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

STOPWORDS = frozenset("""
a about above after again against all also an and any are as at be because been before being
below between both but by can could did do does doing down during each either etc few for from
further had has have having here how i if in into is it its itself just may might more most must
my no nor not now of off on once only or other our out over own same should so some such than
that the their them then there these they this those through to too under until up upon very
via was we were what when where which while who whom why will with within without would you
your yours one two using use used uses want wants need needs make makes made way ways given
instead rather whether new also
""".split())
# Words that make a clause depend on context it does not carry: "to do this", "if it is set".
VAGUE = frozenset("""
this that these those it its they them their above below following former latter such here
there so thus likewise similarly otherwise same previous next certain
""".split())
# Subjects that point elsewhere for what the sentence is about.
VAGUE_SUBJECTS = frozenset("remaining other others some both each all any either".split())
_TOKEN = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
# Clause text a question may keep: words, identifiers and light punctuation, no code.
_CLAUSE = re.compile(r"[A-Za-z][\w\-.,'/ ]*[\w)]")

# (pattern name, regex over one sentence, question template over the "key" group)
PATTERNS: tuple[tuple[str, re.Pattern, str], ...] = (
    ("to-x-use", re.compile(r"^To (?P<key>[a-z][^,;:]{8,110}), (?:you (?:can|should|must|need to|may) )?"
                            r"(?:use|run|set|specify|call|add|pass|give|invoke|type|enable|create|write|"
                            r"issue|execute|configure|edit|change|provide|include|select)\b.{3,}\.$"),
     "How do I {key}?"),
    ("use-y-to-x", re.compile(r"^Use (?!of\b|this\b|it\b|them\b).{2,80}? to (?P<key>[a-z][^,;:]{8,110})\.$"),
     "How do I {key}?"),
    ("allows-you-to", re.compile(r"^(?P<subject>.{3,100}?) (?:allows|lets|enables|permits) (?:you|users|the user) (?:to )?"
                                 r"(?P<key>[a-z][^,;:]{8,110})\.$"),
     "How can I {key}?"),
    ("is-used-to", re.compile(r"^(?P<subject>.{3,100}?) (?:is|are|can be|may be) used to (?P<key>[a-z][^,;:]{8,110})\.$"),
     "What is used to {key}?"),
    ("if-you-want", re.compile(r"^If you (?:want|wish|need|would like) to (?P<key>[a-z][^,;:]{8,110}), .{8,}\.$"),
     "How do I {key}?"),
    ("if-x-then", re.compile(r"^If (?!you (?:do not|don't) )(?P<key>[a-z][^,;:]{12,110}), .{8,}\.$"),
     "What happens if {key}?"),
    # A help article's steps, introduced by the task they carry out: "To X:" then the list.
    ("to-x-steps", re.compile(r"^To (?P<key>[a-z][^,;:]{8,110}):$"), "How do I {key}?"),
    ("you-can-x-by", re.compile(r"^You can (?P<key>[a-z][^,;:]{8,110}?) by (?:clicking|pressing|selecting|using|"
                                r"running|opening|typing|choosing|adding|setting|editing|changing)\b.{3,}\.$"),
     "How can I {key}?"),
)

MIN_SENTENCE, MAX_SENTENCE = 30, 260
MIN_CONTENT_TERMS = 3  # content terms a question keeps (after stopwords)
MIN_RARE_TERMS = 2  # of which this many appear in at most RARE_SHARE of the documents
RARE_SHARE = 0.02
MAX_TITLE_OVERLAP = 0.5  # share of the question's content terms allowed to come from the title


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def content_terms(text: str) -> list[str]:
    """Distinct non-stopword terms, in order of first appearance."""
    seen: dict[str, None] = {}
    for t in tokens(text):
        if t not in STOPWORDS and not t.isdigit() and len(t) > 1:
            seen.setdefault(t, None)
    return list(seen)


def page_of(doc_id: str) -> str:
    return doc_id.split("#", 1)[0]


def docs_by_page(docs: Iterable[dict]) -> dict[str, list[str]]:
    """Each page's document ids (a page's gold at page level), in the documents' order."""
    pages: dict[str, list[str]] = defaultdict(list)
    for d in docs:
        pages[page_of(d["id"])].append(d["id"])
    return dict(pages)


def sentences(text: str) -> Iterable[str]:
    """Prose sentences of a body: one block per line, split at sentence ends; code and
    list fragments fall out through the length and shape checks."""
    for line in text.split("\n"):
        line = " ".join(line.split())
        if len(line) < MIN_SENTENCE:
            continue
        for s in _SENTENCE_END.split(line):
            if MIN_SENTENCE <= len(s) <= MAX_SENTENCE:
                yield s


@dataclass(frozen=True)
class Candidate:
    doc_id: str
    pattern: str
    question: str
    sentence: str
    terms: tuple[str, ...]


def candidates_in(doc: dict) -> Iterable[Candidate]:
    """Every sentence of `doc` that fits a pattern and whose kept clause is not vague."""
    for sentence in sentences(doc["text"]):
        for name, rx, template in PATTERNS:
            m = rx.match(sentence)
            if not m:
                continue
            key = m.group("key").strip().rstrip(".")
            words = set(tokens(key))
            if words & VAGUE or " then " in key or ". " in key or not _CLAUSE.fullmatch(key):
                break
            subject = (m.groupdict().get("subject") or "").split()
            if subject and subject[0].lower() in VAGUE | VAGUE_SUBJECTS:
                break  # "This can be used to ...": what is used is said elsewhere
            terms = content_terms(key)
            if len(terms) >= MIN_CONTENT_TERMS:
                question = template.format(key=re.sub(r"\byour\b", "my", key) if "I " in template else key)
                yield Candidate(doc["id"], name, question, sentence, tuple(terms))
            break  # one pattern per sentence: the first that matches


class TermIndex:
    """Which documents hold each term, to tell distinctive clauses from common ones."""

    def __init__(self, docs: list[dict]) -> None:
        self.n = len(docs)
        self.postings: dict[str, set[str]] = defaultdict(set)
        for d in docs:
            for t in set(tokens(d["title"] + "\n" + d["text"])):
                self.postings[t].add(d["id"])

    def holders(self, terms: Iterable[str]) -> set[str]:
        sets = sorted((self.postings.get(t, set()) for t in terms), key=len)
        out = set(sets[0]) if sets else set()
        for s in sets[1:]:
            out &= s
        return out

    def rare(self, term: str) -> bool:
        return len(self.postings.get(term, ())) <= max(1, math.floor(RARE_SHARE * self.n))


def distinctive(c: Candidate, doc: dict, index: TermIndex) -> bool:
    """One right document, enough rare words, and not a paraphrase of the title."""
    if sum(index.rare(t) for t in c.terms) < MIN_RARE_TERMS:
        return False
    title_terms = set(content_terms(doc["title"]))
    if sum(t in title_terms for t in c.terms) > MAX_TITLE_OVERLAP * len(c.terms):
        return False
    return index.holders(c.terms) == {c.doc_id}


def _rank(key: str) -> str:
    return hashlib.sha1(key.encode()).hexdigest()


def _interleaved(cands: Iterable[Candidate]) -> list[Candidate]:
    """One of each pattern in turn (each in hash order), so no single sentence shape
    dominates a set when another is available."""
    groups: dict[str, list[Candidate]] = defaultdict(list)
    for c in sorted(cands, key=lambda c: _rank(c.doc_id)):
        groups[c.pattern].append(c)
    order = [name for name, _, _ in PATTERNS if name in groups]
    return [c for round_ in itertools.zip_longest(*(groups[p] for p in order)) for c in round_ if c]


def make_faq_questions(docs: list[dict], n: int = 100) -> list[dict]:
    """~n questions with an equal share per source and at most one per page, each row
    ``{"id", "question", "answer", "gold_ids", "page_gold_ids", "pattern"}``; ``answer`` is
    the sentence the question came from."""
    index = TermIndex(docs)
    pages = docs_by_page(docs)
    by_source: dict[str, dict[str, Candidate]] = defaultdict(dict)  # source -> page -> pick
    priority = {name: i for i, (name, _, _) in enumerate(PATTERNS)}
    for d in docs:
        found = [c for c in candidates_in(d) if distinctive(c, d, index)]
        page = by_source[d["id"].split("/", 1)[0]]
        for c in found:  # per page, the how-to patterns first, then a hash
            best = page.get(page_of(c.doc_id))
            if best is None or (priority[c.pattern], _rank(c.doc_id + c.sentence)) < \
                    (priority[best.pattern], _rank(best.doc_id + best.sentence)):
                page[page_of(c.doc_id)] = c
    quota = -(-n // max(1, len(by_source)))
    picked: list[Candidate] = []
    spare: list[Candidate] = []  # fills the shares of sources with too few candidates
    for source in sorted(by_source):
        ranked = _interleaved(by_source[source].values())
        picked += ranked[:quota]
        spare += ranked[quota:]
    picked += _interleaved(spare)[:max(0, n - len(picked))]
    picked = sorted(picked, key=lambda c: _rank(c.doc_id))[:n]
    return [{"id": f"f{i:03d}", "question": c.question, "answer": c.sentence, "gold_ids": [c.doc_id],
             "page_gold_ids": sorted(pages[page_of(c.doc_id)]), "pattern": c.pattern}
            for i, c in enumerate(sorted(picked, key=lambda c: c.doc_id))]


def page_level(questions: list[dict]) -> list[dict]:
    """The same questions with every section of the gold page counted as gold."""
    return [{**q, "gold_ids": q["page_gold_ids"]} for q in questions]
