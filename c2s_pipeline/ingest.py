"""Reading a corpus: files or JSONL records → documents, with every rejected input accounted for.

Accepted: a directory of ``.md .markdown .txt .html .htm .json .jsonl`` files, or a single such file.
JSON(L) records are ``{"id"?, "title"?, "text" | "contents"}``. A document's id is the source's
``id`` when it has one (evaluation gold ids refer to it), else the file's relative path
(``#L<n>`` / ``#<i>`` for records), so ids stay stable across edits; ``content_hash`` detects change.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bs4 import BeautifulSoup

from .text import sha256_hex

TEXT_SUFFIXES = {".md", ".markdown", ".txt"}
HTML_SUFFIXES = {".html", ".htm"}
RECORD_SUFFIXES = {".json", ".jsonl"}
ACCEPTED_SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | RECORD_SUFFIXES
MAX_ID_LENGTH = 512


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str  # the source's own title, "" when it has none (the card then derives one)
    text: str
    source: str  # file, or file:line for records
    content_hash: str


@dataclass(frozen=True)
class Rejection:
    source: str
    reason: str


@dataclass(frozen=True)
class Duplicate:
    doc_id: str
    source: str
    duplicate_of: str


@dataclass
class IngestResult:
    documents: list[Document] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)
    ignored_hidden: int = 0

    def summary(self) -> dict:
        return {
            "accepted": len(self.documents),
            "rejected": len(self.rejected),
            "duplicate": len(self.duplicates),
            "ignored_hidden": self.ignored_hidden,
        }


class CorpusError(ValueError):
    """The corpus as a whole cannot be compiled (missing path, nothing accepted, too small)."""


def read_corpus(path: Path) -> IngestResult:
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"corpus path does not exist: {path}")
    collector = _Collector()
    if path.is_file():
        collector.read_file(path, path.name)
    else:
        for file, rel in _walk(path, collector):
            collector.read_file(file, rel)
    return collector.result


def source_fingerprint(path: Path) -> str:
    """A cheap change detector for a corpus source: names, sizes and modification times of the
    files a compile would read (hidden ones excepted). Content hashes decide the real changes."""
    path = Path(path)
    if not path.exists():
        return "missing"
    if path.is_file():
        stat = path.stat()
        return sha256_hex(path.name, str(stat.st_size), str(stat.st_mtime_ns))[:24]
    parts = []
    for file, rel in _walk(path, _Collector()):
        stat = file.stat()
        parts += [rel, str(stat.st_size), str(stat.st_mtime_ns)]
    return sha256_hex(*parts)[:24]


def _walk(root: Path, collector: "_Collector"):
    for dirpath, dirnames, filenames in os.walk(root):
        # Hidden folders (.git, .cache) are not corpus content; they are counted, not listed.
        hidden = [d for d in dirnames if d.startswith(".")]
        collector.result.ignored_hidden += len(hidden)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            file = Path(dirpath) / name
            rel = file.relative_to(root).as_posix()
            if name.startswith("."):
                collector.result.ignored_hidden += 1
                continue
            yield file, rel


class _Collector:
    def __init__(self) -> None:
        self.result = IngestResult()
        self._ids: dict[str, str] = {}  # doc_id → source where first defined
        self._texts: dict[str, str] = {}  # normalised text hash → doc_id

    def reject(self, source: str, reason: str) -> None:
        self.result.rejected.append(Rejection(source, reason))

    def read_file(self, file: Path, rel: str) -> None:
        suffix = file.suffix.lower()
        if suffix not in ACCEPTED_SUFFIXES:
            accepted = " ".join(sorted(ACCEPTED_SUFFIXES))
            self.reject(rel, f"unsupported file type '{suffix or file.name}' (accepted: {accepted})")
            return
        raw = file.read_bytes()
        if not raw.strip():
            self.reject(rel, "empty file")
            return
        if b"\x00" in raw[:8192]:
            self.reject(rel, "binary file (contains NUL bytes)")
            return
        try:
            content = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            self.reject(rel, f"not valid UTF-8 text (undecodable byte at offset {exc.start})")
            return
        if suffix in TEXT_SUFFIXES:
            self.add(rel, "", content, rel)
        elif suffix in HTML_SUFFIXES:
            title, text = html_to_text(content)
            self.add(rel, title, text, rel)
        elif suffix == ".jsonl":
            for lineno, line in enumerate(content.splitlines(), start=1):
                if line.strip():
                    self.read_record_text(line, rel, f"{rel}:{lineno}", f"{rel}#L{lineno}")
        else:
            self.read_json(content, rel)

    def read_json(self, content: str, rel: str) -> None:
        try:
            data = json.loads(content)
        except json.JSONDecodeError as exc:
            self.reject(f"{rel}:{exc.lineno}", f"malformed JSON: {exc.msg} (column {exc.colno})")
            return
        if isinstance(data, list):
            for i, record in enumerate(data):
                self.read_record(record, rel, f"{rel}[{i}]", f"{rel}#{i}")
        else:
            self.read_record(data, rel, rel, rel)

    def read_record_text(self, line: str, rel: str, source: str, fallback_id: str) -> None:
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            self.reject(source, f"malformed JSON line: {exc.msg} (column {exc.colno})")
            return
        self.read_record(record, rel, source, fallback_id)

    def read_record(self, record: object, rel: str, source: str, fallback_id: str) -> None:
        if not isinstance(record, dict):
            self.reject(source, f"record is a JSON {type(record).__name__}, expected an object")
            return
        text = record.get("text", record.get("contents"))
        if text is None:
            self.reject(source, "record has no 'text' or 'contents' field")
            return
        if not isinstance(text, str):
            self.reject(source, f"record 'text' is a {type(text).__name__}, expected a string")
            return
        raw_id = record.get("id", fallback_id)
        if not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool):
            self.reject(source, f"record 'id' must be a string or integer, got {type(raw_id).__name__}")
            return
        title = record.get("title") or ""
        if not isinstance(title, str):
            self.reject(source, f"record 'title' is a {type(title).__name__}, expected a string")
            return
        self.add(str(raw_id), title, text, source)

    def add(self, doc_id: str, title: str, text: str, source: str) -> None:
        doc_id = doc_id.strip()
        text = text.strip()
        title = " ".join(title.split())
        if not doc_id or len(doc_id) > MAX_ID_LENGTH or re.search(r"[\x00-\x1f`]", doc_id):
            self.reject(source, f"invalid id {doc_id[:80]!r}: needs 1-{MAX_ID_LENGTH} chars, no control chars or backticks")
            return
        if not text:
            self.reject(source, "no text (empty after trimming whitespace)")
            return
        if doc_id in self._ids:
            self.reject(source, f"duplicate id '{doc_id}' (first defined at {self._ids[doc_id]})")
            return
        self._ids[doc_id] = source
        normalised = sha256_hex(" ".join(text.split()).lower())
        if normalised in self._texts:
            self.result.duplicates.append(Duplicate(doc_id, source, self._texts[normalised]))
            return
        self._texts[normalised] = doc_id
        self.result.documents.append(Document(doc_id, title, text, source, sha256_hex(title, text)))


def html_to_text(html: str) -> tuple[str, str]:
    """Visible text of an HTML page, one block per line; title from <title> or the first <h1>."""
    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    heading = soup.find("h1")
    title = (soup.title.get_text(" ", strip=True) if soup.title else "") or (
        heading.get_text(" ", strip=True) if heading else ""
    )
    if soup.title:
        soup.title.decompose()
    text = soup.get_text("\n", strip=True)
    return title, text


def as_rows(items: list) -> list[dict]:
    return [asdict(item) for item in items]
