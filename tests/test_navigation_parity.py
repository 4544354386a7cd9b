"""The compile's navigability probe and the offline navigator run one navigation engine
(``c2s_core.navigation.engine``) over two views of a tree: the compile's in-memory artifacts and
the sandboxed tools. On the probe's own questions over the compiled sample corpus they reach
the same leaves and rank the same documents, so the probe's numbers are the navigator's; the
navigator's fallbacks, which the probe does not model, change only the questions they act on."""

from __future__ import annotations

import pytest

from c2s_agent.agent import TurnBudget
from c2s_agent.offline_navigator import Navigator, navigate
from c2s_agent.tools import TreeTools
from c2s_core.navigation.scoring import embedder
from c2s_pipeline.artifacts import CorpusArtifacts
from c2s_pipeline.diagnostics import TOP_K, TreeInputs, _questions, diagnose
from c2s_pipeline.diagnostics import navigate as probe_navigate

SAMPLE = 30  # documents whose probe questions are asked both ways (~75 questions)
NO_FALLBACKS = {"route": False, "entities": False, "related": False, "backtrack": False}


@pytest.fixture(scope="module")
def probe(sample_tree):
    tree = TreeInputs.load(CorpusArtifacts(sample_tree.home / "artifacts" / "sample"), sample_tree.out)
    view = tree.view()
    return tree, view, _questions(tree, SAMPLE, 0)


def navigator_run(root, question: str, **fallbacks):
    tools = TreeTools(root, **navigate.tool_options)
    nav = Navigator(tools, budget=TurnBudget(), **{**NO_FALLBACKS, **fallbacks})
    return nav, nav.navigate(question), tools


@pytest.fixture(scope="module")
def both_ways(sample_tree, probe):
    """Each probe question run by the probe and by the navigator with its fallbacks off, once for
    every test of this module."""
    _, view, questions = probe
    embed = embedder()  # one encoder for both sides, so equal inputs give equal vectors
    return [(probe_navigate(view, embed, question), navigator_run(sample_tree.out, question))
            for _, _, question in questions]


def test_the_probe_and_the_navigator_reach_and_rank_alike(probe, both_ways):
    tree, view, questions = probe
    assert len(questions) > SAMPLE  # titles, leads and body sentences
    jumped = 0
    for (_, kind, question), ((engine, expected), (nav, found, tools)) in zip(questions, both_ways):
        assert [n.path for n in found.leaves] == [n.path for n in expected.leaves], (kind, question)
        assert list(found.cards) == list(expected.cards), (kind, question)
        assert found.ranked == expected.ranked and found.ranked, (kind, question)
        assert nav.widths == engine.widths and nav.budget.used == engine.budget.used, (kind, question)
        assert nav.notes == engine.notes
        # The navigator read the tree only through the tools: ls / grep, and get_document.
        assert {c.tool for c in tools.trace} == {"code_execution", "get_document"}
        jumped += any("term-index rows" in note for note in engine.notes)
    assert jumped  # the term-index jump is part of what both run


def test_the_probe_report_is_the_navigators_reach_and_recall(probe, both_ways):
    tree, view, questions = probe
    report = diagnose(tree, embedder(), sample=SAMPLE)["probe"]
    reached, found = [], []
    for (row, _, _), (_, (_, ranking, _)) in zip(questions, both_ways):
        reached.append(tree.doc_ids[row] in ranking.cards)
        found.append(tree.doc_ids[row] in ranking.ranked[:TOP_K])
    assert report["questions"] == len(questions)
    assert report["reach"]["rate"] == round(sum(reached) / len(reached), 4)
    assert report["navigation_recall_at_5"]["rate"] == round(sum(found) / len(found), 4)


@pytest.mark.parametrize("fallback, note", [("entities", "entity "), ("route", "routing confidence"),
                                            ("related", "related jump"), ("backtrack", "backtrack to")])
def test_each_fallback_changes_only_the_questions_it_acts_on(sample_tree, probe, both_ways, fallback, note):
    _, _, questions = probe
    acted = 0
    for (_, _, question), ((_, expected), _) in zip(questions, both_ways):
        nav, found, _ = navigator_run(sample_tree.out, question, **{fallback: True})
        if any(n.startswith(note) for n in nav.notes):
            acted += 1
        else:
            assert found.ranked == expected.ranked, (fallback, question)
    if fallback != "related":  # each acts on some of these questions (related jumps: test_agent.py)
        assert acted, fallback
