"""Hostile input: what compile reads of a corpus, and what the agent's sandbox and CLI let through."""

from __future__ import annotations

import json
import os
import random
import shlex
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from c2s_agent.sandbox import MAX_PATTERN_EXPANSION, Sandbox, limits, redact_host_paths
from c2s_pipeline.ingest import MAX_FILE_BYTES, read_corpus, source_fingerprint

from .test_ingest import write


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


def test_a_jsonl_file_over_the_cap_is_read_a_record_at_a_time_and_a_record_over_it_rejected_alone(tmp_path):
    """A corpus exported as one JSONL (50,000 articles: ~60 MB) is not one file to cap: it is read
    a line at a time, the cap applies to each record, and a bad line costs only itself."""
    records = [json.dumps({"id": f"kb-{i}", "text": f"Article {i}: " + "word " * 30}) for i in range(12)]
    records[4] = json.dumps({"id": "huge", "text": "y" * 5000})  # over the cap: skipped, not held whole
    lines = "\n".join(records).encode() + b"\n"
    lines = lines.replace(b"Article 7:", b"Article \xff:")  # one undecodable line
    write(tmp_path / "export.jsonl", b"\xef\xbb\xbf" + lines)  # a BOM before the first record
    assert len(lines) > 1000
    result = read_corpus(tmp_path, max_file_bytes=1000)
    assert [d.doc_id for d in result.documents] == [f"kb-{i}" for i in range(12) if i not in (4, 7)]
    assert reasons(result) == {
        "export.jsonl:5": "record too large: over the 1,000-byte cap per record",
        "export.jsonl:8": "not valid UTF-8 text (undecodable byte at offset 32)"}
    blank = write(tmp_path / "blank" / "none.jsonl", "\n \n")
    assert reasons(read_corpus(blank)) == {"none.jsonl": "empty file"}


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
    # tmp_path holds the corpus (a $DAGSTER_HOME above it): that cannot exclude everything.
    result = read_corpus(corpus, exclude=[corpus / "out", corpus / "home", tmp_path])
    assert sorted(d.doc_id for d in result.documents) == ["a.md", "sub/b.md"]
    assert result.excluded == ["home", "out"]
    assert result.ignored_hidden == 2 and result.rejected == []
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


# -- sandbox: patterns, budgets, hidden files, manifest view -------------------------------------


CANARY = "CANARY-OUTSIDE-7f3a"
HIDDEN = "CANARY-HIDDEN-19c2"


