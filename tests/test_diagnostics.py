"""Navigability diagnostics on real compiles: recorded in manifest.json and in the skill_tree
materialization, in range, reproducible from the compiled artifacts for a seed, worse on a
degenerate corpus than on the sample corpus, and warned about in the compile summary."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pytest
from dagster import AssetKey, AssetRecordsFilter, DagsterInstance

from c2s_pipeline.artifacts import CorpusArtifacts
from c2s_core.cache import ItemCache
from c2s_pipeline.diagnostics import NAVIGABILITY, TreeInputs, diagnose
from c2s_core.navigation.stats import bootstrap_groups, judge, verdict
from c2s_core.encoder import EmbedStats, Encoder, embed_with_cache
from c2s_core.text import query_terms

from .conftest import Compiled, compile_into

ECHOES = 240  # near-identical documents: enough leaves that a beam cannot open them all


@pytest.fixture(scope="module")
def echoes_tree(dagster_home, tmp_path_factory) -> Compiled:
    """A degenerate corpus: one template, documents told apart only by a number."""
    folder = tmp_path_factory.mktemp("echoes")
    for i in range(ECHOES):
        (folder / f"update-{i:03d}.md").write_text(
            f"# Account update {i}\n\nYour account was updated. The account settings changed and the account "
            f"team reviewed the account update. Nothing else about the account changed in update {i}.\n\n"
            "The account update was recorded. Contact the account team about the account update if needed.\n")
    return compile_into(dagster_home, "echoes", folder)


def rediagnose(compiled: Compiled, name: str, **kw) -> dict:
    """The diagnostics recomputed from a compiled corpus's artifacts and published tree."""
    encoder, cache = Encoder(), ItemCache(compiled.home / "cache.sqlite")
    stats = EmbedStats()
    try:
        tree = TreeInputs.load(CorpusArtifacts(compiled.home / "artifacts" / name), compiled.out)
        report = diagnose(tree, lambda texts: embed_with_cache(encoder, cache, texts, stats), **kw)
    finally:
        cache.close()
    return report


def in_unit(value: float) -> bool:
    return value is not None and 0.0 <= value <= 1.0


def check_interval(interval: dict) -> None:
    assert in_unit(interval["rate"]) and in_unit(interval["low"]) and in_unit(interval["high"])
    assert interval["low"] <= interval["rate"] <= interval["high"]


def ruled(difference: dict) -> str:
    """The verdict's rule: a winner's lead clears the margin across the whole interval."""
    margin = difference["margin"]
    return "navigation" if difference["low"] > margin else "flat" if difference["high"] < -margin else "either"


def test_a_winner_is_named_only_beyond_the_margin_of_equivalence():
    # 600 questions on 200 documents: navigation misses 1 in 100 that flat search finds, a gap
    # beyond its interval but within 5% of flat's recall; then 1 in 10, beyond both.
    docs = np.repeat(np.arange(200), 3)
    groups = bootstrap_groups(docs, np.random.default_rng(0))
    flat = np.ones(len(docs))
    for every, expected in ((100, "either"), (10, "flat")):
        navigation = np.where(np.arange(len(docs)) % every == 0, 0.0, 1.0)
        judged = judge(navigation - flat, groups, flat.mean())
        assert judged["high"] < 0 and judged["margin"] == 0.05  # the gap is beyond its interval either way
        assert judged["verdict"] == expected
        assert judge(flat - navigation, groups, navigation.mean())["verdict"] == (
            "navigation" if expected == "flat" else "either")
    assert verdict({"mean": None, "low": None, "high": None, "margin": None}) == "either"


