"""The agent's ``code_execution`` tool: a shell-like interpreter confined to a compiled tree.

The agent browses the tree with the commands it knows from bash (ls, cat, head, tail, grep,
find, wc, sort, uniq, echo, pwd) joined by ``|`` pipes, several pipelines in one line joined by ``;``
(run in order, one reply) and ``for`` loops over words (a program counting many things asks once)::

    sb = Sandbox("out/tree")
    print(sb.run("grep -ril refund skills | head -20"))
    print(sb.run("grep -rih '\\<refund' skills/billing | wc -l; grep -rih '\\<refund' skills/orders | wc -l"))
    print(sb.run("for d in skills/billing skills/orders; do grep -rih '\\<refund' $d | wc -l; done"))

Everything is interpreted in pure Python; nothing reaches a real shell. Document text may carry
prompt injection, so the worst a command line can do is read files that are already inside the
tree: paths that leave it, symlinks, hidden files, redirections, substitutions and ``&&`` / ``||``
chaining are refused, and every command is bounded in files visited, bytes read, pattern size,
regex time, wall time, memory and output size. Command lines run in worker processes whose
memory and CPU time the operating system limits (:mod:`.worker`), so no command, however it
is built, can take the calling process down. ``manifest.json`` is shown with host paths redacted
(the file on disk is unchanged).

The package, by job: :mod:`.parsing` (the command line), :mod:`.patterns` (grep's regexes,
costed), :mod:`.files` (paths and reads inside the tree), :mod:`.commands` (the interpreter),
:mod:`.limits` (budgets and the reply's size), :mod:`.worker` (the processes they run in).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .commands import Interpreter, Reply
from .files import REDACTED_PATH, STDIN, redact_host_paths
from .limits import (MAX_CALL_MEMORY, MAX_CALL_SECONDS, MAX_COMMANDS, MAX_FILES, MAX_LINE_CHARS, MAX_PATTERN_CHARS,
                     MAX_PATTERN_EXPANSION, MAX_PATTERN_NESTING, MAX_RUNS, MAX_SCAN_BYTES, MAX_STAGES, TRUNCATED,
                     SandboxError, Stopped, stop_line)
from .parsing import SUPPORTED
from .worker import POOL, Settings

__all__ = ["MAX_CALL_MEMORY", "MAX_CALL_SECONDS", "MAX_COMMANDS", "MAX_FILES", "MAX_LINE_CHARS", "MAX_PATTERN_CHARS",
           "MAX_PATTERN_EXPANSION", "MAX_PATTERN_NESTING", "MAX_RUNS", "MAX_SCAN_BYTES", "MAX_STAGES", "REDACTED_PATH",
           "STDIN", "SUPPORTED", "TRUNCATED", "Interpreter", "Reply", "Sandbox", "SandboxError", "SandboxStats",
           "Stopped", "redact_host_paths", "stop_line"]


@dataclass
class SandboxStats:
    bytes_read: int = 0  # file content read, for cost accounting
    commands: int = 0  # command lines run, refused ones included


class Sandbox:
    """Run shell-like command lines over the tree at ``root``; see the module docstring.

    ``isolated=False`` runs them in this process instead of a worker: the same interpreter and
    checks, without the operating system's limits (for tests that watch what it touches).
    Not thread-safe: use one instance per agent (they share the worker processes).
    """

    def __init__(self, root: str | os.PathLike[str], max_output_bytes: int = 8192,
                 regex_timeout_s: float = 1.0, time_budget_s: float = MAX_CALL_SECONDS,
                 memory_budget_bytes: int = MAX_CALL_MEMORY, *, isolated: bool = True) -> None:
        self.root = Path(root).resolve(strict=True)
        if not self.root.is_dir():
            raise NotADirectoryError(str(root))
        self.settings = Settings(max_output_bytes, regex_timeout_s, time_budget_s, memory_budget_bytes)
        self.isolated = isolated
        self.stats = SandboxStats()
        # Of the last command line, as a shell's $?: 0 ran, 1 ran but reported errors (a missing
        # file), 2 refused, stopped or failed.
        self.last_status = 0
        # Where the last command ran: the worker's pid and, measured there through /proc, its
        # resident size as the command started and its peak while it ran (bytes).
        self.last_run: dict = {}
        if isolated:
            POOL.prestart()
            self._interpreter = None
        else:
            self._interpreter = Interpreter(self.root, **vars(self.settings))

    @property
    def max_output_bytes(self) -> int:
        return self.settings.max_output_bytes

    @property
    def time_budget_s(self) -> float:
        return self.settings.time_budget_s

    @property
    def memory_budget_bytes(self) -> int:
        return self.settings.memory_budget_bytes

    def run(self, command: str) -> str:
        """Run one command line; always returns text (refusals, stops and errors included)."""
        self.stats.commands += 1
        if self._interpreter is not None:
            reply, self.last_run = self._interpreter.run(str(command)), {"pid": os.getpid()}
        else:
            reply, self.last_run = POOL.run(self.root, str(command), self.settings)
        self.stats.bytes_read += reply.bytes_read
        self.last_status = reply.status
        return reply.text
