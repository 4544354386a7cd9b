"""The ``c2s`` command line."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import progress as stage_progress
from .progress import LLMProgress
from .workspace import CorpusSpec, LLMSettings, Workspace

app = typer.Typer(help="c2s — compile a document corpus into a navigable skill tree, and serve it.",
                  no_args_is_help=True, add_completion=False)
console = Console(stderr=True, emoji=False)  # document text never turns into emoji


@app.callback()
def _root() -> None:
    """Compile corpora into skill trees (c2s compile) and work with the compiled trees."""


class _Bars:
    """Progress listener: one bar per stage, created when the stage first reports; LLM stages
    also show calls made / from cache / failed and the dollars spent so far."""

    def __init__(self, bars: Progress):
        self.bars = bars
        self.tasks: dict[str, int] = {}

    def update(self, stage: str, done: int, total: int, llm: LLMProgress | None = None) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.bars.add_task(stage, total=total, detail="")
        detail = {} if llm is None else {"detail": (
            f"{llm.made} calls, {llm.cached} cached" + (f", [red]{llm.failed} failed[/]" if llm.failed else "")
            + (f", ${llm.cost_usd:.4f}" if llm.cost_usd else ""))}
        self.bars.update(self.tasks[stage], completed=done, total=total, **detail)


def _fail(message: str, code: int = 1) -> None:
    # One line, never wrapped; the message may quote file names and titles, so no markup in it.
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True, emoji=False)
    raise typer.Exit(code)


def _route_library_logs(home: Path) -> None:
    """Send what libraries log (SQLAlchemy, Dagster's internals, HTTP clients) to
    ``$DAGSTER_HOME/logs/c2s.log`` instead of the terminal: an interrupt that lands while a database
    connection closes makes SQLAlchemy log a traceback, and the terminal promises one line.
    ``C2S_DEBUG=1`` keeps them on stderr too."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "c2s_library_logs", False)]:
        root.removeHandler(old)  # a second compile in one process (tests, notebooks) replaces them
        old.close()
    (home / "logs").mkdir(parents=True, exist_ok=True)
    handlers: list[logging.Handler] = [logging.FileHandler(home / "logs" / "c2s.log", encoding="utf-8", delay=True)]
    handlers[0].setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    if os.environ.get("C2S_DEBUG"):
        handlers.append(logging.StreamHandler())
    for handler in handlers:
        handler.c2s_library_logs = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    else:  # "Exception ignored in ..." from a destructor the interrupt cut short: same place
        sys.unraisablehook = lambda unraisable: logging.getLogger("c2s").warning(
            "%s: %s", unraisable.err_msg or "exception ignored", unraisable.exc_value,
            exc_info=(unraisable.exc_type, unraisable.exc_value, unraisable.exc_traceback))


# Options shared by the commands that write a corpus registration; each left out keeps the
# registered value (or the default, for a new corpus).
OutOpt = Annotated[Optional[Path], typer.Option("--out", help="output tree (default: $DAGSTER_HOME/trees/NAME)")]
ProviderOpt = Annotated[Optional[str], typer.Option(
    "--provider", help="LLM provider for compile tasks: offline (default), anthropic (ANTHROPIC_API_KEY) or "
                       "openai (OPENAI_API_KEY)")]
ModelOpt = Annotated[Optional[str], typer.Option("--model", help="model for real providers (anthropic default: "
                                                                 "claude-sonnet-4-6)")]
CardModelOpt = Annotated[Optional[str], typer.Option("--card-model", help="a cheaper model for the per-document "
                                                                          "cards (default: --model)")]
BaseUrlOpt = Annotated[Optional[str], typer.Option("--base-url", help="API endpoint, e.g. an OpenAI-compatible "
                                                                      "server at http://localhost:8000/v1")]
ConcurrencyOpt = Annotated[Optional[int], typer.Option("--concurrency", min=1,
                                                       help="LLM calls in flight at once (default 20)")]
MaxCostOpt = Annotated[Optional[float], typer.Option("--max-cost", min=0.0, help="stop (resumably) before spending "
                                                                                "more than this many US dollars")]
POpt = Annotated[Optional[int], typer.Option("--p", help="branching ratio (default 10)")]
KOpt = Annotated[Optional[int], typer.Option("--k", help="maximum number of top-level skills (default 10)")]
TauOpt = Annotated[Optional[float], typer.Option("--tau", help="soft-assignment cosine margin (default 0.05)")]
PublishOpt = Annotated[Optional[str], typer.Option("--publish", help="also publish the tree to s3://bucket/prefix/")]
FollowOpt = Annotated[Optional[bool], typer.Option("--follow-symlinks/--no-follow-symlinks",
                                                   help="read symlinks whose target stays inside the corpus "
                                                        "(default: symlinks are listed as rejected)")]
MaxFileOpt = Annotated[Optional[int], typer.Option("--max-file-bytes", min=1, help="reject larger input files "
                                                                                   "unread (default 50 MiB)")]


@app.command("compile")
def compile_command(
    path: str = typer.Argument(..., help="a directory of .md .txt .html .json .jsonl files, one such file, "
                                          "or an s3://bucket/prefix/"),
    corpus: str = typer.Option(..., "--corpus", help="partition name for this corpus"),
    out: OutOpt = None, provider: ProviderOpt = None, model: ModelOpt = None, card_model: CardModelOpt = None,
    base_url: BaseUrlOpt = None, concurrency: ConcurrencyOpt = None, max_cost: MaxCostOpt = None,
    dry_run: bool = typer.Option(False, "--dry-run", help="estimate calls, tokens and dollars per stage; call "
                                                          "nothing, compile nothing"),
    p: POpt = None, k: KOpt = None, tau: TauOpt = None, publish: PublishOpt = None,
    follow_symlinks: FollowOpt = None, max_file_bytes: MaxFileOpt = None,
    full: bool = typer.Option(False, "--full", help="rebuild from scratch instead of updating the published tree"),
    as_json: bool = typer.Option(False, "--json", help="print the manifest (or the --dry-run estimate) as JSON"),
) -> None:
    """Compile PATH into a skill tree: register it (with these settings) and run the compile_corpus job for
    --corpus. Settings left out keep the corpus's registered ones."""
    from .compiler import CompileError, CompileInterrupted, compile_corpus

    workspace = Workspace()
    _route_library_logs(workspace.home)
    spec = _spec(workspace, corpus, path, out, _options(locals()))
    if dry_run:
        try:
            estimate = compile_corpus(spec, workspace, dry_run=True)
        except CompileError as exc:
            _fail(str(exc))
        if as_json:
            typer.echo(json.dumps(estimate, indent=2, ensure_ascii=False))
        else:
            print_estimate(estimate, spec.llm.max_cost)
        return
    with Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[detail]}"), console=console, transient=True, disable=as_json) as bars:
        stage_progress.set_listener(_Bars(bars))
        try:
            manifest = compile_corpus(spec, workspace, full=full)
        except (CompileInterrupted, KeyboardInterrupt):
            console.print("interrupted; rerun to resume", highlight=False)
            raise typer.Exit(130)
        except CompileError as exc:
            _fail(str(exc))
        except Exception as exc:  # anything else is still one line; C2S_DEBUG=1 shows the trace
            if os.environ.get("C2S_DEBUG"):
                raise
            _fail(f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]} (set C2S_DEBUG=1 for the trace)")
        finally:
            stage_progress.set_listener(None)
    if as_json:
        typer.echo(json.dumps(manifest, indent=2, ensure_ascii=False))
    else:
        print_summary(manifest, Path(spec.out))


