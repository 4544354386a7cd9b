"""The agent: its tools, the answer loop's shared pieces, the offline navigator and the CLI.

Unit tests run on a small hand-written tree; the navigator is measured on compiled trees of the
WixQA sample (80 questions with gold ids) and of the bundled sample corpus, side by side with
flat dense retrieval over the same documents with the same encoder.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from c2s_agent import AnswerResult, answer
from c2s_agent.agent import (RULES, Reply, TurnBudget, UnknownNavigatorError, check_citations, citations_in,
                             navigators, preloaded_context, register_navigator, system_prompt)
from c2s_cli.ask import register
from c2s_cli.main import app
from c2s_agent.tools import ALL_TOOL_SCHEMAS, PAGE_CHARS, TOOL_SCHEMAS, TreeTools, parse_document
from c2s_core.text import inflections_pattern, stem
from c2s_core.tree import TreeError
from c2s_core.docstore import StoredDocument, write_document_store
from c2s_core.encoder import BUNDLED_MODEL
from c2s_core.search_index import MODES, SearchIndex, write_search_index

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from nav_bench import where_lost  # noqa: E402  (the benchmark's classification of a navigator's miss)

SAMPLE_QUESTIONS = ROOT / "c2s_pipeline" / "sample_questions.jsonl"

LONG_TEXT = "".join(f"Paragraph {i:04d}: refunds are issued to the original card. " for i in range(300))
DOCS = {
    "refund-policy": ("Refund policy", "Refunds are available within 30 days of purchase. "
                      "Contact support with your order number to request one."),
    "refund-long": ("Refund processing details", LONG_TEXT),
    "shipping-times": ("Shipping times", "Standard shipping takes 3-5 business days. "
                       "Express shipping arrives the next business day."),
    "empty-doc": ("Empty document", ""),
}
SKILL = """\
---
name: {name}
description: '{description}'
metadata:
  level: 2
  documents: {n}
---

# {title}

{description}

Entities: {entities}

## Sub-groups (1)

- [{group}]({group}/INDEX.md) ({n} docs) — {description}

## Related skills

- [{other}](../{other}/SKILL.md) — shared: Support
"""
INDEX = """\
---
name: {group}
description: '{description}'
metadata:
  level: 1
  documents: {n}
---

# {title}

{description}

## Documents ({n})

{rows}
"""


def make_tree(root: Path) -> Path:
    """A two-skill tree in the compiler's layout, written by hand (no compile needed)."""
    skills = {
        "billing": ("refunds", "Billing and refunds: refund policy, refund processing.", ["refund-policy", "refund-long", "empty-doc"], "shipping"),
        "shipping": ("delivery", "Shipping and delivery times, express shipping.", ["shipping-times"], "billing"),
    }
    index = {}
    for name, (group, description, ids, other) in skills.items():
        rows = "\n".join(f"- `{d}` **{DOCS[d][0]}** — {DOCS[d][1][:60]} _(refund; policy)_" for d in ids)
        folder = root / "skills" / name
        (folder / group).mkdir(parents=True)
        (folder / "SKILL.md").write_text(SKILL.format(name=name, description=description, n=len(ids),
                                                      title=name.title(), entities="Support", group=group,
                                                      other=other))
        (folder / group / "INDEX.md").write_text(INDEX.format(group=group, description=description, n=len(ids),
                                                              title=group.title(), rows=rows))
        index[name.title()] = [{"path": f"skills/{name}/{group}/INDEX.md", "mentions": len(ids)}]
    (root / "entity_index.json").write_text(json.dumps(index, indent=1))
    (root / "manifest.json").write_text(json.dumps({"stats": {"documents": {"accepted": len(DOCS)}}}))
    write_document_store(root / "documents.sqlite",
                         [StoredDocument(d, t, x, "h", "test") for d, (t, x) in DOCS.items()])
    return root


@pytest.fixture
def tree(tmp_path) -> Path:
    return make_tree(tmp_path / "tree")


# -- get_document -----------------------------------------------------------------------------


def test_get_document_pages_long_text(tree):
    tools = TreeTools(tree)
    first = parse_document(tools.get_document("refund-long"))
    assert first.doc_id == "refund-long" and first.title == "Refund processing details"
    assert (first.offset, first.total_chars, first.next_offset) == (0, len(LONG_TEXT), PAGE_CHARS)
    assert f"offset={PAGE_CHARS}" in tools.get_document("refund-long")
    text, offset = first.text, first.next_offset
    while offset is not None:
        page = parse_document(tools.get_document("refund-long", offset=offset))
        assert page.offset == offset and len(page.text) <= PAGE_CHARS
        text, offset = text + page.text, page.next_offset
    assert text == LONG_TEXT
    short = tools.get_document("refund-policy")
    assert "end of document" in short and short.endswith(DOCS["refund-policy"][1])
    assert parse_document(tools.get_document("empty-doc")).text == ""


@pytest.mark.parametrize("doc_id", ["no-such-doc", "refund", "", "   ", "``", None])
def test_get_document_unknown_or_empty_id_is_a_clear_error(tree, doc_id):
    tools = TreeTools(tree)
    out = tools.get_document(doc_id)
    assert out.startswith("error:") and parse_document(out) is None
    assert not any(text and text[:40] in out for _, text in DOCS.values())  # never some other document
    assert tools.fetched == [] and tools.trace[-1].error


def test_get_document_truncated_id_names_candidates_without_reading_one(tree):
    tools = TreeTools(tree)
    out = tools.get_document("refund-p")
    assert out.startswith("error:") and "refund-policy" in out and DOCS["refund-policy"][1] not in out


def test_get_document_tolerates_backticks_and_rejects_bad_offsets(tree):
    tools = TreeTools(tree)
    assert parse_document(tools.get_document(" `refund-policy` ")).doc_id == "refund-policy"
    for offset in (-1, 10_000_000, "abc"):
        assert tools.get_document("refund-long", offset=offset).startswith("error:")


def test_tools_are_thread_safe(tree):
    tools = TreeTools(tree)
    ids = ["refund-policy", "shipping-times", "refund-long"]
    failures = []

    def worker(k: int) -> None:
        for i in range(40):
            doc_id = ids[(k + i) % len(ids)]
            page = parse_document(tools.get_document(doc_id))
            if page is None or page.doc_id != doc_id or not DOCS[doc_id][1].startswith(page.text):
                failures.append((doc_id, page))
            if "refunds" not in tools.code_execution("grep -ril refund skills"):
                failures.append("grep")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert len(tools.trace) == 8 * 40 * 2
    assert sorted(tools.fetched) == sorted(ids)


# -- trace, schemas, dispatch --------------------------------------------------------------------


