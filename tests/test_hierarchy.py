"""Hierarchy math and verify-and-repartition on hand-built clusters; K-Means, exact and blocked,
on real embeddings of the bundled sample corpus."""

import math

import numpy as np
import pytest
from sklearn.cluster import KMeans

from c2s_core.encoder import Encoder
from c2s_pipeline import hierarchy
from c2s_pipeline.assets.levels import apply_verdicts
from c2s_pipeline.subgroups import fits_one_leaf, fitting_parts, leaf_room, leanest_group_row_bytes
from c2s_core.frontmatter import frontmatter_problems, render_frontmatter
from c2s_core.llm.schemas import Move, RepartitionVerdict
from c2s_pipeline.forest import safe_name

from .conftest import SAMPLE_CORPUS


def blobs(centres, per, seed=0):
    rng = np.random.default_rng(seed)
    dim = 16
    basis = np.eye(dim)
    return hierarchy.normalise(np.vstack([basis[c] + 0.05 * rng.standard_normal((per, dim)) for c in centres]))


def test_kmeans_recovers_separated_topics_with_ceil_n_over_p_clusters():
    vectors = blobs([0, 1, 2], per=10)
    labels = hierarchy.kmeans(vectors, hierarchy.cluster_count(len(vectors), 10))
    assert len(set(labels)) == 3
    for start in (0, 10, 20):
        assert len(set(labels[start : start + 10])) == 1
    assert labels[0] == 0  # numbered by first appearance


def test_a_level_with_more_items_than_k_makes_at_least_two_clusters():
    assert hierarchy.cluster_count(300, 10, 10) == 30  # ceil(n/p)
    assert hierarchy.cluster_count(11, 20) == 1
    assert hierarchy.cluster_count(11, 20, 10) == 2  # k < n <= p: not one skill for the corpus
    assert hierarchy.cluster_count(10, 20, 10) == 1  # n <= k: so few items may sit under one skill
    assert hierarchy.cluster_count(11, 20, 1) == 1  # a tree asked for one skill gets one


PASSAGES = 600  # enough for a blocked K-Means, few enough to embed in seconds on two cores


@pytest.fixture(scope="module")
def passages() -> np.ndarray:
    """Paragraphs of the bundled sample corpus (every other one of its 1,378 longer than 80
    characters, 600 in all), embedded by the bundled encoder: real text, real topic structure."""
    texts = [p.strip() for f in sorted(SAMPLE_CORPUS.rglob("*.md")) for p in f.read_text(encoding="utf-8").split("\n\n")
             if len(p.strip()) > 80 and not p.strip().startswith("#")]
    assert len(texts) >= 2 * PASSAGES
    return Encoder().encode(texts[::2][:PASSAGES])


def _groups(labels: np.ndarray) -> list[list[int]]:
    return [np.flatnonzero(labels == c).tolist() for c in range(int(labels.max()) + 1)]


def _numbered_by_first_appearance(labels: np.ndarray) -> bool:
    first = list(dict.fromkeys(labels.tolist()))
    return first == list(range(len(first)))


def test_kmeans_below_the_threshold_is_one_exact_kmeans(passages, monkeypatch):
    def refuse(*args):
        raise AssertionError("blocked K-Means ran below the threshold")

    monkeypatch.setattr(hierarchy, "blocked_kmeans", refuse)
    assert len(passages) <= hierarchy.EXACT_KMEANS_ITEMS
    k = hierarchy.cluster_count(len(passages), 10)
    labels = hierarchy.kmeans(passages, k)
    raw = KMeans(n_clusters=k, n_init=3, random_state=hierarchy.SEED).fit_predict(hierarchy.normalise(passages))
    # The same partition as sklearn's, only renumbered by first appearance.
    assert {frozenset(g) for g in _groups(labels)} == {frozenset(np.flatnonzero(raw == c).tolist()) for c in range(k)}
    assert _numbered_by_first_appearance(labels)


