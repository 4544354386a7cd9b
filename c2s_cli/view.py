"""``c2s view``: a static HTML view of a compiled tree."""

from __future__ import annotations

from pathlib import Path

import typer

from .console import TREE_HELP, fail


def view(
    tree: Path = typer.Argument(..., help=TREE_HELP),
    out: Path = typer.Option(..., "--out", help="folder for the page (new, empty, or a previous view)"),
) -> None:
    """Write a static HTML view of TREE (outline, treemap, summaries, entities, title search) that
    opens from disk with no server; prints the path of its index.html."""
    from c2s_core.tree import TreeError
    from c2s_core.view import ViewError, build_view

    try:
        index = build_view(tree, out)
    except (TreeError, ViewError) as e:
        fail(str(e))
    typer.echo(str(index))


def register(app: typer.Typer) -> None:
    """Add ``view`` to ``app``."""
    app.command("view")(view)