def test_trace_records_every_call_with_bytes_and_time(tree):
    tools = TreeTools(tree)
    listing = tools.code_execution("cat skills/billing/SKILL.md")
    doc = tools.get_document("refund-policy")
    tools.call("get_document", {"doc_id": "nope"})
    tools.call("rm", {"path": "/"})
    trace = tools.trace
    assert [c.tool for c in trace] == ["code_execution", "get_document", "get_document", "rm"]
    assert trace[0].input == {"command": "cat skills/billing/SKILL.md"}
    assert trace[0].output_bytes == len(listing.encode()) and trace[0].scanned_bytes > 0
    assert trace[1].input == {"doc_id": "refund-policy", "offset": 0}
    assert trace[1].output_bytes == len(doc.encode()) and not trace[1].error
    assert trace[2].error and trace[3].error
    assert all(c.seconds >= 0 for c in trace)
    usage = tools.usage()
    assert usage["tool_calls"] == 4 and usage["nav_bytes"] == trace[0].output_bytes
    assert usage["document_bytes"] == trace[1].output_bytes + trace[2].output_bytes
    assert usage["documents_fetched"] == 1
    assert json.dumps([c.to_dict() for c in trace])


def test_tool_schemas_match_the_tools(tree):
    assert [s["name"] for s in TOOL_SCHEMAS] == ["code_execution", "get_document"]
    for schema in TOOL_SCHEMAS:
        assert schema["description"] and schema["input_schema"]["type"] == "object"
        assert set(schema["input_schema"]["required"]) <= set(schema["input_schema"]["properties"])
    tools = TreeTools(tree)
    assert "SKILL.md" in tools.call("code_execution", {"command": "find skills -name SKILL.md"})
    assert tools.call("get_document", {"doc_id": "refund-policy", "offset": 0}).startswith("doc_id:")


def test_not_a_tree_is_a_clear_error(tmp_path):
    with pytest.raises(TreeError, match="not found"):
        TreeTools(tmp_path / "missing")
    with pytest.raises(TreeError, match="manifest.json"):
        TreeTools(tmp_path)


# -- agent pieces --------------------------------------------------------------------------------


def test_preloaded_context_and_system_prompt(tree):
    context = preloaded_context(tree)
    assert "- billing (3 docs): Billing and refunds" in context and "- shipping" in context
    prompt = system_prompt(tree)
    assert prompt.startswith(RULES) and context in prompt
    for rule in ("at least two candidate skills", "entity_index.json", "Related skills", "backtrack",
                 "get_document", "[doc_id]", "80 words", "150 words"):
        assert rule in RULES


def test_citations_are_parsed_and_checked():
    text = "Refunds take 30 days [refund-policy]. See [the docs](https://x.y) and [`shipping-times`]."
    assert citations_in(text) == ["refund-policy", "shipping-times"]
    assert check_citations(text, ["refund-policy", "shipping-times"]) == []
    assert check_citations(text, ["refund-policy"]) == [
        "cited shipping-times was never retrieved with get_document"]
    assert check_citations("No sources here.", ["refund-policy"]) == [
        "no citation: the answer cites no retrieved document"]
    unknown = check_citations("x [ghost]", ["ghost"], exists=lambda d: d != "ghost")
    assert unknown == ["cited ghost is not a document of this tree"]


def test_turn_budget():
    budget = TurnBudget(2)
    assert budget.take() and budget.left == 1 and "answer now" in budget.reminder()
    assert budget.take() and not budget.take() and budget.used == 2
    with pytest.raises(ValueError):
        TurnBudget(0)


def test_unknown_navigator_and_empty_question(tree):
    with pytest.raises(UnknownNavigatorError, match="unknown navigator 'nope'; available: anthropic, offline, openai"):
        answer("refund?", tree, navigator="nope")
    with pytest.raises(ValueError):
        answer("  ", tree)


def test_a_registered_navigator_answers_and_is_named(tree, monkeypatch):
    from c2s_agent import agent

    def first_document(question, tools, *, budget, system, **opts):
        tools.get_document("refund-policy")
        return Reply(answer="See [refund-policy].", path="direct", turns=1)

    monkeypatch.setitem(agent._NAVIGATORS, "direct", "c2s_agent.offline_navigator:navigate")  # restored after
    register_navigator("direct", first_document)
    assert "direct" in navigators() and navigators() == sorted(navigators())
    result = answer("refund?", tree, navigator="direct")
    assert result.navigator == "direct" and result.citations == ["refund-policy"] and result.grounded
    assert result.to_dict()["navigator"] == "direct" and "provider" not in result.to_dict()
    assert answer("refund?", tree).navigator == "offline"


def test_answer_on_a_small_tree(tree):
    result = answer("How many days do I have to request a refund?", tree)
    assert isinstance(result, AnswerResult)
    assert "refund-policy" in result.citations and not result.flags
    assert set(result.citations) <= set(result.fetched)
    assert result.path.startswith("skills → billing → refunds → ")
    data = json.loads(result.to_json())
    for key in ("answer", "citations", "fetched", "trace", "turns", "usage", "path"):
        assert key in data
    assert data["trace"][0]["tool"] == "code_execution"
    assert result.turns <= 10 and result.usage["nav_bytes"] > 0


def test_answer_uses_the_entity_index(tree):
    result = answer("What are the Shipping times for express delivery?", tree)
    assert "entity 'Shipping': 1 place(s)" in result.notes
    assert result.citations[0] == "shipping-times" and not result.flags


def test_the_entity_grep_prints_only_keys_made_of_the_questions_words(tmp_path):
    """A key that merely starts with a question's word ("Shipper" for "shipping") is not
    printed: on a large tree such keys were half of what a question read."""
    root = make_tree(tmp_path / "tree")
    index = json.loads((root / "entity_index.json").read_text())
    place = [{"path": "skills/shipping/delivery/INDEX.md", "mentions": 1}]
    for key in ("Shippingcontainer", "Shipper", "Timestamp", "Timeshare", "Express Shippers", "Shipping Times"):
        index[key] = place
    (root / "entity_index.json").write_text(json.dumps(index, indent=1))
    result = answer("What are the Shipping times for express delivery?", root)
    grep, = [c for c in result.trace if c.tool == "code_execution" and c.input["command"].startswith("grep -n -o")]
    printed = TreeTools(root).code_execution(grep.input["command"])
    keys = {line.split('"')[1] for line in printed.splitlines()}
    assert keys == {"Shipping", "Shipping Times"}
    assert "entity 'Shipping Times': 1 place(s)" in result.notes


def test_inflections_pattern_matches_the_words_its_term_stems_from():
    words = ("read reads reading readed reader readline library libraries librarys queries query "
             "package packages packaging packaged shipping ships shipment").split()
    for term in {stem(w) for w in words}:
        rx = re.compile(inflections_pattern(term))
        matched = {w for w in words if rx.fullmatch(w)}
        assert {w for w in words if stem(w) == term} <= matched, term  # every word the term stands for
        assert not matched & {"reader", "readline", "shipment"} - {term}, term  # no longer word starting with it


