"""The c2s command line: a clear one-line error for each bad corpus, never a traceback."""

import json
import re

import pytest
from typer.testing import CliRunner

from c2s_cli.compile import _Lines
from c2s_cli.main import app

runner = CliRunner()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    return tmp_path


def run(*args):
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.mark.parametrize("files, message", [
    ({}, "no documents accepted"),
    ({"a.md": "", "b.bin": "x"}, "no documents accepted"),
    ({f"d{i}.md": f"# Doc {i}\n\nText number {i} about topic {i}." for i in range(4)}, "fewer than the branching ratio p=10"),
])
def test_unusable_corpora_fail_with_a_reason(home, files, message):
    corpus = home / "corpus"
    corpus.mkdir()
    for name, text in files.items():
        (corpus / name).write_text(text)
    for dry_run in ([], ["--dry-run"]):  # the estimate reads the corpus as the compile does, and says why
        result = run("compile", str(corpus), "--corpus", "bad", *dry_run)
        assert result.exit_code == 1
        assert message in result.output and "Traceback" not in result.output
        if files.get("a.md") == "":
            assert "a.md: empty file" in result.output


def test_bad_arguments(home):
    result = run("compile", str(home / "missing"), "--corpus", "x")
    assert result.exit_code == 1 and "corpus path does not exist" in result.output
    (home / "c").mkdir()
    result = run("compile", str(home / "c"), "--corpus", "bad/name")
    assert result.exit_code == 2 and "--name" in result.output and "letters, digits" in result.output
    result = run("compile", str(home / "c"), "--corpus", "ok", "--p", "1")
    assert result.exit_code == 2 and "--p" in result.output


def test_compile_json_reports_rejections(home):
    corpus = home / "corpus"
    corpus.mkdir()
    for i in range(12):
        (corpus / f"doc{i:02d}.md").write_text(f"# Topic {i}\n\nThis article explains setting number {i} in detail.")
    (corpus / "broken.jsonl").write_text('{"id": "x", "text": "fine record with enough words"}\n{oops\n')
    (corpus / "empty.txt").write_text("")
    result = run("compile", str(corpus), "--corpus", "small", "--out", str(home / "out"), "--json")
    assert result.exit_code == 0, result.output
    manifest = json.loads(result.stdout)
    assert manifest["stats"]["documents"] == {"accepted": 13, "rejected": 2, "duplicate": 0, "ignored_hidden": 0, "excluded": 0}
    assert {(r["source"], r["reason"].split(":")[0]) for r in manifest["rejected"]} == {
        ("broken.jsonl:2", "malformed JSON line"), ("empty.txt", "empty file")}
    assert len(manifest["doc_paths"]) == 13 and (home / "out" / "manifest.json").is_file()


def test_corpus_add_registers_a_partition_for_backfills(home):
    from dagster import DagsterInstance

    from c2s_pipeline.partitions import corpus_partitions
    from c2s_pipeline.workspace import Workspace

    corpus = home / "kb"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nSome text.")
    result = run("corpus", "add", str(corpus), "--corpus", "kb", "--p", "8")
    assert result.exit_code == 0 and "added corpus partition kb" in result.output
    registered = Workspace(home / "home").corpora()["kb"]
    assert (registered.source, registered.p) == (str(corpus.resolve()), 8)
    with DagsterInstance.from_config(str(home / "home")) as instance:
        assert instance.get_dynamic_partitions(corpus_partitions.name) == ["kb"]
    again = run("corpus", "add", str(corpus), "--corpus", "kb", "--p", "12")
    assert again.exit_code == 0 and "updated corpus partition kb" in again.output
    assert Workspace(home / "home").corpora()["kb"].p == 12
    listed = run("corpus", "list")
    assert "kb" in listed.output and "yes" in listed.output
    missing = run("corpus", "add", str(home / "nope"), "--corpus", "x")
    assert missing.exit_code == 1 and "corpus path does not exist" in missing.output


def test_corpus_set_changes_only_the_settings_given(home):
    from c2s_pipeline.workspace import Workspace

    corpus = home / "kb"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nSome text.")
    assert run("corpus", "add", str(corpus), "--corpus", "kb", "--p", "8", "--provider", "openai",
               "--model", "qwen3-8b", "--base-url", "http://127.0.0.1:8000/v1").exit_code == 0
    result = run("corpus", "set", "kb", "--tau", "0.1", "--concurrency", "4")
    assert result.exit_code == 0 and "updated corpus partition kb" in result.output
    spec = Workspace(home / "home").corpus("kb")
    assert (spec.p, spec.tau, spec.llm.provider, spec.llm.model, spec.llm.concurrency) == (8, 0.1, "openai", "qwen3-8b", 4)
    assert spec.llm.base_url == "http://127.0.0.1:8000/v1"
    # Compiling with no setting flags keeps the registered ones (p=8 here).
    compiled = run("compile", str(corpus), "--corpus", "kb")
    assert compiled.exit_code == 1 and "fewer than the branching ratio p=8" in compiled.output
    assert Workspace(home / "home").corpus("kb").llm.model == "qwen3-8b"

    unknown = run("corpus", "set", "nope", "--p", "4")
    assert unknown.exit_code == 1 and "corpus 'nope' is not registered" in unknown.output
    bad = run("corpus", "set", "kb", "--provider", "gemini")
    assert bad.exit_code == 2 and "unknown LLM provider 'gemini'" in bad.output


def test_progress_lines_off_a_terminal_say_each_stage_start_every_interval_and_end():
    now, lines = [0.0], []
    log = _Lines(lines.append, every=10.0, clock=lambda: now[0])
    for t, done in ((0, 0), (3, 10), (9, 20), (12, 30), (15, 40), (23, 50), (24, 100), (30, 100)):
        now[0] = t
        log.update("doc_cards", done, 100)
    assert [line.split(" ", 1)[1] for line in lines] == ["doc_cards 0/100", "doc_cards 30/100", "doc_cards 50/100",
                                                          "doc_cards 100/100"]
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d doc_cards \d+/100", line) for line in lines)


def test_a_compile_off_a_terminal_logs_its_progress_and_shows_rejected_names_inert(home):
    corpus = home / "corpus"
    corpus.mkdir()
    for i in range(12):
        (corpus / f"doc{i:02d}.md").write_text(f"# Topic {i}\n\nThis article explains setting number {i} in detail.")
    (corpus / "evil\x1b[2J\nname.md").write_text("")  # rejected: empty; an escape and a newline in its name
    result = run("compile", str(corpus), "--corpus", "small", "--out", str(home / "out"))
    assert result.exit_code == 0, result.output
    # CliRunner's stderr is no terminal: each stage that reports progress says when it is done, on a line.
    done = [m.group(1) for m in re.finditer(r"^\d\d:\d\d:\d\d (\w+) (\d+)/\2\b", result.output, re.M)]
    assert {"doc_cards", "doc_embeddings", "summaries_l1", "staged_tree"} <= set(done), result.output  # the probe too
    assert len(done) == len(set(done))
    assert "\x1b" not in result.output
    assert "evil\\x1b[2J\\x0aname.md: empty file" in result.output
