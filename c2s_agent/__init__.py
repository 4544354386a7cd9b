"""c2s agent: answer questions by navigating a compiled skill tree.

    from c2s_agent import answer
    result = answer("How do I get a refund?", "out/tree")

Importing this package stays light: the encoder and the navigator load on first use.
"""

from .agent import AnswerResult, answer

__all__ = ["AnswerResult", "answer"]