def test_concurrent_answers_match_sequential_ones(tree):
    questions = ["refund window?", "express shipping time", "refund processing details", "shipping"]
    expected = [answer(q, tree).answer for q in questions]
    got: dict[int, str] = {}

    def run(i: int) -> None:
        got[i] = answer(questions[i], tree).answer

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(questions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[i] for i in range(len(questions))] == expected


def test_turn_budget_is_respected(tree):
    result = answer("refund policy", tree, max_turns=1)
    assert result.turns == 1 and result.fetched == [] and result.flags  # no room to read anything
    result = answer("refund policy", tree, max_turns=3)
    assert result.turns <= 3


# -- search and routing --------------------------------------------------------------------------


def doc_vectors(ids: list[str]) -> np.ndarray:
    """Unit vectors of the hand-made documents (title + text), as a compile's embeddings would be."""
    from c2s_core.navigation.scoring import embedder

    return embedder().encoder.encode([f"{DOCS[d][0]}\n{DOCS[d][1]}" for d in ids])


@pytest.fixture
def searchable(tree) -> Path:
    ids = list(reversed(DOCS))  # not the index's (doc_id) order: the writer must reorder them
    write_search_index(tree, doc_vectors(ids), ids, BUNDLED_MODEL)
    return tree


@pytest.fixture
def searchable_without_vectors(tree) -> Path:
    """A tree whose search index predates the shipped document vectors."""
    write_search_index(tree)
    return tree


def test_search_tool_rows_and_errors(searchable):
    tools = TreeTools(searchable)
    assert tools.has_search and tools.schemas == ALL_TOOL_SCHEMAS
    assert [s["name"] for s in ALL_TOOL_SCHEMAS] == ["code_execution", "get_document", "search"]
    mode = ALL_TOOL_SCHEMAS[2]["input_schema"]["properties"]["mode"]
    assert mode["enum"] == list(MODES) == ["bm25", "dense", "hybrid"] and mode["default"] == "hybrid"
    out = tools.search("express shipping", k=2)
    first = out.splitlines()[0]
    assert first.startswith("1. `shipping-times` Shipping times | ") and " | score " in first
    assert len(out.splitlines()) <= 2 and not out.startswith("note:")
    hits = tools.search_hits("refund days purchase", 3, "bm25")
    assert hits[0].doc_id == "refund-policy" and hits[0].score > 0 and all(h.score > 0 for h in hits)
    assert tools.call("search", {"query": "refund", "k": 1}).count("\n") == 0
    assert tools.search("zzzz qqqq", mode="bm25").startswith("no document matches")
    for bad in ({"query": ""}, {"query": "refund", "k": "many"}, {}, {"query": "refund", "mode": "fuzzy"}):
        assert tools.call("search", bad).startswith("error:")
    assert "mode must be one of bm25, dense, hybrid" in tools.search("refund", mode="fuzzy")
    usage = tools.usage()
    assert usage["search_calls"] == 9 and usage["search_bytes"] > 0 and usage["nav_calls"] == 0
    assert [c.error for c in tools.trace if c.tool == "search"][-5:] == [True, True, True, True, True]
    assert tools.trace[0].input == {"query": "express shipping", "k": 2, "mode": "hybrid"}


def test_search_without_an_index_is_a_clear_error(tree):
    tools = TreeTools(tree)
    assert not tools.has_search and tools.schemas == TOOL_SCHEMAS
    assert "no search index" in tools.search("refund")
    assert tools.search_hits("refund") == []
    assert "unknown tool 'search'" in tools.call("search", {"query": "refund"})


