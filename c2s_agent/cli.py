"""Command line for serving a compiled tree: ``ask`` a question, or run a ``shell`` command line
in the agent's sandbox. :func:`register` adds both commands to another typer app (``c2s``)."""

from __future__ import annotations

import re
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape as _escape_markup

app = typer.Typer(help="Ask questions of a compiled c2s tree.", no_args_is_help=True, add_completion=False)
# Titles, answers and ids come from documents: no :emoji: codes, markup only where escaped.
out = Console(highlight=False, soft_wrap=True, emoji=False)  # no hard breaks inside ids and paths
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


TREE_HELP = "compiled tree (the --out of c2s compile)"


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def _tools(tree: Path):
    from .tools import TreeTools
    from c2s_core.tree import TreeError

    try:
        return TreeTools(tree)
    except TreeError as e:
        _fail(str(e))


def ask(
    question: str = typer.Argument(..., help="the question, in quotes"),
    tree: Path = typer.Option(..., "--tree", help=TREE_HELP),
    provider: str = typer.Option("offline", "--provider",
                                 help="who navigates: offline (no LLM), anthropic or openai (OpenAI-compatible)"),
    model: str = typer.Option(None, "--model", help="LLM model (default: claude-sonnet-4-6 / gpt-4.1, or $C2S_AGENT_MODEL)"),
    base_url: str = typer.Option(None, "--base-url",
                                 help="LLM endpoint, e.g. a local vLLM/Ollama server (default: $ANTHROPIC_BASE_URL / $OPENAI_BASE_URL)"),
    max_turns: int = typer.Option(10, "--max-turns", min=1, help="rounds of tool calls allowed"),
    as_json: bool = typer.Option(False, "--json", help="print the full result (answer, citations, trace) as JSON"),
) -> None:
    """Answer QUESTION by navigating the tree; prints the answer, its sources and the path taken."""
    from c2s_core.llm.clients import LLMError

    from .agent import UnknownProviderError, answer

    tools = _tools(tree)
    if not question.strip():
        _fail("the question is empty")
    opts = {k: v for k, v in (("model", model), ("base_url", base_url)) if v}
    if opts and provider == "offline":
        _fail("--model and --base-url are for an LLM provider (--provider anthropic or openai)")
    try:
        result = answer(question, tools, provider=provider, max_turns=max_turns, **opts)
    except (UnknownProviderError, LLMError) as e:
        _fail(str(e))
    if as_json:
        typer.echo(result.to_json())
        return
    out.print(escape(result.answer))
    out.print()
    if result.citations:
        out.print("[bold]Sources[/]")
        for doc_id in result.citations:
            doc = tools.tree.store.get(doc_id)
            out.print(f"  [cyan]{escape(doc_id)}[/]  {escape(doc.title) if doc else '[red](unknown document)[/]'}")
    for flag in result.flags:
        out.print(f"[yellow]warning:[/] {escape(flag)}")
    u = result.usage
    out.print(f"[dim]path: {escape(result.path)}[/]")
    out.print(f"[dim]{result.turns} turns · {u['tool_calls']} tool calls · {u['nav_files_read']} nav files "
              f"({u['nav_bytes']:,} B) · {u['documents_fetched']} documents read · {u['seconds']:.1f} s[/]")
    if "llm_calls" in u:
        out.print(f"[dim]{escape(str(u['model']))}: {u['llm_calls']} calls · {u['input_tokens']:,} in · "
                  f"{u['output_tokens']:,} out · cache {u['cache_read_tokens']:,} read / "
                  f"{u['cache_write_tokens']:,} written · ${u['cost_usd']:.4f}[/]")


def shell(
    command: str = typer.Argument(..., help='one command line, e.g. "grep -ril refund skills | head"'),
    tree: Path = typer.Option(..., "--tree", help=TREE_HELP),
) -> None:
    """Run COMMAND in the agent's code_execution sandbox over the tree and print its output.
    Exits 1 when the command reported errors (a missing file), 2 when it was refused or failed."""
    tools = _tools(tree)
    typer.echo(printable(tools.code_execution(command)))
    if tools.sandbox.last_status:
        raise typer.Exit(tools.sandbox.last_status)


# -- command line ----------------------------------------------------------------------------------

def view(
    tree: Path = typer.Argument(..., help="compiled tree (the --out of c2s compile)"),
    out: Path = typer.Option(..., "--out", help="folder for the page (new, empty, or a previous view)"),
) -> None:
    """Write a static HTML view of TREE (outline, treemap, summaries, entities, title search) that
    opens from disk with no server; prints the path of its index.html."""
    from c2s_core.tree import TreeError
    from c2s_core.view import ViewError, build_view

    try:
        index = build_view(tree, out)
    except (TreeError, ViewError) as e:
        _fail(str(e))
    typer.echo(str(index))


def register(target: typer.Typer) -> None:
    """Add ``ask``, ``shell`` and ``view`` to ``target`` (e.g. the ``c2s`` app)."""
    target.command("ask")(ask)
    target.command("shell")(shell)
    target.command("view")(view)


register(app)

if __name__ == "__main__":
    app()
