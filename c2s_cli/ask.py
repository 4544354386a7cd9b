"""``c2s ask`` a question of a compiled tree, or run a ``c2s shell`` command line in the agent's
sandbox over it."""

from __future__ import annotations

from pathlib import Path

import typer

from .console import TREE_HELP, escape, fail, out, printable


def _tools(tree: Path, navigator: str | None = None):
    """The tools over ``tree`` (as ``navigator`` works with them, when one is named)."""
    from c2s_agent.agent import UnknownNavigatorError, tools_for
    from c2s_agent.tools import TreeTools
    from c2s_core.tree import TreeError

    try:
        return tools_for(tree, navigator) if navigator else TreeTools(tree)
    except (TreeError, UnknownNavigatorError) as e:
        fail(str(e))


def ask(
    question: str = typer.Argument(..., help="the question, in quotes"),
    tree: Path = typer.Option(..., "--tree", help=TREE_HELP),
    navigator: str = typer.Option("offline", "--navigator", "--provider",
                                  help="who navigates: offline (no LLM), anthropic or openai (OpenAI-compatible)"),
    model: str = typer.Option(None, "--model", help="LLM model (default: claude-sonnet-4-6 / gpt-4.1, or $C2S_AGENT_MODEL)"),
    base_url: str = typer.Option(None, "--base-url",
                                 help="LLM endpoint, e.g. a local vLLM/Ollama server (default: $ANTHROPIC_BASE_URL / $OPENAI_BASE_URL)"),
    max_turns: int = typer.Option(10, "--max-turns", min=1, help="rounds of tool calls allowed"),
    as_json: bool = typer.Option(False, "--json", help="print the full result (answer, citations, trace) as JSON"),
) -> None:
    """Answer QUESTION by navigating the tree; prints the answer, its sources and the path taken."""
    from c2s_agent.agent import UnknownNavigatorError, answer
    from c2s_core.llm.clients import LLMError

    tools = _tools(tree, navigator)
    if not question.strip():
        fail("the question is empty")
    opts = {k: v for k, v in (("model", model), ("base_url", base_url)) if v}
    if opts and navigator == "offline":
        fail("--model and --base-url are for an LLM navigator (--navigator anthropic or openai)")
    try:
        result = answer(question, tools, navigator=navigator, max_turns=max_turns, **opts)
    except (UnknownNavigatorError, LLMError) as e:
        fail(str(e))
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


def register(app: typer.Typer) -> None:
    """Add ``ask`` and ``shell`` to ``app``."""
    app.command("ask")(ask)
    app.command("shell")(shell)