def make_tree(tmp_path: Path) -> Path:
    """A small tree in the compiled layout, with canaries beside it and hidden files inside it."""
    (tmp_path / "canary.txt").write_text(CANARY + "\n")
    write(tmp_path / "outside" / "x.md", CANARY + "\n")
    root = tmp_path / "tree"
    files = {
        "INDEX.md": "# Corpus\n- skills/billing\n- skills/café\n",
        "skills/billing/SKILL.md": "---\nname: billing\n---\n# Billing\nRefund policy: 30 days.\n"
                                   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\n",
        "skills/billing/refunds/INDEX.md": "# Refunds\n- `r-1` **Refund [bold]how[/]** — :x: ask\n",
        "skills/café/SKILL.md": "# Café ☕\nNaïve unicode — 日本語 text\n",
        "skills/café/日本/INDEX.md": "# 日本\nrows\n",
        "entity_index.json": json.dumps({"Refund": [{"path": "skills/billing/SKILL.md", "mentions": 2}]}) + "\n",
        "long.txt": "a" * 3000 + "!\n",
        ".secret": HIDDEN + "\n",
        ".git/config": HIDDEN + "\n",
        "skills/billing/.notes.md": HIDDEN + "\n",
    }
    for rel, text in files.items():
        write(root / rel, text)
    manifest = {"corpus": "t", "source": str(tmp_path / "corpus"), "out": str(root),
                "skills": [{"name": "billing", "path": "skills/billing/SKILL.md"}],
                "stages": {"documents": {"artifacts": str(tmp_path / "home" / "artifacts"),
                                         "note": f"read from {tmp_path}/corpus at start"}},
                "bucket": "s3://bucket/key/part"}
    write(root / "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False))
    write(root / "documents.sqlite", b"SQLite format 3\x00" + CANARY.encode())
    (root / "link_out").symlink_to(tmp_path / "outside", target_is_directory=True)
    (root / "skills" / "canary.md").symlink_to(tmp_path / "canary.txt")
    os.mkfifo(root / "skills" / "pipe.md")
    return root


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    return make_tree(tmp_path)


def test_unrolling_patterns_are_refused_before_compiling(hostile):
    sb = Sandbox(hostile, isolated=False)  # in this process, where tracemalloc sees it
    tracemalloc.start()
    try:
        out = sb.run("grep -E '((((a{100}){100}){100}){100})' manifest.json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out == ("grep: refused: pattern '((((a{100}){100}){100}){100})' unrolls to 100,000,000 "
                   "atoms once its counted repeats {n} are multiplied out; the limit is 10,000 "
                   "(use + or * instead of large counts)")
    assert peak < 5 << 20 and sb.last_status == 2
    # Basic-regex repeats and -e patterns count too, summed; small counts still work.
    assert "unrolls to 10,001 atoms" in sb.run("grep '\\(ab\\)\\{5000\\}x' INDEX.md")
    assert "unrolls to 10,001 atoms" in sb.run(f"grep -E -e 'a{{{MAX_PATTERN_EXPANSION}}}' -e b INDEX.md")
    assert sb.run("grep -cE 'a{80}b' skills/billing/SKILL.md") == "1"
    assert sb.run("grep -c 'a\\{3000\\}' long.txt") == "1"
    assert sb.run("grep -E '" + "(" * 33 + "a" + ")" * 33 + "' INDEX.md") == (
        "grep: refused: pattern '" + "(" * 33 + "a" + ")" * 33 + "' nests groups 33 deep; the limit is 32")


def test_grep_honours_every_e_pattern(hostile):
    sb = Sandbox(hostile)
    assert sb.run("grep -e Refund -e Naïve -r skills") == (
        "skills/billing/SKILL.md:Refund policy: 30 days.\n"
        "skills/billing/refunds/INDEX.md:# Refunds\n"
        "skills/billing/refunds/INDEX.md:- `r-1` **Refund [bold]how[/]** — :x: ask\n"
        "skills/café/SKILL.md:Naïve unicode — 日本語 text")
    assert sb.run("grep -c -e policy -e '^#' skills/billing/SKILL.md") == "2"
    assert sb.run("grep -rl -e nomatch -e 日本語 .") == "./skills/café/SKILL.md"
    assert sb.run("grep -vc -e a -e i -e '#' INDEX.md") == "0"
    assert sb.run("grep -F -e '[bold]' -e '**' skills/billing/refunds/INDEX.md | wc -l") == "1"
    assert sb.run("grep -w -e 30 -e day skills/billing/SKILL.md") == "Refund policy: 30 days."


def test_hidden_files_are_invisible(hostile):
    sb = Sandbox(hostile)
    for command in ("ls", "ls -a", "ls -la", "ls -Ra", "find .", "find / -name '.*'",
                    "grep -r CANARY", "grep -rl HIDDEN .", "cat .*", "cat */.*", "cat skills/billing/.*",
                    "head .secret", "cat .git/config", "ls .git", "grep -r x .git", "wc -l .secret"):
        out = sb.run(command)
        assert HIDDEN not in out and ".secret" not in out.replace("'.secret' is hidden", ""), (command, out)
        assert ".git/" not in out and ".notes" not in out.replace("'skills/billing/.notes.md'", ""), (command, out)
    assert sb.run("cat .secret") == ("refused: '.secret' is hidden "
                                     "(names starting with '.' are not part of the tree)")
    assert sb.run("cat skills/billing/.notes.md").startswith("refused: 'skills/billing/.notes.md' is hidden")
    assert sb.run("ls -a skills/billing") == "SKILL.md\nrefunds/"


def test_manifest_is_shown_without_host_paths(hostile, tmp_path):
    sb = Sandbox(hostile)
    on_disk = (hostile / "manifest.json").read_text()
    shown = sb.run("cat manifest.json")
    assert str(tmp_path) not in shown and str(tmp_path) in on_disk
    view = json.loads(shown)
    assert view["source"] == "<host path>" and view["out"] == "."
    assert view["stages"]["documents"] == {"artifacts": "<host path>", "note": "read from <host path> at start"}
    assert view["bucket"] == "s3://bucket/key/part" and view["skills"][0]["path"] == "skills/billing/SKILL.md"
    for command in ("grep -r tmp .", "grep -c / manifest.json", "head -n 3 manifest.json", "sort manifest.json",
                    "grep -rh source", "tail -n +1 */../manifest.json"):
        assert str(tmp_path) not in sb.run(command), command
    assert (hostile / "manifest.json").read_text() == on_disk  # the file itself is untouched


def test_redaction_keeps_relative_paths_and_urls():
    root = "/srv/trees/t"
    text = json.dumps({"a": "/srv/trees/t/skills/x/SKILL.md", "b": "/etc/passwd", "c": "skills/x",
                       "d": "https://example.com/a/b", "e": "file:///home/u/c.md", "f": "1/2 and/or",
                       "/home/u": "key", "g": "C:\\Users\\u\\corpus"})
    assert json.loads(redact_host_paths(text, root)) == {
        "a": "skills/x/SKILL.md", "b": "<host path>", "c": "skills/x", "d": "https://example.com/a/b",
        "e": "<host path>", "f": "1/2 and/or", "<host path>": "key", "g": "<host path>"}
    assert redact_host_paths("not json: /srv/trees/t and /opt/x", root) == "not json: . and <host path>"


def test_every_command_runs_under_a_time_and_memory_budget(hostile, monkeypatch):
    sb = Sandbox(hostile, time_budget_s=0.0)
    assert sb.run("ls -R") == "stopped: this command ran over 0 s; narrow the path or the pattern"
    assert sb.last_status == 2
    # Streams cost what they keep, not what they read: counting 600,000 lines keeps none; sorting
    # them keeps all, and is stopped.
    write(hostile / "lines.txt", "".join(f"line {i}\n" for i in range(600_000)))
    sb = Sandbox(hostile, memory_budget_bytes=8 << 20)
    assert sb.run("cat -n lines.txt | wc -l") == "600000"
    assert sb.run("sort lines.txt | wc -l") == (
        "stopped: this command would use over 8 MiB of memory; narrow the path or page with head -n")
    assert sb.run("head -n 1 long.txt | wc -c") == "3002"
    # Inside the interpreter memory is checked throughout, as growth of the resident size.
    growth = iter(range(0, 1 << 40, 4 << 20))  # each reading 4 MiB more than the last
    monkeypatch.setattr(limits, "memory_in_use", lambda: next(growth))
    monkeypatch.setattr(limits, "MEMORY_CHECK_INTERVAL_S", 0.0)
    sb = Sandbox(hostile, memory_budget_bytes=8 << 20, isolated=False)
    assert "would use over 8 MiB of memory" in sb.run("find . -type f")


def test_out_of_memory_inside_a_command_is_an_answer_not_a_crash(hostile):
    # One allocation in C (a 24 MiB line joined from its chunks) that no check inside the
    # interpreter can interrupt: the worker's address-space limit fails it, the reply says so,
    # and the next command gets a fresh worker.
    write(hostile / "one-line.txt", "a" * (24 << 20) + "\n")
    sb = Sandbox(hostile, memory_budget_bytes=16 << 20)
    first = sb.run("ls")
    worker = sb.last_run["pid"]
    assert sb.run("cat one-line.txt | wc -c") == (
        "stopped: this command would use over 16 MiB of memory; narrow the path or page with head -n")
    assert sb.last_status == 2
    assert sb.run("ls") == first and sb.last_run["pid"] != worker
    assert Sandbox(hostile).run("cat one-line.txt | wc -c") == str((24 << 20) + 1)  # within 256 MiB


# -- sandbox: generated commands -------------------------------------------------------------------


FILES = ["INDEX.md", "manifest.json", "big/words.txt", "big/lines.txt", "big/line.txt", "entity_index.json", "long.txt", "documents.sqlite",
         "skills/billing/SKILL.md", "skills/billing/refunds/INDEX.md", "skills/café/SKILL.md",
         "skills/café/日本/INDEX.md", "skills/pipe.md", "/INDEX.md", "./skills//billing/SKILL.md"]
DIRS = [".", "/", "skills", "skills/billing", "skills/café", "skills/café/日本", "skills/billing/refunds/"]
GLOBS = ["*", "*/*", "*/*/*", "skills/*/SKILL.md", "skills/*/*/INDEX.md", "s*", "?NDEX.md", "[a-z]*",
         "**", "*.json", "skills/[bc]*", ".*", "*/.*", "skills/*/.*", "*/*/*/*.md", "/*"]
OUTSIDE = ["../canary.txt", "/etc/passwd", "~", "~/canary.txt", "link_out/x.md", "link_out", "skills/canary.md",
           "/../canary.txt", "skills/../../canary.txt", "..", "../outside/x.md", ".secret", ".git/config",
           "skills/billing/.notes.md", "/proc/self/environ", "//etc/passwd", "./../canary.txt", "link_out/../..",
           "skills/café/../../../canary.txt", "../tree/../canary.txt", "nope", "", "-"]
WORDS = ["refund", "Refund", "café", "日本語", "☕", "policy", "a", "#", "30", "x", "CANARY", "source", "tmp",
         "\u202e", "é", "ab", "[bold]", ":x:", "--", "-e"]
REGEXES = ["^#", "a.b", "Re(f|x)und", "[[:alpha:]]+", "\\bpolicy\\b", "\\<Ref", "a\\{3\\}", "(", ")", "[",
           "*", "+", "\\", "é+", ".*", "a|b", "^$", "[^a-z]", "\\d+", "x{2,}", "(?i)ref", "\\p{L}+"]
PATHOLOGICAL = ["(a+)+$", "(a|aa)+$", "(a*)*b", "((((a{100}){100}){100}){100})", "a{10001}",
                "(" * 40 + "a" + ")" * 40, "(.*){20}x", "(a?){30}a{30}", "\\(a*\\)*b", "(x+x+)+y",
                "((a{99}){99})", "[" * 300, "(?R)*x", "(a(?1)?b)", "(?P<n>a|b(?&n))+", "(?P<n>x)(?P>n)*",
                "(?:ab){e<=2}", "(a|b)(?-1)*$"]
FLAGS = {"ls": "Rla1F", "cat": "n", "grep": "rRinlcEwvFIhH", "head": "", "tail": "", "wc": "lwc",
         "sort": "rnu", "uniq": "c", "find": "", "pwd": ""}
CONSTRUCTS = [" ; cat ../canary.txt", " && ls", " > out.txt", " >> x", " < /etc/passwd", " $(cat ../canary.txt)",
              " `id`", " &", "\ncat ../canary.txt", " 2>/dev/null", " || true", " ${HOME}", " $HOME", " (ls)"]
JUNK = "aé日☕\u202e\x1b\t \\'\"*?[]{}|$!#~"


def _quote(rng: random.Random, token: str) -> str:
    roll = rng.random()
    if roll < 0.55:
        return token  # bare: globs expand, metacharacters reach the parser
    if roll < 0.8:
        return shlex.quote(token)
    if roll < 0.95:
        return '"' + token.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return token.replace(" ", "\\ ")


def _operand(rng: random.Random) -> str:
    pool = rng.choices([FILES, DIRS, GLOBS, OUTSIDE], weights=[5, 2, 3, 2])[0]
    if rng.random() < 0.03:
        return "".join(rng.choice(JUNK) for _ in range(rng.randint(1, 8)))
    return rng.choice(pool)


def _pattern(rng: random.Random) -> str:
    pool = rng.choices([WORDS, REGEXES, PATHOLOGICAL], weights=[6, 4, 1])[0]
    return rng.choice(pool)


def _options(rng: random.Random, flags: str) -> list[str]:
    chosen = [c for c in flags if rng.random() < 0.25]
    if rng.random() < 0.02:
        chosen.append(rng.choice("AZBx"))  # unsupported
    if not chosen:
        return []
    if rng.random() < 0.5:
        return ["-" + "".join(chosen)]
    return ["-" + c for c in chosen]


def _stage(rng: random.Random, first: bool) -> str:
    if rng.random() < 0.03:
        name = rng.choice(["rm", "python", "sh", "echo", "xargs"])  # not supported
    else:
        name = rng.choices(list(FLAGS), weights=[5, 5, 8, 3, 3, 2, 2, 2, 3, 1])[0]
    args = _options(rng, FLAGS.get(name, "rf"))
    if name in ("head", "tail"):
        args += rng.choice([[], [], ["-n", str(rng.randint(0, 50))], [f"-{rng.randint(1, 9)}"], ["-n", "+2"],
                            ["-n", "x"]])
    patterns: list[str] = []
    if name == "grep":
        patterns = [_pattern(rng) for _ in range(rng.randint(2, 3) if rng.random() < 0.3 else 1)]
        args += [a for p in patterns for a in ("-e", p)] if len(patterns) > 1 else patterns
    if name == "find":
        starts = [_operand(rng) for _ in range(rng.randint(0, 2))]
        preds = rng.choice([[], ["-name", rng.choice(GLOBS)], ["-iname", "*.MD"], ["-type", rng.choice("fdl")],
                            ["-maxdepth", str(rng.randint(0, 3))], ["-exec", "cat", "{}", "+"], ["-delete"],
                            ["-name"], ["-name", "*", "-type", "f"]])
        args = starts + preds
    elif first or rng.random() < 0.15:
        args += [_operand(rng) for _ in range(rng.choice([0, 1, 1, 1, 2, 3]))]
    if name not in ("find", "head", "tail") and rng.random() < 0.2:
        rng.shuffle(args)  # options after operands, values torn from their options
    # Patterns are mostly quoted, as a careful agent would; bare ones meet the parser's refusals.
    return " ".join([name] + [shlex.quote(a) if a in patterns and rng.random() < 0.85 else _quote(rng, a)
                              for a in args])


def generate_command(rng: random.Random) -> str:
    stages = [_stage(rng, first=True)]
    stages += [_stage(rng, first=False) for _ in range(rng.choice([0] * 6 + [1, 1, 1, 2, 3, 5, 9]))]
    line = " | ".join(stages)
    if rng.random() < 0.08:
        line += rng.choice(CONSTRUCTS)
    if rng.random() < 0.01:
        line += " x" * 1000  # past the length limit
    if rng.random() < 0.01:
        line += "\x00"
    return line


# Audit events are process-wide and a hook cannot be removed: install one, and let it record only
# while a sandbox call runs, and only from the thread that runs it.
_AUDIT: dict = {"thread": None, "events": []}
_WATCHED = {"open", "os.listdir", "os.scandir"}
_FORBIDDEN = ("os.remove", "os.rename", "os.replace", "os.mkdir", "os.rmdir", "os.truncate", "os.chmod",
              "os.chown", "os.utime", "os.symlink", "os.link", "os.system", "os.fork", "os.exec", "os.spawn",
              "os.posix_spawn", "os.kill", "os.putenv", "os.unsetenv", "subprocess.", "socket.", "shutil.",
              "sqlite3.connect", "ctypes.", "import")


def _audit(event: str, args: tuple) -> None:
    if _AUDIT["thread"] != threading.get_ident():
        return
    if event in _WATCHED or event.startswith(_FORBIDDEN):
        _AUDIT["events"].append((event, args))


def _install_audit_hook() -> None:
    if not getattr(sys, "_c2s_sandbox_audit", False):
        sys.addaudithook(_audit)
        sys._c2s_sandbox_audit = True  # type: ignore[attr-defined]


def _violations(events: list, root: Path) -> list:
    bad = []
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    for event, args in events:
        if event not in _WATCHED:
            bad.append((event, args))
            continue
        path = args[0]
        if not isinstance(path, (str, bytes, os.PathLike)):
            bad.append((event, args))  # an open by descriptor: not something the sandbox does
            continue
        real = Path(os.path.realpath(os.fsdecode(path)))
        if not real.is_relative_to(root):
            bad.append((event, str(real)))
        if event == "open":
            mode, flags = args[1], args[2] if len(args) > 2 else 0
            if (isinstance(mode, str) and set(mode) & set("wax+")) or (flags or 0) & write_flags:
                bad.append(("write", str(real)))
    return bad


def _snapshot(top: Path) -> dict:
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def add_large_files(root: Path, tmp_path: Path) -> None:
    """Large legal files (under the 64 MiB read cap) whose naive handling takes many times their
    size: short words (a list of them), many short lines, one long line, and a large manifest
    full of host paths."""
    write(root / "big" / "words.txt", ("ab " * 20 + "\n") * 60_000)  # 3.6 MB, 1.2 M words
    write(root / "big" / "lines.txt", "x\n" * 600_000)
    write(root / "big" / "line.txt", "a" * (3 << 20) + "\n")
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["documents"] = [{"source": f"{tmp_path}/corpus/doc-{i}.md", "n": i} for i in range(40_000)]
    write(root / "manifest.json", json.dumps(manifest, indent=2))


def _peak_added(sb: Sandbox) -> int:
    """Resident memory the last command added to the worker that ran it, from /proc (VmHWM, the
    kernel's peak, reset as the command started)."""
    run = sb.last_run
    return run["rss_peak"] - run["rss_start"] if "rss_peak" in run else 0


@pytest.mark.timeout(300)
def test_generated_commands_stay_confined_and_bounded(hostile, tmp_path):
    rng = random.Random(20240611)
    add_large_files(hostile, tmp_path)
    commands = [generate_command(rng) for _ in range(400)]
    commands += [f"{verb} {path}" for verb in ("wc", "wc -w", "cat -n", "sort -n", "sort -u", "uniq -c", "tail -n 1",
                                                "head -n 2", "grep -c a", "grep -vc b")
                 for path in ("big/words.txt", "big/lines.txt", "big/line.txt", "manifest.json")]
    root = hostile.resolve()
    budgets = dict(max_output_bytes=4096, regex_timeout_s=0.05, time_budget_s=2.0, memory_budget_bytes=32 << 20)
    local = Sandbox(hostile, **budgets, isolated=False)  # in this process: the audit hook sees it
    sb = Sandbox(hostile, **budgets)  # in a worker, as the agent runs it
    local.run("ls")  # first-use imports and caches are not the command's doing
    sb.run("ls")
    _install_audit_hook()
    before = _snapshot(tmp_path)
    statuses: dict[int, int] = {}
    started = time.monotonic()
    for command in commands:
        _AUDIT["events"] = []
        _AUDIT["thread"] = threading.get_ident()
        try:
            out = local.run(command)
        finally:
            _AUDIT["thread"] = None
        assert not _violations(_AUDIT["events"], root), (command, _violations(_AUDIT["events"], root))
        t0 = time.monotonic()
        isolated = sb.run(command)
        elapsed = time.monotonic() - t0
        for reply in (out, isolated):
            assert isinstance(reply, str), command
            assert CANARY not in reply and HIDDEN not in reply, (command, reply)
            if str(tmp_path) not in command:
                assert str(tmp_path) not in reply, (command, reply)  # no host path, manifest included
            assert not reply.startswith("error: "), (command, reply)  # every failure is a known one
            assert len(reply.encode()) <= 4096 + 200, (command, len(reply.encode()))  # errors included
        if not any(s in reply for reply in (out, isolated) for s in ("stopped:", "took over")):  # timing-dependent
            assert isolated == out, command  # a worker answers what the interpreter answers
        assert elapsed < sb.time_budget_s + 1.0, (command, elapsed)
        assert _peak_added(sb) < sb.memory_budget_bytes, (command, _peak_added(sb) >> 20)
        assert sb.last_status in (0, 1, 2)
        statuses[sb.last_status] = statuses.get(sb.last_status, 0) + 1
    assert _snapshot(tmp_path) == before  # nothing written, created or removed
    # The generator reaches successes, per-file errors and refusals alike.
    assert all(statuses.get(k, 0) >= 20 for k in (0, 1, 2)), statuses
    assert time.monotonic() - started < 200


# -- terminal output ----------------------------------------------------------------------------------

HOSTILE_TITLE = "[bold red]Alarm[/] :x: \x1b[31mred\x1b[0m \u202egnp.exe"


def cli_tree(tmp_path: Path) -> Path:
    """A minimal serving tree whose one document has a title made to steer a terminal."""
    from c2s_core.docstore import StoredDocument, write_document_store

    root = tmp_path / "cli-tree"
    write(root / "skills" / "alarm" / "SKILL.md",
          "---\nname: alarm\ndescription: 'Alarms [bold]and[/] :x: codes'\nmetadata:\n  documents: 1\n---\n"
          "# Alarm\n\nLine with an escape: \x1b]0;pwned\x07 done\n")
    write(root / "manifest.json", json.dumps({"source": str(tmp_path / "corpus")}))
    write_document_store(root / "documents.sqlite",
                         [StoredDocument("alarm-1", HOSTILE_TITLE, "Alarm text [link=x]y[/link].", "h", "a.md")])
    return root


def test_ask_prints_document_text_literally(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from c2s_agent import agent
    from c2s_agent.agent import Reply
    from c2s_cli.main import app

    def navigator(question, tools, budget, system, **opts):
        tools.get_document("alarm-1")
        return Reply(answer="See [alarm-1] :x: [bold red]now[/] \x1b[2J", path="skills → [red]alarm[/]",
                     flags=["[blink]flag[/] :warning:"])

    monkeypatch.setitem(agent._NAVIGATORS, "hostile", navigator)
    res = CliRunner().invoke(app, ["ask", "--tree", str(cli_tree(tmp_path)), "--navigator", "hostile", "alarms?"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "[bold red]Alarm[/] :x: \\x1b[31mred\\x1b[0m \\u202egnp.exe" in out  # the title, literally
    assert "See [alarm-1] :x: [bold red]now[/] \\x1b[2J" in out
    assert "[blink]flag[/] :warning:" in out and "path: skills → [red]alarm[/]" in out
    assert "\x1b" not in out and "\u202e" not in out
    assert "❌" not in out and "⚠" not in out  # no emoji codes rendered


def test_shell_exit_status_follows_the_command(tmp_path):
    from typer.testing import CliRunner

    from c2s_cli.main import app

    tree = str(cli_tree(tmp_path))
    runner = CliRunner()
    ok = runner.invoke(app, ["shell", "--tree", tree, "cat skills/alarm/SKILL.md"])
    assert ok.exit_code == 0 and "Line with an escape: \\x1b]0;pwned\\x07 done" in ok.output
    assert "\x1b" not in ok.output and "\x07" not in ok.output
    missing = runner.invoke(app, ["shell", "--tree", tree, "cat skills/alarm/SKILL.md nope.md"])
    assert missing.exit_code == 1 and "cat: nope.md: No such file or directory" in missing.output
    for command, message in (("cat /etc/passwd", "outside the tree"), ("rm -rf skills", "command not found"),
                             ("grep -E '(' manifest.json", "invalid pattern"), ("ls; id", "command not found"),
                             ("ls && id", "refused"),
                             ("grep -E 'a{20000}' manifest.json", "unrolls to")):
        res = runner.invoke(app, ["shell", "--tree", tree, command])
        assert res.exit_code == 2 and message in res.output, (command, res.output)
    assert runner.invoke(app, ["shell", "--tree", tree, "cat manifest.json"]).output.strip() == (
        '{"source": "<host path>"}')


# -- what a compile will replace and read ------------------------------------------------------


def small_corpus(folder: Path, n: int = 12) -> Path:
    for i in range(n):
        write(folder / f"note-{i}.md", f"# Note {i}\n\nHow refunds work for account case {i}.")
    return folder


def cli_compile(home: Path, *args: str):
    from typer.testing import CliRunner

    from c2s_cli.main import app

    return CliRunner().invoke(app, ["compile", *args], env={"DAGSTER_HOME": str(home)})


def test_out_that_c2s_did_not_publish_is_never_replaced(tmp_path):
    corpus = small_corpus(tmp_path / "corpus")
    victim = tmp_path / "v" / "ext"
    write(victim / "manifest.json", "{}")
    write(victim / "background.js", "x")
    result = cli_compile(tmp_path / "home", str(corpus), "--corpus", "victim", "--out", str(victim))
    assert result.exit_code == 1 and "is not a tree c2s published" in result.output
    assert (victim / "background.js").read_text() == "x"
    assert not (tmp_path / "home" / "artifacts" / "victim").exists()  # refused before any stage ran

    a_file = write(tmp_path / "out.txt", "keep me")
    result = cli_compile(tmp_path / "home", str(corpus), "--corpus", "victim", "--out", str(a_file))
    assert result.exit_code == 1 and "is not a directory" in result.output and a_file.read_text() == "keep me"

    # A tree of another corpus is not replaced either; the corpus's own tree is.
    mine = tmp_path / "trees" / "mine"
    assert cli_compile(tmp_path / "home", str(corpus), "--corpus", "mine", "--out", str(mine)).exit_code == 0
    result = cli_compile(tmp_path / "home", str(corpus), "--corpus", "other", "--out", str(mine))
    assert result.exit_code == 1 and "published tree of corpus 'mine'" in result.output
    assert cli_compile(tmp_path / "home", str(corpus), "--corpus", "mine", "--out", str(mine)).exit_code == 0


def test_a_compile_never_reads_its_own_output_or_home(tmp_path):
    corpus = small_corpus(tmp_path / "corpus")
    os.symlink("/etc/passwd", corpus / "passwd.txt")
    home, out = corpus / "state", corpus / "out"
    for _ in range(2):
        result = cli_compile(home, str(corpus), "--corpus", "self", "--out", str(out), "--json")
        assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stats"]["documents"]["accepted"] == 12 and manifest["stats"]["documents"]["excluded"] == 2
    assert {"passwd.txt": "symbolic link, not followed"}.items() <= {
        r["source"]: r["reason"] for r in manifest["rejected"]}.items()
    import sqlite3

    with sqlite3.connect(out / "documents.sqlite") as db:
        texts = [row[0] for row in db.execute("SELECT text FROM documents")]
    assert len(texts) == 12 and not any("root:" in text for text in texts)


def test_compile_summary_prints_document_text_literally(tmp_path):
    corpus = tmp_path / "corpus"
    for i in range(12):
        write(corpus / f"note-{i}.md", f"# [bold red]Alert[/] list:x:{i} refunds\n\nHow list:x:38 refunds work, case {i}.")
    result = cli_compile(tmp_path / "home", str(corpus), "--corpus", "markup", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    raw = [s["description"] for s in manifest["skills"] if "[bold red]" in s["description"] or ":x:" in s["description"]]
    assert raw, "the sample titles should reach a skill description"
    assert "❌" not in result.output
    assert ":x:" in result.output.replace("\n", "").replace("│", "")


def test_a_broken_registry_is_one_line_naming_the_file(tmp_path):
    corpus = small_corpus(tmp_path / "corpus")
    write(tmp_path / "home" / "corpora.yaml", "corpora:\n  x: [unclosed\n")
    result = cli_compile(tmp_path / "home", str(corpus), "--corpus", "x")
    assert result.exit_code == 1 and "corpora.yaml is not a valid corpus registry" in result.output
    assert result.output.strip().count("\n") == 0 and "Traceback" not in result.output


# -- budgets the system enforces: each finding of an attack run, as behaviour -----------------------


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> Path:
    """A tree with large legal files (under the 64 MiB read cap) that naive handling multiplies."""
    root = cli_tree(tmp_path_factory.mktemp("large"))  # a tree c2s shell serves
    write(root / "skills" / "a" / "SKILL.md", "# A\n")
    for i in range(40):
        write(root / "skills" / f"s{i:03d}" / "INDEX.md", f"# {i}\n")
        write(root / "skills" / f"s{i:03d}" / "sub" / "INDEX.md", f"# {i}.1\n")
    write(root / "words.txt", ("ab " * 20 + "\n") * 1_000_000)  # 60 MB, 20 M words
    write(root / "lines.txt", "x\n" * 3_000_000)
    write(root / "numbers.txt", "".join(f"{(i * 7919) % 1_000_003}\n" for i in range(3_000_000)))
    entries = [{"source": f"/home/someone/corpus/doc-{i}.md", "n": i} for i in range(600_000)]
    write(root / "manifest.json", json.dumps({"corpus": "big", "source": "/home/someone/corpus",
                                              "documents": entries}, indent=2))
    write(root / "term_index.txt", "refund 1 2\npolicy 3\n" * 1000)
    return root


def ran_within(sb: Sandbox, command: str, budget: int = 256 << 20) -> str:
    """Run ``command``; assert the memory it added to its worker (peak resident size from /proc)
    stayed within ``budget``."""
    out = sb.run(command)
    added = sb.last_run.get("rss_peak", 0) - sb.last_run.get("rss_start", 0)
    assert added < budget, (command, added >> 20)
    return out


def test_recursive_patterns_are_refused_and_cost_nothing(large):
    sb = Sandbox(large)
    for pattern in ("(?R)*x", "(a(?1)?b)", "(?P<n>a|b(?&n))+", "(?P<n>x)(?P>n)*", "(a)(?-1)", "(a)(?+1)(b)"):
        out = ran_within(sb, f"grep -E {shlex.quote(pattern)} term_index.txt", 16 << 20)
        assert out == (f"grep: refused: pattern {pattern!r} calls a group recursively ((?R), (?1), (?&name)); "
                       "grep patterns cannot recurse"), out
    assert "asks for fuzzy matching" in sb.run("grep -E '(?:refund){e<=2}' term_index.txt")
    # The same characters as text, escaped or in a class, are ordinary patterns.
    assert sb.run("grep -c '(?R)' term_index.txt") == "0"
    assert sb.run("grep -cE '[(?R)]' term_index.txt") == "0"


def test_large_legal_files_stream_within_the_budget(large):
    sb = Sandbox(large)
    assert ran_within(sb, "wc -w words.txt") == "20000000 words.txt"
    assert ran_within(sb, "cat -n lines.txt | tail -n 1") == "3000000\tx"
    assert ran_within(sb, "grep -c x lines.txt") == "3000000"
    # Sorting keeps every line: stopped at the budget, never past it.
    assert ran_within(sb, "sort -n numbers.txt | head -n 1") == (
        "stopped: this command would use over 256 MiB of memory; narrow the path or page with head -n")
    assert "lines.txt" in ran_within(sb, "ls").splitlines()  # and the next command runs


def test_a_large_manifest_is_redacted_as_it_streams(large):
    sb = Sandbox(large)
    assert ran_within(sb, "head -n 3 manifest.json", 16 << 20) == (
        '{\n  "corpus": "big",\n  "source": "<host path>",')
    assert ran_within(sb, "grep -c someone manifest.json", 64 << 20) == "0"


def test_error_lines_count_toward_the_output_cap(large):
    sb = Sandbox(large)
    out = sb.run("cat " + "skills/*/* " * 150)
    assert len(out.encode()) <= 8192 + 200 and sb.last_status == 1  # the cap, and a note
    assert out.splitlines()[0] == "# A"  # output first, then the error lines, capped
    assert out.splitlines()[-2].startswith("cat: skills/") and out.endswith("more error lines not shown]")


def test_an_over_long_name_is_refused_without_a_host_path(large):
    sb = Sandbox(large)
    out = sb.run("cat " + "x" * 256)
    assert out == f"refused: a name in '{'x' * 40}…' is over 255 bytes long; no file in the tree has one"
    assert str(large) not in out and sb.last_status == 2
    assert "No such file" in sb.run("cat " + "x" * 255)  # the longest legal name is just missing


def test_counts_take_ascii_digits_only(large):
    sb = Sandbox(large)
    assert sb.run("head -n ² lines.txt") == "head: invalid number of lines: '²'"
    assert sb.run("tail -n ++5 lines.txt") == "tail: invalid number of lines: '++5'"
    assert sb.run("find -maxdepth ²") == "find: invalid -maxdepth: '²'"
    assert sb.run("find -maxdepth +1") == "find: invalid -maxdepth: '+1'"
    assert sb.run("head -n +2 skills/a/SKILL.md") == "# A" and sb.run("tail -n +1 skills/a/SKILL.md") == "# A"


def test_undecodable_bytes_are_one_line_over_the_cli(large):
    import subprocess

    sb = Sandbox(large)
    assert sb.run("cat \udcff") == "refused: the command line holds bytes that are not UTF-8 text"
    cli = [sys.executable.encode(), b"-m", b"c2s_cli"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    shell = subprocess.run(cli + [b"shell", b"--tree", os.fsencode(large), b"cat \xff"], capture_output=True, env=env)
    assert (shell.returncode, shell.stdout, shell.stderr) == (
        2, b"refused: the command line holds bytes that are not UTF-8 text\n", b"")


def test_a_question_with_undecodable_bytes_is_answered_over_the_cli(sample_tree):
    """``c2s ask`` with bytes that are not UTF-8 (a terminal in another encoding): the question is
    read with U+FFFD in their place and answered, with no traceback."""
    import subprocess

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    asked = subprocess.run([sys.executable.encode(), b"-m", b"c2s_cli", b"ask", b"--tree", os.fsencode(sample_tree.out),
                            b"--json", b"How do I get a refund \xff\xfe for a booking?"], capture_output=True, env=env)
    assert asked.returncode == 0 and b"Traceback" not in asked.stderr, asked.stderr[-2000:]
    result = json.loads(asked.stdout)
    assert "\ufffd" in result["question"] and result["citations"]


def test_the_budget_holds_over_the_cli(large):
    """Each hostile command through ``c2s shell``: the largest resident size of the CLI process and
    its workers (the kernel's, from wait4) stays within the CLI's own size plus the budget."""
    import subprocess

    def max_rss(command: str) -> tuple[int, int]:
        proc = subprocess.Popen([sys.executable, "-m", "c2s_cli", "shell", "--tree", str(large), command],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, usage.ru_maxrss * 1024

    code, base = max_rss("pwd")
    assert code == 0
    for command in ("grep -E '(?R)*x' term_index.txt", "wc -w words.txt", "cat -n lines.txt",
                    "sort -n numbers.txt", "head -n 2 manifest.json"):
        code, peak = max_rss(command)
        assert code in (0, 2) and peak < base + (256 << 20), (command, peak >> 20, base >> 20)
