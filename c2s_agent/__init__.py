"""c2s agent: answer questions by navigating a compiled skill tree.

    from c2s_agent import answer
    result = answer("How do I get a refund?", "out/tree")

Importing this package stays light (the sandbox's worker processes import only
:mod:`c2s_agent.sandbox`): the agent, the encoder and the navigator load on first use.
"""

__all__ = ["AnswerResult", "answer"]


def __getattr__(name: str):
    if name in __all__:
        from . import agent

        return getattr(agent, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
