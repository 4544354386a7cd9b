"""``c2s compile``: register a corpus and run its compile job, with a progress bar per stage, then
print the summary (or the ``--dry-run`` estimate)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from datetime import datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from c2s_pipeline import progress as stage_progress
from c2s_pipeline.progress import LLMProgress
from c2s_pipeline.workspace import Workspace

from .console import escape, fail
from .corpus import (BaseUrlOpt, CardModelOpt, ConcurrencyOpt, FollowOpt, KOpt, MaxCostOpt, MaxFileOpt, ModelOpt,
                     OutOpt, POpt, ProviderOpt, PublishOpt, TauOpt, corpus_spec, given_settings)

# Progress bars and the summary tables go to stderr, so stdout holds only what --json prints.
console = Console(stderr=True, emoji=False)  # document text never turns into emoji


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


class _Lines:
    """Progress listener for a stderr that is not a terminal (a log file, CI, ``nohup``): a
    timestamped line when a stage starts, at most every ``every`` seconds while it runs, and when
    it is done, so a compile that fails late has said how far it got."""

    def __init__(self, write, every: float = 10.0, clock=time.monotonic):
        self.write, self.every, self.clock = write, every, clock
        self.last: dict[str, float] = {}
        self.finished: set[str] = set()

    def update(self, stage: str, done: int, total: int, llm: LLMProgress | None = None) -> None:
        now = self.clock()
        first, complete = stage not in self.last, total > 0 and done >= total
        if stage in self.finished or not (first or complete or now - self.last[stage] >= self.every):
            return
        self.last[stage] = now
        if complete:
            self.finished.add(stage)
        detail = "" if llm is None else (f"; {llm.made} calls, {llm.cached} cached"
                                         + (f", {llm.failed} failed" if llm.failed else "")
                                         + (f", ${llm.cost_usd:.4f}" if llm.cost_usd else ""))
        self.write(f"{datetime.now().strftime('%H:%M:%S')} {stage} {done}/{total}{detail}")


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
    from c2s_pipeline.compiler import CompileError, CompileInterrupted, compile_corpus

    workspace = Workspace()
    _route_library_logs(workspace.home)
    spec = corpus_spec(workspace, corpus, path, out, given_settings(locals()))
    if dry_run:
        try:
            estimate = compile_corpus(spec, workspace, dry_run=True)
        except CompileError as exc:
            fail(str(exc), 1)
        if as_json:
            typer.echo(json.dumps(estimate, indent=2, ensure_ascii=False))
        else:
            print_estimate(estimate, spec.llm.max_cost)
        return
    # On a terminal, a live bar per stage; elsewhere (a log, CI) plain progress lines on stderr.
    live = console.is_terminal and not as_json
    with Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[detail]}"), console=console, transient=True, disable=not live) as bars:
        stage_progress.set_listener(_Bars(bars) if live else
                                    _Lines(lambda line: console.print(line, markup=False, highlight=False)))
        try:
            manifest = compile_corpus(spec, workspace, full=full)
        except (CompileInterrupted, KeyboardInterrupt):
            console.print("interrupted; rerun to resume", highlight=False)
            raise typer.Exit(130)
        except CompileError as exc:
            fail(str(exc), 1)
        except Exception as exc:  # anything else is still one line; C2S_DEBUG=1 shows the trace
            if os.environ.get("C2S_DEBUG"):
                raise
            fail(f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]} (set C2S_DEBUG=1 for the trace)", 1)
        finally:
            stage_progress.set_listener(None)
    if as_json:
        typer.echo(json.dumps(manifest, indent=2, ensure_ascii=False))
    else:
        print_summary(manifest, Path(spec.out))


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
    per = t.get("per_1000_documents")
    if per and t["cost_usd"]:
        console.print(f"  per 1,000 documents: ${per['cost_usd']:.2f} ({per['input_tokens']:,} tokens in, "
                      f"{per['output_tokens']:,} out)", highlight=False)
    notes = [f"{s['stage']}: {s['note']}" for s in estimate["stages"] if s["note"]] + estimate["notes"]
    for note in notes:
        console.print(f"  note: {note}", highlight=False)
    if max_cost is not None and t["cost_usd"] > max_cost:
        console.print(f"[yellow]the estimate exceeds --max-cost ${max_cost:.2f}: the run would stop there "
                      "(resumably)[/]", highlight=False)


def print_summary(manifest: dict, out: Path) -> None:
    from c2s_pipeline.diagnostics import NAVIGABILITY, navigability_warnings, summary_line

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
        shares = stats["llm_usage"].get("cache_read_share", {})
        if shares:
            table.add_row("prompt cache", "read: " + ", ".join(
                f"{name} {share:.0%}" for name, share in shares.items() if share is not None))
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
            # Names and reasons quote the input: control characters are shown, never sent to the terminal.
            console.print(f"  {escape(row['source'], keep='')}: {escape(row['reason'], keep='')}", highlight=False)
        if len(manifest["rejected"]) > 20:
            console.print(f"  … and {len(manifest['rejected']) - 20} more (see {out / 'manifest.json'})", markup=False)


def register(app: typer.Typer) -> None:
    """Add ``compile`` to ``app``."""
    app.command("compile")(compile_command)