def test_manifest_reports_every_diagnostic_in_range(sample_tree):
    report = sample_tree.manifest[NAVIGABILITY]
    stats = sample_tree.manifest["stats"]
    collapse = report["collapse"]
    assert collapse["skills"] == stats["skills"]
    largest = max(s["documents"] for s in sample_tree.manifest["skills"])
    assert collapse["largest_share"] == pytest.approx(largest / stats["documents"]["accepted"], abs=1e-4)
    assert collapse["largest_share"] <= collapse["top2_share"] <= 1.0

    siblings = report["sibling_similarity"]
    assert siblings["pairs"] > 0 and -1.0 <= siblings["mean"] <= siblings["max"] <= 1.0
    assert set(report["cohesion"]) == {f"level_{n}" for n in range(1, stats["levels"] + 1)} | {"corpus"}
    # Members sit nearer their own centroid than documents sit to the corpus centroid.
    assert report["cohesion"]["corpus"] < report["cohesion"]["level_1"] <= 1.0
    assert in_unit(report["path_term_coverage"]["documents"]) and in_unit(report["path_term_coverage"]["mean_share"])

    probe = report["probe"]
    assert probe["documents"] == min(200, stats["documents"]["accepted"])
    assert probe["documents"] < probe["questions"] <= 3 * probe["documents"]
    assert 3 <= probe["beam"]["min"] <= probe["beam"]["mean"] <= probe["beam"]["max"] <= 10
    for interval in (probe["reach"], probe["navigation_recall_at_5"], *(
            probe["flat_recall_at_5"][m] for m in ("bm25", "dense", "hybrid"))):
        check_interval(interval)
    # The best flat method is the best of the three, as the evaluation judges navigation against.
    flat = probe["flat_recall_at_5"]
    assert flat[flat["best"]]["rate"] == max(flat[m]["rate"] for m in ("bm25", "dense", "hybrid"))
    # Reaching a document is necessary for ranking it in the top five.
    assert probe["navigation_recall_at_5"]["rate"] <= probe["reach"]["rate"]
    assert report["navigability_score"] == probe["reach"]["rate"]
    difference = probe["navigation_minus_flat"]
    assert difference["low"] <= difference["mean"] <= difference["high"]
    # A winner clears a margin of 5% of the flat method's recall, beyond the interval.
    assert difference["margin"] == pytest.approx(0.05 * flat[flat["best"]]["rate"], abs=1e-4)
    assert report["verdict"] == probe["verdict"] == ruled(difference)
    # Per style of question (topic: titles and leads; detail: body sentences), the same rule.
    styles = probe["by_question_style"]
    assert set(styles) == {"topic", "detail"}
    for style in styles.values():
        assert style["low"] <= style["mean"] <= style["high"] and 0 < style["margin"] <= 0.05
        assert style["verdict"] == ruled(style)
    assert report["verdict_by_question_style"] == {k: v["verdict"] for k, v in styles.items()}
    assert sample_tree.manifest["stages"]["staged_tree"]["navigability_seconds"] > 0


def test_skill_tree_materialization_carries_the_diagnostics(sample_tree):
    # The instance the sample was compiled in (other tests may point $DAGSTER_HOME elsewhere).
    with DagsterInstance.from_config(str(sample_tree.home)) as instance:
        record, = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey("skill_tree"), asset_partitions=["sample"]), limit=1).records
        staged, = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey("staged_tree"), asset_partitions=["sample"]), limit=1).records
    metadata = record.asset_materialization.metadata
    report = sample_tree.manifest[NAVIGABILITY]
    assert metadata["navigability_score"].value == pytest.approx(report["navigability_score"])
    assert metadata["flat_recall_at_5"].value == pytest.approx(
        report["probe"]["flat_recall_at_5"][report["probe"]["flat_recall_at_5"]["best"]]["rate"])
    assert metadata["largest_skill_share"].value == pytest.approx(report["collapse"]["largest_share"])
    assert metadata["cohesion_level_1"].value == pytest.approx(report["cohesion"]["level_1"])
    assert metadata["navigability_verdict"].value == report["verdict"]
    for style, verdict in report["verdict_by_question_style"].items():
        assert metadata[f"navigability_verdict_{style}"].value == verdict
    assert metadata[NAVIGABILITY].value == report
    assert "expected winner" in metadata["navigability_summary"].value
    staged_metadata = staged.asset_materialization.metadata
    assert staged_metadata[NAVIGABILITY].value == report
    # Other tests recompile this corpus: the newest materialization is the same report, not the same run.
    assert staged_metadata["navigability_seconds"].value > 0


def test_the_probe_is_reproducible_for_a_seed(sample_tree):
    recorded = sample_tree.manifest[NAVIGABILITY]
    # From the artifacts, with the seed the compile used: the numbers the compile recorded.
    assert rediagnose(sample_tree, "sample") == recorded
    small = rediagnose(sample_tree, "sample", sample=40, seed=7)
    assert small == rediagnose(sample_tree, "sample", sample=40, seed=7)
    other = rediagnose(sample_tree, "sample", sample=40, seed=8)
    assert small["probe"]["documents"] == other["probe"]["documents"] == 40
    assert small["probe"]["sample_digest"] != other["probe"]["sample_digest"]
    # The structural metrics do not depend on the sample.
    assert small["collapse"] == other["collapse"] == recorded["collapse"]
    assert small["sibling_similarity"] == recorded["sibling_similarity"]


def test_only_titles_no_other_document_shares_are_posed(sample_tree, echoes_tree):
    """"Account update 7" and "Account update 8" share their terms: neither names one document."""
    from c2s_pipeline.diagnostics import _questions

    for compiled, name in ((sample_tree, "sample"), (echoes_tree, "echoes")):
        tree = TreeInputs.load(CorpusArtifacts(compiled.home / "artifacts" / name), compiled.out)
        asked = _questions(tree, 200, 0)
        titles = [q for _, kind, q in asked if kind == "title"]
        everyone = [frozenset(query_terms(tree.cards[d].title)) for d in tree.doc_ids]
        assert all(everyone.count(frozenset(query_terms(t))) == 1 for t in titles)
        assert bool(titles) == (name == "sample")  # every echo's title is "Account update N"


