"""``c2s serve``: a compiled tree offered to MCP clients over stdio or streamable HTTP
(the server itself is :mod:`c2s_agent.serve`)."""

from __future__ import annotations

import signal
from pathlib import Path

import typer

from c2s_agent.serve import (DEFAULT_HOST, DEFAULT_PORT, TOKEN_ENV, LiveTree, bind, build_server, run_http,
                             run_stdio, url_of)

from .console import TREE_HELP, err, escape, fail


def serve(
    tree: Path = typer.Option(..., "--tree", help=TREE_HELP),
    transport: str = typer.Option("stdio", "--transport",
                                  help="stdio (an MCP client launches the server) or http (streamable HTTP at /mcp)"),
    host: str = typer.Option(DEFAULT_HOST, "--host", help="address to bind for http"),
    port: int = typer.Option(DEFAULT_PORT, "--port", min=0, max=65535, help="port for http (0: any free port)"),
    token: str = typer.Option(None, "--token", envvar=TOKEN_ENV, show_default=False,
                              help="http clients must send 'Authorization: Bearer TOKEN'"),
    navigator: str = typer.Option("offline", "--navigator", "--provider",
                                  help="who navigates to answer the ask tool: offline (no LLM), anthropic or openai"),
    model: str = typer.Option(None, "--model", help="LLM model for ask (an LLM navigator only)"),
    base_url: str = typer.Option(None, "--base-url", help="LLM endpoint for ask (an LLM navigator only)"),
    max_turns: int = typer.Option(10, "--max-turns", min=1, help="rounds of tool calls ask may make"),
    ask_concurrency: int = typer.Option(None, "--ask-concurrency", min=1, show_default=False,
                                        help="questions ask answers at once; more wait their turn "
                                             "(default: one per CPU offline, 16 with an LLM)"),
) -> None:
    """Serve the tree to MCP clients: the tools code_execution, get_document, search and ask, and the
    resources c2s://tree/{+path}, c2s://doc/{+doc_id} and c2s://skills. A recompile's new tree
    is picked up without a restart."""
    from c2s_agent.agent import UnknownNavigatorError
    from c2s_core.tree import TreeError

    if transport not in ("stdio", "http"):
        fail(f"--transport must be stdio or http, not {transport!r}")
    opts = {k: v for k, v in (("model", model), ("base_url", base_url)) if v}
    if opts and navigator == "offline":
        fail("--model and --base-url are for an LLM navigator (--navigator anthropic or openai)")
    if transport == "http" and token is not None and not token.strip():
        fail(f"the token is empty; set --token or {TOKEN_ENV} to a secret, or leave both unset")
    sock = None
    if transport == "http":
        try:
            sock = bind(host, port)
        except OSError as e:
            fail(f"cannot listen on {host}:{port}: {e.strerror or e}")
    try:
        live = LiveTree(tree)
    except TreeError as e:
        fail(str(e))
    try:
        try:
            server = build_server(live, navigator=navigator, max_turns=max_turns,
                                  ask_concurrency=ask_concurrency, **opts)
        except UnknownNavigatorError as e:
            fail(str(e))
        documents = len(live.current().tree.store)
        # SIGTERM ends the process through the finally below, which removes the snapshots (the
        # HTTP server hands a signal it caught back to this handler once it has shut down).
        signal.signal(signal.SIGTERM, _exit)
        if sock is None:
            err.print(f"c2s serve: {escape(str(live.out))} ({documents:,} documents) over stdio")
            run_stdio(server)
            return
        loopback = host in ("127.0.0.1", "localhost", "::1")
        err.print(f"c2s serve: {escape(str(live.out))} ({documents:,} documents) at {url_of(sock)}"
                  + (" (bearer token required)" if token else ""))
        if not loopback and not token:
            err.print(f"[yellow]warning:[/] listening on {escape(host)} without a token: anyone who can "
                      f"reach it can read the tree (set --token or {TOKEN_ENV})")
        run_http(server, sock, token=token)
    except KeyboardInterrupt:
        pass
    except SystemExit as e:
        if e.code != 128 + signal.SIGTERM:
            raise
    finally:
        live.close()


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def register(app: typer.Typer) -> None:
    """Add ``serve`` to ``app``."""
    app.command("serve")(serve)
