"""FAQ-style development questions drawn from body text (benchmarks/faq_questions.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from faq_questions import make_faq_questions, page_level  # noqa: E402

FILLER = [
    {"id": f"misc/page{i}.html#top", "title": f"Miscellaneous page {i}",
     "text": "This page talks about ordinary things such as files, options and commands. "
             "Nothing here is special or distinctive in any way at all."}
    for i in range(60)
]
DOCS = FILLER + [
    {"id": "tool/archive.html#top", "title": "archive — bundle things",
     "text": "To compress snapshot tarballs with zstandard, use the --zstd flag.\n"
             "To do this, run the command twice."},
    {"id": "tool/archive.html#details", "title": "archive › Details",
     "text": "Archives keep their members in the order given on the command line."},
    {"id": "tool/manifest.html#top", "title": "manifest — describe an archive",
     "text": "The manifest checksum is used to detect corrupted tarball members."},
    {"id": "db/vacuum.html#top", "title": "Vacuum",
     "text": "If autovacuum workers exceed maintenance_work_mem, the planner spills tuples to disk.\n"
             "If it is set, the value is ignored."},
    {"id": "net/proxy.html#top", "title": "Proxy settings",
     "text": "The tunnel helper allows you to forward kerberos tickets through bastion hosts."},
]


def by_gold(questions: list[dict]) -> dict[str, str]:
    return {q["gold_ids"][0]: q["question"] for q in questions}


def test_instructional_sentences_become_questions_with_their_shapes():
    qs = by_gold(make_faq_questions(DOCS, n=10))
    assert qs["tool/archive.html#top"] == "How do I compress snapshot tarballs with zstandard?"
    assert qs["tool/manifest.html#top"] == "What is used to detect corrupted tarball members?"
    assert qs["db/vacuum.html#top"] == "What happens if autovacuum workers exceed maintenance_work_mem?"
    assert qs["net/proxy.html#top"] == "How can I forward kerberos tickets through bastion hosts?"


def test_vague_and_common_sentences_are_skipped():
    questions = [q["question"] for q in make_faq_questions(DOCS, n=10)]
    assert not any("this" in q.lower().split() or "it" in q.lower().split() for q in questions)
    assert not any(q["gold_ids"][0].startswith("misc/") for q in make_faq_questions(DOCS, n=10))


def test_one_question_per_page_and_page_level_gold():
    qs = make_faq_questions(DOCS, n=10)
    pages = [q["gold_ids"][0].split("#")[0] for q in qs]
    assert len(pages) == len(set(pages))
    archive = next(q for q in page_level(qs) if q["gold_ids"][0].startswith("tool/archive.html"))
    assert archive["gold_ids"] == ["tool/archive.html#details", "tool/archive.html#top"]


def test_selection_is_deterministic_and_respects_n():
    assert make_faq_questions(DOCS, n=10) == make_faq_questions(list(reversed(DOCS)), n=10)
    assert len(make_faq_questions(DOCS, n=2)) == 2


def test_a_pronoun_subject_is_vague():
    docs = FILLER + [{"id": "lib/find.html#top", "title": "find_library",
                      "text": "This can be used to locate static archives on unixlike hosts."}]
    assert make_faq_questions(docs, n=5) == []