def test_blocked_kmeans_above_the_threshold_keeps_ceil_n_over_p_groups(passages, monkeypatch):
    monkeypatch.setattr(hierarchy, "EXACT_KMEANS_ITEMS", 200)
    calls = []
    blocked = hierarchy.blocked_kmeans
    monkeypatch.setattr(hierarchy, "blocked_kmeans", lambda *a: calls.append(a) or blocked(*a))
    k = hierarchy.cluster_count(len(passages), 10)
    labels = hierarchy.kmeans(passages, k)
    assert len(calls) == 1
    assert labels.shape == (len(passages),)
    assert sorted(set(labels.tolist())) == list(range(k))  # exactly k groups, none empty
    assert sorted(i for g in _groups(labels) for i in g) == list(range(len(passages)))  # every item once
    assert _numbered_by_first_appearance(labels)
    assert np.array_equal(labels, hierarchy.kmeans(passages, k))  # deterministic


def test_blocked_kmeans_is_about_as_cohesive_as_exact(passages):
    unit = hierarchy.normalise(passages)
    k = hierarchy.cluster_count(len(unit), 10)
    exact = KMeans(n_clusters=k, n_init=3, random_state=hierarchy.SEED).fit_predict(unit)
    blocked = hierarchy.blocked_kmeans(unit, k)
    exact_cohesion = float(np.mean(hierarchy.cohesion(unit, _groups(exact))))
    blocked_cohesion = float(np.mean(hierarchy.cohesion(unit, _groups(blocked))))
    corpus = float((unit @ hierarchy.normalise(unit.mean(axis=0, keepdims=True))[0]).mean())
    assert blocked_cohesion > corpus + 0.2  # clusters far tighter than the corpus as a whole
    assert blocked_cohesion >= exact_cohesion - 0.01, (blocked_cohesion, exact_cohesion)


def test_members_by_label_lists_each_labels_items_in_order_empty_labels_included():
    labels = np.array([2, 0, 2, 3, 0, 2])
    assert hierarchy.members_by_label(labels, 5) == [[1, 4], [], [0, 2, 5], [3], []]


def test_stages_grow_with_log_k_and_blocks_balance_them():
    assert [hierarchy.stage_count(k) for k in (2, 100, 2000, 2025, 2026, 5000, 91125, 91126)] == [2, 2, 2, 2, 3, 3, 3, 4]
    # Two stages: about sqrt(k) blocks; three: about the cube root.
    assert [hierarchy.block_count(k, 2) for k in (2, 3, 100, 2000)] == [2, 2, 10, 45]
    assert [hierarchy.block_count(k, 3) for k in (2026, 5000, 91125)] == [13, 17, 45]


def test_kmeans_in_three_stages_keeps_every_item_once_in_exactly_k_groups(passages):
    """Forced to three stages (a corpus of over 20,000 documents takes them), K-Means still makes
    exactly k non-empty clusters, each item in one, about as cohesive as in two stages."""
    unit = hierarchy.normalise(passages)
    k = hierarchy.cluster_count(len(unit), 10)
    three = hierarchy.blocked_kmeans(unit, k, stages=3)
    two = hierarchy.blocked_kmeans(unit, k, stages=2)
    assert sorted(set(three.tolist())) == list(range(k))
    assert sorted(i for g in _groups(three) for i in g) == list(range(len(unit)))
    assert not np.array_equal(three, two)  # another partition, made in another number of stages
    cohesion = {n: float(np.mean(hierarchy.cohesion(unit, _groups(labels)))) for n, labels in ((2, two), (3, three))}
    assert cohesion[3] >= cohesion[2] - 0.02, cohesion


@pytest.mark.parametrize("sizes, total, seats", [
    ([10, 20, 30], 6, [1, 2, 3]),  # exact quotas
    ([30, 30, 40], 4, [1, 1, 2]),  # quotas 1.2, 1.2, 1.6: the one seat left goes to the largest remainder
    ([1, 1, 98], 10, [1, 1, 8]),  # tiny blocks get their one seat, taken from the others
    ([5, 5, 5], 15, [5, 5, 5]),  # one seat per item at most
    ([400, 7, 90, 3], 50, [39, 1, 9, 1]),
])
def test_apportion_by_largest_remainder(sizes, total, seats):
    assert hierarchy.apportion(sizes, total) == seats


