"""Evaluation harness: the navigator against flat retrieval, RAPTOR and a search agent on a QA set.

    c2s eval --tree OUT --qa qa.jsonl --methods navigator,bm25,dense,hybrid,raptor,agentic --out results/

or from Python::

    from c2s_agent.evaluation import evaluate, load_qa
    run = evaluate("OUT", load_qa("qa.jsonl"), methods=["navigator", "bm25"])

Importing this package stays light: bm25s, the encoder and matplotlib load on first use.
"""

from .metrics import QAError, QAItem, load_qa
from .runner import EvalRun, evaluate

__all__ = ["EvalRun", "QAError", "QAItem", "evaluate", "load_qa"]
