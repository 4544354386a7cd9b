"""The agent's ``code_execution`` tool: a shell-like interpreter confined to a compiled tree.

The agent browses the tree with the commands it knows from bash (ls, cat, head, tail, grep,
find, wc, sort, uniq, pwd) joined by ``|`` pipes::

    sb = Sandbox("out/tree")
    print(sb.run("grep -ril refund skills | head -20"))

Everything is interpreted here in pure Python; nothing reaches a real shell or a subprocess.
Document text may carry prompt injection, so the worst a command line can do is read files
that are already inside the tree: paths that leave it, symlinks, hidden files, redirections,
substitutions and command chaining are refused, and every command is bounded in files visited,
bytes read, pattern size, regex time, wall time, memory and output size. ``manifest.json`` is
shown with host paths redacted (the file on disk is unchanged).
"""

from __future__ import annotations

import fnmatch
import json
import os
import posixpath
import re
import shlex
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from c2s_core.layout import MANIFEST_FILE

try:  # the third-party `regex` module can time-bound a search; stdlib `re` cannot
    import regex as _regex
except ImportError:  # pragma: no cover - exercised by monkeypatching in the tests
    _regex = None

MAX_LINE_CHARS = 2000
MAX_STAGES = 8
MAX_PATTERN_CHARS = 512
# Regex engines unroll counted repeats when compiling: ((a{100}){100}){100} is a million atoms.
MAX_PATTERN_EXPANSION = 10_000  # atoms a command's patterns may unroll to, repeats multiplied out
MAX_PATTERN_NESTING = 32  # open groups; deeper ones overflow the regex parser's recursion
MAX_CALL_SECONDS = 10.0  # wall time of one command line
MAX_CALL_MEMORY = 256 << 20  # memory one command line may add to the process
MEMORY_CHECK_INTERVAL_S = 0.002  # the process's size is read at most this often (a system call)
MAX_FILES = 20_000  # files and directories visited by one command line
MAX_SCAN_BYTES = 64 << 20  # file content read by one command line
SNIFF_BYTES = 8192  # like GNU grep, decide "binary" (a NUL byte) from the first buffer

SUPPORTED = "cat, find, grep, head, ls, pwd, sort, tail, uniq, wc"
STDIN = "(standard input)"

# Unquoted shell constructs we refuse, longest first so '&&' is named before '&'.
_CONSTRUCTS = (
    ("&&", "command chaining '&&'"),
    ("||", "command chaining '||'"),
    ("$(", "command substitution '$(...)'"),
    ("${", "variable expansion '${...}'"),
    (">>", "redirection '>>'"),
    (">", "redirection '>'"),
    ("<", "redirection '<'"),
    (";", "command separator ';'"),
    ("&", "background job '&'"),
    ("`", "command substitution with backticks"),
    ("(", "subshell '('"),
    (")", "subshell ')'"),
    ("\n", "a newline (run one command line at a time)"),
)
_VARIABLE = re.compile(r"\$(?:\w+|[?#@*!$-])")
_GLOB_MAGIC = re.compile(r"[*?[]")
_REGEX_MAGIC = re.compile(r"[\\.^$*+?()\[\]{}|]")
_NUMBER = re.compile(r"\s*[-+]?\d+(?:\.\d*)?")
_COUNTED_REPEAT = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")
# An absolute host path inside a string (not the path part of a URL like s3://bucket/key).
_HOST_PATH = re.compile(r"file://[^\s\"'<>]*|(?<![\w.~/:\\-])/[^\s\"'<>|,;()\[\]{}]+"
                        r"|(?<![\w])[A-Za-z]:\\[^\s\"'<>|,;]*")
REDACTED_PATH = "<host path>"
LINE_OVERHEAD = 64  # bytes per line held as a Python str in a list, beyond its characters


class SandboxError(Exception):
    """A refused or failed command; ``str(error)`` is the one-line reply the agent sees."""


@dataclass
class SandboxStats:
    bytes_read: int = 0  # file content read, for cost accounting
    commands: int = 0  # command lines run, refused ones included


