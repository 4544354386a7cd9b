"""Reading a corpus: files or JSONL records → documents, with every rejected input accounted for.

Accepted: a directory of ``.md .markdown .txt .html .htm .json .jsonl`` files, or a single such file.
JSON(L) records are ``{"id"?, "title"?, "text" | "contents"}``. A document's id is the source's
``id`` when it has one (evaluation gold ids refer to it), else the file's relative path
(``#L<n>`` / ``#<i>`` for records), so ids stay stable across edits; ``content_hash`` detects change.

What is read: regular files only, each at most ``max_file_bytes`` (:data:`MAX_FILE_BYTES`); a
JSONL file is streamed a record at a time, so the cap is then per record (line), not per file.
Symbolic links are not followed unless ``follow_symlinks`` is set, and then only when the target
stays inside the corpus; FIFOs, sockets and devices are never opened. Hidden entries (names
starting with ``.``) are counted, not read; directories passed in ``exclude`` (the compile's own
output, ``$DAGSTER_HOME``) are counted and skipped. Every other input that is not read, and every
parse failure, is a :class:`Rejection` naming the file (and line) and the reason.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from c2s_core.text import UNPRINTABLE, sha256_hex

TEXT_SUFFIXES = {".md", ".markdown", ".txt"}
HTML_SUFFIXES = {".html", ".htm"}
RECORD_SUFFIXES = {".json", ".jsonl"}
ACCEPTED_SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | RECORD_SUFFIXES
MAX_ID_LENGTH = 512
MAX_FILE_BYTES = 50 * 1024 * 1024  # per input file (JSONL: per record); larger ones are rejected, never read whole
# Elements per HTML page: parsing costs ~7 µs an element whatever the page holds, so a page of
# bare tags (10 MB of <b>: 3.5 million) is rejected after ~4 s instead of parsed for minutes.
MAX_HTML_ELEMENTS = 500_000
HTML_CHUNK_CHARS = 1 << 16
READ_CHUNK_BYTES = 1 << 16  # the rest of a JSONL record over the cap is skipped a chunk at a time


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
    excluded: list[str] = field(default_factory=list)  # paths skipped because the caller excluded them

    def summary(self) -> dict:
        return {
            "accepted": len(self.documents),
            "rejected": len(self.rejected),
            "duplicate": len(self.duplicates),
            "ignored_hidden": self.ignored_hidden,
            "excluded": len(self.excluded),
        }

    def nothing_accepted(self, source: str) -> str:
        """Why a corpus gave no documents: its first rejections and their reasons."""
        reasons = "; ".join(f"{r.source}: {r.reason}" for r in self.rejected[:5])
        return f"no documents accepted from {source}" + (
            f" ({len(self.rejected)} rejected: {reasons})" if reasons else " (no input files found)")


class CorpusError(ValueError):
    """The corpus as a whole cannot be compiled (missing path, nothing accepted, too small)."""


def read_corpus(path: Path, *, follow_symlinks: bool = False, max_file_bytes: int = MAX_FILE_BYTES,
                exclude: Iterable[Path] = ()) -> IngestResult:
    """Read a corpus directory (or one file). ``follow_symlinks``: read links whose target stays
    inside the corpus (others are still rejected); ``exclude``: paths inside the corpus to skip
    and count, e.g. the compile's output directory and ``$DAGSTER_HOME``."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"corpus path does not exist: {path}")
    collector = _Collector(max_file_bytes)
    if path.is_dir():
        for file, rel in _walk(path, collector, follow_symlinks, exclude):
            collector.read_file(file, rel)
    else:  # named by the caller: read even through a link, but only if it is a regular file
        collector.read_file(path, path.name)
    return collector.result


