"""c2s compiler: a document corpus → a navigable tree of SKILL.md / INDEX.md files.

Importing this package stays light (no Dagster, no torch); the Dagster definitions live in
``c2s_pipeline.definitions`` and the CLI in ``c2s_pipeline.cli``.
"""

__version__ = "0.1.0"
