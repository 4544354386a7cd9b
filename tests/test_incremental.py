"""Incremental recompilation: a small edit re-does only the affected work and keeps paths."""

import shutil

import pytest

from c2s_pipeline.validate import nav_files

from .conftest import SAMPLE_CORPUS, compile_into


@pytest.fixture(scope="module")
def changed_corpus(tmp_path_factory, dagster_home):
    root = tmp_path_factory.mktemp("inc")
    corpus = root / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    first = compile_into(dagster_home, "living", corpus)
    docs = sorted(p for p in corpus.rglob("*.md"))
    removed, edited = docs[3], docs[40]
    removed_id = removed.relative_to(corpus).as_posix()
    edited_id = edited.relative_to(corpus).as_posix()
    removed.unlink()
    edited.write_text(edited.read_text() + "\n\nUpdate: this now also applies to gift vouchers (error TW-7788).\n")
    (corpus / "booking" / "holiday-mode.md").write_text(
        "# Pause bookings during holidays\n\nHoliday mode pauses all new online bookings for a date range. "
        "Go to **Settings > Booking > Holiday mode**, pick the dates and save; existing appointments stay booked.\n")
    second = compile_into(dagster_home, "living", corpus)
    return first, second, removed_id, edited_id


def test_small_change_is_applied_incrementally(changed_corpus):
    first, second, removed_id, edited_id = changed_corpus
    build = second.manifest["build"]
    assert build["mode"] == "incremental"
    assert (build["documents_added"], build["documents_changed"], build["documents_removed"]) == (1, 1, 1)
    # The first compile may be served from the session's shared cache: count its calls either way.
    made_first = sum(first.manifest["stats"]["llm_calls"].values())
    made_second = second.manifest["stats"]["llm_calls"]["made"]
    assert 0 < made_second <= 0.15 * made_first
    assert build["llm_calls_saved"] == made_first - made_second
    # Two cards are new (added and edited documents). The edit lies past the embedded prefix of
    # its document, so only the added document needs a new embedding.
    assert second.manifest["stages"]["doc_cards"]["llm_calls"]["made"] == 2
    assert second.manifest["stages"]["doc_embeddings"]["embeddings"]["computed"] in (1, 2)
    paths = second.manifest["doc_paths"]
    assert removed_id not in paths and "booking/holiday-mode.md" in paths and edited_id in paths
    assert all(check["passed"] for check in second.manifest["checks"].values()), second.manifest["checks"]


def test_untouched_branches_keep_their_paths_and_summaries(changed_corpus):
    first, second, removed_id, edited_id = changed_corpus
    before, after = first.manifest["doc_paths"], second.manifest["doc_paths"]
    moved = {d for d in before if d in after and before[d] != after[d]}
    assert len(moved) <= 25, "only documents of a locally split leaf may move"
    untouched_leaves = set(before.values()) - {before[removed_id], before[edited_id]} - {before[d] for d in moved}
    untouched_leaves -= {after["booking/holiday-mode.md"]}
    for leaf in untouched_leaves:
        assert (second.out / leaf).read_text() == (first.out / leaf).read_text() or \
            (second.out / leaf).read_text().split("## See also")[0] == (first.out / leaf).read_text().split("## See also")[0]
    first_files = {p.relative_to(first.out) for p in nav_files(first.out)}
    second_files = {p.relative_to(second.out) for p in nav_files(second.out)}
    assert first_files <= second_files | {p for p in first_files if p.as_posix() not in after.values()}


def test_full_flag_and_settings_change_force_a_rebuild(changed_corpus, dagster_home):
    first, second, *_ = changed_corpus
    again = compile_into(dagster_home, "living", second.source)
    assert again.manifest["build"]["mode"] == "incremental" and again.manifest["stats"]["llm_calls"]["made"] == 0
    from c2s_pipeline.compiler import compile_corpus
    from c2s_pipeline.workspace import CorpusSpec, Workspace

    spec = CorpusSpec(name="living", source=str(second.source), out=str(second.out))
    forced = compile_corpus(spec, Workspace(dagster_home), full=True)
    assert forced["build"] == {"mode": "full", "reason": "a full rebuild was requested", "documents_added": 0,
                               "documents_changed": 0, "documents_removed": 0}
    retuned = compile_corpus(spec.model_copy(update={"tau": 0.02}), Workspace(dagster_home))
    assert retuned["build"]["mode"] == "full" and "tau" in retuned["build"]["reason"]