class Sandbox:
    """Run shell-like command lines over the tree at ``root``; see the module docstring.

    Not thread-safe: use one instance per agent.
    """

    def __init__(self, root: str | os.PathLike[str], max_output_bytes: int = 8192,
                 regex_timeout_s: float = 1.0, time_budget_s: float = MAX_CALL_SECONDS,
                 memory_budget_bytes: int = MAX_CALL_MEMORY) -> None:
        self.root = Path(root).resolve(strict=True)
        if not self.root.is_dir():
            raise NotADirectoryError(str(root))
        self.max_output_bytes = max_output_bytes
        self.regex_timeout_s = regex_timeout_s
        self.time_budget_s = time_budget_s
        self.memory_budget_bytes = memory_budget_bytes
        self.stats = SandboxStats()
        # Of the last command line, as a shell's $?: 0 ran, 1 ran but reported errors (a missing
        # file), 2 refused, stopped or failed.
        self.last_status = 0
        self._commands: dict[str, Callable[[list[str], str | None], str]] = {
            "cat": self._cat, "find": self._find, "grep": self._grep, "head": self._head,
            "ls": self._ls, "pwd": self._pwd, "sort": self._sort, "tail": self._tail,
            "uniq": self._uniq, "wc": self._wc,
        }
        self._errors: list[str] = []
        self._visited = self._scanned = 0
        self._deadline = self._next_memory_check = 0.0
        self._memory_base = 0
        self._manifest_view: tuple[tuple[int, int], str] | None = None
        _memory_in_use()  # opens its descriptor now, outside any command

    def run(self, command: str) -> str:
        """Run one command line; always returns text (refusals and errors included)."""
        self.stats.commands += 1
        self._errors, self._visited, self._scanned = [], 0, 0
        self._deadline = time.monotonic() + self.time_budget_s
        self._memory_base, self._next_memory_check = _memory_in_use(), 0.0
        self.last_status = 2
        try:
            out = self._truncate(self._pipeline(command))
        except SandboxError as e:
            return str(e)
        except MemoryError:
            return ("stopped: the process ran out of memory running this command; "
                    "narrow the path or the pattern")
        except RecursionError:
            return "error: this command line is nested too deeply to run"
        except Exception as e:  # a bug here must never crash the agent loop
            return f"error: {type(e).__name__}: {e}"
        self.last_status = 1 if self._errors else 0
        # Per-file errors go last, like stderr on a terminal, and are never truncated away.
        return "\n".join(part for part in (out, *self._errors) if part)

    # -- budgets --------------------------------------------------------------------------

    def _check(self, need: int = 0) -> None:
        """Stop the command once it runs past its time budget, or once the memory it added to the
        process (plus ``need`` bytes it is about to allocate) passes its memory budget."""
        now = time.monotonic()
        if now > self._deadline:
            raise SandboxError(f"stopped: this command ran over {self.time_budget_s:g} s; "
                               "narrow the path or the pattern")
        if not need and now < self._next_memory_check:
            return
        self._next_memory_check = now + MEMORY_CHECK_INTERVAL_S
        used = _memory_in_use() - self._memory_base
        if used + need > self.memory_budget_bytes:
            raise SandboxError(f"stopped: this command would use over "
                               f"{self.memory_budget_bytes >> 20:,} MiB of memory; "
                               "narrow the path or page with head -n")

    def _lines(self, text: str) -> list[str]:
        """The lines of ``text``, once the list is known to fit the memory budget: splitting is
        one allocation in C that no later check could interrupt."""
        if len(text) > 1 << 20:
            self._check(sys.getsizeof(text) + LINE_OVERHEAD * text.count("\n"))
        return _lines(text)

    # -- command line -------------------------------------------------------------------

    def _pipeline(self, line: str) -> str:
        if "\0" in line:
            raise SandboxError("refused: NUL byte in command line")
        if len(line) > MAX_LINE_CHARS:
            raise SandboxError(f"refused: command line is {len(line):,} characters; "
                               f"the limit is {MAX_LINE_CHARS:,}")
        stages = _split_pipeline(line)
        if len(stages) > MAX_STAGES:
            raise SandboxError(f"refused: pipeline has {len(stages)} stages; "
                               f"the limit is {MAX_STAGES}")
        argvs = [_argv(stage) for stage in stages]  # parse everything before running anything
        for name, *_ in argvs:
            if name not in self._commands:
                raise SandboxError(f"{name}: command not found; supported: {SUPPORTED}, "
                                   "joined with | (paths are relative to the tree root, /)")
        data: str | None = None
        for name, *args in argvs:
            self._check()
            data = self._commands[name](args, data)
        return data or ""

    def _truncate(self, text: str) -> str:
        data = text.encode()
        if len(data) <= self.max_output_bytes:
            return text.rstrip("\n")
        cut = data[: self.max_output_bytes]
        if b"\n" in cut:  # whole lines only, when there is at least one
            cut = cut[: cut.rindex(b"\n") + 1]
        shown = cut.decode(errors="ignore")  # never split a UTF-8 character
        note = (f"[output truncated: showed {len(shown.encode()):,} of {len(data):,} bytes; "
                "narrow with grep or page with head -n/tail -n]")
        return shown.rstrip("\n") + "\n" + note

    def _options(self, cmd: str, args: list[str], flags: str, valued: str = "",
                 repeated: str = "") -> tuple[dict, list[str]]:
        """GNU-style short options anywhere on the line: '-ril', '-n 5', '-n5', '--'. A valued
        option in ``repeated`` collects every value in a list (grep -e A -e B)."""
        opts: dict[str, str | bool | list[str]] = {}
        operands: list[str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            i += 1
            if arg == "--":
                operands += args[i:]
                break
            if not arg.startswith("-") or arg == "-":
                operands.append(arg)
                continue
            if arg.startswith("--"):
                raise SandboxError(f"{cmd}: unsupported option {arg!r}; only short options work")
            for j, c in enumerate(arg[1:], start=1):
                if c in valued:
                    value = arg[j + 1:]
                    if not value:
                        if i == len(args):
                            raise SandboxError(f"{cmd}: option '-{c}' needs a value")
                        value, i = args[i], i + 1
                    if c in repeated:
                        opts.setdefault(c, []).append(value)  # type: ignore[union-attr]
                    else:
                        opts[c] = value
                    break
                if c not in flags:
                    supported = " ".join(f"-{f}" for f in flags + valued)
                    raise SandboxError(f"{cmd}: unsupported option '-{c}'; supported: {supported}")
                opts[c] = True
        return opts, operands

    # -- paths --------------------------------------------------------------------------

    def _resolve(self, arg: str) -> Path:
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
            if part.startswith("."):  # dot-files are not part of what the tree shows
                raise SandboxError(f"refused: {'/'.join(parts[:k + 1])!r} is hidden "
                                   "(names starting with '.' are not part of the tree)")
            if path.is_symlink():  # any symlink, even one pointing inside: never follow
                raise SandboxError(f"refused: {'/'.join(parts[:k + 1])!r} is a symbolic link")
        if arg.startswith("/") and not path.exists():
            raise outside
        if path.exists() and not path.resolve().is_relative_to(self.root):  # belt and braces
            raise outside
        return path

    def _expand(self, args: list[str]) -> list[str]:
        """Expand globs (skills/*/SKILL.md) against the tree like bash; no match keeps the word."""
        out: list[str] = []
        for arg in args:
            out += (self._glob(arg) if _GLOB_MAGIC.search(arg) else []) or [arg]
        return out

    def _glob(self, pattern: str) -> list[str]:
        parts = [p for p in pattern.lstrip("/").split("/") if p not in ("", ".")]
        if pattern.startswith("~") or ".." in parts:
            return []  # left as typed, so _resolve refuses it with a clear message
        found = [""]
        for part in parts:
            step = []
            for base in found:
                folder = self.root / base
                if not folder.is_dir():
                    continue
                names = sorted(os.listdir(folder)) if _GLOB_MAGIC.search(part) else [part]
                for name in names:
                    self._visit()
                    entry = folder / name
                    if (fnmatch.fnmatchcase(name, part) and not name.startswith(".")
                            and entry.exists() and not entry.is_symlink()):
                        step.append(posixpath.join(base, name))
            found = step
        prefix = "/" if pattern.startswith("/") else ""
        return [prefix + f for f in found]

    def _visit(self) -> None:
        self._visited += 1
        if self._visited > MAX_FILES:
            raise SandboxError(f"stopped: visited more than {MAX_FILES:,} files and directories; "
                               "narrow the path")
        self._check()

    def _walk(self, top: Path, max_depth: int | None = None) -> Iterator[tuple[Path, int]]:
        """(path, depth) depth-first in sorted order, top included; never follows symlinks."""
        stack = [(top, 0)]
        while stack:
            path, depth = stack.pop()
            self._visit()
            yield path, depth
            if path.is_dir() and (max_depth is None or depth < max_depth):
                try:
                    children = sorted(c for c in path.iterdir()
                                      if not c.name.startswith(".") and not c.is_symlink())
                except OSError as e:
                    self._errors.append(f"cannot read directory {path.name!r}: {e.strerror}")
                    continue
                stack += [(c, depth + 1) for c in reversed(children)]

    def _files(self, cmd: str, args: list[str], recursive: bool = False
               ) -> Iterator[tuple[str, Path, bool]]:
        """(label, path, found_by_walking) for each regular file the operands name."""
        targets = [(arg, self._resolve(arg)) for arg in args]  # refuse before reading anything
        for arg, path in targets:
            if not path.exists():
                self._errors.append(f"{cmd}: {arg}: No such file or directory")
            elif path.is_dir() and recursive:
                for sub, _ in self._walk(path):
                    if sub.is_file():
                        yield posixpath.join(arg, sub.relative_to(path).as_posix()), sub, True
            elif path.is_dir():
                self._errors.append(f"{cmd}: {arg}: Is a directory")
            else:
                yield arg, path, False

    def _read(self, cmd: str, label: str, path: Path, quiet_binary: bool) -> str | None:
        """A text file's content; None (after noting why, unless quiet) for binary/unreadable."""
        if not path.is_file():  # FIFOs and devices could block or never end
            self._errors.append(f"{cmd}: {label}: not a regular file")
            return None
        size = path.stat().st_size
        if self._scanned + size > MAX_SCAN_BYTES:
            raise SandboxError(f"{cmd}: stopped: this command would read more than "
                               f"{MAX_SCAN_BYTES:,} bytes; narrow the path")
        self._check(2 * size if size > 1 << 20 else 0)  # the bytes, then their decoded text
        try:
            with path.open("rb") as f:
                data = f.read(SNIFF_BYTES)
                binary = b"\0" in data
                if not binary:
                    # read(n) allocates n bytes up front: ask for what the file holds, not the cap.
                    rest = min(MAX_SCAN_BYTES - self._scanned, size) - len(data)
                    data += f.read(max(rest, 0))
        except OSError as e:
            self._errors.append(f"{cmd}: {label}: {e.strerror}")
            return None
        self._scanned += len(data)
        self.stats.bytes_read += len(data)
        if binary:
            if not quiet_binary:
                self._errors.append(f"{cmd}: refused: {label!r} is a binary file")
            return None
        text = data.decode("utf-8", errors="replace")
        if path.parent == self.root and path.name == MANIFEST_FILE:
            text = self._manifest_text(path, text)
        return text

    def _manifest_text(self, path: Path, text: str) -> str:
        """manifest.json as the agent sees it: host paths (the corpus source, the output
        directory) are machine details, not content, so they are shown redacted."""
        st = path.stat()
        key = (st.st_mtime_ns, st.st_size)
        if self._manifest_view is None or self._manifest_view[0] != key:
            self._manifest_view = (key, redact_host_paths(text, self.root))
        return self._manifest_view[1]

    def _inputs(self, cmd: str, args: list[str], stdin: str | None,
                recursive: bool = False) -> Iterator[tuple[str, str]]:
        """(label, text) for each file operand, or for stdin when there are none."""
        if not args:
            if stdin is None:
                raise SandboxError(f"{cmd}: missing file operand (give a path or pipe text in)")
            yield STDIN, stdin
            return
        for label, path, walked in self._files(cmd, args, recursive):
            text = self._read(cmd, label, path, quiet_binary=walked)
            if text is not None:
                yield label, text

    # -- commands -----------------------------------------------------------------------

    def _pwd(self, args: list[str], stdin: str | None) -> str:
        return "/\n"

    def _ls(self, args: list[str], stdin: str | None) -> str:
        opts, ops = self._options("ls", args, "Rla1F")
        targets = [(arg, self._resolve(arg)) for arg in self._expand(ops or ["."])]
        blocks: list[str] = []
        for arg, top in targets:
            if not top.exists():
                self._errors.append(f"ls: cannot access {arg!r}: No such file or directory")
                continue
            if not top.is_dir():
                blocks.append(_ls_entry(top, arg, "l" in opts))
                continue
            folders = [p for p, _ in self._walk(top) if p.is_dir()] if "R" in opts else [top]
            for folder in folders:
                rel = folder.relative_to(top).as_posix()
                # -a is accepted but shows no more: hidden names are not part of the tree.
                names = sorted(n for n in os.listdir(folder) if n[0] != ".")
                lines = [_ls_entry(folder / n, n, "l" in opts) for n in names]
                if "R" in opts or len(targets) > 1:
                    lines.insert(0, (arg if rel == "." else posixpath.join(arg, rel)) + ":")
                blocks.append("\n".join(lines))
        listing = "\n\n".join(b for b in blocks if b)
        return listing + "\n" if listing else ""

    def _cat(self, args: list[str], stdin: str | None) -> str:
        opts, ops = self._options("cat", args, "n")
        lines = [line for _, text in self._inputs("cat", self._expand(ops), stdin)
                 for line in self._lines(text)]
        if "n" in opts:
            lines = [f"{n:6}\t{line}" for n, line in enumerate(lines, 1)]
        return _text(lines)

    def _head(self, args: list[str], stdin: str | None) -> str:
        return self._head_tail("head", args, stdin)

    def _tail(self, args: list[str], stdin: str | None) -> str:
        return self._head_tail("tail", args, stdin)

    def _head_tail(self, cmd: str, args: list[str], stdin: str | None) -> str:
        args = [f"-n{a[1:]}" if re.fullmatch(r"-\d+", a) else a for a in args]  # head -5
        opts, ops = self._options(cmd, args, "", valued="n")
        count = str(opts.get("n", "10"))
        from_line = cmd == "tail" and count.startswith("+")  # tail -n +K: from line K on
        if not count.lstrip("+").isdigit():
            raise SandboxError(f"{cmd}: invalid number of lines: {count!r}")
        n = int(count)
        inputs = list(self._inputs(cmd, self._expand(ops), stdin))
        out: list[str] = []
        for label, text in inputs:
            lines = self._lines(text)
            if len(inputs) > 1:  # GNU headers between files
                out += [""] if out else []
                out.append(f"==> {label} <==")
            if cmd == "head":
                out += lines[:n]
            else:
                out += lines[max(n - 1, 0):] if from_line else lines[max(len(lines) - n, 0):]
        return _text(out)

    def _grep(self, args: list[str], stdin: str | None) -> str:
        opts, ops = self._options("grep", args, "rRinlcEwvFIhHo", valued="e", repeated="e")
        if "e" in opts:  # every -e counts: a line matches if any of them does
            patterns = list(opts["e"])  # type: ignore[arg-type]
        elif ops:
            patterns = [ops.pop(0)]
        else:
            raise SandboxError("grep: usage: grep [-rinlcEwvFo] PATTERN [path...]")
        match = self._matcher(patterns, opts)
        recursive = "r" in opts or "R" in opts
        ops = self._expand(ops) or ([""] if recursive else [])  # grep -r PATTERN: whole tree
        named = ("H" in opts or recursive or len(ops) > 1) and "h" not in opts
        out: list[str] = []
        for label, text in self._inputs("grep", ops, stdin, recursive):
            lines = self._lines(text)
            if "l" in opts:
                if any(match(line) != ("v" in opts) for line in lines):
                    out.append(label)
                continue
            hits = [(n, line) for n, line in enumerate(lines, 1)
                    if match(line) != ("v" in opts)]
            prefix = f"{label}:" if named else ""
            if "c" in opts:
                out.append(f"{prefix}{len(hits)}")
            elif "o" in opts and "v" not in opts:  # each non-empty match on its own line
                out += [prefix + (f"{n}:" if "n" in opts else "") + part
                        for n, line in hits for part in match.parts(line)]
            else:
                out += [prefix + (f"{n}:" if "n" in opts else "") + line for n, line in hits]
        return _text(out)

    def _matcher(self, patterns: list[str], opts: dict) -> Callable[[str], bool]:
        """A line predicate for grep patterns (any may match) whose size when compiled and
        total matching time are bounded."""
        for pattern in patterns:
            if len(pattern) > MAX_PATTERN_CHARS:
                raise SandboxError(f"refused: pattern is {len(pattern):,} characters; "
                                   f"the limit is {MAX_PATTERN_CHARS}")
        shown = ", ".join(repr(p) for p in patterns)
        sources = [re.escape(p) if "F" in opts else _gnu_to_python(p, "E" in opts)
                   for p in patterns]
        if "w" in opts:
            sources = [rf"(?<!\w)(?:{source})(?!\w)" for source in sources]
        # Checked before compiling: compiling is where an unrolled pattern takes its memory.
        costs = [_pattern_cost(source) for source in sources]
        nesting = max(depth for _, depth in costs)
        if nesting > MAX_PATTERN_NESTING:
            raise SandboxError(f"grep: refused: pattern {shown} nests groups {nesting} deep; "
                               f"the limit is {MAX_PATTERN_NESTING}")
        atoms = sum(size for size, _ in costs)
        if atoms > MAX_PATTERN_EXPANSION:
            raise SandboxError(
                f"grep: refused: pattern {shown} unrolls to {atoms:,} atoms once its counted "
                f"repeats {{n}} are multiplied out; the limit is {MAX_PATTERN_EXPANSION:,} "
                "(use + or * instead of large counts)")
        literal = "F" in opts or not any(_REGEX_MAGIC.search(p) for p in patterns)
        engine = _regex or re
        flags = engine.IGNORECASE if "i" in opts else 0
        compiled = []
        for pattern, source in zip(patterns, sources):
            try:
                compiled.append(engine.compile(source, flags))
            except engine.error as e:
                raise SandboxError(f"grep: invalid pattern {pattern!r}: {e}") from None
        # Stdlib `re` has no timeout: bound it with SIGALRM, which only the main thread gets;
        # elsewhere allow only literal text, which cannot backtrack catastrophically.
        use_alarm = _regex is None and threading.current_thread() is threading.main_thread()
        if _regex is None and not use_alarm and not literal:
            raise SandboxError("grep: regular expressions need the 'regex' package here; "
                               "use -F for a fixed string")

        def search(rx: re.Pattern[str], line: str, seconds: float, pos: int = 0) -> re.Match[str] | None:
            if _regex is not None:
                return rx.search(line, pos, timeout=seconds)
            return _search_with_alarm(rx, line, seconds, pos) if use_alarm else rx.search(line, pos)

        budget = self.regex_timeout_s
        timeout = SandboxError(
            f"grep: stopped: pattern {shown} took over {self.regex_timeout_s:g} s of matching; "
            "simplify it (avoid nested quantifiers like (a+)+) or use -F for a fixed string")
        lines_seen = 0

        def first(line: str, pos: int = 0, *, earliest: bool = False) -> re.Match[str] | None:
            """The first pattern's match at or after ``pos`` (``earliest``: the match that starts
            first among all patterns, as ``grep -o`` prints them), within the time budget."""
            nonlocal budget
            start = time.monotonic()
            found = None
            for rx in compiled:
                left = budget - (time.monotonic() - start)
                if left <= 0:
                    raise timeout
                try:
                    # Never past the command's own deadline either.
                    m = search(rx, line, min(left, max(self._deadline - time.monotonic(), 1e-3)), pos)
                except TimeoutError:
                    self._check()  # the command's deadline, if that is what ran out
                    raise timeout from None
                if m and (found is None or m.start() < found.start()):
                    found = m
                    if not earliest:
                        break
            budget -= time.monotonic() - start
            return found

        def match(line: str) -> bool:
            nonlocal lines_seen
            lines_seen += 1
            if lines_seen % 256 == 0:
                self._check()
            return first(line) is not None

        def parts(line: str) -> list[str]:
            found, pos = [], 0
            while pos <= len(line) and (m := first(line, pos, earliest=True)):
                if m.end() > m.start():
                    found.append(m.group(0))
                pos = m.end() if m.end() > pos else pos + 1
            return found

        match.parts = parts  # type: ignore[attr-defined]
        return match

    def _find(self, args: list[str], stdin: str | None) -> str:
        split = next((i for i, a in enumerate(args) if a.startswith("-")), len(args))
        starts, args = args[:split], args[split:]
        usage = "supported: -name GLOB, -iname GLOB, -type f|d, -maxdepth N"
        preds: dict[str, str] = {}
        for i in range(0, len(args), 2):
            pred, value = args[i], args[i + 1] if i + 1 < len(args) else None
            if pred not in ("-name", "-iname", "-type", "-maxdepth"):
                raise SandboxError(f"find: unsupported expression {pred!r}; {usage}")
            if value is None:
                raise SandboxError(f"find: missing argument to {pred!r}")
            preds[pred] = value
        if preds.get("-type", "f") not in ("f", "d"):
            raise SandboxError(f"find: unsupported -type {preds['-type']!r}; {usage}")
        if not preds.get("-maxdepth", "0").isdigit():
            raise SandboxError(f"find: invalid -maxdepth {preds['-maxdepth']!r}")
        depth = int(preds["-maxdepth"]) if "-maxdepth" in preds else None
        out: list[str] = []
        for arg in self._expand(starts or ["."]):
            top = self._resolve(arg)
            if not top.exists():
                self._errors.append(f"find: {arg!r}: No such file or directory")
                continue
            for path, level in self._walk(top, depth):
                name = path.name if level else posixpath.basename(arg.rstrip("/")) or arg
                if "-name" in preds and not fnmatch.fnmatchcase(name, preds["-name"]):
                    continue
                if "-iname" in preds and not fnmatch.fnmatchcase(name.lower(),
                                                                 preds["-iname"].lower()):
                    continue
                if "-type" in preds and path.is_dir() != (preds["-type"] == "d"):
                    continue
                out.append(posixpath.join(arg, path.relative_to(top).as_posix())
                           if level else arg)
        return _text(out)

    def _wc(self, args: list[str], stdin: str | None) -> str:
        opts, ops = self._options("wc", args, "lwc")
        keys = [k for k in "lwc" if k in opts] or list("lwc")
        rows: list[tuple[list[int], str]] = []
        for label, text in self._inputs("wc", self._expand(ops), stdin):
            counts = {"l": text.count("\n"), "w": len(text.split()), "c": len(text.encode())}
            rows.append(([counts[k] for k in keys], "" if label == STDIN else label))
        if len(rows) > 1:
            rows.append(([sum(col) for col in zip(*(r[0] for r in rows))], "total"))
        width = max((len(str(n)) for counts, _ in rows for n in counts), default=1)
        return _text([" ".join([str(n).rjust(width) for n in counts] + ([label] if label else []))
                      for counts, label in rows])

    def _sort(self, args: list[str], stdin: str | None) -> str:
        opts, ops = self._options("sort", args, "rnu")
        lines = [line for _, text in self._inputs("sort", self._expand(ops), stdin)
                 for line in self._lines(text)]
        if "u" in opts:
            lines = list(dict.fromkeys(lines))
        key = (lambda s: (_leading_number(s), s)) if "n" in opts else None
        return _text(sorted(lines, key=key, reverse="r" in opts))

    def _uniq(self, args: list[str], stdin: str | None) -> str:
        opts, ops = self._options("uniq", args, "c")
        runs: list[list] = []  # [line, count] for adjacent duplicates, as GNU uniq
        for _, text in self._inputs("uniq", self._expand(ops), stdin):
            for line in self._lines(text):
                if runs and runs[-1][0] == line:
                    runs[-1][1] += 1
                else:
                    runs.append([line, 1])
        return _text([f"{n:7} {line}" if "c" in opts else line for line, n in runs])


# -- helpers ------------------------------------------------------------------------------


def redact_host_paths(text: str, root: str | os.PathLike[str]) -> str:
    """``text`` with absolute host paths replaced: a path inside ``root`` by its path relative to
    the tree ('.' for the root itself), any other by REDACTED_PATH. JSON is rewritten string by
    string and re-serialised as the compile writes it (indent 2); other text in place."""
    roots = {os.path.normpath(os.path.abspath(root)), os.path.realpath(root)}

    def one(m: re.Match[str]) -> str:
        found = m.group()
        path = os.path.normpath(found[len("file://"):] if found.startswith("file://") else found)
        for base in roots:
            if path == base:
                return "."
            if path.startswith(base.rstrip("/") + "/"):
                return path[len(base.rstrip("/")) + 1:]
        return REDACTED_PATH

    def scrub(value: object) -> object:
        if isinstance(value, str):
            return _HOST_PATH.sub(one, value)
        if isinstance(value, list):
            return [scrub(v) for v in value]
        if isinstance(value, dict):
            return {_HOST_PATH.sub(one, k): scrub(v) for k, v in value.items()}
        return value

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return _HOST_PATH.sub(one, text)
    tail = "\n" if text.endswith("\n") else ""
    return json.dumps(scrub(data), indent=2, ensure_ascii=False) + tail


def _pattern_cost(source: str) -> tuple[int, int]:
    """(atoms, deepest group nesting) of a Python-syntax regex with its counted repeats unrolled,
    as the engines compile them: x{100} is 100 atoms, (x{100}){100} is 10,000. Overcounts a
    little (group prefixes like ?P<name> count as atoms), never under."""
    frames = [[0, 0]]  # per open group: [atoms so far, atoms of its last item]
    deepest, i, n = 0, 0, len(source)
    while i < n:
        c, frame = source[i], frames[-1]
        if c == "(":
            frames.append([0, 0])
            deepest = max(deepest, len(frames) - 1)
            i += 2 if source.startswith("?", i + 1) else 1  # (?:  (?P<  (?i): no quantifier
            continue
        if c == ")" and len(frames) > 1:
            inner = frames.pop()[0]
            frames[-1][0] += inner
            frames[-1][1] = inner
            i += 1
            continue
        if c == "|":
            frame[1] = 0
            i += 1
            continue
        if c in "*+?":  # loops, not unrolled
            i += 1
            continue
        if c == "{" and (m := _COUNTED_REPEAT.match(source, i)) and (m[1] or m[3]):
            count = max(int(m[1] or 0), int(m[3] or 0), 1)
            frame[0] += frame[1] * (count - 1)
            frame[1] *= count
            i = m.end()
            continue
        if c == "\\":  # an escape is one atom
            i += 2
        elif c == "[":  # so is a character class
            j = i + 1
            j += source.startswith("^", j)
            j += source.startswith("]", j)
            while j < n and source[j] != "]":
                j += 2 if source[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
        frame[0] += 1
        frame[1] = 1
    return sum(f[0] for f in frames), deepest


_STATM: tuple[int, int] | None = None  # (pid, fd) of /proc/self/statm, opened once per process


def _memory_in_use() -> int:
    """This process's resident memory in bytes. Linux: read from a /proc/self/statm descriptor
    kept open (re-reading it opens no file); elsewhere the peak resident size, which only grows,
    so the budget then bounds growth past the earlier peak."""
    global _STATM
    try:
        if _STATM is None or _STATM[0] != os.getpid():  # a forked child needs its own
            _STATM = (os.getpid(), os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC))
        return int(os.pread(_STATM[1], 128, 0).split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def _split_pipeline(line: str) -> list[str]:
    """Split on unquoted '|' and refuse every other unquoted shell construct."""
    stages, start, quote, i = [], 0, "", 0
    while i < len(line):
        c = line[i]
        if quote:  # inside quotes everything is literal (no expansion happens here at all)
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"':
                i += 1
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 1
        elif c == "|" and not line.startswith("||", i):
            stages.append(line[start:i])
            start = i + 1
        else:
            what = next((w for tok, w in _CONSTRUCTS if line.startswith(tok, i)), None)
            if what is None and (var := _VARIABLE.match(line, i)):
                what = f"variable expansion {var.group()!r}"
            if what:
                raise SandboxError(f"refused: {what} is not supported; only '|' pipes are "
                                   "(quote special characters to use them literally)")
        i += 1
    return stages + [line[start:]]


def _argv(stage: str) -> list[str]:
    try:
        argv = shlex.split(stage)
    except ValueError as e:
        raise SandboxError(f"syntax error: {e}") from None
    if not argv:
        raise SandboxError("syntax error: empty command in pipeline")
    return argv


def _gnu_to_python(pattern: str, extended: bool) -> str:
    r"""Translate grep syntax to Python's: in basic regexes (no -E) \| \+ \? \( \) \{ \}
    are the operators and the bare characters are literal; \< and \> are word boundaries."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            n = pattern[i + 1]
            out.append(r"\b" if n in "<>" else n if not extended and n in "|+?(){}" else c + n)
            i += 2
            continue
        out.append("\\" + c if not extended and c in "|+?(){}" else c)
        i += 1
    return "".join(out)


def _search_with_alarm(rx: re.Pattern[str], line: str, seconds: float, pos: int = 0) -> re.Match[str] | None:
    """Fallback bound for stdlib `re`, which checks for signals while it backtracks."""
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return rx.search(line, pos)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _ls_entry(path: Path, name: str, long: bool) -> str:
    # Check symlinks first: is_dir() would follow the link.
    suffix = "@" if path.is_symlink() else "/" if path.is_dir() else ""
    if not long:
        return name + suffix
    st = path.lstat()
    return f"{stat.filemode(st.st_mode)} {st.st_size:>9} {name}{suffix}"


def _lines(text: str) -> list[str]:
    lines = text.split("\n")  # only '\n' ends a line, as in grep (not splitlines' \f, \x1c...)
    return lines[:-1] if lines[-1] == "" else lines


def _text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _leading_number(line: str) -> float:
    m = _NUMBER.match(line)  # sort -n: lines without a leading number sort as 0, like GNU
    return float(m.group()) if m else 0.0
