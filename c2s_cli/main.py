"""The ``c2s`` app: every command group registered on one typer app."""

from __future__ import annotations

import typer

from . import ask, compile, corpus, eval, export, publish, serve, view

app = typer.Typer(help="c2s — compile a document corpus into a navigable skill tree, and serve it.",
                  no_args_is_help=True, add_completion=False)


@app.callback()
def _root() -> None:
    """Compile corpora into skill trees (c2s compile) and work with the compiled trees."""


# The order of `c2s --help`: compiling first, then what works with a compiled tree.
for _group in (compile, corpus, ask, view, serve, export, publish, eval):
    _group.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
