"""Identifiers on cards and rows: drawn from the whole document by the card makers, shown on
leaf rows within the nav-file size budget, and read back by the nav-file parser."""

from __future__ import annotations

import json
import math

import pytest

from c2s_core.navrows import parse_nav_file
from c2s_pipeline.assets.corpus import CARD_TEXT_CHARS, card_input, embedding_text
from c2s_core.identifiers import MAX_IDENTIFIER_CHARS, MAX_IDENTIFIERS, by_rarity, extract_identifiers
from c2s_pipeline.ingest import read_corpus
from c2s_core.llm.offline import make_card
from c2s_core.llm.remote import parse_answer
from c2s_core.llm.schemas import Card
from c2s_core.navrows import ROW_STYLES, DocCard, doc_row, doc_rows
from c2s_pipeline.validate import nav_files

FILLER = "The service keeps a copy of every database in a safe place and restores it on request. "
LEAD = ("# Backing up a database\n\nThis page explains how nightly backups are taken and restored. "
        "IMPORTANT: read it before you UPDATE anything. Use `Save changes` when done.\n\n")
DEEP = ("\nIf the connection fails with ERR_CONNECTION_REFUSED, check that PGDATA points at the "
        "cluster and that /etc/fstab mounts the volume; commit with `git commit --no-verify`.\n")