SETTING_OPTIONS = ("p", "k", "tau", "publish", "follow_symlinks", "max_file_bytes", *LLMSettings.model_fields)


def _options(values: dict) -> dict:
    """The registration settings among a command's parameters (None: not given)."""
    return {name: values[name] for name in SETTING_OPTIONS if values.get(name) is not None}


def _spec(workspace: Workspace, corpus: str, path: str | None, out: Path | None, options: dict) -> CorpusSpec:
    """The corpus's registration with the settings given on the command line on top; a missing
    path, an unregistered corpus without a path, or a bad value ends the command."""
    from .storage import is_s3

    try:
        registered = workspace.corpora().get(corpus)
    except ValueError as exc:  # RegistryError: corpora.yaml is broken
        _fail(str(exc))
    if path is None and registered is None:
        _fail(f"corpus '{corpus}' is not registered in {workspace.registry_path}; register it with: "
              f"c2s corpus add PATH --corpus {corpus}")
    if path is not None and not is_s3(path) and not Path(path).exists():
        _fail(f"corpus path does not exist: {path}")
    base = registered.model_dump(exclude={"name"}) if registered else {}
    if path is not None:
        base["source"] = path if is_s3(path) else str(Path(path).resolve())
    if out is not None or "out" not in base:
        base["out"] = str((out or workspace.home / "trees" / corpus).resolve())
    base.update({k: v for k, v in options.items() if k not in LLMSettings.model_fields})
    base["llm"] = {**base.get("llm", {}), **{k: v for k, v in options.items() if k in LLMSettings.model_fields}}
    try:
        return CorpusSpec(name=corpus, **base)
    except ValidationError as exc:
        _fail("; ".join(f"--{'-'.join(str(part) for part in e['loc'][-1:])}: {e['msg']}" for e in exc.errors()), 2)


