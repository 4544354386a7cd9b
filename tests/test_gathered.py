"""Many navigations at once: their embeddings are encoded together, and every result is the one
navigating the questions one after another gives."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from c2s_core.navigation.gathered import GatheredEmbed, gathered_map
from c2s_core.text import sha256_hex


class CountingEmbed:
    """A deterministic stand-in for the encoder (a text's vector from its hash) that records
    each call's texts."""

    def __init__(self, fail_on: str | None = None):
        self.calls: list[list[str]] = []
        self.threads: set[str] = set()
        self.fail_on = fail_on
        self.lock = threading.Lock()

    def __call__(self, texts):
        with self.lock:
            self.calls.append(list(texts))
            self.threads.add(threading.current_thread().name)
        if self.fail_on in texts:
            raise ValueError(f"cannot embed {self.fail_on!r}")
        rows = [np.frombuffer(bytes.fromhex(sha256_hex(t)), dtype=np.uint8).astype(np.float32) for t in texts]
        return np.stack([r / np.linalg.norm(r) for r in rows])


def walk(question: str, embed) -> list[float]:
    """A navigation's shape: several rounds of embedding, each depending on the last's scores."""
    qvec = embed([question])[0]
    trail = []
    for depth in range(3):
        rows = [f"{question} row {depth}.{i}" for i in range(4)] + [f"shared row {depth}"]
        scores = embed(rows) @ qvec
        best = int(np.argmax(scores))
        trail.append(round(float(scores[best]), 6))
        question = rows[best]
        qvec = embed([question])[0]
    return trail


def test_gathered_results_are_the_one_by_one_results_in_far_fewer_encoder_calls():
    questions = [f"question {i}" for i in range(40)]
    alone = CountingEmbed()
    expected = [walk(q, alone) for q in questions]
    gathered = CountingEmbed()
    progress = []
    assert gathered_map(walk, questions, gathered, workers=8, on_done=lambda d, t: progress.append((d, t))) == expected
    # Rounds, not calls: each round encodes what all eight running navigations asked for.
    assert len(gathered.calls) < len(alone.calls) / 4
    assert progress == [(i, 40) for i in range(1, 41)]
    # Nothing is encoded twice: the rows every navigation shares are encoded once.
    encoded = [t for call in gathered.calls for t in call]
    assert len(encoded) == len(set(encoded))
    assert sum(t in ("shared row 0", "shared row 1", "shared row 2") for t in encoded) == 3
    # Encoded in the calling thread only (torch's thread pool belongs to the thread calling it).
    assert gathered.threads == {threading.current_thread().name}


def test_known_vectors_are_not_encoded_again():
    embed = CountingEmbed()
    known = {"question 0": embed(["question 0"])[0]}
    embed.calls.clear()
    gathered_map(lambda q, e: e([q, "other"]), ["question 0"], embed, known=known)
    assert embed.calls == [["other"]]


def test_a_failed_round_raises_in_every_navigation_waiting_on_it():
    embed = CountingEmbed(fail_on="poison")
    shared = GatheredEmbed(embed, workers=3)
    raised: list[str] = []

    def ask(texts):
        try:
            shared(texts)
        except RuntimeError as exc:
            raised.append(f"{exc} ({exc.__cause__})")
        finally:
            shared.finished()

    threads = [threading.Thread(target=ask, args=(texts,)) for texts in (["a"], ["poison"], ["b", "a"])]
    for t in threads:
        t.start()
    shared.serve()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert raised == ["embedding the navigations' texts failed (cannot embed 'poison')"] * 3
    assert len(embed.calls) == 1 and set(embed.calls[0]) == {"a", "poison", "b"}


def test_an_interrupted_round_stops_every_navigation():
    def interrupted(texts):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gathered_map(walk, [f"question {i}" for i in range(10)], interrupted, workers=4)
    assert {t.name for t in threading.enumerate() if t.name.startswith("navigate-")} == set()


def test_ctrl_c_while_the_navigations_run_stops_them_all():
    """Ctrl-C reaching the thread that serves the rounds while it waits for them: the map ends
    with KeyboardInterrupt instead of hanging on navigations waiting for a round. Run apart, so
    a hang fails the test instead of the suite."""
    script = textwrap.dedent("""
        import os, signal, threading, time
        import numpy as np
        from c2s_core.navigation.gathered import gathered_map

        # A process started with SIGINT ignored (as a test runner's worker may start it) keeps
        # ignoring it: Python installs its Ctrl-C handler only where SIGINT is not ignored.
        signal.signal(signal.SIGINT, signal.default_int_handler)

        def work(question, embed):
            if question == 3:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)
            return embed([f"text {question}"])

        try:
            gathered_map(work, list(range(8)), lambda texts: np.ones((len(texts), 2)), workers=4)
        except KeyboardInterrupt:
            print("interrupted", sorted(t.name for t in threading.enumerate() if t.name.startswith("navigate-")))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "interrupted []", done.stderr


def test_an_error_in_one_navigation_stops_the_map_without_hanging_the_others():
    def work(question, embed):
        embed([question])
        if question == "q3":
            raise KeyError("no such node")
        time.sleep(0.01)
        return embed([question + " again"])

    with pytest.raises(KeyError, match="no such node"):
        gathered_map(work, [f"q{i}" for i in range(20)], CountingEmbed(), workers=4)
