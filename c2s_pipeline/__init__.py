"""c2s compiler: a document corpus → a navigable tree of SKILL.md / INDEX.md files.

Importing this package stays light (no Dagster, no torch); the Dagster definitions live in
``c2s_pipeline.definitions``; the ``c2s`` command line is the ``c2s_cli`` package.
"""

__version__ = "0.1.0"
