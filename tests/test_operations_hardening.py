"""Compile-side hardening: what a compile reads (HTML within a memory budget), what it writes
(escaped nav rows, identifiers kept whole, only folders it owns, never a mount point, no staging
left behind), the state it keeps (corrupted artifacts, cache and registry named and recovered
from) and how its runs are operated (no rejected tree published, dead runs failed by the
instance, a killed run retried once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from c2s_core.atomic_publish import MARKER_FILE, OutputError, check_output, publish, staged_path, swap_in
from c2s_core.navrows import parse_nav_file
from c2s_core.text import UNPRINTABLE, printable, strip_emphasis, strip_markdown, terms
from c2s_pipeline.compiler import CompileError, compile_corpus
from c2s_pipeline.workspace import CorpusSpec, Workspace

from .test_compile_llm import shared_encoder  # noqa: F401 - one loaded encoder for these compiles
from .test_ingest import write


def notes(folder: Path, n: int = 12) -> Path:
    for i in range(n):
        write(folder / f"note-{i}.md", f"# Note {i}\n\nHow refunds work for account case {i}, step by step.")
    return folder


def spec_for(tmp_path: Path, source: Path, name: str = "notes", out: Path | None = None) -> CorpusSpec:
    return CorpusSpec(name=name, source=str(source), out=str(out or tmp_path / "trees" / name))


def nav_files(tree: Path) -> dict[str, str]:
    return {p.relative_to(tree).as_posix(): p.read_text(encoding="utf-8") for p in tree.rglob("*.md")}


# -- 9: nav rows never carry raw control characters ---------------------------------------------


def test_printable_shows_control_and_bidi_characters_as_escapes():
    assert printable("a\x1b[2Jb\tc\nd\u202ee\x85f\u2028") == "a\\x1b[2Jb\tc\nd\\u202ee\\x85f\\u2028"
    assert printable("tab\there\n", keep="") == "tab\\x09here\\x0a"
    assert printable("plain text, ünïcode ✓") == "plain text, ünïcode ✓"


def test_titles_with_control_characters_render_as_escaped_single_rows(tmp_path):
    hostile = "Reset \x1b[2J the\x1e screen \u202eevil\x85 now"
    records = [{"id": f"doc-{i}", "title": hostile if i == 0 else f"Refund case {i}",
                "text": f"How refunds work for account case {i}, step by step. Press \x1b[31m red."}
               for i in range(12)]
    records.append({"id": "bad\x85id", "text": "an id with a C1 control"})
    source = write(tmp_path / "records.jsonl", "\n".join(json.dumps(r) for r in records) + "\n")
    spec = spec_for(tmp_path, source)
    manifest = compile_corpus(spec, Workspace(tmp_path / "home"))

    assert [r["reason"] for r in manifest["rejected"] if r["source"].endswith(":13")] == [
        "invalid id 'bad\\x85id': needs 1-512 chars, no control chars or backticks"]
    files = nav_files(Path(spec.out))
    for rel, text in files.items():
        assert not UNPRINTABLE.search(text.replace("\n", "")), rel
    leaf = manifest["doc_paths"]["doc-0"]
    row = next(c for c in parse_nav_file(files[leaf], leaf).cards if c.doc_id == "doc-0")
    assert row.title == printable(" ".join(hostile.split()))
    assert "\\x1b[2J" in row.title and "\\u202e" in row.title


def test_row_parser_splits_rows_at_newlines_only():
    text = ("---\nname: leaf\ndescription: d\n---\n# Leaf\n\n## Documents (2)\n"
            "- `a` **one\x1etwo\u2028three** — first\n- `b` **second** — row\n")
    cards = parse_nav_file(text, "skills/leaf/SKILL.md").cards
    assert [(c.doc_id, c.title) for c in cards] == [("a", "one\x1etwo\u2028three"), ("b", "second")]


# -- 11: identifiers keep their underscores --------------------------------------------------------


def test_markdown_helpers_keep_underscores_inside_identifiers():
    assert strip_emphasis("**dh_installxmlcatalogs** _now_ `MAX_FILE_BYTES`") == (
        "dh_installxmlcatalogs now MAX_FILE_BYTES")
    assert strip_markdown("Run _dh_installxmlcatalogs_ | see [pg_dump](x)") == "Run dh_installxmlcatalogs see pg_dump"


def test_offline_titles_and_rows_keep_identifiers_grep_can_find(tmp_path):
    source = notes(tmp_path / "corpus")
    write(source / "catalogs.md", "# dh_installxmlcatalogs\n\nThe dh_installxmlcatalogs helper registers "
                                  "XML catalogs; set DH_VERBOSE to see each step it takes.")
    spec = spec_for(tmp_path, source)
    manifest = compile_corpus(spec, Workspace(tmp_path / "home"))
    leaf = manifest["doc_paths"]["catalogs.md"]
    text = (Path(spec.out) / leaf).read_text(encoding="utf-8")
    row = next(c for c in parse_nav_file(text, leaf).cards if c.doc_id == "catalogs.md")
    assert row.title == "dh_installxmlcatalogs"
    assert "dhinstallxmlcatalogs" not in text
    # Title search finds the row by the identifier's (stemmed) term.
    title_terms = [line.split()[0] for line in (Path(spec.out) / "term_index.txt").read_text().splitlines()
                   if line.startswith("=")]
    assert f"={terms('dh_installxmlcatalogs')[0]}" in title_terms


# -- 12: only a folder with the marker is c2s's ---------------------------------------------------


def test_a_manifest_without_the_marker_does_not_make_a_folder_replaceable(tmp_path):
    out = tmp_path / "out"
    write(out / "manifest.json", json.dumps({"corpus": "notes", "c2s_version": "0.1.0"}))
    precious = write(out / "precious.txt", "keep me")
    with pytest.raises(OutputError, match=f"no {MARKER_FILE}"):
        check_output(out, "notes")
    stage = write(tmp_path / ".out.staged" / "manifest.json", "{}").parent
    with pytest.raises(OutputError):
        publish(stage, out, "notes")
    assert precious.read_text() == "keep me" and not stage.exists()

    with pytest.raises(CompileError, match=f"no {MARKER_FILE}"):
        compile_corpus(spec_for(tmp_path, notes(tmp_path / "corpus"), out=out), Workspace(tmp_path / "home"))
    assert precious.read_text() == "keep me"
    assert not (tmp_path / "home" / "artifacts" / "notes").exists()  # refused before any stage ran


# -- 13: a mount point is refused up front, and no staging is left behind -------------------------


@pytest.fixture
def mount_point(tmp_path):
    target = tmp_path / "mnt"
    target.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(target)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs needs privileges this run lacks: {done.stderr.decode().strip()}")
    yield target
    subprocess.run(["umount", str(target)], check=True)


def test_a_mount_point_as_out_is_refused_before_any_stage(tmp_path, mount_point):
    assert os.path.ismount(mount_point) and not any(mount_point.iterdir())
    with pytest.raises(CompileError, match="is a mount point"):
        compile_corpus(spec_for(tmp_path, notes(tmp_path / "corpus"), out=mount_point), Workspace(tmp_path / "home"))
    assert not (tmp_path / "home" / "artifacts" / "notes").exists()
    assert not staged_path(mount_point).exists()

    # Renaming a mount point fails (EBUSY): the staged tree goes, the mount keeps its content.
    write(mount_point / "kept.txt", "still here")
    stage = write(staged_path(mount_point) / "SKILL.md", "new").parent
    with pytest.raises(OSError):
        swap_in(stage, mount_point)
    assert not stage.exists() and (mount_point / "kept.txt").read_text() == "still here"


def test_a_failed_swap_puts_the_old_tree_back_and_removes_the_staging(tmp_path, monkeypatch):
    out = write(tmp_path / "out" / MARKER_FILE, json.dumps({"corpus": "notes"})).parent
    write(out / "SKILL.md", "old tree")
    stage = write(staged_path(out) / "SKILL.md", "new tree").parent
    real_replace, calls = os.replace, []

    def replace(src, dst):
        calls.append((Path(src), Path(dst)))
        if Path(src) == stage:
            raise OSError(16, "Device or resource busy")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OutputError, match="could not publish into .*Device or resource busy"):
        publish(stage, out, "notes")
    assert (out / "SKILL.md").read_text() == "old tree"
    assert not stage.exists() and [p.name for p in tmp_path.iterdir()] == ["out"]