def test_only_body_sentences_naming_a_detail_are_posed():
    """A body sentence of words most documents use ("The default value is off") is said by many
    documents and has no single gold; one that carries rare terms (option names) is posed."""
    from c2s_pipeline.diagnostics import _questions
    from c2s_core.navrows import DocCard

    docs = 60
    ids = [f"doc-{i}" for i in range(docs)]
    common = "The default value is off and the setting applies to every user of the service."
    texts = {d: f"Service page {i} explains the basic service settings for users.\n\n{common}\n\n"
                + (f"Pass --zorb{i}-level together with quux{i}mode to widen the cache window." if i % 2 else
                   "Every user of the service can change the setting when the default value is off.")
             for i, d in enumerate(ids)}
    tree = TreeInputs(forest=None, cards={d: DocCard(doc_id=d, title=f"Service page {i}", one_line="", phrases=[]) for i, d in enumerate(ids)},
                      doc_ids=ids, texts=[texts[d] for d in ids], vectors=None, soft={}, search=None, nav_files={})
    asked = _questions(tree, docs, 0)
    body = {ids[row]: q for row, kind, q in asked if kind == "body"}
    # Only the documents with an identifier-bearing sentence get a detail question, and it is that sentence.
    assert set(body) == {d for i, d in enumerate(ids) if i % 2}
    assert all(q.startswith(f"Pass --zorb{d.split('-')[1]}-level") for d, q in body.items())
    # Every document still gets its lead sentence as a topic question.
    assert sum(kind == "lead" for _, kind, _ in asked) == docs


def test_a_degenerate_corpus_reads_worse_than_the_sample_corpus(sample_tree, echoes_tree):
    good, bad = sample_tree.manifest[NAVIGABILITY], echoes_tree.manifest[NAVIGABILITY]
    assert echoes_tree.manifest["stats"]["documents"]["accepted"] == ECHOES
    # Rows that read alike, members hardly nearer their centroid than to the whole corpus ...
    assert bad["sibling_similarity"]["mean"] > good["sibling_similarity"]["mean"] + 0.2
    separation = {name: r["cohesion"]["level_1"] - r["cohesion"]["corpus"] for name, r in (("good", good), ("bad", bad))}
    assert separation["bad"] < separation["good"] / 2
    # ... so the probe reaches and finds fewer of its documents.
    assert bad["navigability_score"] < good["navigability_score"] - 0.1
    assert bad["probe"]["reach"]["high"] < good["probe"]["reach"]["low"]
    assert (bad["probe"]["navigation_recall_at_5"]["rate"]
            < good["probe"]["navigation_recall_at_5"]["rate"] - 0.2)
    assert bad["collapse"]["largest_share"] > good["collapse"]["largest_share"]


def summary_text(manifest: dict, out: Path, capsys) -> str:
    from c2s_cli.compile import print_summary

    print_summary(manifest, out)
    captured = capsys.readouterr()
    return re.sub(r"\s+", " ", re.sub(r"[│┃]", " ", captured.out + captured.err))  # table borders of wrapped cells


def test_the_compile_summary_warns_when_flat_retrieval_is_expected_to_win(sample_tree, capsys):
    flat = copy.deepcopy(sample_tree.manifest)
    flat[NAVIGABILITY]["verdict"] = "flat"
    text = summary_text(flat, sample_tree.out, capsys)
    assert "navigability" in text and "expected winner: flat" in text
    assert re.search(r"warning navigability: flat retrieval is expected to beat navigating this tree by more "
                     r"than 5%", text)
    assert "keep the agent's search routing on" in text

    navigable = copy.deepcopy(sample_tree.manifest)
    navigable[NAVIGABILITY]["verdict"] = "navigation"
    navigable[NAVIGABILITY]["collapse"]["collapsed"] = False
    text = summary_text(navigable, sample_tree.out, capsys)
    assert "expected winner: navigation" in text and "warning navigability" not in text


def test_a_collapsed_top_level_is_warned_about(echoes_tree, capsys):
    report = echoes_tree.manifest[NAVIGABILITY]
    assert report["collapse"]["collapsed"]
    text = summary_text(echoes_tree.manifest, echoes_tree.out, capsys)
    share = f"{report['collapse']['largest_share']:.0%}"
    assert f"the largest of {report['collapse']['skills']} skills holds {share} of the documents" in text
