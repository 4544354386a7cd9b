"""Where command lines run: worker processes whose budgets the operating system enforces.

Each worker is a Python process started once and reused (a pool, shared by every
:class:`~c2s_agent.sandbox.Sandbox` of this process), that reads one request a line on its
stdin and answers one reply a line on its stdout (JSON). Before each command it sets

- ``RLIMIT_AS``: its address space may grow by at most the command's memory budget less a
  headroom (:data:`MAPPED_HEADROOM_BYTES`): past it an allocation fails (``MemoryError``),
  whatever the command, and the reply is ``stopped: ...``. The headroom is for pages the worker
  had mapped but never touched (its stack's unused depth, the allocator's free tail, about
  1.2 MiB in a fresh worker), which a command can make resident without growing the address
  space, so its resident memory, too, stays within the budget;
- ``RLIMIT_CPU``: past the command's time budget (+1 s) the kernel ends the worker (SIGXCPU);

and the caller kills a worker that has not answered by the command's deadline (+ a grace), so
no command outlives its budget, whatever it does inside a C call. A worker that died, was
killed, or grew is replaced by a fresh one; the calling process never holds a command's memory.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .commands import Interpreter, Reply
from .limits import NARROW, memory_in_use, stopped_for_memory, stopped_for_time

GRACE_S = 2.0  # past a command's own deadline before its worker is killed
BOOT_TIMEOUT_S = 60.0  # a worker's start (imports) on a loaded machine
MAPPED_HEADROOM_BYTES = 2 << 20  # see the module docstring; at most an eighth of a budget
RECYCLE_BYTES = 64 << 20  # a worker that stays this much larger than it started is replaced
MAX_INTERPRETERS = 16  # per worker, by tree and settings
_READY = b'{"ready": true}\n'
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])  # the folder holding c2s_agent
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from c2s_agent.sandbox.worker import serve; serve()")


@dataclass(frozen=True)
class Settings:
    """One sandbox's budgets, sent with each command line."""

    max_output_bytes: int
    regex_timeout_s: float
    time_budget_s: float
    memory_budget_bytes: int


# -- the worker process -------------------------------------------------------------------


def serve() -> None:
    """The worker's loop: a request a line in, a reply a line out, until stdin closes."""
    import resource

    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but replies may reach the caller's pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides when a worker ends
    interpreters: dict[tuple, Interpreter] = {}
    started_rss = memory_in_use()
    replies.write(_READY)
    replies.flush()
    for raw in requests:
        request = json.loads(raw)
        settings = Settings(**request["settings"])
        key = (request["root"], settings)
        interpreter = interpreters.pop(key, None) or Interpreter(Path(request["root"]), **vars(settings))
        interpreters[key] = interpreter  # most recently used last
        while len(interpreters) > MAX_INTERPRETERS:
            interpreters.pop(next(iter(interpreters)))
        _reset_peak()
        rss_start = memory_in_use()
        _limit(resource, settings)
        try:
            reply = interpreter.run(request["line"])
        finally:
            _unlimit(resource)
        grew = memory_in_use() - started_rss > RECYCLE_BYTES
        stopped = reply.text.endswith(stopped_for_memory(settings.memory_budget_bytes))
        replies.write(json.dumps({
            "text": reply.text, "status": reply.status, "bytes_read": reply.bytes_read,
            "rss_start": rss_start, "rss_peak": _peak(), "retire": grew or stopped,
        }).encode("ascii") + b"\n")
        replies.flush()