def standard_bm25_scores(query: str) -> np.ndarray:
    """A standard stemmed BM25 built here from bm25s and PyStemmer directly: title + text,
    English stop words, Snowball English, documents in doc_id order."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    ids = sorted(DOCS)
    retriever = bm25s.BM25()
    tokens = bm25s.tokenize([f"{DOCS[d][0]}\n{DOCS[d][1]}" for d in ids], stopwords="en", stemmer=stemmer,
                            show_progress=False)
    retriever.index(tokens, show_progress=False)
    words = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)[0]
    known = [w for w in words if w in tokens.vocab]
    return np.asarray(retriever.get_scores(known), dtype=float) if known else np.zeros(len(ids))


def test_search_index_bm25_is_a_standard_stemmed_bm25(searchable):
    index = SearchIndex.load(searchable)
    assert [d["doc_id"] for d in index.docs] == sorted(DOCS)
    for q in ("refund policy", "express shipping days", "original card", "refunded purchases", "arriving"):
        assert np.allclose(index.bm25_scores(q), standard_bm25_scores(q)), q
    # Stemming is what finds these: no word of the question occurs in the text as written.
    assert [h.doc_id for h in index.search("refunded purchases", 2, "bm25")][:1] == ["refund-policy"]
    assert index.search("arriving", 1, "bm25")[0].doc_id == "shipping-times"
    unstemmed = SearchIndex.build(index.docs, [DOCS[d][1] for d in sorted(DOCS)], stemmer=None)
    assert unstemmed.search("refunded purchases", 2, "bm25") == [] and unstemmed.search("arriving", 1, "bm25") == []


def test_search_index_ships_vectors_float16_memory_mapped_in_index_order(searchable):
    folder = searchable / "search_index"
    meta = json.loads((folder / "docs.json").read_text())
    assert meta["version"] == 2 and meta["stemmer"] == "english"
    assert meta["vectors"] == {"file": "vectors.npy", "model": BUNDLED_MODEL, "dim": 384, "dtype": "float16"}
    index = SearchIndex.load(searchable)
    assert isinstance(index.vectors, np.memmap) and index.vectors.dtype == np.float16
    expected = doc_vectors(sorted(DOCS))
    assert np.allclose(np.asarray(index.vectors, np.float32), expected, atol=1e-3)  # reordered to doc_id order
    with pytest.raises(ValueError, match="do not match"):
        write_search_index(searchable, doc_vectors(["refund-policy"]), ["refund-policy"], BUNDLED_MODEL)


def test_dense_scores_in_blocks_equal_one_product(searchable, monkeypatch):
    import c2s_core.search_index as search_index

    index = SearchIndex.load(searchable)
    whole = np.asarray(index.vectors, dtype=np.float32) @ embedded("when will my parcel get here")
    monkeypatch.setattr(search_index, "DENSE_BLOCK_ROWS", 3)  # four documents: a full block and a short one
    assert np.allclose(index.dense_scores("when will my parcel get here"), whole, atol=1e-6)
    # The vectors navigation scores the documents it read by: the same rows, in the order asked.
    row = {d["doc_id"]: i for i, d in enumerate(index.docs)}
    wanted = ["shipping-times", "refund-policy"]
    assert np.array_equal(index.vectors_of(wanted), np.asarray(index.vectors, np.float32)[[row[d] for d in wanted]])
    assert index.vectors_of([]).shape == (0, index.vectors.shape[1])
    assert index.vectors_of(["shipping-times", "no-such-doc"]) is None


def test_search_modes_dense_and_hybrid(searchable):
    from c2s_core.navigation.scoring import rrf

    index = SearchIndex.load(searchable)
    # No word in common with any document: bm25 finds nothing, meaning still finds the page.
    q = "when will my parcel get here"
    assert index.search(q, 3, "bm25") == []
    dense = index.search(q, 4, "dense")
    assert dense[0].doc_id == "shipping-times" and len(dense) == 4
    assert dense[0].score == pytest.approx(float(doc_vectors(["shipping-times"])[0] @ embedded(q)), abs=2e-3)
    assert index.search(q, 4, "hybrid")[0].doc_id == "shipping-times"
    for q in ("refund policy", "how fast is express delivery", "card"):
        fused = rrf(index.bm25_scores(q), index.dense_scores(q), k=60)
        expected = [index.docs[i]["doc_id"] for i in np.argsort(-fused, kind="stable")[:3]]
        assert [h.doc_id for h in index.search(q, 3)] == expected, q  # hybrid is the default
    with pytest.raises(ValueError, match="unknown search mode"):
        index.search("refund", 3, "fuzzy")


def embedded(text: str) -> np.ndarray:
    from c2s_core.navigation.scoring import embedder

    return embedder()([text])[0]


def test_tree_without_vectors_serves_bm25_and_says_so(searchable_without_vectors):
    tools = TreeTools(searchable_without_vectors)
    bm25 = tools.search("refund days purchase", k=3, mode="bm25")
    assert not bm25.startswith("note:") and bm25.startswith("1. `refund-policy`")
    for mode in ("hybrid", "dense"):
        out = tools.search("refund days purchase", k=3, mode=mode)
        note, rest = out.split("\n", 1)
        assert note.startswith(f"note: {mode} search needs document vectors") and "ranked by bm25" in note
        assert rest == bm25
        assert tools.search_hits("refund days purchase", 3, mode) == tools.search_hits("refund days purchase", 3, "bm25")


def test_unstemmed_index_of_an_older_tree_is_queried_as_it_was_built(searchable_without_vectors):
    folder = searchable_without_vectors / "search_index"
    docs = [{"doc_id": d, "title": DOCS[d][0], "path": ""} for d in sorted(DOCS)]
    SearchIndex.build(docs, [DOCS[d][1] for d in sorted(DOCS)], stemmer=None).save(folder)
    meta = json.loads((folder / "docs.json").read_text())
    (folder / "docs.json").write_text(json.dumps({"version": 1, "docs": meta["docs"]}))  # the version 1 file
    index = SearchIndex.load(searchable_without_vectors)
    assert index.stemmer is None and not index.has_vectors
    assert index.search("refunds", 1, "bm25")[0].doc_id in {"refund-policy", "refund-long"}
    assert index.search("refunded", 1, "bm25") == []  # its vocabulary holds words as written


def test_routing_fuses_search_when_confidence_is_low(searchable):
    routed = answer("How many days do I have to request a refund?", searchable, route_below=1.01)
    assert routed.usage["routed"] and routed.usage["search_calls"] == 3  # bm25, dense and hybrid, in the survey
    assert [c.input["mode"] for c in routed.trace if c.tool == "search"] == ["bm25", "dense", "hybrid"]
    assert any("search hit(s) fused" in n for n in routed.notes)
    assert routed.citations[0] == "refund-policy" and not routed.flags and routed.turns <= 10
    alone = answer("How many days do I have to request a refund?", searchable, route=False)
    assert not alone.usage["routed"] and alone.usage["search_calls"] == 0
    assert "search" not in {c.tool for c in alone.trace}
    assert 0.0 <= alone.usage["confidence_routing"] <= 1.0
    # The search is asked in the survey round; a confident navigation does not fuse its hits.
    never = answer("How many days do I have to request a refund?", searchable, route_below=0.0)
    assert not never.usage["routed"] and never.usage["search_calls"] == 3 and never.fetched == alone.fetched


def test_navigation_that_agrees_with_no_search_list_is_left_out_of_the_fusion(searchable, monkeypatch):
    from c2s_core.navigation import engine
    from c2s_core.navigation.engine import agrees

    assert agrees(["a", "b", "c"], [["v", "w"], ["x", "y", "z", "q", "c"]])  # navigation's third, a list's fifth
    assert not agrees(["a", "b", "c", "d"], [["x", "y", "z", "q", "r", "d"]])  # its fourth, the list's sixth
    assert not agrees([], [["x"]])  # navigation reached nothing

    question = "How many days do I have to request a refund?"
    real = TreeTools.search_hits

    def elsewhere(self, query, k=10, mode="hybrid"):  # the search tool finds only another page
        return [h for h in real(self, query, k, mode) if h.doc_id == "shipping-times"]

    monkeypatch.setattr(TreeTools, "search_hits", elsewhere)
    monkeypatch.setattr(engine, "ROUTE_AGREE", 1)
    lost = answer(question, searchable, route_below=1.01)
    assert lost.usage["navigation_lost"] and lost.fetched == ["shipping-times"]
    assert any("no search list's first five" in n for n in lost.notes)
    monkeypatch.setattr(engine, "ROUTE_AGREE", 0)  # never left out: navigation's documents are read beside
    kept = answer(question, searchable, route_below=1.01)
    assert not kept.usage["navigation_lost"] and {"refund-policy", "shipping-times"} <= set(kept.fetched)


def test_navigation_ranks_what_it_reached_the_same_whether_or_not_search_is_fused(searchable, monkeypatch):
    """Routed, navigation's own list is ranked over the documents it reached only: a search hit it
    did not reach is in the flat lists already, and among navigation's candidates it would shift
    every rank-based signal of the rest."""
    from c2s_core.navigation.engine import Engine

    index = searchable / "skills" / "shipping" / "delivery" / "INDEX.md"
    index.write_text(index.read_text().replace("- `shipping-times`", "- `elsewhere`"))  # unreachable now
    question = "express shipping next business day"
    seen: dict[bool, list[list[str]]] = {True: [], False: []}
    real = Engine._fused

    def spy(self, ranked, lists):
        seen[bool(lists)].append(list(ranked))
        return real(self, ranked, lists)

    monkeypatch.setattr(Engine, "_fused", spy)
    alone = answer(question, searchable, route=False)
    routed = answer(question, searchable, route_below=1.01)
    assert routed.usage["routed"] and "shipping-times" in routed.fetched and "shipping-times" not in routed.reached
    cards_alone, cards_routed = seen[False][0], seen[True][0]  # the cards' order, before any page is read
    assert cards_routed == cards_alone and set(cards_routed) == set(alone.reached)
    assert set(seen[True][1]) <= set(routed.reached)  # the pages' order: navigation's documents alone


def test_routing_without_document_vectors_fuses_bm25_alone(searchable_without_vectors):
    routed = answer("How many days do I have to request a refund?", searchable_without_vectors, route_below=1.01)
    assert [c.input["mode"] for c in routed.trace if c.tool == "search"] == ["bm25"]
    assert routed.usage["routed"] and routed.citations[0] == "refund-policy"


def test_fused_rankings_keep_what_one_list_ranks_first_above_what_all_rank_middling():
    from c2s_core.navigation.scoring import fuse_rankings

    navigation, keywords, vectors = ["a", "m", "x"], ["k", "m", "y"], ["v", "m", "z"]
    assert fuse_rankings([navigation, keywords, vectors], 10)[0] == "m"  # in every list: first
    # "a" and "k" are each one list's first; "m", second in two lists, still leads them.
    assert fuse_rankings([navigation, keywords], 10)[:3] == ["m", "a", "k"]
    assert fuse_rankings([["a", "b"], ["b", "a"]], 10) == ["a", "b"]  # a tie keeps the first list's order
    assert fuse_rankings([], 10) == []
    # Routed: one list's first ("k": bm25 alone found it) leads what two lists rank middling.
    keywords = ["k", "b", "c"]
    navigation, vectors = ["n", "b", "c", "d"], ["v", "c", "b", "d"]
    assert fuse_rankings([navigation, keywords, vectors], 5)[:4] == ["b", "c", "d", "n"]  # "k" 5th
    assert fuse_rankings([navigation, keywords, vectors], 5, firsts_lead=True)[:3] == ["n", "k", "v"]
    assert fuse_rankings([navigation, keywords, vectors], 5, firsts_lead=True)[3:5] == ["b", "c"]
    # Weighted: a list's first at weight 1.5 ("n") comes before another list's first ("y"), which at
    # equal weights it would follow (a tie keeps the order ids first appear in).
    lists = [["y", "b"], ["b", "x"], ["n", "b"]]
    assert fuse_rankings(lists, 5)[:3] == ["b", "y", "n"]
    assert fuse_rankings(lists, 5, weights=[1, 1, 1.5])[:3] == ["b", "n", "y"]
    with pytest.raises(ValueError):  # a list without a weight is an error, never dropped from the fusion
        fuse_rankings([navigation, keywords, vectors], 5, weights=[1.5, 1.0])


def test_routing_reaches_a_document_the_tree_misfiles(searchable):
    """A document the navigation cannot reach (no nav row lists it) comes back through search."""
    index = searchable / "skills" / "shipping" / "delivery" / "INDEX.md"
    index.write_text(index.read_text().replace("- `shipping-times`", "- `elsewhere`"))
    alone = answer("express shipping next business day", searchable, route=False)
    assert "shipping-times" not in alone.fetched
    # Alone, it reads only what its descent reached (the document misfiled as "elsewhere" among them).
    assert alone.reached and set(alone.fetched) <= set(alone.reached) and "elsewhere" in alone.reached
    routed = answer("express shipping next business day", searchable, route_below=1.01)
    # Read, and first but for the one document all three lists hold near their tops (the corpus has four).
    assert "shipping-times" in routed.fetched[:2] and not routed.flags
    assert "shipping-times" not in routed.reached  # search found it, not the descent
    assert routed.to_dict()["reached"] == routed.reached

    assert where_lost(alone.fetched, alone.reached, ["shipping-times"]) == "not reached"
    assert where_lost(routed.fetched, routed.reached, ["shipping-times"]) == "found"
    assert where_lost(alone.fetched, alone.reached, [alone.fetched[0]]) == "found"
    assert where_lost(["a", "b", "c", "d", "e", "f"], ["a", "f"], ["f"]) == "read, not in the first five"
    assert where_lost(["a"], ["a", "f"], ["f"]) == "reached, not read"
    assert where_lost(["p#1", "q#1"], ["p#1", "f#2"], ["f#9"], page_level=True) == "reached, not read"
    assert where_lost(["a"], None, ["a"]) is None  # an answer from a saved report: not known
    assert "shipping-times" not in answer("express shipping next business day", searchable, route_below=0.0).fetched


def test_beam_width_follows_how_far_the_best_node_stands_out(searchable):
    from c2s_agent.agent import TurnBudget
    from c2s_core.navrows import Group
    from c2s_agent.offline_navigator import Navigator
    from c2s_core.navigation.engine import Node as _Node
    from c2s_core.navigation.beam import BEAM_MAX, BEAM_MIN
    from c2s_agent.tools import TreeTools

    result = answer("refund policy", searchable)
    assert result.usage["widths"] and all(BEAM_MIN <= w <= BEAM_MAX for w in result.usage["widths"])
    navigator = Navigator(TreeTools(searchable), budget=TurnBudget())

    def ranked(*scores: float) -> list:
        return [_Node(Group(f"n{i}", f"skills/n{i}/SKILL.md", 1, ""), "", s) for i, s in enumerate(scores)]

    assert navigator._width(ranked(1.0, 0.9, 0.5, 0.4)) == BEAM_MIN  # the third is far behind
    assert navigator._width(ranked(1.0, 0.97, 0.96, 0.9, 0.9, 0.9)) == BEAM_MAX  # a near tie
    assert navigator._width(ranked(1.0, 0.9, 0.9, 0.9)) == BEAM_MIN + 1
    assert navigator._width(ranked(1.0, 0.99)) == 2  # never more than there are
    assert set(answer("refund policy", searchable, beam=2).usage["widths"]) == {2}  # an explicit beam wins


def test_thin_skills_jump_to_a_related_skill(tmp_path):
    """When the skills the beam opens hold little of the question's term weight, the navigator
    opens the best related skill they link to (a fallback the probe does not model)."""
    root = tmp_path / "tree"
    names = [f"topic-{c}" for c in "abcdefgh"]  # more skills than a beam opens
    for i, name in enumerate(names):
        folder = root / "skills" / name / "pages"
        folder.mkdir(parents=True)
        others = "\n".join(f"- [{o}](../{o}/SKILL.md) — shared: Support" for o in names if o != name)
        (folder.parent / "SKILL.md").write_text(SKILL.replace("## Related skills\n\n- [{other}](../{other}/SKILL.md) — shared: Support",
                                                              "## Related skills\n\n" + others).format(
            name=name, description=f"Pages about topic {i}.", n=1, title=name, entities="Support", group="pages"))
        (folder / "INDEX.md").write_text(INDEX.format(group="pages", description=f"Pages about topic {i}.", n=1,
                                                      title="Pages", rows=f"- `doc-{i}` **Topic {i}** — page {i}"))
    (root / "manifest.json").write_text(json.dumps({"stats": {"documents": {"accepted": len(names)}}}))
    write_document_store(root / "documents.sqlite",
                         [StoredDocument(f"doc-{i}", f"Topic {i}", f"Page {i}.", "h", "test") for i in range(len(names))])
    question = "zebra xylophone quartet"  # no skill holds these words: every opened skill is thin
    jumped = answer(question, root, route=False)
    note, = [n for n in jumped.notes if n.startswith("related jump to ")]
    target = note.removeprefix("related jump to ")
    opened = {p.split("/")[1] for p in jumped.visited}
    assert target in opened and len(opened) > max(jumped.usage["widths"][:1])  # one more skill than the beam's
    plain = answer(question, root, route=False, related=False)
    assert not any(n.startswith("related jump") for n in plain.notes) and target not in {p.split("/")[1] for p in plain.visited}


def test_inner_nodes_are_listed_and_only_leaves_are_read(searchable):
    result = answer("How long do refunds take?", searchable, route=False)
    commands = [c.input["command"] for c in result.trace if c.tool == "code_execution"]
    assert not any(c.startswith("cat ") for c in commands)
    assert any(c.startswith("ls skills/") for c in commands)
    read = [part.split()[-1] for c in commands for part in c.split("; ") if part.startswith("grep -E '^(## |- )'")]
    assert read and all((searchable / f).read_text().count("## Documents") == 1 for f in read)
    assert "refund-policy" in result.fetched[:3]


def test_navigation_takes_one_round_a_level(searchable):
    """Skills two levels above the documents, fewer than the first level opens anyway: the
    survey (which also asks search) counts below the skills' groups, one round reads the chosen
    leaves, one reads documents; no round makes more than ten calls."""
    result = answer("How long do refunds take?", searchable, entities=False, related=False, backtrack=False)
    per_round = result.usage["calls_per_round"]
    assert result.turns == 3 and len(per_round) == 3 and max(per_round) <= 10
    survey = result.trace[:per_round[0]]
    assert "search" in {c.tool for c in survey}
    assert any("/*/; do" in c.input["command"] for c in survey if c.tool == "code_execution")  # children counted
    # A level opening fewer nodes than there are skills chooses among them: a round more.
    narrow = answer("How long do refunds take?", searchable, beam=1, entities=False, related=False, backtrack=False)
    assert narrow.turns == 4 and not any("/*/; do" in c.input["command"]
                                         for c in narrow.trace[:narrow.usage["calls_per_round"][0]]
                                         if c.tool == "code_execution")
    assert {c.tool for c in result.trace[-per_round[-1]:]} == {"get_document"}
    with_fallbacks = answer("How long do refunds take?", searchable)
    assert max(with_fallbacks.usage["calls_per_round"]) <= 10  # entity windows read in one call


def test_a_tree_too_tall_for_the_agents_rounds_opens_its_skills_in_the_survey(searchable, monkeypatch):
    """Where choosing among the skills first would take a question past the rounds planned for
    it, the survey opens them all whatever the beam: a round less, and the first choice is among
    their children."""
    from c2s_core.navigation import engine

    monkeypatch.setattr(engine, "AGENT_ROUNDS", 3)  # this tree's skills stand two levels up: 2 + 2 > 3
    narrow = answer("How long do refunds take?", searchable, beam=1, entities=False, related=False, backtrack=False)
    per_round = narrow.usage["calls_per_round"]
    assert narrow.turns == 3 and len(per_round) == 3
    assert any("/*/; do" in c.input["command"] for c in narrow.trace[:per_round[0]] if c.tool == "code_execution")
    assert "refund-policy" in narrow.fetched[:3]


def test_a_reply_cut_to_the_output_cap_is_asked_again_in_halves(tree):
    """Several leaves' rows read in one call with an LLM's small output cap come back whole: a cut
    reply is asked again in halves, so the rows equal those read under a large cap."""
    from c2s_agent.tool_view import ToolView

    leaves = sorted(p.relative_to(tree).as_posix() for p in tree.glob("skills/*/*/INDEX.md"))
    wide = ToolView(TreeTools(tree, max_output_bytes=256 * 1024)).read_rows(leaves)
    one = max(len(TreeTools(tree).code_execution(f"ls {leaf}; grep -E '^(## |- )' {leaf}").encode()) for leaf in leaves)
    narrow_tools = TreeTools(tree, max_output_bytes=one + 64)  # one leaf's rows fit, not both
    narrow = ToolView(narrow_tools).read_rows(leaves)
    assert len(wide) == len(leaves) == 2 and narrow == wide
    assert len(narrow_tools.trace) == 3  # the cut call, then each half


def test_children_are_listed_by_name_and_counted_whole_even_when_cut_short(searchable):
    """A node's sub-folders come by name from ``ls -F`` (not as paths echoed in the loop), each
    with its counts and whether it has sub-folders; a reply cut short is asked again until every
    node's answer is whole, and a leaf's (empty) listing is told from a missing folder."""
    from c2s_agent.tool_view import ToolView, children_loop, count_pipeline

    skills = sorted(p.relative_to(searchable).as_posix() for p in searchable.glob("skills/*/SKILL.md"))
    leaf = next(p.relative_to(searchable).as_posix() for p in searchable.glob("skills/*/*/INDEX.md"))
    asked = [(n, ["refund", "ship", "zzzunseen"]) for n in [*skills, leaf, "skills/nope/SKILL.md"]]
    tools = TreeTools(searchable)
    found = ToolView(tools).count_children(asked)
    assert len(tools.trace) == 1 and set(found) == {*skills, leaf}  # the missing folder is left out
    assert found[leaf] == []
    for skill in skills:
        folder = posixpath.dirname(skill)
        names = sorted(p.name for p in (searchable / folder).iterdir() if p.is_dir())
        assert [c.name for c in found[skill]] == names
        for child in found[skill]:
            assert child.counts == [int(tools.code_execution(count_pipeline(t, f"{folder}/{child.name}")))
                                    for t in ("refund", "ship", "zzzunseen")]
            assert child.inner == any(p.is_dir() for p in (searchable / folder / child.name).iterdir())
    # An output cap that holds each node's reply but not all of them together.
    alone = [len(tools.code_execution(children_loop(posixpath.dirname(n), terms)).encode()) for n, terms in asked]
    assert max(alone) < tools.trace[0].output_bytes
    tiny = TreeTools(searchable, max_output_bytes=max(alone))
    assert ToolView(tiny).count_children(asked) == found and len(tiny.trace) > 1


def _budgeted(tree: Path, monkeypatch, max_files: int) -> TreeTools:
    """Tools whose sandbox runs in this process with at most ``max_files`` visits a call."""
    from c2s_agent.sandbox import Sandbox, limits

    monkeypatch.setattr(limits, "MAX_FILES", max_files)
    tools = TreeTools(tree, max_output_bytes=256 * 1024)
    tools.sandbox = Sandbox(tree, max_output_bytes=256 * 1024, isolated=False)
    return tools


def test_a_call_stopped_on_its_budgets_keeps_its_counts_and_the_next_asks_for_the_rest(searchable, monkeypatch):
    """On a tree too large for one call's budget of files visited, the counts and the children's
    counts equal those one call gives on a small budget's worth: a stopped call's counts are kept
    (its reply ends with the stop) and the next call counts what is left, never from the start."""
    from c2s_agent.tool_view import ToolView, count_pipeline

    tools = TreeTools(searchable)
    skills = sorted(p.relative_to(searchable).as_posix() for p in searchable.glob("skills/*/SKILL.md"))
    nodes = [*skills, *sorted(p.relative_to(searchable).as_posix() for p in searchable.glob("skills/*/*/INDEX.md"))]
    terms = ["refund", "ship", "zzzunseen"]
    asked = [(t, n) for n in nodes for t in terms]
    one_each = [int(tools.code_execution(count_pipeline(t, posixpath.dirname(n)))) for t, n in asked]
    children = ToolView(TreeTools(searchable)).count_children([(n, terms) for n in skills])
    # Room for the walks of three counts a call (a walk visits a folder and all below it).
    walk = max(int(tools.code_execution(f"find {posixpath.dirname(n)} | wc -l")) for n in nodes) + 1
    budgeted = _budgeted(searchable, monkeypatch, 3 * walk)
    assert ToolView(budgeted).grep_counts(asked) == one_each and sum(one_each) > 0
    calls = len(budgeted.trace)
    assert 1 < calls <= -(-len(asked) // 3)  # each call answered at least three counts
    assert budgeted.sandbox.last_status == 0  # the last call finished what the stopped ones left
    budgeted = _budgeted(searchable, monkeypatch, 3 * walk)
    assert ToolView(budgeted).count_children([(n, terms) for n in skills]) == children
    assert len(budgeted.trace) > 1 and budgeted.sandbox.last_status == 0


def test_survey_greps_per_node_not_the_whole_tree(searchable):
    result = answer("refund policy", searchable)
    commands = [c.input["command"] for c in result.trace if c.tool == "code_execution"]
    # The folders each loop runs over: a round's nodes (``for d in A B; do``) or a node's
    # sub-folders (``ls -F A; for d in A/*/; do``).
    folders = [w for c in commands for found in re.findall(r"for d in (.+?); do", c) for w in shlex.split(found)]
    # One subtree each (a skill's folder, never the whole 'skills'), every term counted in one loop.
    assert folders and all(f.startswith("skills/") for f in folders)
    assert not any(part.split("|")[0].rstrip().endswith(" skills") for c in commands for part in c.split(";"))


def test_counts_asked_as_loops_equal_one_pipeline_each(searchable):
    """The loops that count a round's terms below its nodes answer what one grep each would, and a
    loop whose reply is cut short (a small output cap) is asked again until every count is whole."""
    from c2s_agent.tool_view import ToolView, count_pipeline

    nodes = sorted(p.relative_to(searchable).as_posix() for p in searchable.glob("skills/*/*/INDEX.md"))
    asked = [(t, n) for n in nodes for t in ("refund", "ship", "zzzunseen", "c++")]
    tools = TreeTools(searchable)
    one_each = [int(tools.code_execution(count_pipeline(t, posixpath.dirname(n)))) for t, n in asked]
    assert ToolView(TreeTools(searchable)).grep_counts(asked) == one_each and sum(one_each) > 0
    loops = TreeTools(searchable)
    ToolView(loops).grep_counts(asked)
    assert len(loops.trace) == 1  # every count in one call
    tiny = TreeTools(searchable, max_output_bytes=8)
    assert ToolView(tiny).grep_counts(asked) == one_each and len(tiny.trace) > 1


def _password_file_tree(root: Path) -> tuple[Path, str]:
    """One leaf of library pages titled with the words "password file" among others, and one page
    titled "The Password File"; every body uses the words once, in the same sentence."""
    from .fakes.trees import write_tree

    body = "Account {n}: its entry in the password file gives a name, a user id and a home directory."
    docs = {f"man/getpw{i}": (f"getpw{i}(3) — get password file entry {i}", body.format(n=i)) for i in range(8)}
    target = "libpq/pgpass"
    docs[target] = ("The Password File", body.format(n=8))
    return write_tree(root, {"accounts": {"": list(docs)}}, docs), target


def test_a_title_that_restates_the_question_ranks_its_document_first(tmp_path, monkeypatch):
    """Known-item questions restate a title: the page titled so outranks pages whose titles hold
    the same words among others (a title's own words against the question's, see ``title_match``)."""
    from c2s_agent import offline_navigator
    from c2s_core.navigation import engine
    from c2s_agent.tools import TreeTools
    from c2s_core.text import terms, title_match

    root, target = _password_file_tree(tmp_path / "tree")
    question = "Where can I read about the password file?"
    weights = {"read": 0.5, "password": 2.0, "file": 1.0}
    assert title_match(["read", "password", "file"], terms("The Password File"), weights) == pytest.approx(3.0 / 3.5)
    assert title_match(["read", "password", "file"], terms("getpw1(3) — get password file entry 1"), weights) < 0.5
    assert title_match(["read"], terms("The Password File"), weights) == 0.0
    assert offline_navigator.navigate(question, TreeTools(root), route=False).fetched[0] == target
    monkeypatch.setattr(engine, "TITLE_WEIGHT", 0.0)  # without the title's signal the look-alikes win
    assert offline_navigator.navigate(question, TreeTools(root), route=False).fetched[0] != target


# -- CLI -----------------------------------------------------------------------------------------


def test_cli_ask_shell_and_errors(tree, tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["ask", "--tree", str(tree), "How long do refunds take?"])
    assert res.exit_code == 0, res.output
    assert "[refund-policy]" in res.output and "Refund policy" in res.output and "path: skills →" in res.output
    res = runner.invoke(app, ["ask", "--tree", str(tree), "--json", "--max-turns", "5", "refund"])
    assert res.exit_code == 0 and json.loads(res.output)["turns"] <= 5
    res = runner.invoke(app, ["shell", "--tree", str(tree), "grep -ril refund skills | head -1"])
    assert res.exit_code == 0 and res.output.strip() == "skills/billing/SKILL.md"
    assert "outside the tree" in runner.invoke(app, ["shell", "--tree", str(tree), "cat /etc/passwd"]).output
    for args, message in (
        (["ask", "--tree", str(tmp_path / "none"), "q"], "tree not found"),
        (["ask", "--tree", str(tmp_path), "q"], "not a c2s tree"),
        (["ask", "--tree", str(tree), "--navigator", "nope", "q"], "unknown navigator 'nope'"),
        (["ask", "--tree", str(tree), "--provider", "nope", "q"], "unknown navigator 'nope'"),  # the old spelling
        (["shell", "--tree", str(tmp_path), "ls"], "not a c2s tree"),
    ):
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and message in res.output, res.output


def test_register_adds_commands_to_another_app(tree):
    other = typer.Typer()

    @other.command("compile")
    def _compile() -> None:
        """stand-in for c2s compile"""

    register(other)
    res = CliRunner().invoke(other, ["shell", "--tree", str(tree), "ls skills"])
    assert res.exit_code == 0 and res.output.split() == ["billing/", "shipping/"]


# -- the offline navigator on compiled trees -------------------------------------------------------


class RecordingTools(TreeTools):
    """TreeTools that also keep what each call returned, to check what the navigator saw."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen: list[str] = []  # what the tree's files showed
        self.searched: list[str] = []  # what the search tool returned

    def code_execution(self, command: str) -> str:
        out = super().code_execution(command)
        self.seen.append(out)
        return out

    def search(self, query: str, k: int = 10, mode: str = "hybrid") -> str:
        out = super().search(query, k, mode)
        self.searched.append(out)
        return out

    def search_hits(self, query: str, k: int = 10, mode: str = "hybrid"):
        hits = super().search_hits(query, k, mode)
        self.searched.append("\n".join(f"`{h.doc_id}`" for h in hits))
        return hits


