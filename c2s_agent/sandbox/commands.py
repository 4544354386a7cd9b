"""The interpreter: runs one parsed command line (pipelines joined with ``;``, in order) over the
tree in this process, each stage a stream of lines pulled by the next (``cat big | head -n 1``
reads one chunk), so memory follows what a command keeps (``sort`` its lines, ``tail -n N`` N of
them), never the size of a file.

:class:`Interpreter` is what the worker process runs; :class:`~c2s_agent.sandbox.Sandbox` is the
API that sends it command lines there."""

from __future__ import annotations

import fnmatch
import itertools
import posixpath
import re
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .files import STDIN, TreeFiles, count_words, ls_entry
from .limits import (MAX_CALL_MEMORY, MAX_CALL_SECONDS, Budget, Errors, Output, SandboxError, Stopped,
                     stopped_for_memory)
from .parsing import count, options, parse_line
from .patterns import Matcher

_NUMBER = re.compile(r"\s*[-+]?\d+(?:\.\d*)?", re.ASCII)
_SHORT_COUNT = re.compile(r"-\d+", re.ASCII)  # head -5

Stream = Iterator[str]
Command = Callable[[list[str], "Stream | None"], Stream]


@dataclass(frozen=True)
class Reply:
    """What one command line answered: the text, a shell-like status (0 ran, 1 ran but reported
    errors such as a missing file, 2 refused, stopped or failed) and the file bytes it read."""

    text: str
    status: int
    bytes_read: int = 0