def _limit(resource, settings: Settings) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    size = _address_space()
    if size:
        budget = settings.memory_budget_bytes
        soft = size + budget - min(MAPPED_HEADROOM_BYTES, budget // 8)
        resource.setrlimit(resource.RLIMIT_AS, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime + settings.time_budget_s) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _unlimit(resource) -> None:
    for limit in (resource.RLIMIT_AS, resource.RLIMIT_CPU):
        _, hard = resource.getrlimit(limit)
        resource.setrlimit(limit, (hard, hard))


def _address_space() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _reset_peak() -> None:
    """Start the kernel's peak resident size (VmHWM) afresh, so it measures this command."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak() -> int:
    return proc_status_bytes(os.getpid(), "VmHWM")


def proc_status_bytes(pid: int, field: str) -> int:
    """A size from /proc/PID/status (VmRSS, VmHWM ...) in bytes; 0 where there is none."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(field.encode() + b":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


# -- the caller's side --------------------------------------------------------------------


class WorkerGone(Exception):
    """The worker ended before it answered: ``str`` is the reply the command gets."""


class Worker:
    """One worker process, seen from the caller."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, _PACKAGE_PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True)  # Ctrl-C is the caller's
        self._buffer = b""
        self.ready = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, root: Path, line: str, settings: Settings) -> dict:
        if not self.ready:
            if self._read_line(time.monotonic() + BOOT_TIMEOUT_S) != _READY.strip():
                raise WorkerGone("error: the sandbox could not start; retry the command")
            self.ready = True
        request = json.dumps({"root": str(root), "line": line, "settings": vars(settings)})
        try:
            self.proc.stdin.write(request.encode("ascii") + b"\n")
            self.proc.stdin.flush()
        except OSError:
            raise WorkerGone("error: the sandbox could not start; retry the command") from None
        deadline = time.monotonic() + settings.time_budget_s + GRACE_S
        raw = self._read_line(deadline, settings)
        return json.loads(raw)

    def _read_line(self, deadline: float, settings: Settings | None = None) -> bytes:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                self.kill()
                raise WorkerGone(stopped_for_time(settings.time_budget_s) if settings
                                 else "error: the sandbox could not start; retry the command")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise WorkerGone(self._why_gone(settings))
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _why_gone(self, settings: Settings | None) -> str:
        code = self.proc.wait()
        if settings is None:
            return "error: the sandbox could not start; retry the command"
        if code == -signal.SIGXCPU:
            return f"stopped: this command used over {settings.time_budget_s:g} s of CPU time; {NARROW}"
        # Anything else that ends a worker mid-command is a budget the system enforced.
        return stopped_for_memory(settings.memory_budget_bytes)

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        self._close_pipes()

    def close(self) -> None:
        """Ask the worker to end (its stdin closes), without waiting for it."""
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass


class WorkerPool:
    """Workers shared by every sandbox of this process: one per command running at once (up to
    ``max_workers``, then calls wait their turn), idle ones kept for the next call."""

    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers = max_workers or max(4, os.cpu_count() or 1)
        self._cond = threading.Condition()
        self._idle: list[Worker] = []
        self._busy = 0
        self._pid = os.getpid()

    def prestart(self) -> None:
        """Have a worker starting (or idle) now, so the next call need not wait for one."""
        with self._cond:
            self._forked()
            if not self._idle and self._busy < self.max_workers:
                self._idle.append(Worker())

    def run(self, root: Path, line: str, settings: Settings) -> tuple[Reply, dict]:
        """Run ``line`` in a worker; (reply, the worker's report: pid, rss_start, rss_peak)."""
        worker = self._take()
        keep = False
        try:
            answer = worker.call(root, line, settings)
            keep = not answer.pop("retire")
            report = {"pid": worker.pid, "rss_start": answer.pop("rss_start"), "rss_peak": answer.pop("rss_peak")}
            return Reply(answer["text"], answer["status"], answer["bytes_read"]), report
        except WorkerGone as e:
            return Reply(str(e), 2), {"pid": worker.pid}
        finally:
            self._give(worker, keep)

    def _take(self) -> Worker:
        with self._cond:
            self._forked()
            while True:
                while self._idle:
                    worker = self._idle.pop()
                    if worker.alive():
                        self._busy += 1
                        return worker
                    worker.kill()
                if self._busy < self.max_workers:
                    self._busy += 1
                    return Worker()
                self._cond.wait()

    def _give(self, worker: Worker, keep: bool) -> None:
        with self._cond:
            self._busy -= 1
            if keep and worker.alive() and len(self._idle) < self.max_workers:
                self._idle.append(worker)
            else:
                worker.close() if worker.alive() else worker.kill()
                if not self._idle and self._busy < self.max_workers:
                    self._idle.append(Worker())  # its replacement starts now, not at the next call
            self._cond.notify()

    def _forked(self) -> None:
        if self._pid != os.getpid():  # a forked child never shares its parent's workers
            self._idle, self._busy, self._pid = [], 0, os.getpid()

    def close(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()
            try:
                worker.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                worker.kill()


POOL = WorkerPool()
atexit.register(POOL.close)