def source_fingerprint(path: Path, *, follow_symlinks: bool = False,
                       exclude: Iterable[Path] = ()) -> str:
    """A cheap change detector for a corpus source: names, sizes and modification times of the
    files a compile would read (hidden and excluded ones excepted; pass the compile's
    ``exclude`` so its own output does not count as a change). Content hashes decide the rest."""
    path = Path(path)
    if not path.exists():
        return "missing"
    if not path.is_dir():
        stat_ = path.stat()
        return sha256_hex(path.name, str(stat_.st_size), str(stat_.st_mtime_ns))[:24]
    parts = []
    for file, rel in _walk(path, _Collector(), follow_symlinks, exclude):
        stat_ = file.stat()
        parts += [rel, str(stat_.st_size), str(stat_.st_mtime_ns)]
    return sha256_hex(*parts)[:24]


def _walk(root: Path, collector: "_Collector", follow_symlinks: bool = False,
          exclude: Iterable[Path] = ()) -> Iterator[tuple[Path, str]]:
    """(file, relative path) of each regular file to read, depth-first in sorted order. Every
    entry not yielded is counted (hidden, excluded) or rejected with its reason."""
    real_root = root.resolve()
    # An excluded path that holds the corpus (a $DAGSTER_HOME above it) cannot exclude it all.
    skip = {p for p in (Path(e).resolve() for e in exclude)
            if p != real_root and p.is_relative_to(real_root)}
    # (folder, its relative path, the real paths from the root down to it: a followed link to
    # one of those would loop)
    stack: list[tuple[Path, str, tuple[Path, ...]]] = [(root, "", (real_root,))]
    while stack:
        folder, folder_rel, chain = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            collector.reject(folder_rel or ".", f"directory cannot be read: {exc.strerror}")
            continue
        subdirs: list[tuple[Path, str, tuple[Path, ...]]] = []
        for entry in entries:
            rel = f"{folder_rel}/{entry.name}" if folder_rel else entry.name
            if entry.name.startswith("."):
                # Hidden files and folders (.git, .cache, .c2s) are not corpus content.
                collector.result.ignored_hidden += 1
                continue
            item, real = Path(entry.path), chain[-1] / entry.name
            if entry.is_symlink():
                item, reason = _link_target(item, real_root, follow_symlinks, skip)
                if reason:
                    collector.reject(rel, reason)
                    continue
                real = item
            if real in skip:
                collector.result.excluded.append(rel)
                continue
            try:
                mode = item.stat().st_mode
            except OSError as exc:
                collector.reject(rel, f"cannot be read: {exc.strerror}")
                continue
            if stat.S_ISDIR(mode):
                if real in chain:
                    collector.reject(rel, "symbolic link to a folder that contains it (a loop), not followed")
                    continue
                subdirs.append((item, rel, (*chain, real)))
            elif stat.S_ISREG(mode):
                yield item, rel
            else:
                collector.reject(rel, f"not a regular file ({_kind(mode)}), not read")
        stack += reversed(subdirs)


def _link_target(link: Path, real_root: Path, follow: bool, skip: set[Path]) -> tuple[Path, str]:
    """The resolved target of a symlink to read, or a reason not to follow it."""
    if not follow:
        return link, "symbolic link, not followed"
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):  # dangling, or a loop of links
        return link, "symbolic link whose target does not exist, not followed"
    if not target.is_relative_to(real_root):
        return link, "symbolic link to a path outside the corpus, not followed"
    inside = target.relative_to(real_root).parts
    if any(part.startswith(".") for part in inside):
        return link, "symbolic link into a hidden path, not followed"
    if any(target == p or target.is_relative_to(p) for p in skip):
        return link, "symbolic link into an excluded directory, not followed"
    return target, ""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a file or directory"


@contextmanager
def _open_regular(file: Path) -> Iterator[io.BufferedReader | str]:
    """The open file, or a rejection reason. Opened non-blocking and checked after opening, so a
    FIFO swapped in after the walk cannot hang the read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(file, flags)
    except OSError as exc:
        yield f"cannot be read: {exc.strerror}"
        return
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        yield f if stat.S_ISREG(mode) else f"not a regular file ({_kind(mode)}), not read"


def _read_regular(file: Path, limit: int) -> bytes | str:
    """The file's bytes, or a rejection reason."""
    with _open_regular(file) as f:
        if isinstance(f, str):
            return f
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            return _too_large(size, limit)
        raw = f.read(limit + 1)  # the file may have grown since fstat
    if len(raw) > limit:
        return _too_large(len(raw), limit)
    return raw


