"""The tree as the commands see it: path arguments mapped inside it (never out), globs, walks,
and text files streamed line by line within the read budget, ``manifest.json`` with host paths
redacted as it streams. Nothing here writes, and nothing follows a symlink."""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from c2s_core.layout import MANIFEST_FILE

from .limits import SNIFF_BYTES, Budget, Errors, SandboxError

READ_CHUNK = 256 << 10  # bytes read at a time: the lines of one chunk are split at once
LONG_LINE = 1 << 16  # characters; longer lines are counted in slices (wc -w)
MAX_NAME_BYTES = 255  # one path component, as Linux allows
STDIN = "(standard input)"
REDACTED_PATH = "<host path>"

_GLOB_MAGIC = re.compile(r"[*?[]")
# An absolute host path inside a string (not the path part of a URL like s3://bucket/key). No
# backslash in a Unix path: in JSON text it starts an escape (\" \\), which must survive.
_HOST_PATH = re.compile(r"file://[^\s\"'<>\\]*|(?<![\w.~/:\\-])/[^\s\"'<>|,;()\[\]{}\\]+"
                        r"|(?<![\w])[A-Za-z]:\\[^\s\"'<>|,;]*")


class Lines:
    """A text file's lines (without their '\\n'), read as they are consumed."""

    def __init__(self, tree: "TreeFiles", f, first: bytes, left: int, redact: bool) -> None:
        self._tree, self._f, self._first, self._left, self._redact = tree, f, first, left, redact
        self.missing_newline = False  # known once iterated: the last line had no '\n'

    def __iter__(self) -> Iterator[str]:
        tree, redact = self._tree, self._redact

        def text(raw: bytes) -> str:
            # One decode (and one redaction) per chunk of whole lines, not per line.
            block = raw.decode("utf-8", errors="replace")
            return tree.redact(block) if redact else block

        with self._f as f:
            pieces, chunk, left = [], self._first, self._left
            while chunk:
                cut = chunk.rfind(b"\n")
                if cut < 0:
                    pieces.append(chunk)
                else:
                    pieces.append(chunk[:cut])
                    yield from text(b"".join(pieces)).split("\n")
                    pieces = [chunk[cut + 1:]]
                tree.budget.check()
                chunk = f.read(min(READ_CHUNK, left)) if left > 0 else b""
                left -= len(chunk)
                tree.note_read(len(chunk))
            rest = b"".join(pieces)
            if rest:
                self.missing_newline = True
                yield text(rest)


