"""``c2s export claude-code | agent-skills``: a compiled tree as Agent Skills folders for a client
that reads files (the export itself is :mod:`c2s_agent.export`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from c2s_agent.export import DESCRIPTION_BUDGET, NOTES_FILE, ExportError, export_tree

from .console import TREE_HELP, escape, fail, out

export_app = typer.Typer(help="Export a compiled tree as Agent Skills for a client that reads files.",
                         no_args_is_help=True, add_completion=False)

TO_HELP = "export folder: absent, empty or an earlier export (replaced whole)"
BUDGET_HELP = "characters for all skill names and descriptions together (0: no limit)"


def _run(tree: Path, to: Path, fmt: str, budget: int, as_json: bool) -> None:
    from c2s_core.tree import TreeError

    try:
        result = export_tree(tree, to, fmt, description_budget=budget or None)
    except (ExportError, TreeError) as e:
        fail(str(e))
    except OSError as e:
        fail(f"cannot write the export to {to}: {e.strerror or e}")
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=1, ensure_ascii=False))
        return
    main = [s for s in result.skills if s.part == 1]
    where = result.skills_root
    out.print(f"exported {len(main)} skills, {len(result.documents)} documents ({result.format}) to "
              f"{escape(str(where))}")
    for note in result.notes:
        out.print(f"[yellow]note:[/] {escape(note)}")
    if result.notes:
        out.print(f"[dim]notes also in {escape(str(result.root / NOTES_FILE))}[/]")
    if result.format == "claude-code":
        out.print(f"[dim]use: cd {escape(str(result.root))} && claude   (or copy the skill folders into "
                  f"~/.claude/skills/)[/]")


@export_app.command("claude-code")
def claude_code_command(
    tree: Path = typer.Argument(..., help=TREE_HELP),
    to: Path = typer.Option(..., "--to", help=TO_HELP),
    fmt: str = typer.Option("claude-code", "--format", help="claude-code (DIR/.claude/skills/<skill>/) or "
                                                            "agent-skills (DIR/<skill>/)"),
    budget: int = typer.Option(DESCRIPTION_BUDGET, "--description-budget", min=0, help=BUDGET_HELP),
    as_json: bool = typer.Option(False, "--json", help="print what was exported as JSON"),
) -> None:
    """Export TREE for Claude Code, as DIR/.claude/skills/<skill>/.

    Each skill folder holds its SKILL.md, nested INDEX.md files and every document as a file under docs/;
    open DIR in Claude Code, or copy the skill folders to ~/.claude/skills/."""
    _run(tree, to, fmt, budget, as_json)


@export_app.command("agent-skills")
def agent_skills_command(
    tree: Path = typer.Argument(..., help=TREE_HELP),
    to: Path = typer.Option(..., "--to", help=TO_HELP),
    budget: int = typer.Option(DESCRIPTION_BUDGET, "--description-budget", min=0, help=BUDGET_HELP),
    as_json: bool = typer.Option(False, "--json", help="print what was exported as JSON"),
) -> None:
    """Export TREE in the plain Agent Skills layout, as DIR/<skill>/.

    Each skill folder holds its SKILL.md, nested INDEX.md files and every document as a file under docs/."""
    _run(tree, to, "agent-skills", budget, as_json)


def register(app: typer.Typer) -> None:
    """Add ``export claude-code`` and ``export agent-skills`` to ``app``."""
    app.add_typer(export_app, name="export")
