"""The ``c2s`` command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import progress as stage_progress
from .workspace import CorpusSpec, Workspace

app = typer.Typer(help="c2s — compile a document corpus into a navigable skill tree, and serve it.",
                  no_args_is_help=True, add_completion=False)
console = Console(stderr=True)


@app.callback()
def _root() -> None:
    """Compile corpora into skill trees (c2s compile) and work with the compiled trees."""


class _Bars:
    """Progress listener: one bar per stage, created when the stage first reports."""

    def __init__(self, bars: Progress):
        self.bars = bars
        self.tasks: dict[str, int] = {}

    def update(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.bars.add_task(stage, total=total)
        self.bars.update(self.tasks[stage], completed=done, total=total)


def _fail(message: str, code: int = 1) -> None:
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


@app.command("compile")
def compile_command(
    path: str = typer.Argument(..., help="a directory of .md .txt .html .json .jsonl files, one such file, "
                                          "or an s3://bucket/prefix/"),
    corpus: str = typer.Option(..., "--corpus", help="partition name for this corpus"),
    out: Optional[Path] = typer.Option(None, "--out", help="output tree (default: $DAGSTER_HOME/trees/NAME)"),
    provider: str = typer.Option("offline", "--provider", help="LLM provider for compile tasks"),
    model: str = typer.Option("", "--model", help="model name for real providers"),
    p: int = typer.Option(10, "--p", help="branching ratio"),
    k: int = typer.Option(10, "--k", help="maximum number of top-level skills"),
    tau: float = typer.Option(0.05, "--tau", help="soft-assignment cosine margin"),
    publish: Optional[str] = typer.Option(None, "--publish", help="also publish the tree to s3://bucket/prefix/"),
    full: bool = typer.Option(False, "--full", help="rebuild from scratch instead of updating the published tree"),
    as_json: bool = typer.Option(False, "--json", help="print the manifest as JSON"),
) -> None:
    """Compile PATH into a skill tree by materializing the Dagster asset graph for --corpus."""
    from .compiler import CompileError, compile_corpus

    from .storage import is_s3

    workspace = Workspace()
    if not is_s3(path) and not Path(path).exists():
        _fail(f"corpus path does not exist: {path}")
    try:
        spec = CorpusSpec(name=corpus, source=path if is_s3(path) else str(Path(path).resolve()),
                          out=str((out or workspace.home / "trees" / corpus).resolve()), p=p, k=k, tau=tau,
                          publish=publish)
    except ValidationError as exc:
        _fail("; ".join(f"--{e['loc'][0]}: {e['msg']}" for e in exc.errors()), 2)
    with Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=as_json) as bars:
        stage_progress.set_listener(_Bars(bars))
        try:
            manifest = compile_corpus(spec, workspace, provider=provider, model=model, full=full)
        except CompileError as exc:
            _fail(str(exc))
        finally:
            stage_progress.set_listener(None)
    if as_json:
        typer.echo(json.dumps(manifest, indent=2, ensure_ascii=False))
    else:
        print_summary(manifest, Path(spec.out))


def print_summary(manifest: dict, out: Path) -> None:
    stats = manifest["stats"]
    docs, calls, emb = stats["documents"], stats["llm_calls"], stats["embeddings"]
    table = Table(title=f"c2s compile: {manifest['corpus']}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("documents", f"{docs['accepted']} accepted, {docs['rejected']} rejected, {docs['duplicate']} duplicate")
    build = manifest["build"]
    table.add_row("build", f"{build['mode']}: {build['reason']}")
    table.add_row("tree", f"{stats['levels']} levels, {stats['skills']} top-level skills, {stats['nav_files']} nav files")
    table.add_row("nav-file size", f"largest {stats['nav_bytes']['max']:,} B, p95 {stats['nav_bytes']['p95']:,} B")
    table.add_row("@see stubs", str(stats["see_stubs"]))
    table.add_row("entity index", f"{stats['entity_index_entries']} entries, {stats['distinct_entities']} entities")
    table.add_row("LLM calls", f"{calls['made']} made, {calls['cached']} from cache ({manifest['provider']['name']})")
    table.add_row("embeddings", f"{emb['computed']} computed, {emb['cached']} from cache")
    times = {k: v["seconds"] for k, v in manifest["stages"].items() if v["seconds"] >= 0.01}
    table.add_row("wall time", ", ".join(f"{k} {v:.1f}s" for k, v in times.items()))
    table.add_row("output", str(out))
    console.print(table)
    skills = Table(title="top-level skills", title_justify="left")
    skills.add_column("skill")
    skills.add_column("docs", justify="right")
    skills.add_column("description")
    for skill in manifest["skills"]:
        skills.add_row(skill["name"], str(skill["documents"]), skill["description"])
    console.print(skills)
    for check, result in manifest["checks"].items():
        if not result["passed"]:
            console.print(f"[yellow]warning[/] {check}: {result['description']}", highlight=False)
    if manifest["rejected"]:
        console.print(f"[yellow]{len(manifest['rejected'])} input(s) rejected:[/]")
        for row in manifest["rejected"][:20]:
            console.print(f"  {row['source']}: {row['reason']}", highlight=False, markup=False)
        if len(manifest["rejected"]) > 20:
            console.print(f"  … and {len(manifest['rejected']) - 20} more (see {out / 'manifest.json'})")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