def measure(compiled, questions: list[dict]) -> dict:
    """Run the navigator on every question beside flat dense retrieval (the tree's own dense
    search: exact cosine over the vectors the compile shipped for every document, which
    ``c2s eval``'s dense baseline scores too)."""
    from c2s_agent.offline_navigator import navigate

    root = compiled.out
    tools = TreeTools(root)
    ids = tools.tree.store.ids()
    texts = {d: tools.tree.store.get(d).text for d in ids}
    index = SearchIndex.load(root)
    assert index.has_vectors
    flat, nav, calls, runs = [], [], [], []
    start = time.perf_counter()
    for q in questions:
        gold = set(q["gold_ids"])
        flat.append(len(gold & {h.doc_id for h in index.search(q["question"], k=5, mode="dense")}) / len(gold))
        tools = RecordingTools(root, **navigate.tool_options)
        result = answer(q["question"], tools)
        nav.append(len(gold & set(result.fetched[:5])) / len(gold))
        read = [c.input["doc_id"] for c in result.trace if c.tool == "get_document" and not c.error]
        calls.append(len(gold & set(list(dict.fromkeys(read))[:5])) / len(gold))
        runs.append((q, result, tools))
    return {"flat": float(np.mean(flat)), "nav": float(np.mean(nav)), "calls": float(np.mean(calls)),
            "runs": runs, "ids": ids,
            "seconds": time.perf_counter() - start, "corpus_bytes": sum(len(t.encode()) for t in texts.values()),
            "nav_total": compiled.manifest["stats"]["nav_bytes"]["total"]}


