"""One compile at a time per corpus and per output folder, and no run left STARTED by a compile
process that died.

``c2s compile`` holds two ``flock`` locks in ``$DAGSTER_HOME/locks/`` for the length of its run
and writes a compile id into them, which its run also carries as a tag. The kernel releases a
lock when its process dies, however it dies; so a lock that can be taken while a run with its
compile id is still in flight means that run's process is gone, and the run is failed.

Its run also carries a heartbeat (a tag the process rewrites every few seconds), which the
instance's run monitoring enforces (``c2s_pipeline.launcher``): the daemon fails a CLI run whose
heartbeat stopped, so no other run of the corpus waits behind a dead one for a sensor tick or the
next ``c2s compile``. A run failed either way is tagged ``c2s/killed``: the sensor retries it once.
"""

from __future__ import annotations

import fcntl
import os
import signal
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

from c2s_core.text import sha256_hex
from .workspace import CorpusSpec

COMPILE_ID_TAG = "c2s/compile_id"  # ties a CLI run to the lock its process holds
HEARTBEAT_TAG = "c2s/heartbeat"  # unix time of the CLI run's last sign of life
KILLED_TAG = "c2s/killed"  # the run's process died without finishing (SIGKILL, the OOM killer)
CORPUS_TAG = "c2s/corpus"
PARTITION_TAG = "dagster/partition"  # every compile asset is partitioned by corpus
IN_FLIGHT = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
             DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]


class LockBusy(RuntimeError):
    """Another compile holds the corpus or its output folder; the message names its run."""


def _lock_files(home: Path, spec: CorpusSpec) -> list[Path]:
    folder = Path(home) / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    out_key = sha256_hex(Path(spec.out).resolve().as_posix())[:16]
    return [folder / f"corpus-{spec.name}.lock", folder / f"out-{out_key}.lock"]


def runs_in_flight(instance: DagsterInstance, corpus: str) -> list[DagsterRun]:
    """Runs of the corpus not yet finished: c2s's own (tagged with the corpus) and any other run
    of its partition (a backfill, the UI)."""
    found = {run.run_id: run for tag in (CORPUS_TAG, PARTITION_TAG)
             for run in instance.get_runs(RunsFilter(tags={tag: corpus}, statuses=IN_FLIGHT), limit=5)}
    return sorted(found.values(), key=lambda run: run.run_id)


def _busy_message(spec: CorpusSpec, runs: list[DagsterRun]) -> str:
    run = runs[0].run_id if runs else "starting"
    return f"another compile of {spec.name} is running (run {run}); wait for it or stop it, then rerun"


@contextmanager
def compile_lock(home: Path, spec: CorpusSpec, instance: DagsterInstance):
    """Hold the corpus's and its output folder's lock for a compile; yields its compile id.

    Raises ``LockBusy`` at once when another compile holds either, or when a run of the corpus
    that no c2s process holds (the daemon's, the UI's) is in flight."""
    handles = []
    try:
        for path in _lock_files(home, spec):
            handle = open(path, "a+")
            handles.append(handle)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip()
                raise LockBusy(_busy_message(spec, _runs_of(instance, holder) or runs_in_flight(instance, spec.name)))
            handle.seek(0)
            _fail_abandoned(instance, handle.read().strip())
        busy = [r for r in runs_in_flight(instance, spec.name) if COMPILE_ID_TAG not in r.tags]
        if busy:
            raise LockBusy(_busy_message(spec, busy))
        compile_id = uuid.uuid4().hex
        for handle in handles:
            handle.seek(0)
            handle.truncate()
            handle.write(compile_id)
            handle.flush()
        yield compile_id
    finally:
        for handle in handles:
            handle.close()  # closing releases the lock


def fail_abandoned_runs(home: Path, spec: CorpusSpec, instance: DagsterInstance) -> list[str]:
    """Fail the corpus's in-flight CLI runs whose compile process is gone; returns their run ids.
    (What the sensor and the schedule call before they count a corpus as busy.)"""
    path = _lock_files(home, spec)[0]
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return []  # a live compile holds it
        handle.seek(0)
        return _fail_abandoned(instance, handle.read().strip())


def _runs_of(instance: DagsterInstance, compile_id: str) -> list[DagsterRun]:
    if not compile_id:
        return []
    return list(instance.get_runs(RunsFilter(tags={COMPILE_ID_TAG: compile_id}, statuses=IN_FLIGHT)))


def _fail_abandoned(instance: DagsterInstance, compile_id: str) -> list[str]:
    """The lock was free, so the process that last held it is gone: its unfinished runs died."""
    failed = []
    for run in _runs_of(instance, compile_id):
        fail_killed_run(instance, run, "the c2s compile process running this run exited without finishing "
                                       "(killed?); rerun the compile, or re-execute this run from failure")
        failed.append(run.run_id)
    return failed


def fail_killed_run(instance: DagsterInstance, run: DagsterRun, message: str) -> None:
    """Mark ``run`` as killed (the sensor retries such a run once) and fail it."""
    instance.add_run_tags(run.run_id, {KILLED_TAG: "true"})
    instance.report_run_failed(run, message)


def heartbeat_seconds() -> float:
    """How often a CLI run beats (``$C2S_HEARTBEAT_SECONDS``, default 10)."""
    return float(os.environ.get("C2S_HEARTBEAT_SECONDS") or 10)


@contextmanager
def heartbeat(instance: DagsterInstance, run_id: str, every: float | None = None):
    """Rewrite the run's heartbeat tag every ``every`` seconds while the block runs, from a
    daemon thread: it stops with the process, however the process ends."""
    every = heartbeat_seconds() if every is None else every
    stop = threading.Event()

    def beat() -> None:
        # Ctrl-C must reach the main thread, where Dagster turns it into an interrupted step: with
        # this thread able to take it, a Ctrl-C during a stage went unanswered and the compile ran on.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        while not stop.wait(every):
            try:
                instance.add_run_tags(run_id, {HEARTBEAT_TAG: str(int(time.time()))})
            except Exception:  # noqa: BLE001 - a missed beat is retried; the run must go on
                continue

    thread = threading.Thread(target=beat, name=f"c2s-heartbeat-{run_id[:8]}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
