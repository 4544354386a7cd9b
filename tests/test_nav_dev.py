"""The development benchmark's tooling: a table is never read off a tree that an older compiler
built (benchmarks/nav_dev.py), and a constant is taken only where it transfers (benchmarks/loco.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from loco import choose, leave_one_out, transferred  # noqa: E402
from nav_dev import compiler_digest, reusable  # noqa: E402


def _project(root: Path) -> None:
    for package in ("c2s_core", "c2s_pipeline", "c2s_cli", "c2s_agent"):
        (root / package / "sub").mkdir(parents=True)
        (root / package / "__init__.py").write_text(f"NAME = {package!r}\n")
        (root / package / "sub" / "stage.py").write_text("X = 1\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")


def test_the_compiler_digest_follows_the_compilers_code_and_nothing_else(tmp_path):
    _project(tmp_path)
    first = compiler_digest(tmp_path)
    assert compiler_digest(tmp_path) == first

    (tmp_path / "c2s_agent" / "sub" / "stage.py").write_text("X = 2\n")  # the agent compiles nothing
    (tmp_path / "c2s_pipeline" / "notes.txt").write_text("not code\n")
    assert compiler_digest(tmp_path) == first

    changed = []
    for edit in (lambda: (tmp_path / "c2s_pipeline" / "sub" / "stage.py").write_text("X = 2\n"),
                 lambda: (tmp_path / "c2s_core" / "sub" / "new.py").write_text(""),
                 lambda: (tmp_path / "pyproject.toml").write_text("[project]\nname = 'y'\n"),
                 lambda: (tmp_path / "c2s_cli" / "sub" / "stage.py").rename(tmp_path / "c2s_cli" / "moved.py")):
        edit()
        changed.append(compiler_digest(tmp_path))
    assert len({first, *changed}) == 1 + len(changed)  # each edit is a new compiler


def test_a_tree_is_reused_only_for_its_corpus_and_compiler(tmp_path):
    tree, stamp = tmp_path / "trees" / "x", tmp_path / "trees" / "x.source-sha1"
    digests = ["corpus-sha", "compiler-sha"]
    assert reusable(tree, stamp, digests) is None  # never compiled

    tree.mkdir(parents=True)
    (tree / "manifest.json").write_text("{}")
    stamp.write_text("corpus-sha compiler-sha 204.3")
    assert reusable(tree, stamp, digests) == 204.3

    assert reusable(tree, stamp, ["corpus-sha", "newer-compiler"]) is None
    assert reusable(tree, stamp, ["other-corpus", "compiler-sha"]) is None
    stamp.write_text("corpus-sha 204.3")  # a stamp that names no compiler: built by an unknown one
    assert reusable(tree, stamp, digests) is None
    (tree / "manifest.json").unlink()  # a compile that never finished
    stamp.write_text("corpus-sha compiler-sha 204.3")
    assert reusable(tree, stamp, digests) is None


def test_a_value_only_the_corpus_it_helps_would_choose_does_not_transfer():
    # Margins per value and corpus: "fit" gains at 2 and decides every choice it takes part in
    # (it has the worst margin); the others are level or slightly worse at 2.
    margins = {1.0: {"fit": 0.80, "a": 1.00, "b": 1.03, "c": 1.01},
               2.0: {"fit": 0.84, "a": 0.99, "b": 1.03, "c": 1.01}}
    corpora = list(margins[1.0])
    loco = leave_one_out(margins, corpora, 1.0)
    assert choose(margins, corpora, 1.0) == 2.0  # over all four, the worst margin picks 2
    assert {row["left_out"]: row["chosen"] for row in loco} == {"fit": 1.0, "a": 2.0, "b": 2.0, "c": 2.0}
    assert transferred(loco, 2.0) == []  # no corpus given 2 without its say is better there

    margins[2.0]["c"] = 1.02  # a corpus that took no part in the choice gains: the value transfers
    assert transferred(leave_one_out(margins, corpora, 1.0), 2.0) == ["c"]


def _report(path: Path, sets: dict[str, tuple[str, list[tuple[str, float, float, float]]]]) -> Path:
    """A `nav_dev.py --json` file: set name -> (corpus, [(question id, routed, navigator-only, bm25)])."""
    import json

    path.write_text(json.dumps({"sets": [
        {"name": name, "corpus": corpus, "report": {"best_flat": "bm25", "per_query": [
            {"id": q, "routed": r, "navigator-only": n, "bm25": b} for q, r, n, b in rows]}}
        for name, (corpus, rows) in sets.items()]}))
    return path


def test_a_compiler_constant_is_scored_from_the_reports_of_trees_compiled_at_each_value(tmp_path):
    """``loco.py --compiled``: a value's answers may come from several reports (corpora run side by
    side), corpora outside ``--corpora`` are left out, and reports that answer other questions
    than the first value's are refused rather than compared."""
    import pytest
    from loco import compiled_scores

    a = _report(tmp_path / "a.json", {"x faq": ("x", [("q1", 1, 0, 1), ("q2", 0, 0, 1)]),
                                      "z faq": ("z", [("q9", 1, 1, 1)])})
    b = _report(tmp_path / "b.json", {"y faq": ("y", [("q3", 1, 1, 0)])})
    c = _report(tmp_path / "c.json", {"x faq": ("x", [("q1", 1, 1, 1), ("q2", 1, 0, 1)]),
                                      "y faq": ("y", [("q3", 0, 1, 0)])})
    scores, sets = compiled_scores(f"0={a},0={b},0.5={c}", ["x", "y"])
    assert [s["name"] for s in sets] == ["x faq", "y faq"]
    assert scores[0.0] == {"x faq": {"routed": [1, 0], "navigator-only": [0, 0], "best": [1, 1]},
                           "y faq": {"routed": [1], "navigator-only": [1], "best": [0]}}
    assert scores[0.5]["x faq"]["navigator-only"] == [1, 0] and scores[0.5]["y faq"]["routed"] == [0]

    other = _report(tmp_path / "d.json", {"x faq": ("x", [("q1", 1, 1, 1)]), "y faq": ("y", [("q3", 0, 1, 0)])})
    with pytest.raises(SystemExit, match="other sets or questions"):
        compiled_scores(f"0={a},0={b},0.5={other}", ["x", "y"])
    with pytest.raises(SystemExit, match="VALUE=REPORT"):
        compiled_scores(f"0={a},{b}", ["x", "y"])
    with pytest.raises(SystemExit, match="a number for VALUE"):
        compiled_scores(f"half={a}", ["x", "y"])
    with pytest.raises(SystemExit, match="missing.json: not a `nav_dev.py --json` report"):
        compiled_scores(f"0={a},0.5={tmp_path / 'missing.json'}", ["x", "y"])
