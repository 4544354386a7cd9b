"""The ``c2s`` command line: the one package that owns typer and rich. It sits on top of the
compiler (:mod:`c2s_pipeline`) and the agent (:mod:`c2s_agent`), which never import it."""
