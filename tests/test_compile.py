"""End-to-end compiles of the bundled sample corpus and the real WixQA sample: the tree's
structure, its frontmatter, the manifest contract, caching and determinism."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from c2s_core.docstore import DocumentStore
from c2s_core.frontmatter import NAME_RULE, parse_frontmatter
from c2s_pipeline.ingest import read_corpus
from c2s_core.term_index import MAX_LEAF_SHARE, MAX_LEAVES_LISTED, TITLE_MARK, parse_term_index
from c2s_core.text import terms
from c2s_pipeline.validate import nav_files, primary_rows

from .conftest import SAMPLE_CORPUS, WIXQA, compile_into

STUB = re.compile(r"^- @see `([^`]+)` \*\*.*\*\* → `([^`]+)`$", re.MULTILINE)
GROUP_STUB = re.compile(r"^- @see \[([a-z0-9-]+)\] .* → `([^`]+)`$", re.MULTILINE)



@pytest.fixture(params=["sample_tree", "wixqa_tree"])
def compiled(request):
    return request.getfixturevalue(request.param)


def test_every_document_is_a_primary_row_of_exactly_one_leaf(compiled):
    accepted = {d.doc_id for d in read_corpus(compiled.source).documents}
    rows = {}
    for path in nav_files(compiled.out):
        for doc_id in primary_rows(path.read_text()):
            assert doc_id not in rows, f"{doc_id} listed in {rows.get(doc_id)} and {path}"
            rows[doc_id] = path.relative_to(compiled.out).as_posix()
    assert set(rows) == accepted
    assert compiled.manifest["doc_paths"] == rows


def test_frontmatter_follows_agent_skills_rules(compiled):
    for path in nav_files(compiled.out):
        meta = parse_frontmatter(path.read_text())
        assert set(meta) == {"name", "description", "metadata"}, path
        assert meta["name"] == path.parent.name and len(meta["name"]) <= 64
        assert NAME_RULE.match(meta["name"]) and "--" not in meta["name"]
        assert "claude" not in meta["name"] and "anthropic" not in meta["name"]
        assert 0 < len(meta["description"]) <= 1024 and not re.search(r"<[^>]+>", meta["description"])
        assert {"level", "documents"} <= set(meta["metadata"])


def test_tree_shape_follows_the_method(compiled):
    stats = compiled.manifest["stats"]
    n, p, k = stats["documents"]["accepted"], 10, 10
    skills = sorted((compiled.out / "skills").glob("*/SKILL.md"))
    assert len(skills) == stats["skills"] <= k
    depth = max(len(f.relative_to(compiled.out / "skills").parts) - 1 for f in nav_files(compiled.out))
    assert depth == stats["levels"] <= math.ceil(math.log(n, p)) + 1
    # Level 1 has ceil(N/p) clusters before repartition; merges and splits move it a little.
    leaves = [f for f in nav_files(compiled.out) if primary_rows(f.read_text())]
    assert abs(len(leaves) - math.ceil(n / p)) <= max(2, n // (5 * p))
    for path in nav_files(compiled.out):
        text = path.read_text()
        meta = parse_frontmatter(text)["metadata"]
        if meta["level"] == 1:
            assert len(primary_rows(text)) == meta["documents"] > 0
        else:
            subgroups = re.findall(r"^- \[([a-z0-9-]+)\]\(\1/INDEX\.md\) \((\d+) docs\)", text, re.MULTILINE)
            assert subgroups and sum(int(c) for _, c in subgroups) == meta["documents"]
            names = [s for s, _ in subgroups]
            assert len(set(names)) == len(names)
            assert sorted(names) == sorted(p.name for p in path.parent.iterdir() if p.is_dir())
            assert text.count("\n- `") >= 3, "non-leaf nodes list three example documents"


def test_a_level_of_exactly_k_clusters_is_the_top(dagster_home, sample_tree):
    """k is the most top-level skills a tree has: a level that clusters into exactly k groups is the
    top level, not the last but one under a single skill (``ceil(k/p) = 1`` when k ≤ p)."""
    n = sample_tree.manifest["stats"]["documents"]["accepted"]
    p = 3
    k = math.ceil(n / p)
    tree = compile_into(dagster_home, "sample-k", SAMPLE_CORPUS, p=p, k=k)
    stats = tree.manifest["stats"]
    assert stats["levels"] == 1 and stats["skills"] == k > 1
    skills = sorted((tree.out / "skills").glob("*/SKILL.md"))
    assert len(skills) == k and all(parse_frontmatter(f.read_text())["metadata"]["level"] == 1 for f in skills)


def test_a_level_above_k_never_collapses_into_one_skill(dagster_home, sample_tree):
    """With p above k, ceil(n/p) is 1 for k < n <= p: such a level still makes at least two
    skills, never one holding the whole corpus."""
    n = sample_tree.manifest["stats"]["documents"]["accepted"]
    k = 3
    tree = compile_into(dagster_home, "sample-wide", SAMPLE_CORPUS, p=n, k=k)
    skills = sorted((tree.out / "skills").glob("*/SKILL.md"))
    assert 2 <= tree.manifest["stats"]["skills"] == len(skills) <= k
    documents = [parse_frontmatter(f.read_text())["metadata"]["documents"] for f in skills]
    assert sum(documents) == n and max(documents) < n


def test_see_stubs_point_at_canonical_places(compiled):
    count = 0
    for path in nav_files(compiled.out):
        text = path.read_text()
        for doc_id, target in STUB.findall(text):
            assert compiled.manifest["doc_paths"][doc_id] == target != path.relative_to(compiled.out).as_posix()
            count += 1
        for name, target in GROUP_STUB.findall(text):
            assert (compiled.out / target).is_file() and Path(target).parent.name == name
            count += 1
    assert count == compiled.manifest["stats"]["see_stubs"] > 0


def test_entity_index_and_related_skills(compiled):
    index = json.loads((compiled.out / "entity_index.json").read_text())
    assert index and sum(len(v) for v in index.values()) == compiled.manifest["stats"]["entity_index_entries"]
    totals = [sum(e["mentions"] for e in entries) for entries in index.values()]
    assert totals == sorted(totals, reverse=True)
    for entity, entries in index.items():
        assert [e["mentions"] for e in entries] == sorted((e["mentions"] for e in entries), reverse=True)
        for entry in entries:
            assert (compiled.out / entry["path"]).is_file(), (entity, entry)
    skills = sorted((compiled.out / "skills").glob("*/SKILL.md"))
    if len(skills) > 1:
        related = [s for s in skills if "## Related skills" in s.read_text()]
        assert related, "skills sharing entities list each other under Related skills"
        for skill in related:
            for target in re.findall(r"^- \[[a-z0-9-]+\]\(\.\./([a-z0-9-]+)/SKILL\.md\)", skill.read_text(), re.M):
                assert (skill.parent.parent / target / "SKILL.md").is_file()


def test_term_index_names_the_rows_whose_documents_use_each_term(compiled):
    """Every leaf has one numbered line; every listed (leaf, row) is a document using the term
    (in its title or text; a ``=TERM`` line: in its title), every document using a listed term
    is listed, and terms in too many leaves are left out."""
    index = parse_term_index((compiled.out / "term_index.txt").read_text(encoding="utf-8"))
    body = {t: p for t, p in index.terms.items() if not t.startswith(TITLE_MARK)}
    titles = {t.removeprefix(TITLE_MARK): p for t, p in index.terms.items() if t.startswith(TITLE_MARK)}
    stats = compiled.manifest["stats"]["term_index"]
    assert body and titles and (len(body), len(titles)) == (stats["terms"], stats["title_terms"])
    store = DocumentStore(compiled.out / "documents.sqlite")
    rows = {str(f.relative_to(compiled.out).as_posix()): primary_rows(f.read_text()) for f in nav_files(compiled.out)}
    leaves = [leaf for leaf, ids in rows.items() if ids]
    assert sorted(index.leaves.values()) == sorted(leaves) and sorted(index.leaves) == list(range(1, len(leaves) + 1))
    number = {leaf: n for n, leaf in index.leaves.items()}
    cap = min(MAX_LEAVES_LISTED, max(3, math.ceil(MAX_LEAF_SHARE * len(leaves))))
    for listed, text in ((body, lambda doc: f"{doc.title}\n{doc.text}"), (titles, lambda doc: doc.title)):
        used = {leaf: [set(terms(text(store.get(d)))) for d in rows[leaf]] for leaf in leaves}
        for term, post in list(listed.items())[:: max(1, len(listed) // 300)]:
            expected = {number[leaf]: tuple(i for i, words in enumerate(used[leaf], 1) if term in words)
                        for leaf in leaves}
            expected = {leaf: found for leaf, found in expected.items() if found}
            assert post.leaves == expected, term
            assert post.documents == sum(map(len, expected.values())) and len(expected) <= cap
        common = {t for words in used.values() for doc in words for t in doc}
        assert any(sum(any(t in doc for doc in used[leaf]) for leaf in leaves) > cap for t in common - set(listed))


def test_document_store_keeps_full_texts(compiled):
    store = DocumentStore(compiled.out / "documents.sqlite")
    originals = read_corpus(compiled.source).documents
    assert len(store) == len(originals)
    for doc in originals[:: max(1, len(originals) // 20)]:
        stored = store.get(doc.doc_id)
        assert stored.text == doc.text and stored.content_hash == doc.content_hash
    assert store.get("no-such-id") is None


def test_manifest_contract(compiled):
    m = compiled.manifest
    assert m == json.loads((compiled.out / "manifest.json").read_text())
    stats = m["stats"]
    for key in ("accepted", "rejected", "duplicate"):
        assert isinstance(stats["documents"][key], int)
    assert set(stats["llm_calls"]) >= {"made", "cached"} and set(stats["embeddings"]) >= {"computed", "cached"}
    assert stats["nav_files"] == len(nav_files(compiled.out))
    assert stats["nav_bytes"]["max"] == max(f.stat().st_size for f in nav_files(compiled.out))
    assert all(check["passed"] for check in m["checks"].values()), m["checks"]  # nav files within 4 KB too
    assert {"documents", "doc_cards", "doc_embeddings", "clusters_l1", "summaries_l1",
            "repartition_l1", "entities", "staged_tree"} <= set(m["stages"])


def test_search_index_is_written_beside_the_tree_and_loads(compiled):
    from c2s_core.layout import SEARCH_INDEX_DIR
    from c2s_core.search_index import DOCS_FILE, SearchIndex

    folder = compiled.out / SEARCH_INDEX_DIR
    assert (folder / DOCS_FILE).is_file() and (folder / "vocab.index.json").is_file()
    index = SearchIndex.load(compiled.out)
    paths = compiled.manifest["doc_paths"]
    assert [d["doc_id"] for d in index.docs] == sorted(paths)  # every document, once
    store = DocumentStore(compiled.out / "documents.sqlite")
    for row in index.docs[:: max(1, len(index.docs) // 10)]:
        hits = index.search(store.get(row["doc_id"]).title, k=5)
        assert hits and row["doc_id"] in [h.doc_id for h in hits]  # a document's title finds it
        assert all(h.path == paths[h.doc_id] and (compiled.out / h.path).is_file() for h in hits)
    assert index.search("zzzzqqqq unknownword", mode="bm25") == []


def test_search_index_ships_the_compiles_document_vectors(compiled):
    """vectors.npy holds doc_embeddings' matrix (not re-embedded), float16, in index order, and
    a document's own embedding text finds it by dense search."""
    from c2s_core.search_index import SearchIndex
    from c2s_pipeline.artifacts import CorpusArtifacts

    art = CorpusArtifacts(compiled.home / "artifacts" / compiled.manifest["corpus"])
    computed = art.read_matrix("doc_vectors.npy")
    ids = art.read_table("documents.parquet")["doc_id"].to_list()
    index = SearchIndex.load(compiled.out)
    assert isinstance(index.vectors, np.memmap) and index.vectors.dtype == np.float16
    assert index.model == compiled.manifest["encoder"]
    rows = {d: i for i, d in enumerate(ids)}
    order = [rows[d["doc_id"]] for d in index.docs]
    assert np.allclose(np.asarray(index.vectors, np.float32), computed[order], atol=2e-3)
    for i in range(0, len(index.docs), max(1, len(index.docs) // 5)):
        title = index.docs[i]["title"]
        hits = index.search(title, k=5, mode="dense")
        assert len(hits) == 5 and index.docs[i]["doc_id"] in [h.doc_id for h in hits], title


def test_an_upper_level_clusters_its_items_by_their_text_and_their_documents(compiled):
    """Above level 1 an item (a node of the level below) is clustered by its text's embedding
    averaged with the centroid of the documents below it (``CENTROID_SHARE``): the vectors the
    clusters stage kept are that mix, with each item's documents found through the finished
    tree, every document below exactly one item of a level; the mix lies nearer the documents
    than the text alone."""
    from c2s_core.encoder import Encoder
    from c2s_pipeline import hierarchy
    from c2s_pipeline.artifacts import CorpusArtifacts
    from c2s_pipeline.assets.levels import CENTROID_SHARE, Level
    from c2s_pipeline.forest import build_forest

    art = CorpusArtifacts(compiled.home / "artifacts" / compiled.manifest["corpus"])
    forest, row = build_forest(art), art.document_rows()
    vectors = hierarchy.normalise(art.read_matrix("doc_vectors.npy"))
    upper = [number for number in art.used_levels() if number > 1]
    assert upper and 0 < CENTROID_SHARE < 1
    for number in upper:
        level = Level.of(number)
        documents = [forest.by_id[item].documents() for item in level.items(art)[0]]
        assert sorted(d for docs in documents for d in docs) == sorted(row)
        centroids = hierarchy.centroids(vectors, [[row[d] for d in docs] for docs in documents])
        texts = hierarchy.normalise(Encoder().encode(level.below.node_texts(art)))
        kept = art.read_matrix(art.level(number, "items.npy"))
        assert np.allclose(kept, hierarchy.normalise((1 - CENTROID_SHARE) * texts + CENTROID_SHARE * centroids),
                           atol=1e-5)
        assert ((kept * centroids).sum(axis=1) > (texts * centroids).sum(axis=1)).all()


def test_wixqa_gold_ids_survive(wixqa_tree, wixqa_questions):
    gold = {g for q in wixqa_questions for g in q["gold_ids"]}
    assert gold <= set(wixqa_tree.manifest["doc_paths"])


def test_rematerializing_an_unchanged_corpus_makes_no_calls(sample_tree):
    before = _tree_bytes(sample_tree.out)
    again = compile_into(sample_tree.home, "sample", SAMPLE_CORPUS)
    assert again.manifest["stats"]["llm_calls"]["made"] == 0
    assert again.manifest["stats"]["llm_calls"]["cached"] >= sample_tree.manifest["stats"]["documents"]["accepted"]
    assert again.manifest["stats"]["embeddings"]["computed"] == 0
    assert again.manifest["stats"]["embeddings"]["cached"] >= sample_tree.manifest["stats"]["documents"]["accepted"]
    assert again.manifest["build"]["mode"] == "incremental"
    assert _tree_bytes(again.out) == before


def _tree_bytes(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != "manifest.json"}


def comparable_manifest(manifest: dict) -> dict:
    """A manifest less what differs between two compiles of the same inputs: stage timings and
    call counts (a warm cache answers what a cold one computes) and where the source was."""
    return {k: v for k, v in manifest.items() if k not in ("stages", "source")} | {
        "stats": {k: v for k, v in manifest["stats"].items() if k not in ("llm_calls", "embeddings")}}


def assert_same_tree(out: Path, manifest: dict, reference: Path, reference_manifest: dict) -> None:
    assert _tree_bytes(out) == _tree_bytes(reference)
    assert comparable_manifest(manifest) == comparable_manifest(reference_manifest)


class StageProgress:
    """A progress listener keeping every report of one stage, and every stage heard (started: s;
    reported: the stage's name)."""

    def __init__(self, stage: str):
        self.stage, self.reports, self.heard = stage, [], []

    def started(self, stage):
        self.heard.append(f"started: {stage}")

    def update(self, stage, done, total, llm=None):
        self.heard.append(stage)
        if stage == self.stage:
            self.reports.append((done, total, llm))


def test_a_fresh_sharded_compile_gives_the_same_tree(wixqa_tree, tmp_path, monkeypatch):
    """The same inputs in a fresh home (no cache shared) give the same bytes, with doc_cards and
    doc_embeddings run as shard steps of 40 documents: the tree is the one-shard compile's, and
    the stage reports progress as one stage."""
    from dagster import DagsterEventType, DagsterInstance

    from c2s_pipeline import progress
    from c2s_pipeline.compiler import compile_corpus
    from c2s_pipeline.workspace import CorpusSpec, Workspace

    monkeypatch.setenv("C2S_SHARD_SIZE", "40")
    instance, home = DagsterInstance.ephemeral(), tmp_path / "home"
    cards = StageProgress("doc_cards")
    progress.set_listener(cards)
    try:
        manifest = compile_corpus(CorpusSpec(name="wixqa", source=str(WIXQA / "corpus.jsonl"), out=str(home / "out")),
                                  Workspace(home), instance=instance)
    finally:
        progress.set_listener(None)

    documents = manifest["stats"]["documents"]["accepted"]
    shards = math.ceil(documents / 40)
    assert shards == 5
    run, = instance.get_runs()
    steps = {e.step_key for e in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_SUCCESS)}
    for stage in ("doc_cards", "doc_embeddings"):
        assert {s for s in steps if s.startswith(f"{stage}.")} == {
            f"{stage}.{stage}_shards", f"{stage}.{stage}_collect",
            *(f"{stage}.{stage}_shard[{i:04d}]" for i in range(shards))}
    # Every item computed once, by the shards; collecting read them back without counting them again.
    assert manifest["stages"]["doc_cards"]["llm_calls"] == {"made": documents, "cached": 0}
    assert manifest["stages"]["doc_embeddings"]["embeddings"] == {"computed": documents, "cached": 0}
    assert_same_tree(home / "out", manifest, wixqa_tree.out, wixqa_tree.manifest)

    # One stage's progress, counting up to the corpus's documents across its five steps.
    done = [d for d, _, _ in cards.reports]
    assert {t for _, t, _ in cards.reports} == {documents}
    assert done == sorted(done) and done[0] == 0 and done[-1] == documents
    assert cards.reports[-1][2].made == documents
    # Each stage is heard starting (every shard step of a sharded one) before its first report,
    # also a stage that reports nothing until late (staged_tree renders before it probes).
    began = [h.removeprefix("started: ") for h in cards.heard if h.startswith("started: ")]
    assert began.count("doc_cards") >= shards and "staged_tree" in began
    for stage in {h for h in cards.heard if not h.startswith("started: ")}:
        assert cards.heard.index(f"started: {stage}") < cards.heard.index(stage), stage


INDEX_IN_A_PROCESS = """
import sys
from pathlib import Path
from c2s_core.search_index import SearchIndex
files = sorted(Path(sys.argv[1]).rglob("*.md"))
SearchIndex.build([{"doc_id": p.name, "title": p.stem, "path": "x"} for p in files],
                  [p.read_text() for p in files]).save(sys.argv[2])
"""


def test_the_search_index_is_byte_identical_across_processes(tmp_path):
    """Steps of one compile may run in different processes (Celery, Kubernetes), whose string
    hashes differ: the index they write must not depend on them."""
    import os
    import subprocess
    import sys

    written = []
    for seed in ("1", "2"):
        target = tmp_path / seed
        subprocess.run([sys.executable, "-c", INDEX_IN_A_PROCESS, str(SAMPLE_CORPUS), str(target)], check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed})
        written.append({p.name: p.read_bytes() for p in sorted(target.iterdir())})
    assert "vocab.index.json" in written[0]
    assert written[0] == written[1]