class TreeFiles:
    """Paths, globs, walks and reads inside ``root`` for one command line at a time."""

    def __init__(self, root: Path, budget: Budget, errors: Errors) -> None:
        self.root = root
        self.budget = budget
        self.errors = errors
        self.bytes_read = 0
        self._roots = {os.path.normpath(os.path.abspath(root)), os.path.realpath(root)}

    def note_read(self, n: int) -> None:
        self.budget.scanned += n
        self.bytes_read += n

    # -- paths --------------------------------------------------------------------------

    def resolve(self, arg: str) -> Path:
        """Map a path argument into the tree, refusing anything that could leave it."""
        outside = SandboxError(f"refused: path {arg!r} is outside the tree")
        if arg.startswith("~"):
            raise outside
        # The tree is '/' (pwd says so): '/skills' means the tree's skills, '/etc' is refused.
        rel = posixpath.normpath(arg.lstrip("/") or ".")
        if rel == ".." or rel.startswith("../"):
            raise outside
        path, parts = self.root, [] if rel == "." else rel.split("/")
        for k, part in enumerate(parts):
            path = path / part
            shown = "/".join(parts[:k + 1])
            if part.startswith("."):  # dot-files are not part of what the tree shows
                raise SandboxError(f"refused: {shown!r} is hidden "
                                   "(names starting with '.' are not part of the tree)")
            if len(os.fsencode(part)) > MAX_NAME_BYTES:  # the system would answer ENAMETOOLONG
                raise SandboxError(f"refused: a name in {_short(arg)!r} is over {MAX_NAME_BYTES} "
                                   "bytes long; no file in the tree has one")
            if _lstat(path) is not None and stat.S_ISLNK(_lstat(path).st_mode):
                # any symlink, even one pointing inside: never follow
                raise SandboxError(f"refused: {shown!r} is a symbolic link")
        if arg.startswith("/") and not _exists(path):
            raise outside
        if _exists(path) and not path.resolve().is_relative_to(self.root):  # belt and braces
            raise outside
        return path

    def expand(self, args: list[str]) -> list[str]:
        """Expand globs (skills/*/SKILL.md) against the tree like bash; no match keeps the word."""
        out: list[str] = []
        for arg in args:
            out += (self._glob(arg) if _GLOB_MAGIC.search(arg) else []) or [arg]
        return out

    def _glob(self, pattern: str) -> list[str]:
        parts = [p for p in pattern.lstrip("/").split("/") if p not in ("", ".")]
        if pattern.startswith("~") or ".." in parts:
            return []  # left as typed, so resolve() refuses it with a clear message
        found = [""]
        for part in parts:
            step = []
            for base in found:
                folder = self.root / base
                if not folder.is_dir():
                    continue
                names = sorted(_listdir(folder)) if _GLOB_MAGIC.search(part) else [part]
                for name in names:
                    self.budget.visit()
                    entry = folder / name
                    st = _lstat(entry)
                    if (fnmatch.fnmatchcase(name, part) and not name.startswith(".")
                            and st is not None and not stat.S_ISLNK(st.st_mode)):
                        step.append(posixpath.join(base, name))
            found = step
        prefix = "/" if pattern.startswith("/") else ""
        if pattern.endswith("/"):  # 'skills/*/': folders only, written with their slash (as bash)
            return [prefix + f + "/" for f in found if (self.root / f).is_dir()]
        return [prefix + f for f in found]

    def listdir(self, folder: Path) -> list[str]:
        """Names in ``folder`` that the tree shows (no hidden ones), sorted."""
        return sorted(n for n in _listdir(folder) if n[0] != ".")

    def walk(self, top: Path, max_depth: int | None = None) -> Iterator[tuple[Path, int]]:
        """(path, depth) depth-first in sorted order, top included; never follows symlinks."""
        stack = [(top, 0)]
        while stack:
            path, depth = stack.pop()
            self.budget.visit()
            yield path, depth
            if path.is_dir() and not path.is_symlink() and (max_depth is None or depth < max_depth):
                try:
                    children = [path / n for n in self.listdir(path)]
                except OSError as e:
                    self.errors.add(f"cannot read directory {path.name!r}: {e.strerror}")
                    continue
                stack += [(c, depth + 1) for c in reversed(children) if not c.is_symlink()]

    # -- reading ------------------------------------------------------------------------

    def files(self, cmd: str, args: list[str], recursive: bool = False
              ) -> Iterator[tuple[str, Path, bool]]:
        """(label, path, found_by_walking) for each regular file the operands name."""
        targets = [(arg, self.resolve(arg)) for arg in args]  # refuse before reading anything
        for arg, path in targets:
            if not _exists(path):
                self.errors.add(f"{cmd}: {arg}: No such file or directory")
            elif path.is_dir() and recursive:
                for sub, _ in self.walk(path):
                    if sub.is_file():
                        yield posixpath.join(arg, sub.relative_to(path).as_posix()), sub, True
            elif path.is_dir():
                self.errors.add(f"{cmd}: {arg}: Is a directory")
            else:
                yield arg, path, False

    def lines(self, cmd: str, label: str, path: Path, quiet_binary: bool) -> Lines | None:
        """A text file's lines, streamed; None (after noting why, unless quiet) for a binary or
        unreadable file. Refuses up front a file that would take the read past its cap."""
        st = _lstat(path)
        if st is None or not stat.S_ISREG(st.st_mode):  # FIFOs and devices could block or never end
            self.errors.add(f"{cmd}: {label}: not a regular file")
            return None
        left = min(self.budget.can_scan(cmd, st.st_size), st.st_size)
        try:
            f = path.open("rb", buffering=0)  # closed by Lines, or below
        except OSError as e:
            self.errors.add(f"{cmd}: {label}: {e.strerror}")
            return None
        try:
            # read(n) allocates n bytes up front: ask for what the file holds, not the cap.
            first = f.read(min(SNIFF_BYTES, left))
        except OSError as e:
            f.close()
            self.errors.add(f"{cmd}: {label}: {e.strerror}")
            return None
        self.note_read(len(first))
        if b"\0" in first:
            f.close()
            if not quiet_binary:
                self.errors.add(f"{cmd}: refused: {label!r} is a binary file")
            return None
        manifest = path.parent == self.root and path.name == MANIFEST_FILE
        return Lines(self, f, first, left - len(first), redact=manifest)

    def inputs(self, cmd: str, args: list[str], stdin: Lines | Iterator[str] | None,
               recursive: bool = False) -> Iterator[tuple[str, Lines | Iterator[str]]]:
        """(label, lines) for each file operand, or for stdin when there are none."""
        if not args:
            if stdin is None:
                raise SandboxError(f"{cmd}: missing file operand (give a path or pipe text in)")
            yield STDIN, stdin
            return
        for label, path, walked in self.files(cmd, args, recursive):
            lines = self.lines(cmd, label, path, quiet_binary=walked)
            if lines is not None:
                yield label, lines

    # -- manifest.json ------------------------------------------------------------------

    def redact(self, line: str) -> str:
        """``line`` with absolute host paths replaced: a path inside the tree by its path relative
        to it ('.' for the root itself), any other by REDACTED_PATH. Line by line, so showing a
        large manifest costs no more memory than any other file."""
        return redact_line(line, self._roots)


