"""``c2s corpus add | set | list``: a corpus's registration (source, output and how it is compiled),
and the options that write it, shared with ``c2s compile``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from c2s_pipeline.workspace import CorpusSpec, LLMSettings, Workspace

from .console import err, escape, fail

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
MaxFileOpt = Annotated[Optional[int], typer.Option("--max-file-bytes", min=1, help="reject larger input files (JSONL: records) "
                                                                                   "unread (default 50 MiB)")]

SETTING_OPTIONS = ("p", "k", "tau", "publish", "follow_symlinks", "max_file_bytes", *LLMSettings.model_fields)


def given_settings(values: dict) -> dict:
    """The registration settings among a command's parameters (None: not given)."""
    return {name: values[name] for name in SETTING_OPTIONS if values.get(name) is not None}


def corpus_spec(workspace: Workspace, corpus: str, path: str | None, out: Path | None, options: dict) -> CorpusSpec:
    """The corpus's registration with the settings given on the command line on top; a missing
    path, an unregistered corpus without a path, or a bad value ends the command."""
    from c2s_pipeline.storage import is_s3

    try:
        registered = workspace.corpora().get(corpus)
    except ValueError as exc:  # RegistryError: corpora.yaml is broken
        fail(str(exc), 1)
    if path is None and registered is None:
        fail(f"corpus '{corpus}' is not registered in {workspace.registry_path}; register it with: "
             f"c2s corpus add PATH --corpus {corpus}", 1)
    if path is not None and not is_s3(path) and not Path(path).exists():
        fail(f"corpus path does not exist: {path}", 1)
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
        fail("; ".join(f"--{'-'.join(str(part) for part in e['loc'][-1:])}: {e['msg']}" for e in exc.errors()), 2)


corpus_app = typer.Typer(help="Register corpora as partitions and set how each is compiled (then compile them "
                              "with c2s compile, backfill them from the Dagster UI or CLI, or let the sensor "
                              "compile them).", no_args_is_help=True)


def _save_registration(workspace: Workspace, spec: CorpusSpec) -> None:
    from c2s_pipeline.compiler import open_instance
    from c2s_pipeline.partitions import corpus_partitions

    workspace.register(spec)
    instance = open_instance(workspace)
    added = not instance.has_dynamic_partition(corpus_partitions.name, spec.name)
    if added:
        instance.add_dynamic_partitions(corpus_partitions.name, [spec.name])
    llm = spec.llm.model_dump(exclude_none=True, exclude_defaults=True)
    err.print(f"{'added' if added else 'updated'} corpus partition [bold]{escape(spec.name)}[/] "
              f"({escape(spec.source)} → {escape(spec.out)}; p={spec.p} k={spec.k} tau={spec.tau}"
              + (f"; llm {escape(json.dumps(llm))}" if llm else "; llm offline")
              + f") in {escape(str(workspace.home))}")


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
    _save_registration(workspace, corpus_spec(workspace, corpus, path, out, given_settings(locals())))


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
    _save_registration(workspace, corpus_spec(workspace, corpus, source, out, given_settings(locals())))


@corpus_app.command("list")
def corpus_list_command() -> None:
    """The registered corpora, their settings, and whether each is a partition of the instance."""
    from c2s_pipeline.compiler import open_instance
    from c2s_pipeline.partitions import corpus_partitions

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


def register(app: typer.Typer) -> None:
    """Add ``corpus add``, ``corpus set`` and ``corpus list`` to ``app``."""
    app.add_typer(corpus_app, name="corpus")
