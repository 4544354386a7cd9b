"""The agent's ``code_execution`` tool: a shell-like interpreter confined to a compiled tree.

The agent browses the tree with the commands it knows from bash (ls, cat, head, tail, grep,
find, wc, sort, uniq, pwd) joined by ``|`` pipes::

    sb = Sandbox("out/tree")
    print(sb.run("grep -ril refund skills | head -20"))

Everything is interpreted here in pure Python; nothing reaches a real shell or a subprocess.
Document text may carry prompt injection, so the worst a command line can do is read files
that are already inside the tree: paths that leave it, symlinks, redirections, substitutions
and command chaining are refused, and every command is bounded in files visited, bytes read,
regex time and output size.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import shlex
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

try:  # the third-party `regex` module can time-bound a search; stdlib `re` cannot
    import regex as _regex
except ImportError:  # pragma: no cover - exercised by monkeypatching in the tests
    _regex = None

MAX_LINE_CHARS = 2000
MAX_STAGES = 8
MAX_PATTERN_CHARS = 512
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
                 regex_timeout_s: float = 1.0) -> None:
        self.root = Path(root).resolve(strict=True)
        if not self.root.is_dir():
            raise NotADirectoryError(str(root))
        self.max_output_bytes = max_output_bytes
        self.regex_timeout_s = regex_timeout_s
        self.stats = SandboxStats()
        self._commands: dict[str, Callable[[list[str], str | None], str]] = {
            "cat": self._cat, "find": self._find, "grep": self._grep, "head": self._head,
            "ls": self._ls, "pwd": self._pwd, "sort": self._sort, "tail": self._tail,
            "uniq": self._uniq, "wc": self._wc,
        }
        self._errors: list[str] = []
        self._visited = self._scanned = 0

    def run(self, command: str) -> str:
        """Run one command line; always returns text (refusals and errors included)."""
        self.stats.commands += 1
        self._errors, self._visited, self._scanned = [], 0, 0
        try:
            out = self._truncate(self._pipeline(command))
        except SandboxError as e:
            return str(e)
        except Exception as e:  # a bug here must never crash the agent loop
            return f"error: {type(e).__name__}: {e}"
        # Per-file errors go last, like stderr on a terminal, and are never truncated away.
        return "\n".join(part for part in (out, *self._errors) if part)

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

    def _options(self, cmd: str, args: list[str], flags: str,
                 valued: str = "") -> tuple[dict[str, str | bool], list[str]]:
        """GNU-style short options anywhere on the line: '-ril', '-n 5', '-n5', '--'."""
        opts: dict[str, str | bool] = {}
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
                    hidden = name.startswith(".") and not part.startswith(".")
                    entry = folder / name
                    if (fnmatch.fnmatchcase(name, part) and not hidden
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

    def _walk(self, top: Path, max_depth: int | None = None) -> Iterator[tuple[Path, int]]:
        """(path, depth) depth-first in sorted order, top included; never follows symlinks."""
        stack = [(top, 0)]
        while stack:
            path, depth = stack.pop()
            self._visit()
            yield path, depth
            if path.is_dir() and (max_depth is None or depth < max_depth):
                try:
                    children = sorted(c for c in path.iterdir() if not c.is_symlink())
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
        if self._scanned + path.stat().st_size > MAX_SCAN_BYTES:
            raise SandboxError(f"{cmd}: stopped: this command would read more than "
                               f"{MAX_SCAN_BYTES:,} bytes; narrow the path")
        try:
            with path.open("rb") as f:
                data = f.read(SNIFF_BYTES)
                binary = b"\0" in data
                if not binary:
                    data += f.read(MAX_SCAN_BYTES - self._scanned)
        except OSError as e:
            self._errors.append(f"{cmd}: {label}: {e.strerror}")
            return None
        self._scanned += len(data)
        self.stats.bytes_read += len(data)
        if binary:
            if not quiet_binary:
                self._errors.append(f"{cmd}: refused: {label!r} is a binary file")
            return None
        return data.decode("utf-8", errors="replace")

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
                if "a" not in opts and any(p.startswith(".") for p in Path(rel).parts):
                    continue
                names = sorted(n for n in os.listdir(folder) if "a" in opts or n[0] != ".")
                lines = [_ls_entry(folder / n, n, "l" in opts) for n in names]
                if "R" in opts or len(targets) > 1:
                    lines.insert(0, (arg if rel == "." else posixpath.join(arg, rel)) + ":")
                blocks.append("\n".join(lines))
        listing = "\n\n".join(b for b in blocks if b)
        return listing + "\n" if listing else ""

    def _cat(self, args: list[str], stdin: str | None) -> str:
        opts, ops = self._options("cat", args, "n")
        lines = [line for _, text in self._inputs("cat", self._expand(ops), stdin)
                 for line in _lines(text)]
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
            lines = _lines(text)
            if len(inputs) > 1:  # GNU headers between files
                out += [""] if out else []
                out.append(f"==> {label} <==")
            if cmd == "head":
                out += lines[:n]
            else:
                out += lines[max(n - 1, 0):] if from_line else lines[max(len(lines) - n, 0):]
        return _text(out)

    def _grep(self, args: list[str], stdin: str | None) -> str:
        opts, ops = self._options("grep", args, "rRinlcEwvFIhH", valued="e")
        if "e" in opts:
            pattern = str(opts["e"])
        elif ops:
            pattern = ops.pop(0)
        else:
            raise SandboxError("grep: usage: grep [-rinlcEwvF] PATTERN [path...]")
        match = self._matcher(pattern, opts)
        recursive = "r" in opts or "R" in opts
        ops = self._expand(ops) or ([""] if recursive else [])  # grep -r PATTERN: whole tree
        named = ("H" in opts or recursive or len(ops) > 1) and "h" not in opts
        out: list[str] = []
        for label, text in self._inputs("grep", ops, stdin, recursive):
            if "l" in opts:
                if any(match(line) != ("v" in opts) for line in _lines(text)):
                    out.append(label)
                continue
            hits = [(n, line) for n, line in enumerate(_lines(text), 1)
                    if match(line) != ("v" in opts)]
            prefix = f"{label}:" if named else ""
            if "c" in opts:
                out.append(f"{prefix}{len(hits)}")
            else:
                out += [prefix + (f"{n}:" if "n" in opts else "") + line for n, line in hits]
        return _text(out)

    def _matcher(self, pattern: str, opts: dict[str, str | bool]) -> Callable[[str], bool]:
        """A line predicate for a grep pattern whose total matching time is bounded."""
        if len(pattern) > MAX_PATTERN_CHARS:
            raise SandboxError(f"refused: pattern is {len(pattern):,} characters; "
                               f"the limit is {MAX_PATTERN_CHARS}")
        literal = "F" in opts or not _REGEX_MAGIC.search(pattern)
        source = re.escape(pattern) if "F" in opts else _gnu_to_python(pattern, "E" in opts)
        if "w" in opts:
            source = rf"(?<!\w)(?:{source})(?!\w)"
        engine = _regex or re
        flags = engine.IGNORECASE if "i" in opts else 0
        try:
            rx = engine.compile(source, flags)
        except engine.error as e:
            raise SandboxError(f"grep: invalid pattern {pattern!r}: {e}") from None
        # Stdlib `re` has no timeout: bound it with SIGALRM, which only the main thread gets;
        # elsewhere allow only literal text, which cannot backtrack catastrophically.
        use_alarm = _regex is None and threading.current_thread() is threading.main_thread()
        if _regex is None and not use_alarm and not literal:
            raise SandboxError("grep: regular expressions need the 'regex' package here; "
                               "use -F for a fixed string")

        def search(line: str, seconds: float) -> object:
            if _regex is not None:
                return rx.search(line, timeout=seconds)
            return _search_with_alarm(rx, line, seconds) if use_alarm else rx.search(line)

        budget = self.regex_timeout_s
        timeout = SandboxError(
            f"grep: stopped: pattern {pattern!r} took over {self.regex_timeout_s:g} s of matching; "
            "simplify it (avoid nested quantifiers like (a+)+) or use -F for a fixed string")

        def match(line: str) -> bool:
            nonlocal budget
            if budget <= 0:
                raise timeout
            start = time.monotonic()
            try:
                found = search(line, budget) is not None
            except TimeoutError:
                raise timeout from None
            budget -= time.monotonic() - start
            return found

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
                 for line in _lines(text)]
        if "u" in opts:
            lines = list(dict.fromkeys(lines))
        key = (lambda s: (_leading_number(s), s)) if "n" in opts else None
        return _text(sorted(lines, key=key, reverse="r" in opts))

    def _uniq(self, args: list[str], stdin: str | None) -> str:
        opts, ops = self._options("uniq", args, "c")
        runs: list[list] = []  # [line, count] for adjacent duplicates, as GNU uniq
        for _, text in self._inputs("uniq", self._expand(ops), stdin):
            for line in _lines(text):
                if runs and runs[-1][0] == line:
                    runs[-1][1] += 1
                else:
                    runs.append([line, 1])
        return _text([f"{n:7} {line}" if "c" in opts else line for line, n in runs])


# -- helpers ------------------------------------------------------------------------------


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


def _search_with_alarm(rx: re.Pattern[str], line: str, seconds: float) -> re.Match[str] | None:
    """Fallback bound for stdlib `re`, which checks for signals while it backtracks."""
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return rx.search(line)
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
