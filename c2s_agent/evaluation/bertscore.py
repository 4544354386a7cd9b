"""BERTScore F1 of answers against gold answers, when the optional ``bert-score`` package is
installed (``pip install 'c2s[eval]'``). The model comes from local files only, never a hub:
``$C2S_BERTSCORE_MODEL`` (a directory) or the compiler's bundled all-MiniLM-L6-v2, scored on its
last hidden layer (6 for MiniLM-L6)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence

from .metrics import clean_answer

MODEL_ENV = "C2S_BERTSCORE_MODEL"
NOT_INSTALLED = "not installed"


def installed() -> bool:
    return importlib.util.find_spec("bert_score") is not None


def model_dir() -> str:
    from c2s_core.encoder import bundled_model_dir

    path = os.environ.get(MODEL_ENV) or bundled_model_dir()
    if not os.path.isdir(path):
        raise FileNotFoundError(f"BERTScore model directory not found: {path} (set {MODEL_ENV} to a local model)")
    return path


def f1_scores(answers: Sequence[str], golds: Sequence[str]) -> tuple[list[float], str]:
    """BERTScore F1 per (answer, gold) pair, citations and link targets removed first; and a line
    naming the model and layer."""
    import bert_score
    from transformers import AutoConfig

    path = model_dir()
    layers = AutoConfig.from_pretrained(path).num_hidden_layers  # the last layer: 6 for MiniLM-L6
    described = f"F1 with {path}, layer {layers}"
    if not answers:
        return [], described
    _, _, f1 = bert_score.score([clean_answer(a) for a in answers], [clean_answer(g) for g in golds],
                                model_type=path, num_layers=layers, batch_size=32, verbose=False)
    return [round(float(v), 6) for v in f1], described
