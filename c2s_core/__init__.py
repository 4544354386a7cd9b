"""c2s core: what the compiler and the agent share, with neither of them nor Dagster underneath.

The on-disk layout contract (:mod:`.layout`), the compiled-tree reader (:mod:`.tree`), nav rows
written and parsed in one place (:mod:`.navrows`), the document store, text and term helpers, the
encoder and its per-item cache, the term and search indexes, the LLM clients and compile tasks
(:mod:`.llm`), the navigation engine (:mod:`.navigation`) and the HTML view of a tree.
Importing this package stays light (no torch, no Dagster).
"""
