"""What one command line may cost, and the checks that stop it: files visited, bytes read, wall
time and memory inside the interpreter (clean, early answers), and the size of the reply.

The hard limits (address space, CPU time, a wall-clock kill) are the operating system's, set on
the worker process that runs the interpreter: see :mod:`c2s_agent.sandbox.worker`.
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass, field

MAX_LINE_CHARS = 2000
MAX_STAGES = 8  # commands in one pipeline
MAX_COMMANDS = 64  # pipelines joined with ';' in one command line
MAX_RUNS = 2048  # pipelines one command line runs, its for loops unrolled
MAX_PATTERN_CHARS = 512
# Regex engines unroll counted repeats when compiling: ((a{100}){100}){100} is a million atoms.
MAX_PATTERN_EXPANSION = 10_000  # atoms a command's patterns may unroll to, repeats multiplied out
MAX_PATTERN_NESTING = 32  # open groups; deeper ones overflow the regex parser's recursion
MAX_CALL_SECONDS = 10.0  # wall time of one command line
MAX_CALL_MEMORY = 256 << 20  # memory one command line may add to the process running it
MEMORY_CHECK_INTERVAL_S = 0.002  # the process's size is read at most this often (a system call)
CHECK_EVERY_LINES = 256  # lines streamed between two budget checks
# Files visited and content read by one command line: a 50,000-document tree's nav files (about
# 8,000 files, 56 MB) four times over, so a question's grep counts over the whole tree take a few
# calls; the wall-time budget still ends a slow one.
MAX_FILES = 80_000
MAX_SCAN_BYTES = 256 << 20
SNIFF_BYTES = 8192  # like GNU grep, decide "binary" (a NUL byte) from the first buffer

NARROW = "narrow the path or page with head -n"


class SandboxError(Exception):
    """A refused or failed command; ``str(error)`` is the one-line reply the agent sees."""


class Stopped(SandboxError):
    """A command line that ran into a budget: its reply keeps what it printed before the stop."""


_STOP_LINE = re.compile(r"^(?:[a-z]+: )?stopped: ")


def stop_line(line: str) -> bool:
    """Is ``line`` the line a stop on a budget ends a reply with (``stopped: ...``, ``grep:
    stopped: ...``)?"""
    return bool(_STOP_LINE.match(line))


def stopped_for_memory(budget_bytes: int) -> str:
    return f"stopped: this command would use over {budget_bytes >> 20:,} MiB of memory; {NARROW}"


def stopped_for_time(seconds: float) -> str:
    return f"stopped: this command ran over {seconds:g} s; narrow the path or the pattern"


@dataclass
class Budget:
    """The running command line's budgets: call :meth:`check` often, :meth:`visit` per file or
    directory, :meth:`scan` per byte read."""

    seconds: float = MAX_CALL_SECONDS
    memory_bytes: int = MAX_CALL_MEMORY
    deadline: float = 0.0
    visited: int = 0
    scanned: int = 0
    _memory_base: int = 0
    _next_memory_check: float = 0.0
    _lines: int = 0

    def start(self) -> None:
        self.deadline = time.monotonic() + self.seconds
        self.visited = self.scanned = self._lines = 0
        self._memory_base, self._next_memory_check = memory_in_use(), 0.0

    def check(self, need: int = 0) -> None:
        """Stop the command once it runs past its time budget, or once the memory it added to the
        process (plus ``need`` bytes it is about to allocate) passes its memory budget."""
        now = time.monotonic()
        if now > self.deadline:
            raise Stopped(stopped_for_time(self.seconds))
        if not need and now < self._next_memory_check:
            return
        self._next_memory_check = now + MEMORY_CHECK_INTERVAL_S
        if memory_in_use() - self._memory_base + need > self.memory_bytes:
            raise Stopped(stopped_for_memory(self.memory_bytes))

    def line(self) -> None:
        """One streamed line: a full check every CHECK_EVERY_LINES lines."""
        self._lines += 1
        if self._lines % CHECK_EVERY_LINES == 0:
            self.check()

    def visit(self) -> None:
        self.visited += 1
        if self.visited > MAX_FILES:
            raise Stopped(f"stopped: visited more than {MAX_FILES:,} files and directories; "
                               "narrow the path")
        self.check()

    def can_scan(self, cmd: str, size: int) -> int:
        """Bytes left to read, once a file of ``size`` bytes is known to fit the scan cap."""
        if self.scanned + size > MAX_SCAN_BYTES:
            raise Stopped(f"{cmd}: stopped: this command would read more than "
                               f"{MAX_SCAN_BYTES:,} bytes; narrow the path")
        return MAX_SCAN_BYTES - self.scanned


@dataclass
class Errors:
    """Per-file error lines of one command line, kept up to ``cap_bytes`` (the rest counted):
    a command naming thousands of missing files cannot grow its reply or the process."""

    cap_bytes: int
    lines: list[str] = field(default_factory=list)
    size: int = 0
    dropped: int = 0

    def add(self, line: str) -> None:
        if self.size < self.cap_bytes:
            self.lines.append(line)
            self.size += len(line.encode("utf-8", "replace")) + 1
        else:
            self.dropped += 1

    def __bool__(self) -> bool:
        return bool(self.lines or self.dropped)


TRUNCATED = "[output truncated:"  # how the note that ends a reply cut to its cap begins


class Output:
    """The reply being written, stream-fed line by line: at most ``cap`` bytes are kept, whole lines
    where one fits, and the total is counted for the truncation note."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept: list[bytes] = []
        self.kept_bytes = 0
        self.total = 0
        self.full = False

    def write(self, line: str) -> None:
        data = line.encode("utf-8", "replace") + b"\n"
        self.total += len(data)
        if self.full:
            return
        if self.kept_bytes + len(data) <= self.cap:
            self.kept.append(data)
            self.kept_bytes += len(data)
            return
        self.full = True
        if not self.kept:  # not even one whole line fits: show the start of the first
            self.kept.append(data[: self.cap])
            self.kept_bytes = min(len(data), self.cap)

    def render(self, errors: Errors, reserve: int = 0) -> str:
        """The reply: output then error lines (like stderr on a terminal), within the cap less
        ``reserve`` bytes (kept for a line that ends the reply). Error lines take at most half of
        it when the output needs the rest, and are never cut away."""
        cap = max(self.cap - reserve, 0)
        err_lines = _fit_lines(errors.lines, cap - min(self.total, cap // 2))
        if errors.dropped or len(err_lines) < len(errors.lines):
            more = errors.dropped + len(errors.lines) - len(err_lines)
            err_lines.append(f"[{more:,} more error lines not shown]")
        err_bytes = sum(len(line.encode("utf-8", "replace")) + 1 for line in err_lines)
        room = max(cap - err_bytes, 0) if err_lines else cap
        out = self._shown(room)
        return "\n".join(part for part in (out, *err_lines) if part)

    def _shown(self, room: int) -> str:
        data = b"".join(self.kept)
        if self.total <= room:
            return data.decode("utf-8", "ignore").rstrip("\n")
        cut = data[:room]
        if b"\n" in cut:  # whole lines only, when there is at least one
            cut = cut[: cut.rindex(b"\n") + 1]
        shown = cut.decode(errors="ignore")  # never split a UTF-8 character
        note = (f"{TRUNCATED} showed {len(shown.encode()):,} of {self.total:,} bytes; "
                "narrow with grep or page with head -n/tail -n]")
        return shown.rstrip("\n") + "\n" + note


def _fit_lines(lines: list[str], room: int) -> list[str]:
    shown, used = [], 0
    for line in lines:
        size = len(line.encode("utf-8", "replace")) + 1
        if used + size > room:
            break
        shown.append(line)
        used += size
    return shown


_STATM: tuple[int, int] | None = None  # (pid, fd) of /proc/self/statm, opened once per process


def memory_in_use() -> int:
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
