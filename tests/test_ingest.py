"""Reading corpora: every bad input is rejected with its file, line and reason; nothing is lost."""

import json

import pytest

from c2s_pipeline.ingest import CorpusError, read_corpus


def write(path, content):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def test_directory_of_mixed_formats_keeps_ids_and_titles(tmp_path):
    write(tmp_path / "guides" / "domains.md", "# Connect a domain\n\nPoint your A record at us.")
    write(tmp_path / "faq.txt", "Can I pause my plan?\nYes, from Billing.")
    write(tmp_path / "page.html", "<html><head><title>Refunds</title><script>x=1</script></head>"
                                  "<body><h1>Refunds</h1><p>Refunds take 5 days.</p></body></html>")
    write(tmp_path / "records.jsonl", json.dumps({"id": "A-1", "title": "Invoices", "text": "Invoices are PDF."}) + "\n"
          + json.dumps({"contents": "No id here, so the line names it."}) + "\n")
    write(tmp_path / "one.json", json.dumps([{"id": 7, "text": "Seven."}, {"text": "Second record."}]))
    result = read_corpus(tmp_path)
    ids = {d.doc_id: d for d in result.documents}
    assert set(ids) == {"guides/domains.md", "faq.txt", "page.html", "A-1", "records.jsonl#L2", "7", "one.json#1"}
    assert ids["page.html"].title == "Refunds"
    assert "x=1" not in ids["page.html"].text and "Refunds take 5 days." in ids["page.html"].text
    assert ids["A-1"].title == "Invoices"
    assert result.rejected == [] and result.duplicates == []


@pytest.mark.parametrize(
    "name, content, source, reason",
    [
        ("empty.md", "", "empty.md", "empty file"),
        ("blank.txt", "   \n\n", "blank.txt", "empty file"),
        ("image.md", b"\x89PNG\x00\x00binary", "image.md", "binary file"),
        ("latin1.txt", "caf\xe9 cr\xe8me".encode("latin-1"), "latin1.txt", "not valid UTF-8 text (undecodable byte at offset 3)"),
        ("logo.png", b"not really", "logo.png", "unsupported file type '.png'"),
        ("bad.json", "{\"text\": ", "bad.json:1", "malformed JSON"),
        ("list.json", "[1, 2]", "list.json[0]", "record is a JSON int, expected an object"),
    ],
)
def test_bad_files_are_rejected_with_reason(tmp_path, name, content, source, reason):
    write(tmp_path / "ok.md", "# Fine\n\nA real document.")
    write(tmp_path / name, content)
    result = read_corpus(tmp_path)
    assert [d.doc_id for d in result.documents] == ["ok.md"]
    assert any(r.source == source and reason in r.reason for r in result.rejected), result.rejected


def test_jsonl_lines_rejected_by_line_number(tmp_path):
    lines = [
        json.dumps({"id": "a", "text": "Alpha document text."}),
        "{not json",
        json.dumps({"id": "b", "title": "No text"}),
        json.dumps({"id": "c", "text": "   "}),
        json.dumps({"id": "a", "text": "Same id as line one, other text."}),
        json.dumps({"id": "d", "text": "alpha   DOCUMENT text."}),
        json.dumps(["a", "list"]),
        json.dumps({"id": {"nested": 1}, "text": "Object id."}),
        json.dumps({"id": "e", "text": 42}),
    ]
    path = write(tmp_path / "corpus.jsonl", "\n".join(lines) + "\n")
    result = read_corpus(path)
    assert [d.doc_id for d in result.documents] == ["a"]
    reasons = {r.source: r.reason for r in result.rejected}
    assert reasons["corpus.jsonl:2"].startswith("malformed JSON line")
    assert reasons["corpus.jsonl:3"] == "record has no 'text' or 'contents' field"
    assert reasons["corpus.jsonl:4"] == "no text (empty after trimming whitespace)"
    assert reasons["corpus.jsonl:5"] == "duplicate id 'a' (first defined at corpus.jsonl:1)"
    assert reasons["corpus.jsonl:7"] == "record is a JSON list, expected an object"
    assert "id' must be a string or integer" in reasons["corpus.jsonl:8"]
    assert reasons["corpus.jsonl:9"] == "record 'text' is a int, expected a string"
    # Same text up to case and spacing: kept once, the duplicate reported with its original.
    assert [(d.doc_id, d.source, d.duplicate_of) for d in result.duplicates] == [("d", "corpus.jsonl:6", "a")]
    # Every input line is accounted for exactly once.
    assert len(result.documents) + len(result.rejected) + len(result.duplicates) == len(lines)


def test_hidden_files_are_counted_not_read(tmp_path):
    write(tmp_path / "doc.md", "# Doc\n\nText here.")
    write(tmp_path / ".git" / "config", "[core]")
    write(tmp_path / ".DS_Store", b"\x00\x01")
    result = read_corpus(tmp_path)
    assert [d.doc_id for d in result.documents] == ["doc.md"]
    assert result.ignored_hidden == 2 and result.rejected == []


def test_missing_path_is_a_corpus_error(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        read_corpus(tmp_path / "nope")


def test_content_hash_changes_with_text_and_id_stays(tmp_path):
    path = write(tmp_path / "a.md", "# A\n\nFirst version.")
    before = read_corpus(tmp_path).documents[0]
    path.write_text("# A\n\nSecond version.")
    after = read_corpus(tmp_path).documents[0]
    assert before.doc_id == after.doc_id == "a.md"
    assert before.content_hash != after.content_hash