corpus_app = typer.Typer(help="Register corpora as partitions and set how each is compiled (then compile them "
                              "with c2s compile, backfill them from the Dagster UI or CLI, or let the sensor "
                              "compile them).", no_args_is_help=True)
app.add_typer(corpus_app, name="corpus")


def _register(workspace: Workspace, spec: CorpusSpec) -> None:
    from .compiler import open_instance
    from .partitions import corpus_partitions

    workspace.register(spec)
    instance = open_instance(workspace)
    added = not instance.has_dynamic_partition(corpus_partitions.name, spec.name)
    if added:
        instance.add_dynamic_partitions(corpus_partitions.name, [spec.name])
    llm = spec.llm.model_dump(exclude_none=True, exclude_defaults=True)
    console.print(f"{'added' if added else 'updated'} corpus partition [bold]{escape(spec.name)}[/] "
                  f"({escape(spec.source)} → {escape(spec.out)}; p={spec.p} k={spec.k} tau={spec.tau}"
                  + (f"; llm {escape(json.dumps(llm))}" if llm else "; llm offline")
                  + f") in {escape(str(workspace.home))}", highlight=False, soft_wrap=True)


@corpus_app.command("add")
def corpus_add_command(
    path: str = typer.Argument(..., help="the corpus source: a directory, a file, or s3://bucket/prefix/"),
    corpus: str = typer.Option(..., "--corpus", help="partition name for this corpus"),
    out: OutOpt = None, provider: ProviderOpt = None, model: ModelOpt = None, card_model: CardModelOpt = None,
    base_url: BaseUrlOpt = None, concurrency: ConcurrencyOpt = None, max_cost: MaxCostOpt = None,
    p: POpt = None, k: KOpt = None, tau: TauOpt = None, publish: PublishOpt = None,
    follow_symlinks: FollowOpt = None, max_file_bytes: MaxFileOpt = None,
) -> None:
    """Register PATH in corpora.yaml, with the settings every run of it compiles with, and add it as a
    `corpus` partition of the Dagster instance."""
    workspace = Workspace()
    _register(workspace, _spec(workspace, corpus, path, out, _options(locals())))


@corpus_app.command("set")
def corpus_set_command(
    corpus: str = typer.Argument(..., help="a registered corpus"),
    source: Optional[str] = typer.Option(None, "--source", help="a new source: directory, file or s3:// prefix"),
    out: OutOpt = None, provider: ProviderOpt = None, model: ModelOpt = None, card_model: CardModelOpt = None,
    base_url: BaseUrlOpt = None, concurrency: ConcurrencyOpt = None, max_cost: MaxCostOpt = None,
    p: POpt = None, k: KOpt = None, tau: TauOpt = None, publish: PublishOpt = None,
    follow_symlinks: FollowOpt = None, max_file_bytes: MaxFileOpt = None,
) -> None:
    """Change how a registered corpus is compiled; the next run from any launcher uses the new settings
    (the sensor sees the change and requests one)."""
    workspace = Workspace()
    _register(workspace, _spec(workspace, corpus, source, out, _options(locals())))


@corpus_app.command("list")
def corpus_list_command() -> None:
    """The registered corpora, their settings, and whether each is a partition of the instance."""
    from .compiler import open_instance
    from .partitions import corpus_partitions

    workspace = Workspace()
    partitions = set(open_instance(workspace).get_dynamic_partitions(corpus_partitions.name))
    table = Table(show_header=True)
    for column in ("corpus", "source", "out", "p", "k", "tau", "llm", "partition"):
        table.add_column(column)
    for name, spec in sorted(workspace.corpora().items()):
        llm = spec.llm.provider + (f" {spec.llm.model}" if spec.llm.model else "")
        table.add_row(*(escape(v) for v in (name, spec.source, spec.out, str(spec.p), str(spec.k), str(spec.tau),
                                            llm, "yes" if name in partitions else "no")))
    Console(emoji=False).print(table)


def print_estimate(estimate: dict, max_cost: float | None = None) -> None:
    table = Table(title=f"c2s compile --dry-run: {estimate['corpus']}, {estimate['documents']} documents, "
                        f"{estimate['levels']} levels, {estimate['provider']} {estimate['model']}"
                        + (f" (cards: {estimate['card_model']})" if estimate["card_model"] != estimate["model"] else ""),
                  title_justify="left")
    table.add_column("stage", no_wrap=True)
    for column in ("items", "cached", "calls", "in tokens", "out tokens", "$"):
        table.add_column(column, justify="right", no_wrap=True)
    for s in estimate["stages"]:
        table.add_row(s["stage"], f"{s['items']:,}", "?" if s["cached"] is None else f"{s['cached']:,}",
                      f"{s['calls']:,}", f"{s['input_tokens']:,}", f"{s['output_tokens']:,}", f"{s['cost_usd']:.2f}")
    t = estimate["total"]
    table.add_row("total", "", "", f"{t['calls']:,}", f"{t['input_tokens']:,}", f"{t['output_tokens']:,}",
                  f"{t['cost_usd']:.2f}", style="bold")
    console.print(table)
    notes = [f"{s['stage']}: {s['note']}" for s in estimate["stages"] if s["note"]] + estimate["notes"]
    for note in notes:
        console.print(f"  note: {note}", highlight=False)
    if max_cost is not None and t["cost_usd"] > max_cost:
        console.print(f"[yellow]the estimate exceeds --max-cost ${max_cost:.2f}: the run would stop there "
                      "(resumably)[/]", highlight=False)


