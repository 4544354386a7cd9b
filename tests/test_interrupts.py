"""Interrupting a compile: Ctrl-C ends it with one line and exit status 130 wherever it lands,
and the rerun resumes."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from .test_ingest import write


def _as_from_a_terminal() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _start_compile(tmp_path: Path):
    import subprocess

    corpus = tmp_path / "corpus"
    for i in range(120):  # enough that the embeddings are still running when the signal comes
        write(corpus / f"note-{i}.md", f"# Note {i}\n\n" + " ".join(f"refund policy case {i} step {j}." for j in range(60)))
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1"}
    cli = Path(sys.executable).parent / "c2s"
    command = [str(cli), "compile", str(corpus), "--corpus", "big", "--out", str(tmp_path / "out")]
    # As from a terminal: a test runner started in the background inherits an ignored SIGINT, and
    # a process mask that blocks it would keep the signal pending until the compile had finished.
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=_as_from_a_terminal)
    return proc, command, env


def _interrupted(proc) -> str:
    import signal

    assert proc.poll() is None, "the compile ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    assert output.strip().splitlines()[-1] == "interrupted; rerun to resume" and "Traceback" not in output
    return output


def test_ctrl_c_ends_a_compile_with_one_line_and_130(tmp_path):
    import subprocess

    proc, command, env = _start_compile(tmp_path)
    deadline = time.monotonic() + 120
    stages = tmp_path / "home" / "artifacts" / "big" / "stages"
    while not (stages / "doc_cards.json").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    # Once the cards stage has finished, inside the embeddings (~6 s of them on 2 cores).
    time.sleep(1.0)
    _interrupted(proc)
    # The rerun resumes: what was embedded before the interrupt comes from the cache.
    rerun = subprocess.run([*command, "--json"], env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert json.loads(rerun.stdout)["stats"]["documents"]["accepted"] == 120


def test_ctrl_c_while_the_encoder_loads_ends_the_compile_with_130(tmp_path):
    """Torch's import is C++ calling back into Python: a Ctrl-C landing there was either lost
    (the compile ran to the end and exited 0) or aborted the process with a core dump."""
    proc, _, _ = _start_compile(tmp_path)
    for line in proc.stdout:
        if "doc_embeddings 0/" in line:  # the stage has started; the encoder loads next (seconds)
            break
    time.sleep(0.2)
    _interrupted(proc)


def test_interrupts_held_while_the_encoder_loads_are_delivered_after_it():
    import signal

    from c2s_core.encoder import interrupts_held

    class Interrupted(Exception):
        pass

    def interrupt(_signum, _frame):
        raise Interrupted

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        reached_the_end = False
        with pytest.raises(Interrupted):
            with interrupts_held():
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGINT)
                reached_the_end = True  # the block ran on: the signals were held, not raised
        assert reached_the_end and signal.getsignal(signal.SIGINT) is interrupt
        # An ignored signal stays ignored: nothing is held, nothing delivered afterwards.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with interrupts_held():
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_recorded_between_stages_stops_the_next_one():
    """Dagster only records a SIGINT that lands between steps (and forgets it when the run ends);
    the next stage takes it up instead of running."""
    import signal

    from dagster import DagsterExecutionInterruptedError
    from dagster._utils.interrupts import capture_interrupts

    from c2s_pipeline.assets._stage import Stage
    from c2s_pipeline.recipe import stage

    with capture_interrupts():
        Stage(stage("documents"), context=None, workspace=None)  # nothing recorded: the stage starts
        os.kill(os.getpid(), signal.SIGINT)  # recorded, not raised
        with pytest.raises(DagsterExecutionInterruptedError, match="interrupted before doc_cards"):
            Stage(stage("doc_cards"), context=None, workspace=None)
        Stage(stage("doc_embeddings"), context=None, workspace=None)  # taken up once