@pytest.mark.parametrize("sizes, total", [([1, 1, 1], 2), ([2, 2], 5)])
def test_apportion_refuses_what_cannot_be_seated(sizes, total):
    with pytest.raises(ValueError, match="cannot apportion"):
        hierarchy.apportion(sizes, total)


def test_soft_assignment_lists_items_near_a_second_centroid():
    vectors = blobs([0, 1], per=5)
    between = hierarchy.normalise(np.eye(16)[[0]] * 0.9 + np.eye(16)[[1]])
    vectors = np.vstack([vectors, between])
    groups = [list(range(5)) + [10], list(range(5, 10))]
    placed = hierarchy.place(vectors, groups, tau=0.05)
    assert [p.runner_up for p in placed if p.runner_up is not None] == [1]
    assert placed[10].primary == 0 and placed[10].runner_up == 1
    assert all(p.runner_up is None for p in hierarchy.place(vectors, groups, tau=0.0))


def test_placement_and_similar_pairs_in_blocks_match_one_product(passages, monkeypatch):
    """Similarities taken a few rows at a time (memory bounded on large levels) give the
    placements and nearest pairs of the whole matrix at once."""
    k = hierarchy.cluster_count(len(passages), 10)
    groups = _groups(hierarchy.kmeans(passages, k))
    whole = hierarchy.place(passages, groups, tau=0.05)
    whole_pairs = hierarchy.similar_pairs(passages, groups)
    assert any(p.runner_up is not None for p in whole) and len(whole_pairs) >= k
    monkeypatch.setattr(hierarchy, "SIMILARITY_BLOCK_FLOATS", 7 * k + 3)  # blocks of 7 rows, the last shorter
    blocked = hierarchy.place(passages, groups, tau=0.05)
    assert [(p.item, p.primary, p.runner_up) for p in blocked] == [(p.item, p.primary, p.runner_up) for p in whole]
    assert np.allclose([p.similarity for p in blocked], [p.similarity for p in whole], atol=1e-6)
    pairs = hierarchy.similar_pairs(passages, groups)
    assert {(a, b) for a, b, _ in pairs} == {(a, b) for a, b, _ in whole_pairs}
    assert np.allclose([s for _, _, s in pairs], [s for _, _, s in whole_pairs], atol=1e-6)


def test_placing_again_after_some_clusters_changed_equals_placing_from_scratch(passages):
    """Repartition changes a few clusters; comparing most items with the changed centroids only
    gives every item the nearest other cluster and runner-up a full placement gives it."""
    k = hierarchy.cluster_count(len(passages), 10)
    before = _groups(hierarchy.kmeans(passages, k))
    placed = hierarchy.place(passages, before, tau=0.05)
    after = [list(g) for g in before]
    after[0] = after[0] + after[1]  # a merge: group 1 is gone
    after[1] = []
    after[2], moved = after[2][1:], after[2][0]  # a move
    after[3] = after[3] + [moved]
    half = len(after[4]) // 2  # a split into a new group at the end
    after[4], new_group = after[4][:half], after[4][half:]
    after = [g for g in after if g] + [new_group]
    position = {tuple(sorted(g)): i for i, g in enumerate(after)}
    old_to_new = {i: position.get(tuple(sorted(g)), -1) for i, g in enumerate(before)}
    kept = [position.get(tuple(sorted(g))) is not None and tuple(sorted(g)) in {tuple(sorted(b)) for b in before}
            for g in after]
    nearest = np.array([old_to_new[p.nearest] for p in placed])
    similarity = np.array([p.nearest_similarity for p in placed])
    assert not all(kept) and sum(kept) == len(after) - 5
    again = hierarchy.place_again(passages, after, 0.05, kept, nearest, similarity)
    fresh = hierarchy.place(passages, after, tau=0.05)
    assert [(p.item, p.primary, p.nearest, p.runner_up) for p in again] == \
        [(p.item, p.primary, p.nearest, p.runner_up) for p in fresh]
    assert np.allclose([p.nearest_similarity for p in again], [p.nearest_similarity for p in fresh], atol=1e-6)
    assert any(p.runner_up is not None for p in fresh)
    # Most items were compared with the five changed centroids only: their nearest came from before.
    assert sum(kept[p.primary] and nearest[p.item] >= 0 for p in again) > len(passages) // 2