def print_summary(manifest: dict, out: Path) -> None:
    from .diagnostics import NAVIGABILITY, navigability_warnings, summary_line

    stats = manifest["stats"]
    docs, calls, emb = stats["documents"], stats["llm_calls"], stats["embeddings"]
    table = Table(title=f"c2s compile: {manifest['corpus']}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("documents", f"{docs['accepted']} accepted, {docs['rejected']} rejected, {docs['duplicate']} duplicate")
    build = manifest["build"]
    table.add_row("build", escape(f"{build['mode']}: {build['reason']}"))
    table.add_row("tree", f"{stats['levels']} levels, {stats['skills']} top-level skills, {stats['nav_files']} nav files")
    table.add_row("nav-file size", f"largest {stats['nav_bytes']['max']:,} B, p95 {stats['nav_bytes']['p95']:,} B")
    table.add_row("@see stubs", str(stats["see_stubs"]))
    table.add_row("entity index", f"{stats['entity_index_entries']} entries, {stats['distinct_entities']} entities")
    if "term_index" in stats:
        terms = stats["term_index"]
        titles = f", {terms['title_terms']:,} title terms" if "title_terms" in terms else ""  # (older manifests)
        table.add_row("term index", f"{terms['terms']:,} body terms{titles}, {terms['bytes']:,} B")
    table.add_row("LLM calls", f"{calls['made']} made, {calls['cached']} from cache ({manifest['provider']['name']})")
    usage = stats.get("llm_usage", {}).get("total")
    if usage and usage["calls"]:
        table.add_row("LLM usage", f"{usage['calls']} API calls ({usage['reasks']} re-asks, {usage['retries']} "
                                   f"retries), {usage['input_tokens']:,} input + {usage['cache_read_tokens']:,} "
                                   f"cache-read + {usage['cache_write_tokens']:,} cache-write + "
                                   f"{usage['output_tokens']:,} output tokens, ${usage['cost_usd']:.4f}")
    table.add_row("embeddings", f"{emb['computed']} computed, {emb['cached']} from cache")
    navigability = manifest.get(NAVIGABILITY)
    if navigability:
        table.add_row("navigability", escape(summary_line(navigability)))
    times = {k: v["seconds"] for k, v in manifest["stages"].items() if v["seconds"] >= 0.01}
    table.add_row("wall time", ", ".join(f"{k} {v:.1f}s" for k, v in times.items()))
    table.add_row("output", escape(str(out)))
    console.print(table)
    skills = Table(title="top-level skills", title_justify="left")
    skills.add_column("skill")
    skills.add_column("docs", justify="right")
    skills.add_column("description")
    for skill in manifest["skills"]:
        skills.add_row(escape(skill["name"]), str(skill["documents"]), escape(skill["description"]))
    console.print(skills)
    for warning in navigability_warnings(navigability) if navigability else []:
        console.print(f"[yellow]warning[/] navigability: {escape(warning)}", highlight=False)
    for check, result in manifest["checks"].items():
        if not result["passed"]:
            console.print(f"[yellow]warning[/] {check}: {escape(result['description'])}", highlight=False)
    if manifest["rejected"]:
        console.print(f"[yellow]{len(manifest['rejected'])} input(s) rejected:[/]")
        for row in manifest["rejected"][:20]:
            console.print(f"  {row['source']}: {row['reason']}", highlight=False, markup=False)
        if len(manifest["rejected"]) > 20:
            console.print(f"  … and {len(manifest['rejected']) - 20} more (see {out / 'manifest.json'})", markup=False)


def _register_serving_commands() -> None:
    """`c2s ask`, `c2s shell` and `c2s eval` live with the agent; the CLI is one app."""
    from c2s_agent.cli import register as register_agent
    from c2s_agent.export import register as register_export
    from c2s_agent.skills_api import register as register_publish
    from c2s_agent.serve import register as register_serve

    for register in (register_agent, register_serve, register_export, register_publish):
        register(app)
    try:
        from c2s_agent.evaluation.cli import register as register_eval
    except ImportError:  # the evaluation harness is optional at import time
        return
    register_eval(app)


_register_serving_commands()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