def _lines(f: io.BufferedReader, limit: int) -> Iterator[bytes | None]:
    """Each b'\\n'-ended line of ``f`` (without it), or None for a line over ``limit`` bytes,
    whose rest is skipped a chunk at a time (never held whole)."""
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        if len(line) <= limit or line.endswith(b"\n") and len(line) == limit + 1:
            yield line.rstrip(b"\n")
            continue
        while not line.endswith(b"\n"):  # the rest of the long line, a chunk at a time
            line = f.readline(READ_CHUNK_BYTES)
            if not line:
                break
        yield None


def _too_large(size: int, limit: int) -> str:
    return f"file too large: {size:,} bytes, over the {limit:,}-byte cap per file"


def _too_deep_at(content: str) -> tuple[int, int]:
    """(line, column) where JSON nesting first gets deeper than Python's recursion limit lets
    ``json`` parse; only called after that parse failed."""
    limit = max(sys.getrecursionlimit() - 100, 1)
    depth, line, col, in_string, escaped = 0, 1, 0, False, False
    for c in content:
        col += 1
        if c == "\n":
            line, col = line + 1, 0
        elif in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string, escaped = True, False
        elif c in "[{":
            depth += 1
            if depth > limit:
                return line, col
        elif c in "]}":
            depth -= 1
    return line, col