@pytest.fixture(scope="module")
def wixqa(wixqa_tree, wixqa_questions) -> dict:
    return measure(wixqa_tree, wixqa_questions)


@pytest.fixture(scope="module")
def sample(sample_tree) -> dict:
    if not SAMPLE_QUESTIONS.exists():
        pytest.skip(f"no sample questions at {SAMPLE_QUESTIONS}")
    questions = [json.loads(line) for line in SAMPLE_QUESTIONS.read_text().splitlines() if line.strip()]
    # Every other question (20 of 40): the bundled corpus is the demo's; WixQA's 80 real questions
    # carry the quality bar, and the suite stays within its time.
    return measure(sample_tree, questions[::2])


def report(name: str, m: dict) -> str:
    runs = m["runs"]
    nav_bytes = np.mean([r.usage["nav_bytes"] for _, r, _ in runs])
    return (f"{name}: recall@5 navigator {m['nav']:.3f} (first 5 in call order {m['calls']:.3f}) vs "
            f"flat dense {m['flat']:.3f} ({m['nav'] / m['flat']:.2f}x); nav bytes/query {nav_bytes:,.0f} of {m['nav_total']:,}; "
            f"{len(runs)} questions in {m['seconds']:.1f} s")


@pytest.mark.parametrize("corpus", ["wixqa", "sample"])
def test_navigator_answers_every_question_with_valid_citations(corpus, request):
    m = request.getfixturevalue(corpus)
    ids = set(m["ids"])
    for q, result, _ in m["runs"]:
        assert result.answer.strip(), q["id"]
        assert result.citations, (q["id"], result.answer)
        assert not result.flags, (q["id"], result.flags)
        assert set(result.citations) <= set(result.fetched) <= ids
        assert result.path.startswith("skills → ") and result.turns <= 10


