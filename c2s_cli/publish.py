"""``c2s publish skills-api``: each top-level skill of a compiled tree uploaded to the Anthropic
Skills API (the upload itself is :mod:`c2s_agent.skills_api`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from c2s_agent.skills_api import Action, PublishError, PublishReport, publish

from .console import TREE_HELP, escape, fail, out

publish_app = typer.Typer(help="Publish a compiled tree to an agent platform.", no_args_is_help=True,
                          add_completion=False)


def _show_plan(report: PublishReport) -> None:
    for note in report.notes:
        out.print(f"[yellow]note:[/] {escape(note)}")
    title = "plan (dry run: from the local state, the API was not asked)" if report.dry_run else "plan"
    out.print(f"{title}: {escape(report.base_url)}, corpus {escape(report.corpus)}")
    for a in report.actions:
        size = f" ({len(a.local.files)} files, {a.local.bytes:,} B)" if a.local else ""
        out.print(f"  {a.kind:<11} {escape(a.folder)}{size}"
                  + (f" [dim]— {escape(a.reason)}[/]" if a.reason else ""))


def _show_done(a: Action) -> None:
    out.print(f"  [green]done[/] {a.kind} {escape(a.folder)}")


@publish_app.command("skills-api")
def skills_api_command(
    tree: Path = typer.Argument(..., help=TREE_HELP),
    prune: bool = typer.Option(False, "--prune", help="delete this corpus's skills that are no longer in the tree"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan from the local state; call nothing"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="API endpoint (default: $ANTHROPIC_BASE_URL, "
                                                                    "else https://api.anthropic.com)"),
    state_file: Optional[Path] = typer.Option(None, "--state", help="state file (default: .<tree>.skills-api.json "
                                                                    "beside the tree)"),
) -> None:
    """Upload each top-level skill of TREE to the Anthropic Skills API.

    New skills are created, changed ones get a new version, unchanged ones are left alone; the key comes
    from $ANTHROPIC_API_KEY."""
    from c2s_core.tree import TreeError

    try:
        report = publish(tree, base_url=base_url, prune=prune, dry_run=dry_run, state_path=state_file,
                         on_plan=_show_plan, on_done=_show_done)
    except (PublishError, TreeError) as e:
        fail(str(e), 1)
    except OSError as e:
        fail(f"cannot publish {tree}: {e.strerror or e}", 1)
    counts = report.counts()
    summary = ", ".join(f"{counts[k]} {k}" for k in ("create", "new version", "unchanged", "delete", "stale")
                        if counts.get(k)) or "nothing to publish"
    out.print(("would: " if report.dry_run else "published: ") + summary)


def register(app: typer.Typer) -> None:
    """Add ``publish skills-api`` to ``app``."""
    app.add_typer(publish_app, name="publish")
