"""The bundled encoder gives a text the same vector whatever is encoded beside it, so a compile
split into shards, a recompile of a few documents and a question at query time all embed the
same text to the same bits."""

from __future__ import annotations

import numpy as np
import pytest

from c2s_core.encoder import Encoder

from .conftest import SAMPLE_CORPUS


@pytest.fixture(scope="module")
def paragraphs() -> list[str]:
    """Paragraphs of the bundled sample corpus: many token lengths, headings to long steps."""
    texts = [p.strip() for f in sorted(SAMPLE_CORPUS.rglob("*.md")) for p in f.read_text(encoding="utf-8").split("\n\n")
             if p.strip()]
    return texts[::7][:120]


def test_a_text_embeds_to_the_same_bits_in_any_batch(paragraphs):
    encoder = Encoder()
    together = encoder.encode(paragraphs)
    assert together.shape == (len(paragraphs), 384)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    lengths = set(encoder.token_lengths(paragraphs))
    assert len(lengths) > 20  # batches would pad most of these texts, were they mixed
    for size in (1, 7):  # alone (a batch of few token rows), and beside a few others
        apart = np.concatenate([encoder.encode(paragraphs[i : i + size]) for i in range(0, len(paragraphs), size)])
        assert np.array_equal(apart, together), size
    # In another order too: the rows follow the texts.
    order = np.random.default_rng(0).permutation(len(paragraphs))
    assert np.array_equal(encoder.encode([paragraphs[i] for i in order]), together[order])
