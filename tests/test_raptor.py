"""The RAPTOR baseline: its clustering pieces on synthetic data, and one tree built offline over
the real WixQA sample (structure, caching, document ranking, recall on the dev questions)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from c2s_agent.evaluation.baselines import CONTEXT_DOCS, RANK_DEPTH, Corpus
from c2s_agent.evaluation.metrics import mrr_at, recall_at
from c2s_agent.evaluation.raptor import (CHUNK_TOKENS, CLUSTER_TOKEN_LIMIT, REDUCTION_DIM, THRESHOLD, TOP_K, Raptor,
                                         gmm_cluster, n_tokens, optimal_clusters, soft_memberships, split_text,
                                         split_by_tokens)
from c2s_core.tree import open_tree

# Measured offline on the 80 WixQA dev questions: recall@5 0.898, MRR@10 0.831.
RECALL5_FLOOR = 0.85
MRR10_FLOOR = 0.78


# -- the pieces, on synthetic data -----------------------------------------------------------------


def test_split_text_packs_sentences_under_the_limit():
    text = " ".join(f"Sentence number {i} says a few words about payments." for i in range(60))
    text += " " + ", ".join(["a long clause without any full stop"] * 40) + "."
    chunks = split_text(text)
    assert len(chunks) > 3
    assert all(1 <= n_tokens(c) <= CHUNK_TOKENS for c in chunks)
    assert " ".join(chunks).split() == text.split()  # nothing lost, nothing reordered
    assert chunks[0].startswith("Sentence number 0") and chunks[0].endswith(".")


def test_bic_picks_three_blobs():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    points = np.concatenate([c + rng.normal(scale=0.8, size=(40, 2)) for c in centres])
    assert optimal_clusters(points) == 3


def test_soft_membership_threshold():
    probs = np.array([[0.85, 0.15, 0.0], [0.5, 0.45, 0.05], [0.05, 0.05, 0.9]])
    labels = [x.tolist() for x in soft_memberships(probs, THRESHOLD)]
    assert labels == [[0, 1], [0, 1], [2]]
    # every probability ≤ the threshold: the node keeps its most likely cluster
    assert soft_memberships(np.array([[0.09] * 9 + [0.1, 0.09]]), THRESHOLD)[0].tolist() == [9]


def test_gmm_puts_a_midpoint_in_two_clusters():
    rng = np.random.default_rng(1)
    points = np.concatenate([rng.normal(-3, 1, size=(60, 1)), rng.normal(3, 1, size=(60, 1)), [[0.0]]])
    labels, n = gmm_cluster(points)
    assert n == 2
    assert sorted(labels[-1].tolist()) == [0, 1]  # the midpoint belongs to both
    assert all(len(x) == 1 for x in labels[:10])  # blob cores to one


def test_split_by_tokens_respects_the_limit():
    rng = np.random.default_rng(2)
    groups = split_by_tokens(rng.normal(size=(9, 4)), [400] * 9, 1000)
    assert sorted(i for g in groups for i in g) == list(range(9))
    assert [len(g) for g in groups] == [2, 2, 2, 2, 1]


# -- one tree over the real WixQA sample --------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(wixqa_tree) -> Corpus:
    return Corpus.load(open_tree(wixqa_tree.out))


@pytest.fixture(scope="module")
def built(corpus, tmp_path_factory):
    cache = tmp_path_factory.mktemp("raptor-cache")
    raptor = Raptor(corpus, cache)
    stats = raptor.prepare()
    return raptor, stats, cache


def test_tree_structure(built, corpus):
    raptor, stats, _ = built
    tree = raptor.tree
    assert not stats["from_cache"] and stats["llm_calls"] == stats["summaries"] > 0
    assert stats["nodes"] == len(tree.texts) == len(tree.embeddings) == stats["leaves"] + stats["summaries"]
    assert stats["layers"] == tree.n_layers >= 3  # leaves + at least two layers of summaries
    assert np.allclose(np.linalg.norm(tree.embeddings, axis=1), 1.0, atol=1e-3)
    ids = set(corpus.ids)
    leaves = [i for i, layer in enumerate(tree.layers) if layer == 0]
    assert {d for i in leaves for d in tree.doc_ids[i]} == ids  # every document is chunked
    for i in leaves:
        assert len(tree.doc_ids[i]) == 1 and tree.doc_ids[i][0] in ids
        assert not tree.children[i] and 1 <= n_tokens(tree.texts[i]) <= CHUNK_TOKENS
    for i, layer in enumerate(tree.layers):
        if layer == 0:
            continue
        children = tree.children[i]
        assert children and all(0 <= c < len(tree.texts) and tree.layers[c] == layer - 1 for c in children)
        assert set(tree.doc_ids[i]) == {d for c in children for d in tree.doc_ids[c]}
        assert tree.texts[i].strip()
        # a cluster over the token limit is split again (a singleton may not be)
        assert len(children) == 1 or sum(n_tokens(tree.texts[c]) for c in children) <= CLUSTER_TOKEN_LIMIT
    # every node of a layer that was clustered has a parent; soft clustering gives some two
    for layer in range(tree.n_layers - 1):
        parents = Counter(c for i, children in enumerate(tree.children) if tree.layers[i] == layer + 1
                          for c in children)
        assert set(parents) == {i for i, x in enumerate(tree.layers) if x == layer}
    # In UMAP space these mixtures are confident: on this corpus no node joins two clusters
    # (stats["shared_nodes"] == 0), so the soft threshold is tested on synthetic data above.
    parents_of = Counter(c for children in tree.children for c in children)
    assert stats["shared_nodes"] == sum(1 for n in parents_of.values() if n > 1)
    top = [i for i, x in enumerate(tree.layers) if x == tree.n_layers - 1]
    assert len(top) <= REDUCTION_DIM + 1 or tree.n_layers - 1 == 5  # stopped by the reference's rule


def test_cached_construction_computes_nothing(built, corpus, monkeypatch):
    from c2s_core.cache import ItemCache
    from c2s_core.encoder import Encoder
    from c2s_core.llm.offline import OfflineProvider

    raptor, stats, cache = built
    calls = Counter()
    encode, summaries = Encoder.encode, OfflineProvider.summaries

    def counting_encode(self, texts):
        calls["embedded"] += len(texts)
        return encode(self, texts)

    def counting_summaries(self, items, only, on_result=None):
        calls["summaries"] += len(only)
        return summaries(self, items, only, on_result)

    monkeypatch.setattr(Encoder, "encode", counting_encode)
    monkeypatch.setattr(OfflineProvider, "summaries", counting_summaries)
    again = Raptor(corpus, cache)
    second = again.prepare()
    assert second["from_cache"] and second["llm_calls"] == 0 and second["embedded"] == 0
    assert calls == Counter()
    assert (second["nodes"], second["layers"]) == (stats["nodes"], stats["layers"])
    assert np.array_equal(again.tree.embeddings, raptor.tree.embeddings)
    assert again.tree.children == raptor.tree.children
    # every summary was also stored on its own as it was made, for a build that stops part-way
    items = ItemCache(cache / "raptor-items.sqlite")
    try:
        stored = items._con.execute("SELECT count(*) FROM items WHERE namespace = 'llm:summary'").fetchone()[0]
    finally:
        items.close()
    assert stored == stats["summaries"]


def test_run_ranks_ten_documents_and_answers_from_five(built, corpus, wixqa_questions):
    raptor, _, _ = built
    item = wixqa_questions[0]
    result = raptor.run(item["question"])
    assert len(result.ranked) == RANK_DEPTH == len(set(result.ranked))
    assert set(result.ranked) <= set(corpus.ids)
    assert result.context == result.ranked[:CONTEXT_DOCS]
    assert 1 <= result.usage["nodes_retrieved"] <= TOP_K and result.usage["layers_hit"]
    assert result.answer.strip() and result.seconds > 0
    assert item["gold_ids"][0] in result.context


def test_recall_on_wixqa_dev(built, wixqa_questions):
    raptor, _, _ = built
    recalls, mrrs = [], []
    for item in wixqa_questions:
        _, ranked, _ = raptor.retrieve(item["question"])
        recalls.append(recall_at(ranked, item["gold_ids"], 5))
        mrrs.append(mrr_at(ranked, item["gold_ids"], 10))
    recall, mrr = float(np.mean(recalls)), float(np.mean(mrrs))
    print(f"RAPTOR offline on {len(wixqa_questions)} WixQA dev questions: recall@5 {recall:.3f}, MRR@10 {mrr:.3f}")
    assert recall >= RECALL5_FLOOR
    assert mrr >= MRR10_FLOOR


def test_eval_runs_raptor_beside_a_flat_baseline_from_the_cached_tree(built, wixqa_tree):
    from c2s_agent.evaluation import runner
    from c2s_agent.evaluation.metrics import load_qa

    from .conftest import WIXQA

    _, _, cache = built
    items = load_qa(WIXQA / "qa_dev.jsonl", limit=6)
    run = runner.evaluate(wixqa_tree.out, items, ["raptor", "dense"], cache_dir=cache)
    assert run.setup["raptor_from_cache"] is True and run.setup["raptor_llm_calls"] == 0
    rows = [r for r in run.records if r["method"] == "raptor"]
    assert len(rows) == 6 and not any(r.get("error") for r in rows)
    for r in rows:
        assert len(r["ranked"]) == 10 and r["context"] == r["ranked"][:5]
        assert r["answer"] and set(r["citations"]) <= set(r["context"])
    assert set(run.summary) == {"raptor", "dense"} and 0.0 <= run.summary["raptor"]["recall@5"] <= 1.0


def test_raptor_summarises_with_the_remote_provider(corpus, tmp_path, monkeypatch):
    """The summaries come from the same provider as the compile: here Anthropic's Messages API,
    spoken by the local fake server, through the compiler's "summary" task."""
    from tests.fakes.compile_model import CompileModel, task_of
    from tests.fakes.llm_servers import FakeLLMServer

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    picked = list(range(0, len(corpus.ids), 6))[:24]  # a small spread of the sample: a quick build
    small = Corpus([corpus.ids[i] for i in picked], [corpus.titles[i] for i in picked],
                   [corpus.texts[i] for i in picked], [corpus.hashes[i] for i in picked])
    model = CompileModel()
    with FakeLLMServer("anthropic", handler=model) as server:
        raptor = Raptor(small, tmp_path, provider="anthropic", model="claude-sonnet-4-6", base_url=server.base_url)
        stats = raptor.prepare()
        assert stats["summaries"] > 0 and stats["llm_calls"] == stats["summaries"] == len(server.requests)
        assert {task_of(r) for r in server.requests} == {"summary"}
        assert {r.body["model"] for r in server.requests} == {"claude-sonnet-4-6"}
        tree = raptor.tree
        summaries = [t for t, layer in zip(tree.texts, tree.layers) if layer > 0]
        assert all("and related topics" in t for t in summaries)  # the model's titles, not a local stand-in
        again = Raptor(small, tmp_path, provider="anthropic", model="claude-sonnet-4-6", base_url=server.base_url)
        assert again.prepare()["from_cache"] is True and len(server.requests) == stats["llm_calls"]