def test_two_clusters_make_one_similar_pair_never_a_cluster_with_itself():
    vectors = blobs([0, 1], per=5)
    pairs = hierarchy.similar_pairs(vectors, [list(range(5)), list(range(5, 10))])
    assert [(a, b) for a, b, _ in pairs] == [(0, 1)] and np.isfinite(pairs[0][2])


def test_proximity_batches_respect_the_limit_and_cover_every_cluster():
    vectors = blobs(list(range(16)) * 2, per=4)
    groups = [list(range(i * 4, i * 4 + 4)) for i in range(32)]
    batches = hierarchy.proximity_batches(vectors, groups, batch_size=10)
    assert max(len(b) for b in batches) <= 10
    assert sorted(i for b in batches for i in b) == list(range(32))


def _setup():
    vectors = blobs([0, 1, 2], per=6)
    ids = [f"d{i}" for i in range(18)]
    index = {d: i for i, d in enumerate(ids)}
    groups = [("L1-0000", ids[:6]), ("L1-0001", ids[6:12]), ("L1-0002", ids[12:])]
    return vectors, index, groups


def test_moves_merge_and_split_touch_each_cluster_once():
    vectors, index, groups = _setup()
    verdict = RepartitionVerdict(
        moves=[Move(item_id="d0", to_cluster="L1-0001")],
        confusable=[("L1-0001", "L1-0002"), ("L1-0000", "L1-0002")],
        mixed=["L1-0000"],
    )
    outcome = apply_verdicts(groups, [verdict], vectors, index, p=10, max_clusters=None)
    result = dict(outcome.groups)
    # The move touched both clusters, so neither may be split or merged in the same compile.
    assert "d0" in result["L1-0001"] and "d0" not in result["L1-0000"]
    assert outcome.counts == {"moves": 1, "merges": 0, "splits": 0, "rebalanced_pairs": 0, "fitted": 0}
    assert sorted(d for g in result.values() for d in g) == sorted(index)


def test_confusable_pair_merges_when_small_and_mixed_cluster_splits():
    vectors, index, groups = _setup()
    mixed = ("L1-0000", groups[0][1] + groups[1][1])
    outcome = apply_verdicts([mixed, groups[2]], [RepartitionVerdict(mixed=["L1-0000"])], vectors, index, p=10,
                             max_clusters=None)
    result = dict(outcome.groups)
    assert outcome.counts["splits"] == 1 and len(result) == 3
    assert {frozenset(g) for g in result.values()} == {frozenset(g) for _, g in groups}
    merged = apply_verdicts(groups, [RepartitionVerdict(confusable=[("L1-0001", "L1-0002")])], vectors, index,
                            p=10, max_clusters=None)
    assert merged.counts["merges"] == 1 and sorted(dict(merged.groups)["L1-0001"]) == sorted(groups[1][1] + groups[2][1])
    assert merged.touched == {"L1-0001"}


def test_level_one_repartition_keeps_every_cluster_within_a_leafs_file():
    """Rows of 300 bytes: a leaf holds ten of them at most. Two confusable clusters of six are
    rebalanced rather than merged into twelve, and a cluster a move takes past ten is split into
    parts that each fit."""
    vectors, index, groups = _setup()
    rows = [300] * len(index)
    assert sum(rows[:10]) <= leaf_room(10) < sum(rows[:11])
    kept = apply_verdicts(groups, [RepartitionVerdict(confusable=[("L1-0001", "L1-0002")])], vectors, index,
                          p=10, max_clusters=None, row_bytes=rows)
    assert kept.counts["merges"] == 0 and kept.counts["rebalanced_pairs"] == 1 and len(kept.groups) == 3
    crowded = [("L1-0000", groups[0][1] + groups[1][1][:4]), ("L1-0001", groups[1][1][4:]), groups[2]]
    moved = apply_verdicts(crowded, [RepartitionVerdict(moves=[Move(item_id="d10", to_cluster="L1-0000")])],
                           vectors, index, p=10, max_clusters=None, row_bytes=rows)
    assert moved.counts["moves"] == 1 and moved.counts["fitted"] == 1
    sizes = sorted(len(g) for _, g in moved.groups)
    assert len(moved.groups) == 4 and max(sizes) <= 10 and sum(sizes) == len(index)
    assert sorted(d for _, g in moved.groups for d in g) == sorted(index)
    unfitted = apply_verdicts(crowded, [RepartitionVerdict(moves=[Move(item_id="d10", to_cluster="L1-0000")])],
                              vectors, index, p=10, max_clusters=None)
    assert unfitted.counts["fitted"] == 0 and max(len(g) for _, g in unfitted.groups) == 11


