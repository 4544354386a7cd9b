"""The consoles every command prints on, and the one way a command fails.

Titles, answers, ids and error messages carry document text: it is printed with no ``:emoji:``
codes, no hard breaks inside ids and paths, and markup or terminal control characters inert.
"""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape as _escape_markup

from c2s_core.text import printable

__all__ = ["err", "escape", "fail", "out", "printable", "TREE_HELP"]

out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def escape(text: str, keep: str = "\n\t") -> str:
    """Document-derived text for Rich: printed literally, markup and control characters inert
    (``keep=""`` also shows newlines and tabs as escapes, for one-line values such as file names)."""
    return _escape_markup(printable(text, keep))


def fail(message: str, code: int = 2) -> NoReturn:
    """End the command with ``error: MESSAGE`` on one line of stderr and exit status ``code``
    (2: the arguments or the input are wrong; 1: the work itself failed)."""
    err.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


TREE_HELP = "compiled tree (the --out of c2s compile)"