class _Collector:
    def __init__(self, max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.result = IngestResult()
        self.max_file_bytes = max_file_bytes
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
        if suffix == ".jsonl":
            self.read_jsonl(file, rel)
            return
        raw = _read_regular(file, self.max_file_bytes)
        if isinstance(raw, str):
            self.reject(rel, raw)
            return
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
        try:
            self.parse(content, suffix, rel)
        except Exception as exc:  # one bad file must never stop the compile
            self.reject(rel, f"could not be parsed: {type(exc).__name__}: {str(exc)[:200]}")

    def parse(self, content: str, suffix: str, rel: str) -> None:
        if suffix in TEXT_SUFFIXES:
            self.add(rel, "", content, rel)
        elif suffix in HTML_SUFFIXES:
            try:
                title, text = html_to_text(content)
            except HTMLTooComplex as exc:
                self.reject(rel, str(exc))
                return
            self.add(rel, title, text, rel)
        else:
            self.read_json(content, rel)

    def read_jsonl(self, file: Path, rel: str) -> None:
        """A JSONL file, a record (line) at a time: a corpus of any size in one file is read with
        one record in memory, and a bad line is rejected alone (``file:line``), the rest read."""
        records = 0
        try:
            with _open_regular(file) as f:
                if isinstance(f, str):
                    self.reject(rel, f)
                    return
                head = f.peek(8192)[:8192]  # buffered: the lines below read on from the start
                if b"\x00" in head:
                    self.reject(rel, "binary file (contains NUL bytes)")
                    return
                # Only b'\n' ends a record (binary lines): U+2028 inside a string does not.
                for lineno, raw in enumerate(_lines(f, self.max_file_bytes), start=1):
                    source = f"{rel}:{lineno}"
                    if raw is None:
                        self.reject(source, f"record too large: over the {self.max_file_bytes:,}-byte cap per record")
                        records += 1
                        continue
                    if not raw.strip():
                        continue
                    records += 1
                    try:
                        line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
                    except UnicodeDecodeError as exc:
                        self.reject(source, f"not valid UTF-8 text (undecodable byte at offset {exc.start})")
                        continue
                    self.read_record_text(line, rel, source, f"{rel}#L{lineno}")
        except OSError as exc:  # a read error midway: what was read stands, the rest is named
            self.reject(rel, f"cannot be read: {exc.strerror or exc}")
            return
        if not records:
            self.reject(rel, "empty file")

    def read_json(self, content: str, rel: str) -> None:
        try:
            data = json.loads(content)
        except json.JSONDecodeError as exc:
            self.reject(f"{rel}:{exc.lineno}", f"malformed JSON: {exc.msg} (column {exc.colno})")
            return
        except RecursionError:
            line, col = _too_deep_at(content)
            self.reject(f"{rel}:{line}", f"malformed JSON: nested too deeply to parse (by column {col})")
            return
        except ValueError as exc:  # e.g. an integer with more digits than Python converts
            self.reject(rel, f"malformed JSON: {str(exc)[:200]}")
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
        except RecursionError:
            _, col = _too_deep_at(line)
            self.reject(source, f"malformed JSON line: nested too deeply to parse (by column {col})")
            return
        except ValueError as exc:
            self.reject(source, f"malformed JSON line: {str(exc)[:200]}")
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
        if not doc_id or len(doc_id) > MAX_ID_LENGTH or "`" in doc_id or UNPRINTABLE.search(doc_id):
            self.reject(source, f"invalid id {doc_id[:80]!r}: needs 1-{MAX_ID_LENGTH} chars, no control chars or backticks")
            return
        if not text:
            self.reject(source, "no text (empty after trimming whitespace)")
            return
        for name, value in (("id", doc_id), ("title", title), ("text", text)):
            try:  # JSON escapes can spell lone surrogates, which no UTF-8 file can hold
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                self.reject(source, f"{name} is not valid Unicode (unpaired surrogate at character {exc.start})")
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


class HTMLTooComplex(ValueError):
    """A page with more elements than :data:`MAX_HTML_ELEMENTS`; the message says how many."""


class _VisibleText(HTMLParser):
    """Streams a page's visible text without building a tree: each text node stripped, one per
    line (scripts, styles, noscript and template content left out), the first <title> kept
    apart, the first <h1> noted. Memory grows with the text, not with the markup."""

    HIDDEN = frozenset({"script", "style", "noscript", "template"})

    def __init__(self, max_elements: int):
        super().__init__(convert_charrefs=True)
        self.max_elements, self.elements = max_elements, 0
        self.hidden = 0  # depth inside HIDDEN elements
        self.text = io.StringIO()
        self.title: list[str] | None = None  # the first <title>'s text, while and once read
        self.heading: list[str] | None = None  # the first <h1>'s text
        self.in_title = self.title_done = False
        self.heading_depth, self.heading_done = 0, False

    def handle_starttag(self, tag: str, attrs) -> None:
        self.elements += 1
        if self.elements > self.max_elements:
            raise HTMLTooComplex(f"HTML page has more than {self.max_elements:,} elements; split it into "
                                 "smaller pages (parsing it would cost too much memory and time)")
        if tag in self.HIDDEN:
            self.hidden += 1
        elif tag == "title" and not self.title_done and not self.in_title:
            self.in_title, self.title = True, []
        elif tag == "h1" and not self.heading_done:
            self.heading_depth += 1
            self.heading = [] if self.heading is None else self.heading

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag == "title" and self.in_title:
            self.in_title, self.title_done = False, True
        elif tag == "h1" and self.heading_depth:
            self.heading_depth -= 1
            self.heading_done = not self.heading_depth

    def handle_data(self, data: str) -> None:
        data = data.strip()
        if not data or self.hidden:
            return
        if self.in_title:
            self.title.append(data)
            return
        if self.heading_depth:
            self.heading.append(data)
        self.text.write(data)
        self.text.write("\n")


def html_to_text(html: str, max_elements: int = MAX_HTML_ELEMENTS) -> tuple[str, str]:
    """Visible text of an HTML page, one text node per line; title from <title> or the first
    <h1>. Raises :class:`HTMLTooComplex` past ``max_elements`` elements, having parsed no more."""
    parser = _VisibleText(max_elements)
    for start in range(0, len(html), HTML_CHUNK_CHARS):  # chunks: the parser's buffer stays small
        parser.feed(html[start:start + HTML_CHUNK_CHARS])
    parser.close()
    title = " ".join(parser.title or []) or " ".join(parser.heading or [])
    return title, parser.text.getvalue().rstrip("\n")


def as_rows(items: list) -> list[dict]:
    return [asdict(item) for item in items]