class Interpreter:
    """Run shell-like command lines over the tree at ``root`` in this process. One command line
    at a time (not thread-safe)."""

    def __init__(self, root: str | Path, *, max_output_bytes: int = 8192, regex_timeout_s: float = 1.0,
                 time_budget_s: float = MAX_CALL_SECONDS, memory_budget_bytes: int = MAX_CALL_MEMORY) -> None:
        self.root = Path(root)
        self.max_output_bytes = max_output_bytes
        self.regex_timeout_s = regex_timeout_s
        self.budget = Budget(time_budget_s, memory_budget_bytes)
        self.commands: dict[str, Command] = {
            "cat": self.cat, "echo": self.echo, "find": self.find, "grep": self.grep, "head": self.head, "ls": self.ls,
            "pwd": self.pwd, "sort": self.sort, "tail": self.tail, "uniq": self.uniq, "wc": self.wc,
        }
        self.errors = Errors(max_output_bytes)
        self.files = TreeFiles(self.root, self.budget, self.errors)

    def run(self, line: str) -> Reply:
        """Run one command line; always a reply (refusals, stops and failures included)."""
        self.budget.start()
        self.errors = Errors(self.max_output_bytes)
        self.files = TreeFiles(self.root, self.budget, self.errors)
        out = Output(self.max_output_bytes)
        try:
            # The pipelines of a ';' list share the line's budgets and its one reply; a refusal
            # in any of them is the whole reply. A stop on a budget keeps what was printed
            # before it, as a shell shows a killed command's output so far: what ran need not
            # be asked again.
            for pipeline in parse_line(line, set(self.commands), self.files.expand):
                stream: Stream | None = None
                for name, *args in pipeline:
                    self.budget.check()
                    stream = self.commands[name](args, stream)
                for text in stream or ():
                    self.budget.line()
                    out.write(text)
        except Stopped as e:
            printed = out.render(self.errors, reserve=len(str(e).encode("utf-8", "replace")) + 1)
            return self._failed(f"{printed}\n{e}" if printed else str(e))
        except SandboxError as e:
            return self._failed(str(e))
        except MemoryError:
            return self._failed(stopped_for_memory(self.budget.memory_bytes))
        except RecursionError:
            return self._failed("error: this command line is nested too deeply to run")
        except OSError as e:  # the message's file name would be a host path: never shown
            return self._failed(f"error: cannot read the tree: {e.strerror or 'input/output error'}")
        except Exception as e:  # a bug here must never crash the agent loop, nor show internals
            return self._failed(f"error: this command failed unexpectedly ({type(e).__name__})")
        return Reply(out.render(self.errors), 1 if self.errors else 0, self.files.bytes_read)

    def _failed(self, text: str) -> Reply:
        return Reply(text, 2, self.files.bytes_read)

    # -- commands -----------------------------------------------------------------------

    def pwd(self, args: list[str], stdin: Stream | None) -> Stream:
        return iter(["/"])

    def echo(self, args: list[str], stdin: Stream | None) -> Stream:
        # Its words, as written (no options): a loop labels what it prints with it.
        return iter([" ".join(args)])

    def ls(self, args: list[str], stdin: Stream | None) -> Stream:
        opts, ops = options("ls", args, "Rla1F")
        targets = [(arg, self.files.resolve(arg)) for arg in self.files.expand(ops or ["."])]
        long = "l" in opts

        def blocks() -> Iterator[list[str]]:
            for arg, top in targets:
                if not top.exists():
                    self.errors.add(f"ls: cannot access {arg!r}: No such file or directory")
                    continue
                if not top.is_dir():
                    yield [ls_entry(top, arg, long)]
                    continue
                folders = (p for p, _ in self.files.walk(top) if p.is_dir()) if "R" in opts else [top]
                for folder in folders:
                    rel = folder.relative_to(top).as_posix()
                    # -a is accepted but shows no more: hidden names are not part of the tree.
                    lines = [ls_entry(folder / n, n, long) for n in self.files.listdir(folder)]
                    if "R" in opts or len(targets) > 1:
                        lines.insert(0, (arg if rel == "." else posixpath.join(arg, rel)) + ":")
                    yield lines

        def listing() -> Stream:
            first = True
            for block in blocks():
                if block:
                    if not first:
                        yield ""
                    first = False
                    yield from block
        return listing()

    def cat(self, args: list[str], stdin: Stream | None) -> Stream:
        opts, ops = options("cat", args, "n")
        lines = self._all_lines("cat", self.files.expand(ops), stdin)
        if "n" in opts:
            return (f"{n:6}\t{line}" for n, line in enumerate(lines, 1))
        return lines

    def head(self, args: list[str], stdin: Stream | None) -> Stream:
        return self._head_tail("head", args, stdin)

    def tail(self, args: list[str], stdin: Stream | None) -> Stream:
        return self._head_tail("tail", args, stdin)

    def _head_tail(self, cmd: str, args: list[str], stdin: Stream | None) -> Stream:
        args = [f"-n{a[1:]}" if _SHORT_COUNT.fullmatch(a) else a for a in args]
        opts, ops = options(cmd, args, "", valued="n")
        n, plus = count(cmd, str(opts.get("n", "10")), "number of lines", plus=True)
        n = min(n, sys.maxsize)
        from_line = cmd == "tail" and plus  # tail -n +K: from line K on
        ops = self.files.expand(ops)

        def lines() -> Stream:
            inputs = self.files.inputs(cmd, ops, stdin)
            first = True
            for label, text in inputs:
                if len(ops) > 1:  # GNU headers between files
                    if not first:
                        yield ""
                    yield f"==> {label} <=="
                first = False
                if cmd == "head":
                    yield from itertools.islice(text, n)
                elif from_line:
                    yield from itertools.islice(text, max(n - 1, 0), None)
                elif n:
                    yield from deque(self._checked(text), maxlen=n)
                else:
                    deque(self._checked(text), maxlen=0)  # read, as tail does, keep nothing
        return lines()

    def grep(self, args: list[str], stdin: Stream | None) -> Stream:
        opts, ops = options("grep", args, "rRinlcEwvFIhHo", valued="e", repeated="e")
        if "e" in opts:  # every -e counts: a line matches if any of them does
            patterns = list(opts["e"])  # type: ignore[arg-type]
        elif ops:
            patterns = [ops.pop(0)]
        else:
            raise SandboxError("grep: usage: grep [-rinlcEwvFo] PATTERN [path...]")
        match = Matcher(patterns, opts, self.budget, self.regex_timeout_s)
        recursive = "r" in opts or "R" in opts
        ops = self.files.expand(ops) or ([""] if recursive else [])  # grep -r PATTERN: whole tree
        named = ("H" in opts or recursive or len(ops) > 1) and "h" not in opts
        invert = "v" in opts
        number = "n" in opts

        def lines() -> Stream:
            for label, text in self.files.inputs("grep", ops, stdin, recursive):
                prefix = f"{label}:" if named else ""
                numbered = enumerate(self._checked(text), 1)
                if not invert:  # only lines holding a pattern's required text can match
                    numbered = match.candidates(numbered)
                hits = ((n, line) for n, line in numbered if match(line) != invert)
                if "l" in opts:
                    if next(hits, None) is not None:
                        yield label
                elif "c" in opts:
                    yield f"{prefix}{sum(1 for _ in hits)}"
                elif "o" in opts and not invert:  # each non-empty match on its own line
                    for n, line in hits:
                        for part in match.parts(line):
                            yield prefix + (f"{n}:" if number else "") + part
                else:
                    for n, line in hits:
                        yield prefix + (f"{n}:" if number else "") + line
        return lines()

    def find(self, args: list[str], stdin: Stream | None) -> Stream:
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
        depth = count("find", preds["-maxdepth"], "-maxdepth")[0] if "-maxdepth" in preds else None
        starts = self.files.expand(starts or ["."])

        def lines() -> Stream:
            for arg in starts:
                top = self.files.resolve(arg)
                if not top.exists():
                    self.errors.add(f"find: {arg!r}: No such file or directory")
                    continue
                for path, level in self.files.walk(top, depth):
                    name = path.name if level else posixpath.basename(arg.rstrip("/")) or arg
                    if "-name" in preds and not fnmatch.fnmatchcase(name, preds["-name"]):
                        continue
                    if "-iname" in preds and not fnmatch.fnmatchcase(name.lower(), preds["-iname"].lower()):
                        continue
                    if "-type" in preds and path.is_dir() != (preds["-type"] == "d"):
                        continue
                    yield posixpath.join(arg, path.relative_to(top).as_posix()) if level else arg
        return lines()

    def wc(self, args: list[str], stdin: Stream | None) -> Stream:
        opts, ops = options("wc", args, "lwc")
        keys = [k for k in "lwc" if k in opts] or list("lwc")
        ops = self.files.expand(ops)

        def lines() -> Stream:
            rows: list[tuple[list[int], str]] = []
            for label, text in self.files.inputs("wc", ops, stdin):
                counts = {"l": 0, "w": 0, "c": 0}
                for line in self._checked(text):
                    counts["l"] += 1
                    if "w" in keys:
                        counts["w"] += count_words(line)
                    if "c" in keys:
                        counts["c"] += len(line.encode("utf-8", "replace")) + 1
                if getattr(text, "missing_newline", False):  # wc counts newlines, not lines
                    counts["l"] -= 1
                    counts["c"] -= 1
                rows.append(([counts[k] for k in keys], "" if label == STDIN else label))
            if len(rows) > 1:
                rows.append(([sum(col) for col in zip(*(r[0] for r in rows))], "total"))
            width = max((len(str(n)) for counts, _ in rows for n in counts), default=1)
            for counts, label in rows:
                yield " ".join([str(n).rjust(width) for n in counts] + ([label] if label else []))
        return lines()

    def sort(self, args: list[str], stdin: Stream | None) -> Stream:
        opts, ops = options("sort", args, "rnu")
        lines = self._all_lines("sort", self.files.expand(ops), stdin)

        def ordered() -> Stream:
            kept = dict.fromkeys(lines) if "u" in opts else list(lines)
            key = (lambda s: (_leading_number(s), s)) if "n" in opts else None
            self.budget.check()
            yield from sorted(kept, key=key, reverse="r" in opts)
        return ordered()

    def uniq(self, args: list[str], stdin: Stream | None) -> Stream:
        opts, ops = options("uniq", args, "c")
        lines = self._all_lines("uniq", self.files.expand(ops), stdin)

        def runs() -> Stream:  # adjacent duplicates, as GNU uniq
            for line, group in itertools.groupby(lines):
                yield f"{sum(1 for _ in group):7} {line}" if "c" in opts else line
        return runs()

    # -- streams ------------------------------------------------------------------------

    def _all_lines(self, cmd: str, ops: list[str], stdin: Stream | None) -> Stream:
        def lines() -> Stream:
            for _, text in self.files.inputs(cmd, ops, stdin):
                yield from self._checked(text)
        return lines()

    def _checked(self, lines: Iterable[str]) -> Stream:
        """``lines`` with the budgets checked as they pass (a kept list, like sort's, grows here)."""
        check = self.budget.line
        for line in lines:
            check()
            yield line


def _leading_number(line: str) -> float:
    m = _NUMBER.match(line)  # sort -n: lines without a leading number sort as 0, like GNU
    return float(m.group()) if m else 0.0
