"""``c2s eval``: the navigator against flat retrieval baselines on a QA set.

:func:`register` adds the command to another typer app (the main ``c2s``); ``app`` runs it alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def eval_command(
    tree: Path = typer.Option(..., "--tree", help="compiled tree (the --out of c2s compile)"),
    qa: Path = typer.Option(..., "--qa", help='QA file: JSON lines {"id", "question", "answer"?, "gold_ids"?}'),
    methods: str = typer.Option("navigator,bm25,dense,hybrid", "--methods",
                                help="comma-separated: navigator, bm25, dense, hybrid"),
    provider: str = typer.Option("offline", "--provider", help="who drives the navigator (offline: no LLM)"),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="only the first N questions"),
    results: Path = typer.Option(Path("results"), "--out", help="directory for results.json, results.md, "
                                                                  "per-query.jsonl and chart.png"),
    max_turns: int = typer.Option(10, "--max-turns", min=1, help="the navigator's rounds of tool calls"),
) -> None:
    """Evaluate the navigator against bm25 / dense / hybrid retrieval: recall@k, MRR, context
    recall/precision, Token F1, cost, and a paired bootstrap verdict."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from ..agent import UnknownProviderError, providers
    from ..tree import TreeError, open_tree
    from .metrics import QAError, load_qa
    from .report import markdown, table, verdict_lines, write_outputs
    from .runner import MethodError, evaluate, parse_methods

    try:
        chosen = parse_methods(methods)
    except MethodError as e:
        _fail(str(e))
    if "navigator" in chosen and provider not in providers():
        _fail(f"unknown provider {provider!r}; available: {', '.join(providers())}")
    try:
        opened = open_tree(tree)
    except TreeError as e:
        _fail(str(e))
    try:
        items = load_qa(qa, limit)
    except QAError as e:
        _fail(str(e))
    unknown = sorted({g for item in items for g in (item.gold_ids or ()) if g not in opened.store})
    if unknown:
        err.print(f"[yellow]warning:[/] {len(unknown)} gold id(s) are not documents of this tree "
                  f"(e.g. {escape(unknown[0])}); they count as misses")
    with Progress(TextColumn("[bold]eval[/]"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[method]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                  console=err, transient=False) as bars:
        task = bars.add_task("eval", total=len(items) * len(chosen), method="loading indexes")

        def progress(done: int, total: int, method: str) -> None:
            bars.update(task, completed=done, total=total, method=method)

        try:
            run = evaluate(opened, items, chosen, provider=provider, cache_dir=results / "cache",
                           max_turns=max_turns, on_progress=progress)
        except (UnknownProviderError, MethodError, ValueError) as e:
            _fail(str(e))
    paths = write_outputs(run, results)
    out.print(table(run))
    out.print()
    for line in verdict_lines(run):
        out.print(line)
    out.print()
    for name, path in paths.items():
        out.print(f"{name}: {escape(str(path))}")
    if any(s.get("errors") for s in run.summary.values()):
        err.print("[yellow]warning:[/] some questions failed; see 'error' in per-query.jsonl")


def register(app: typer.Typer) -> None:
    """Add ``eval`` to ``app``."""
    app.command("eval")(eval_command)


app = typer.Typer(help="Evaluate a compiled c2s tree.", no_args_is_help=True, add_completion=False)
register(app)

if __name__ == "__main__":  # python -m c2s_agent.evaluation.cli eval ...
    app()