@pytest.mark.parametrize("corpus", ["wixqa", "sample"])
def test_navigator_recall_at_5_is_near_flat_dense(corpus, request):
    m = request.getfixturevalue(corpus)
    print(report(corpus, m))
    # Measured (offline compile, MiniLM, routing over bm25, dense and hybrid lists): WixQA 0.946 vs
    # 0.919 flat (1.03x), sample (every other question) 0.950 vs 0.875 (1.09x); the first five
    # get_document calls: the same. The method's target is 0.9x flat dense; WixQA also keeps an absolute floor.
    assert m["nav"] >= 0.9 * m["flat"], report(corpus, m)
    assert m["calls"] >= 0.9 * m["flat"], report(corpus, m)
    if corpus == "wixqa":
        assert m["nav"] >= 0.85, report(corpus, m)


@pytest.mark.parametrize("corpus", ["wixqa", "sample"])
def test_navigator_reads_a_fraction_of_the_corpus(corpus, request):
    m = request.getfixturevalue(corpus)
    runs, n = m["runs"], len(m["ids"])
    nav_bytes = np.mean([r.usage["nav_bytes"] for _, r, _ in runs])
    doc_bytes = np.mean([r.usage["document_bytes"] for _, r, _ in runs])
    # Tiny trees (2 skills, ~18 leaves) still take ~45% of their nav bytes with a beam of 5;
    # documents read stay near 6% of the corpus.
    assert nav_bytes < 0.6 * m["nav_total"], report(corpus, m)
    assert max(r.usage["documents_fetched"] for _, r, _ in runs) <= max(10, n // 10)
    assert (nav_bytes + doc_bytes) < 0.25 * (m["nav_total"] + m["corpus_bytes"])


def test_navigator_acts_only_through_the_tools_and_navigates(wixqa):
    """Every document it reads was listed on a nav file it read first, or by the search tool
    when (and only when) its routing confidence was low. The search is asked in the survey round,
    in parallel with navigation; its hits count only when the question is routed."""
    for q, result, tools in wixqa["runs"]:
        used = {c.tool for c in result.trace}
        assert used == {"code_execution", "get_document", "search"}
        commands = [c.input["command"] for c in result.trace if c.tool == "code_execution"]
        assert all(c.split()[0] in {"ls", "grep", "head", "for"} for c in commands)
        assert any(c.startswith("ls -F skills/") and "/*/; do" in c for c in commands)  # a node's children
        seen = "\n".join(tools.seen + (tools.searched if result.usage["routed"] else []))
        for doc_id in result.fetched:
            assert f"`{doc_id}`" in seen, (q["id"], doc_id)
        # Each node visited had its children learned (a loop over its folder) or was read (a leaf's rows), once.
        assert len(result.visited) == len(set(result.visited))
        for path in result.visited:
            assert any(f"{shlex.quote(posixpath.dirname(path))}/*/;" in c.split()
                       or shlex.quote(path) in c.replace(";", " ").split() for c in commands), path