def test_a_tree_grouped_by_an_older_compiler_is_rebuilt_not_updated(changed_corpus, dagster_home):
    """The published tree records the code versions of the stages that grouped it; a compiler whose
    grouping stages changed rebuilds it rather than placing changes into the old grouping."""
    import json

    from c2s_pipeline.compiler import compile_corpus
    from c2s_pipeline.incremental import PUBLISHED
    from c2s_pipeline.workspace import CorpusSpec, Workspace

    first, second, *_ = changed_corpus
    spec = CorpusSpec(name="living", source=str(second.source), out=str(second.out))
    compile_corpus(spec, Workspace(dagster_home))  # published with this compiler's settings (a test may retune)
    meta_file = Workspace(dagster_home).artifacts("living") / PUBLISHED / "meta.json"
    meta = json.loads(meta_file.read_text())
    assert meta["build"]["grouping"]["clusters_l1"].startswith("clusters-")
    meta["build"]["grouping"]["clusters_l2"] = "clusters-0"  # as an older compiler recorded it
    meta_file.write_text(json.dumps(meta))
    rebuilt = compile_corpus(spec, Workspace(dagster_home))
    assert rebuilt["build"]["mode"] == "full" and rebuilt["build"]["reason"].endswith("settings changed since the "
                                                                                      "published tree: grouping")
    del meta["build"]["grouping"]  # a tree published before the grouping was recorded
    meta_file.write_text(json.dumps(meta))
    assert compile_corpus(spec, Workspace(dagster_home))["build"]["mode"] == "full"
    assert compile_corpus(spec, Workspace(dagster_home))["build"]["mode"] == "incremental"  # recorded again


def test_a_crash_while_rendering_leaves_the_published_tree_serving(changed_corpus, dagster_home, monkeypatch):
    from c2s_pipeline.assets import publish as publish_stage
    from c2s_pipeline.compiler import CompileError, compile_corpus
    from c2s_pipeline.workspace import CorpusSpec, Workspace

    first, second, *_ = changed_corpus
    before = {p.relative_to(second.out): p.read_bytes() for p in second.out.rglob("*") if p.is_file()}

    def disk_full(path, documents):
        path.write_bytes(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(publish_stage, "write_document_store", disk_full)
    spec = CorpusSpec(name="living", source=str(second.source), out=str(second.out))
    with pytest.raises(CompileError, match="staged_tree: .*No space left on device"):
        compile_corpus(spec, Workspace(dagster_home), full=True)
    after = {p.relative_to(second.out): p.read_bytes() for p in second.out.rglob("*") if p.is_file()}
    assert after == before
    assert not [p for p in second.out.parent.iterdir() if ".staged" in p.name or ".previous-" in p.name]


def test_level_update_counts_each_clusters_member_changes():
    import numpy as np

    from c2s_pipeline.incremental import needs_summary, update_level

    vectors = np.eye(4)[[0, 0, 0, 0, 1, 1, 1, 1, 1, 0]].astype(float)  # items a..h in two groups, i and j new
    ids = list("abcdefghij")
    previous = [("A", list("abcd")), ("B", list("efgh"))]
    update = update_level(previous, ids, vectors, leave={"c", "d"}, insert=["c", "i", "j"], touched_items={"c"},
                          split_above=None)
    groups = dict(update.groups)
    assert sorted(groups["A"]) == list("abcj") and sorted(groups["B"]) == list("efghi")
    # A: d left, j joined, c was edited in place (left and came back): 3 changes; B: i joined.
    assert update.delta == {"A": 3, "B": 1}
    assert needs_summary(3, 4) and not needs_summary(1, 5) and needs_summary(2, 5)
    assert not needs_summary(2, 10) and needs_summary(3, 10) and needs_summary(1, 1)
