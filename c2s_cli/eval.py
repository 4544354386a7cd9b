"""``c2s eval``: the navigator against flat retrieval, RAPTOR and a search agent on a QA set
(the harness itself is :mod:`c2s_agent.evaluation`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .console import TREE_HELP, err, escape, fail, out


def eval_command(
    tree: Path = typer.Option(..., "--tree", help=TREE_HELP),
    qa: Path = typer.Option(..., "--qa", help='QA file: JSON lines {"id", "question", "answer"?, "gold_ids"?}'),
    methods: str = typer.Option("navigator,bm25,dense,hybrid,raptor,agentic", "--methods",
                                help="comma-separated: navigator (routed: tree + search fallback), "
                                     "navigator-only (tree only), bm25, dense, hybrid, raptor, agentic"),
    navigator: str = typer.Option("offline", "--navigator", "--provider",
                                  help="who navigates: offline (no LLM), anthropic or openai; the same LLM answers "
                                       "for every other method (bm25, dense, hybrid, raptor, agentic)"),
    model: Optional[str] = typer.Option(None, "--model", help="the navigator's LLM model (default: claude-sonnet-4-6 / "
                                                              "gpt-4.1, or $C2S_AGENT_MODEL)"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="the navigator's LLM endpoint (e.g. a local "
                                                                    "OpenAI-compatible server)"),
    judge: str = typer.Option("none", "--judge", help="LLM judge of the answers: none, anthropic or openai"),
    judge_model: Optional[str] = typer.Option(None, "--judge-model", help="the judge's model"),
    judge_base_url: Optional[str] = typer.Option(None, "--judge-base-url", help="the judge's endpoint"),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="only the first N questions"),
    results: Path = typer.Option(Path("results"), "--out", help="directory for results.json, results.md, "
                                                                  "per-query.jsonl, chart.png and cache/"),
    max_turns: int = typer.Option(10, "--max-turns", min=1,
                                  help="rounds of tool calls of the navigator and the agentic method"),
) -> None:
    """Evaluate the navigator against bm25 / dense / hybrid retrieval, RAPTOR and a search agent:
    recall@k, MRR, context recall/precision, Token F1 (BERTScore when installed, LLM-judged
    scores with --judge), cost, and a paired bootstrap verdict."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from c2s_agent.agent import UnknownNavigatorError, check_navigator
    from c2s_agent.evaluation.answering import ANSWERING
    from c2s_agent.evaluation.judge import JUDGES
    from c2s_agent.evaluation.metrics import QAError, load_qa
    from c2s_agent.evaluation.report import table, verdict_lines, write_outputs
    from c2s_agent.evaluation.runner import NAVIGATORS, MethodError, evaluate, parse_methods
    from c2s_core.llm.clients import LLMError
    from c2s_core.tree import TreeError, open_tree

    try:
        chosen = parse_methods(methods)
    except MethodError as e:
        fail(str(e))
    try:
        check_navigator(navigator)
    except UnknownNavigatorError as e:
        fail(str(e))
    others = [m for m in chosen if m not in NAVIGATORS]
    if others and navigator not in ANSWERING:
        fail(f"{', '.join(others)} answer with {', '.join(ANSWERING)}; navigator {navigator!r} only drives the "
             "navigator methods")
    if navigator == "offline" and (model or base_url):
        fail("--model and --base-url are for an LLM navigator (--navigator anthropic or openai)")
    if judge not in JUDGES:
        fail(f"unknown judge {judge!r}; choose from {', '.join(JUDGES)}")
    if judge == "none" and (judge_model or judge_base_url):
        fail("--judge-model and --judge-base-url need a judge (--judge anthropic or openai)")
    try:
        opened = open_tree(tree)
    except TreeError as e:
        fail(str(e))
    try:
        items = load_qa(qa, limit)
    except QAError as e:
        fail(str(e))
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
            run = evaluate(opened, items, chosen, navigator=navigator, cache_dir=results / "cache",
                           max_turns=max_turns, on_progress=progress, model=model, base_url=base_url,
                           judge=judge, judge_model=judge_model, judge_base_url=judge_base_url)
        except (UnknownNavigatorError, MethodError, ValueError, LLMError) as e:
            fail(str(e))
    paths = write_outputs(run, results)
    out.print(table(run))
    out.print()
    for line in verdict_lines(run):
        out.print(line)
    out.print(f"bertscore: {escape(run.bertscore)}")
    if run.judge:
        out.print(f"judge: {escape(run.judge['model'])}: {run.judge['calls']} calls, {run.judge['cache_hits']} cached, "
                  f"{run.judge['errors']} errors, ${run.judge['cost_usd']:.4f}")
    out.print()
    for name, path in paths.items():
        out.print(f"{name}: {escape(str(path))}")
    if any(s.get("errors") for s in run.summary.values()):
        err.print("[yellow]warning:[/] some questions failed; see 'error' in per-query.jsonl")
    if any(s.get("judge_errors") for s in run.summary.values()):
        err.print("[yellow]warning:[/] some judge verdicts failed; see 'judge_error' in per-query.jsonl")


def register(app: typer.Typer) -> None:
    """Add ``eval`` to ``app``."""
    app.command("eval")(eval_command)