def _long_document() -> str:
    return LEAD + FILLER * (CARD_TEXT_CHARS // len(FILLER) + 5) + DEEP


def test_identifiers_deep_in_the_body_reach_the_card_and_plain_words_do_not():
    text = _long_document()
    item = card_input("backup", "", text)
    assert "PGDATA" not in item.text and "PGDATA" in item.tail  # past what a card prompt reads
    card = make_card(item)
    assert {"ERR_CONNECTION_REFUSED", "PGDATA", "/etc/fstab", "--no-verify"} <= set(card.identifiers)
    for plain in ("IMPORTANT", "UPDATE", "Save changes", "database", "Backing"):
        assert plain not in card.identifiers
    assert len(card.identifiers) <= MAX_IDENTIFIERS and sum(map(len, card.identifiers)) <= MAX_IDENTIFIER_CHARS


def test_identifiers_leave_what_a_document_is_embedded_as_unchanged():
    item = card_input("backup", "", _long_document())
    card, start_only = make_card(item), make_card(item.model_copy(update={"tail": ""}))
    assert card.identifiers != start_only.identifiers
    text = _long_document()
    assert (embedding_text(card.title, card.one_line, card.phrases, text)
            == embedding_text(start_only.title, start_only.one_line, start_only.phrases, text))


@pytest.mark.parametrize("text, expected", [
    ("The compiler stops with error E0425 when a name is unresolved.", "E0425"),
    ("A missing table raises SQLSTATE 42P01 in the server log.", "SQLSTATE 42P01"),
    ("Build the path with os.path.join() rather than string addition.", "os.path.join()"),
    ("Print the current commit with `git rev-parse HEAD` in scripts.", "git rev-parse HEAD"),
    ("Raise max_connections when clients are turned away.", "max_connections"),
    ("The server reads its data directory from $PGDATA at start.", "PGDATA"),
    ("Mount points are listed in /etc/fstab on every boot.", "/etc/fstab"),
    ("Options are set with setsockopt(2) before the socket is bound.", "setsockopt(2)"),
    ("Errors such as ECONNREFUSED mean nothing listens on the port.", "ECONNREFUSED"),
])
def test_each_identifier_shape_is_found(text, expected):
    assert expected in extract_identifiers(text)


@pytest.mark.parametrize("text", [
    "IMPORTANT: the UPDATE and DELETE buttons ask before they act. NOTE: DESCRIPTION below.",
    "Click `Save changes`, then `Publish` to go live.",
    "Open your site dashboard.Click the settings tab.",  # sentences glued by a lost newline
    "Set up your automationAny trigger fires the next stepThe rule runs.",
    "Read and/or write the file, then visit our help center at https://example.com/help/page.",
])
def test_plain_english_is_never_an_identifier(text):
    assert extract_identifiers(text) == []


def test_the_title_and_one_line_are_not_repeated_and_rarest_come_first():
    assert "pg_dump" not in extract_identifiers("Run pg_dump with --clean.", exclude="pg_dump(1)")
    assert by_rarity([["size_t", "SO_REUSEADDR"], ["size_t"], ["size_t", "O_RDONLY"]]) == [
        ["SO_REUSEADDR", "size_t"], ["size_t"], ["O_RDONLY", "size_t"]]


def test_a_row_with_identifiers_round_trips_through_the_parser():
    card = DocCard("pg/backup#dump", "pg_dump — export a database", "Writes a database to a script file.",
                   ["script file", "database export", "custom format"], ["--no-verify", "pg_dump", "PGDATA"])
    row = doc_row(card)
    assert "`--no-verify` `PGDATA`" in row and row.count("pg_dump") == 1  # the title shows it already
    old_row = "- `x1` **Old title** — an old one-line _(first; second)_"
    text = f"---\nname: n\ndescription: d\n---\n\n# T\n\n## Documents (2)\n\n{row}\n{old_row}\n"
    new, old = parse_nav_file(text, "skills/n/INDEX.md").cards
    assert new.identifiers == ("--no-verify", "PGDATA")
    assert new.one_line == card.one_line and set(new.phrases) <= set(card.phrases)
    assert "--no-verify" in new.text and "PGDATA" in new.text
    assert (old.one_line, old.phrases, old.identifiers) == ("an old one-line", ("first", "second"), ())


def test_a_crowded_leaf_renders_leaner_rows_and_keeps_identifiers_longest():
    cards = [DocCard(f"doc-{i}", f"Title {i}", FILLER * 2, ["alpha beta", "gamma delta", "epsilon"],
                     [f"ERR_CODE_{i}", f"--flag-{i}"]) for i in range(40)]
    rich = doc_rows(cards, 10**6)
    lean = doc_rows(cards, 4000)
    assert rich == [doc_row(c, ROW_STYLES[0]) for c in cards]
    assert sum(len(r) for r in lean) < sum(len(r) for r in rich)
    assert all(f"`ERR_CODE_{i}`" in row for i, row in enumerate(lean))


def test_a_real_provider_card_is_topped_up_from_the_whole_document():
    item = card_input("backup", "", _long_document())
    answer = json.dumps({"title": "Backing up a database", "one_line": "How nightly backups are taken.",
                         "phrases": ["nightly backups"], "identifiers": ["`pg_basebackup`"]})
    card = parse_answer("card", item, answer, Card)
    assert card.identifiers[0] == "pg_basebackup"  # the model's first, cleaned of backticks
    assert "PGDATA" in card.identifiers  # then what the prompt never showed it
    no_key = parse_answer("card", item, json.dumps({"title": "T", "one_line": "One line."}), Card)
    assert "ERR_CONNECTION_REFUSED" in no_key.identifiers


# -- compiled trees ----------------------------------------------------------------------------------

@pytest.fixture(params=["sample_tree", "wixqa_tree"])
def compiled(request):
    return request.getfixturevalue(request.param)


def _p95(sizes: list[int]) -> int:
    sizes = sorted(sizes)
    return sizes[min(len(sizes) - 1, math.ceil(0.95 * len(sizes)) - 1)]


def test_nav_files_stay_under_4kb_at_p95(compiled):
    sizes = [f.stat().st_size for f in nav_files(compiled.out)]
    assert _p95(sizes) < 4096, f"p95 {_p95(sizes)} B, largest {max(sizes)} B"
    assert compiled.manifest["stats"]["nav_bytes"]["p95"] == _p95(sizes)
    assert f"p95 {_p95(sizes)} B" in compiled.manifest["checks"]["nav_file_sizes"]["description"]


def test_identifiers_from_document_bodies_show_on_their_leaf_rows(sample_tree):
    texts = {d.doc_id: d.text for d in read_corpus(sample_tree.source).documents}
    rows = [c for f in nav_files(sample_tree.out)
            for c in parse_nav_file(f.read_text(), f.relative_to(sample_tree.out).as_posix()).cards]
    shown = [c for c in rows if c.identifiers]
    assert len(shown) >= len(rows) // 2
    for card in shown:
        for identifier in card.identifiers:
            assert identifier in texts[card.doc_id]
            assert identifier.lower() not in f"{card.title} {card.one_line}".lower()
    # Retry-After, the header to wait on, first appears past the middle of the rate-limits page
    limits = next(c for c in rows if c.doc_id.endswith("api-rate-limits.md"))
    text = texts[limits.doc_id]
    assert "Retry-After" in limits.identifiers and text.find("Retry-After") > len(text) // 2


def test_rows_leave_out_what_their_title_already_says():
    from types import SimpleNamespace

    from c2s_core.navrows import group_row

    card = DocCard("man2/bind.2", "bind(2) — bind a name to a socket", "bind - bind a name to a socket",
                   ["socket", "addr"], ["SO_REUSEADDR"])
    row = doc_row(card)
    assert row == "- `man2/bind.2` **bind(2) — bind a name to a socket** — `SO_REUSEADDR` _(addr)_"
    (parsed,) = parse_nav_file(f"## Documents (1)\n\n{row}\n", "skills/x/INDEX.md").cards
    assert (parsed.one_line, parsed.identifiers, parsed.phrases) == ("", ("SO_REUSEADDR",), ("addr",))
    child = SimpleNamespace(name="socket-options-bind", title="Socket options, bind", size=12,
                            description="Socket options and bind: 12 documents on SO_REUSEADDR, linger; e.g. bind(2).")
    assert group_row(child) == ("- [socket-options-bind](socket-options-bind/INDEX.md) (12 docs) — "
                                "SO_REUSEADDR, linger; e.g. bind(2).")