def test_unknown_ids_in_a_verdict_are_ignored_and_reported():
    vectors, index, groups = _setup()
    verdict = RepartitionVerdict(moves=[Move(item_id="ghost", to_cluster="L1-0001")], mixed=["L1-9999"],
                                 confusable=[("L1-0000", "nope")])
    outcome = apply_verdicts(groups, [verdict], vectors, index, p=10, max_clusters=None)
    assert outcome.groups == groups and len(outcome.ignored) == 3


def test_top_level_split_never_reaches_k():
    vectors, index, groups = _setup()
    outcome = apply_verdicts(groups, [RepartitionVerdict(mixed=["L1-0000"])], vectors, index, p=10, max_clusters=3)
    assert outcome.counts["splits"] == 0


@pytest.mark.parametrize("label, name", [
    ("Billing & Refunds!", "billing-refunds"),
    ("claude-api-keys", "api-keys"),
    ("--Anthropic--", "group"),
    ("x" * 80, "x" * 50),
])
def test_safe_names(label, name):
    assert safe_name(label) == name


@pytest.mark.parametrize("name, description, directory, problem", [
    ("ok-name", "fine", "ok-name", None),
    ("Bad_Name", "fine", "Bad_Name", "must be lowercase"),
    ("a--b", "fine", "a--b", "single inner hyphens"),
    ("my-claude", "fine", "my-claude", "reserved word"),
    ("ok", "fine", "other", "differs from its directory"),
    ("ok", "", "ok", "description missing"),
    ("a" * 65, "fine", "a" * 65, "longer than 64"),
])
def test_frontmatter_rules(name, description, directory, problem):
    text = f"---\nname: {name}\ndescription: '{description}'\n---\n# x\n"
    problems = frontmatter_problems(text, directory)
    assert (not problems) if problem is None else any(problem in p for p in problems), problems


def test_rendered_frontmatter_strips_xml_and_caps_description():
    text = render_frontmatter("ok", "<b>bold</b> " + "word " * 400, {"level": 1, "documents": 3})
    assert frontmatter_problems(text + "# x\n", "ok") == []


def test_a_node_above_the_leaves_too_crowded_for_its_nav_file_is_split_into_siblings_that_fit():
    """A level-2 cluster of 48 children named at length (a 50,000-document tree made one: a 5.8 KB
    INDEX.md of sub-group links) is judged by its children's leanest rows, named as the tree will
    name them, and split by K-Means into siblings whose files fit; ten children fit as they are."""
    labels = [f"Specified cause, throwable cause and later retrieval of {word} exceptions"
              for word in ("io", "sql", "ssl", "jar", "uri", "xml")] * 8
    rows = leanest_group_row_bytes(labels, [10] * len(labels))
    name = safe_name(labels[0])
    assert rows[0] == len(f"- [{name}]({name}/INDEX.md) (10 docs)") + 1 == 108
    assert fits_one_leaf(rows[:10]) and not fits_one_leaf(rows)
    unit = hierarchy.normalise(np.random.default_rng(0).normal(size=(len(labels), 8)))
    parts = fitting_parts(list(range(len(labels))), rows, unit)
    assert len(parts) >= 2 and all(fits_one_leaf([rows[i] for i in part]) for part in parts)
    assert sorted(i for part in parts for i in part) == list(range(len(labels)))
