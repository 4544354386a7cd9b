"""Hostile input: what compile reads of a corpus, and what the agent's sandbox and CLI let through."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from c2s_pipeline.ingest import MAX_FILE_BYTES, read_corpus, source_fingerprint


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def reasons(result) -> dict[str, str]:
    return {r.source: r.reason for r in result.rejected}


def read_within(seconds: float, *args, **kwargs):
    """read_corpus in a daemon thread, so a read that blocks fails the test instead of hanging it."""
    box: list = []
    worker = threading.Thread(target=lambda: box.append(read_corpus(*args, **kwargs)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, f"read_corpus did not return within {seconds} s"
    return box[0]


# -- ingest: symlinks --------------------------------------------------------------------------

@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """A corpus with every kind of link: out of the corpus, inside it, dangling, looping, hidden."""
    outside = write(tmp_path / "outside" / "secret.md", "# Secret\n\nOUTSIDE-THE-CORPUS")
    root = tmp_path / "corpus"
    write(root / "doc.md", "# Doc\n\nA real document.")
    write(root / "sub" / "inner.md", "# Inner\n\nInside a folder.")
    write(root / ".hidden" / "h.md", "# Hidden\n\nNot corpus content.")
    (root / "passwd.txt").symlink_to("/etc/passwd")
    (root / "secret.md").symlink_to(outside)
    (root / "outdir").symlink_to(tmp_path / "outside", target_is_directory=True)
    (root / "alias.md").symlink_to("doc.md")
    (root / "subalias").symlink_to("sub", target_is_directory=True)
    (root / "dangling.md").symlink_to(root / "missing.md")
    (root / "sub" / "loop").symlink_to("..", target_is_directory=True)
    (root / "peek.md").symlink_to(root / ".hidden" / "h.md")
    return root


def test_symlinks_are_listed_rejections_and_never_followed_by_default(linked):
    result = read_corpus(linked)
    assert sorted(d.doc_id for d in result.documents) == ["doc.md", "sub/inner.md"]
    assert all("OUTSIDE" not in d.text and "root:" not in d.text for d in result.documents)
    got = reasons(result)
    for link in ("passwd.txt", "secret.md", "outdir", "alias.md", "subalias", "dangling.md",
                 "sub/loop", "peek.md"):
        assert got[link] == "symbolic link, not followed", (link, got)


def test_follow_symlinks_reads_only_links_that_stay_inside(linked):
    result = read_corpus(linked, follow_symlinks=True)
    ids = sorted(d.doc_id for d in result.documents)
    # Links inside are read under their own names (alias.md sorts first), so the same text
    # seen twice is kept once and reported as a duplicate.
    assert ids == ["alias.md", "sub/inner.md"]
    assert sorted((d.doc_id, d.duplicate_of) for d in result.duplicates) == [
        ("doc.md", "alias.md"), ("subalias/inner.md", "sub/inner.md")]
    got = reasons(result)
    assert got["passwd.txt"] == "symbolic link to a path outside the corpus, not followed"
    assert got["secret.md"] == "symbolic link to a path outside the corpus, not followed"
    assert got["outdir"] == "symbolic link to a path outside the corpus, not followed"
    assert got["dangling.md"] == "symbolic link whose target does not exist, not followed"
    assert got["sub/loop"] == "symbolic link to a folder that contains it (a loop), not followed"
    assert got["subalias/loop"] == "symbolic link to a folder that contains it (a loop), not followed"
    assert got["peek.md"] == "symbolic link into a hidden path, not followed"
    assert all("OUTSIDE" not in d.text for d in result.documents)


def test_symlinked_corpus_root_is_read(linked, tmp_path):
    # The path the caller names may itself be a link; only links found inside are refused.
    (tmp_path / "via").symlink_to(linked, target_is_directory=True)
    assert sorted(d.doc_id for d in read_corpus(tmp_path / "via").documents) == ["doc.md", "sub/inner.md"]


# -- ingest: bad input never stops the compile -------------------------------------------------

DEEP = "[" * 50_000


def test_deeply_nested_json_is_a_rejection_naming_file_and_line(tmp_path):
    write(tmp_path / "ok.md", "# Fine\n\nA real document.")
    write(tmp_path / "records.jsonl", json.dumps({"id": "a", "text": "Alpha."}) + "\n" + DEEP + "\n"
          + json.dumps({"id": "b", "text": "Beta."}) + "\n")
    write(tmp_path / "deep.json", '{"text": "x",\n "nested": ' + DEEP)
    result = read_corpus(tmp_path)
    assert sorted(d.doc_id for d in result.documents) == ["a", "b", "ok.md"]
    got = reasons(result)
    assert got["records.jsonl:2"].startswith("malformed JSON line: nested too deeply to parse")
    assert got["deep.json:2"].startswith("malformed JSON: nested too deeply to parse")


def test_other_parse_failures_are_rejections_with_file_and_line(tmp_path, monkeypatch):
    from c2s_pipeline import ingest

    write(tmp_path / "ok.md", "# Fine\n\nA real document.")
    write(tmp_path / "big.jsonl", '{"text": "x", "n": ' + "9" * 5000 + "}\n")  # int too long to convert
    write(tmp_path / "surrogate.jsonl", '{"text": "broken \\ud800 text"}\n')  # no UTF-8 file can hold it
    write(tmp_path / "u2028.jsonl", json.dumps({"text": "one\u2028record"}, ensure_ascii=False) + "\n")
    write(tmp_path / "page.html", "<html><body>x</body></html>")
    monkeypatch.setattr(ingest, "html_to_text", lambda html: 1 / 0)  # any parser bug
    result = read_corpus(tmp_path)
    got = reasons(result)
    assert got["big.jsonl:1"].startswith("malformed JSON line: Exceeds the limit")
    assert got["surrogate.jsonl:1"] == "text is not valid Unicode (unpaired surrogate at character 7)"
    assert got["page.html"] == "could not be parsed: ZeroDivisionError: division by zero"
    # A line is what ends in '\n': U+2028 inside a string does not split the record.
    assert sorted(d.doc_id for d in result.documents) == ["ok.md", "u2028.jsonl#L1"]


def test_fifo_is_not_opened(tmp_path):
    write(tmp_path / "ok.md", "# Fine\n\nA real document.")
    os.mkfifo(tmp_path / "p.md")
    result = read_within(10, tmp_path)
    assert [d.doc_id for d in result.documents] == ["ok.md"]
    assert reasons(result) == {"p.md": "not a regular file (a FIFO), not read"}
    named = read_within(10, tmp_path / "p.md")  # even when named as the corpus itself
    assert reasons(named) == {"p.md": "not a regular file (a FIFO), not read"}


def test_files_over_the_size_cap_are_rejected_with_size_and_cap(tmp_path):
    assert MAX_FILE_BYTES == 50 * 1024 * 1024
    write(tmp_path / "ok.md", "# Fine\n\nSmall.")
    write(tmp_path / "big.md", "x" * 1001)
    result = read_corpus(tmp_path, max_file_bytes=1000)
    assert [d.doc_id for d in result.documents] == ["ok.md"]
    assert reasons(result) == {"big.md": "file too large: 1,001 bytes, over the 1,000-byte cap per file"}


# -- ingest: self-ingestion ---------------------------------------------------------------------

def test_hidden_and_excluded_directories_are_counted_not_read(tmp_path):
    corpus = tmp_path / "docs"
    write(corpus / "a.md", "# A\n\nA document.")
    write(corpus / ".c2s" / "state.md", "# Hidden state")
    write(corpus / ".git" / "HEAD", "ref: refs/heads/main")
    # The compile's own output and $DAGSTER_HOME inside the corpus: must not be read back.
    write(corpus / "out" / "skills" / "a" / "SKILL.md", "# Skill\n\nCompiled output.")
    write(corpus / "home" / "storage" / "run.md", "# Run\n\nDagster state.")
    write(corpus / "sub" / "b.md", "# B\n\nAnother document.")
    result = read_corpus(corpus, exclude=[corpus / "out", corpus / "home", tmp_path])
    assert sorted(d.doc_id for d in result.documents) == ["a.md", "sub/b.md"]
    assert result.excluded == ["home", "out"]
    assert result.ignored_hidden == 2 and result.rejected == []
    # tmp_path holds the corpus: excluding it cannot exclude everything.
    assert result.summary() == {"accepted": 2, "rejected": 0, "duplicate": 0, "ignored_hidden": 2,
                                "excluded": 2}
    # Without exclude (the callers that pass nothing) the output would be read back.
    assert "out/skills/a/SKILL.md" in {d.doc_id for d in read_corpus(corpus).documents}


def test_source_fingerprint_ignores_excluded_output(tmp_path):
    corpus = tmp_path / "docs"
    write(corpus / "a.md", "# A\n\nA document.")
    before = source_fingerprint(corpus, exclude=[corpus / "out"])
    write(corpus / "out" / "manifest.json", "{}")  # a compile writes its output
    assert source_fingerprint(corpus, exclude=[corpus / "out"]) == before
    assert source_fingerprint(corpus) != before
