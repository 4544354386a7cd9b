"""The consoles every command prints on, and the one way a command fails.

Titles, answers, ids and error messages carry document text: it is printed with no ``:emoji:``
codes, no hard breaks inside ids and paths, and markup or terminal control characters inert.
"""

from __future__ import annotations

import re
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape as _escape_markup

out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

# Characters that steer a terminal rather than print: C0/C1 controls (ANSI escapes, carriage
# returns that overwrite a line) and bidirectional overrides that reorder what is shown.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with terminal control characters shown as escapes (\\x1b), newlines and tabs kept."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                            else f"\\u{ord(m.group()):04x}", text)


def escape(text: str) -> str:
    """Document-derived text for Rich: printed literally, markup and control characters inert."""
    return _escape_markup(printable(text))


def fail(message: str, code: int = 2) -> NoReturn:
    """End the command with ``error: MESSAGE`` on one line of stderr and exit status ``code``
    (2: the arguments or the input are wrong; 1: the work itself failed)."""
    err.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


TREE_HELP = "compiled tree (the --out of c2s compile)"