def redact_host_paths(text: str, root: str | os.PathLike[str]) -> str:
    """``text`` (JSON or not) with host paths redacted as :meth:`TreeFiles.redact` does."""
    roots = {os.path.normpath(os.path.abspath(root)), os.path.realpath(root)}
    return "\n".join(redact_line(line, roots) for line in text.split("\n"))


def redact_line(line: str, roots: set[str]) -> str:
    def one(m: re.Match[str]) -> str:
        found = m.group()
        path = os.path.normpath(found[len("file://"):] if found.startswith("file://") else found)
        for base in roots:
            if path == base:
                return "."
            if path.startswith(base.rstrip("/") + "/"):
                return path[len(base.rstrip("/")) + 1:]
        return REDACTED_PATH

    return _HOST_PATH.sub(one, line)


def ls_entry(path: Path, name: str, long: bool) -> str:
    st = _lstat(path)
    # Checked without following: a symlink is shown as one, never as what it points at.
    suffix = "@" if st and stat.S_ISLNK(st.st_mode) else "/" if st and stat.S_ISDIR(st.st_mode) else ""
    if not long or st is None:
        return name + suffix
    return f"{stat.filemode(st.st_mode)} {st.st_size:>9} {name}{suffix}"


def count_words(line: str) -> int:
    """``len(line.split())`` without the list: a long line is counted in slices."""
    if len(line) <= LONG_LINE:
        return len(line.split())
    words, prev = 0, ""
    for i in range(0, len(line), LONG_LINE):
        part = line[i:i + LONG_LINE]
        words += len(part.split())
        if prev and not prev[-1].isspace() and not part[0].isspace():
            words -= 1  # one word across the cut
        prev = part
    return words


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:  # missing, or a name the system cannot look up (too long, a loop)
        return None


def _exists(path: Path) -> bool:
    try:
        os.stat(path)
        return True
    except (OSError, ValueError):
        return False


def _listdir(folder: Path) -> list[str]:
    return os.listdir(folder)


def _short(text: str, keep: int = 40) -> str:
    return text if len(text) <= keep else text[:keep] + "…"


__all__ = ["STDIN", "REDACTED_PATH", "Lines", "TreeFiles", "count_words", "ls_entry",
           "redact_host_paths"]
