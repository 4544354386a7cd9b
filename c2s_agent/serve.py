"""Serving a compiled tree to any MCP client: ``c2s serve --tree OUT [--transport stdio|http]``.

The server offers the agent's own tools over the Model Context Protocol (official SDK, ``mcp``):

- tools ``code_execution(command)``, ``get_document(doc_id, offset)`` and ``search(query, k)``:
  exactly the tools of :class:`~c2s_agent.tools.TreeTools` (same sandbox, limits and replies),
  and ``ask(question)``: :func:`c2s_agent.agent.answer` with the configured navigator (default
  ``offline``);
- resources ``c2s://tree/{+path}`` (a file of the tree, read through the sandbox's rules),
  ``c2s://doc/{+doc_id}`` (a document's full text) and ``c2s://skills`` (the top-level skills).

One process serves many clients from one loaded tree. A recompile publishes a new tree by
renaming a new directory over OUT (:mod:`c2s_core.atomic_publish`) and deletes the old one at once,
so the server never reads OUT in place: it serves a private snapshot of each published version
(hard links, beside OUT; copies where links are impossible), checks OUT's identity at the start
of every call and snapshots a new version when it changes. A call keeps the snapshot it started
with to its end; a replaced snapshot is deleted once its last call finishes::

    server = build_server("out/tree")            # an MCPServer; mcp.Client(server) talks to it in-process
    with LiveTree("out/tree") as live, live.use() as tree:
        ...                                      # tree: one version, stable until the block ends
"""

import atexit
import hmac
import itertools
import logging
import os
import re
import shlex
import shutil
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from c2s_core.layout import MANIFEST_FILE
from c2s_core.search_index import DEFAULT_MODE

from .tools import MAX_SEARCH_K, SEARCH_K, SEARCH_SCHEMA, TOOL_SCHEMAS, TreeTools
from c2s_core.tree import Tree, TreeError

log = logging.getLogger("c2s.serve")

SERVER_NAME = "c2s"
HTTP_PATH = "/mcp"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOKEN_ENV = "C2S_SERVE_TOKEN"
TREE_URI = "c2s://tree/{+path}"
DOC_URI = "c2s://doc/{+doc_id}"
SKILLS_URI = "c2s://skills"
RESOURCE_MAX_BYTES = 4 << 20  # a resource read returns at most this much of a file
REQUEST_TIMEOUT_S = 10.0  # an HTTP request's headers and body must arrive within this
SNAPSHOT_ATTEMPTS = 5  # tries to copy a version that a publish keeps replacing mid-copy
_GLOB = re.compile(r"[*?[]")


# -- the live tree ------------------------------------------------------------------------


@dataclass(eq=False)
class Snapshot:
    """One published version of the tree, in a directory only this server uses."""

    tree: Tree
    identity: tuple
    version: int
    refs: int = 0
    retired: bool = False

    @property
    def root(self) -> Path:
        return self.tree.root


@dataclass
class _Stats:
    reloads: int = 0
    rejected: list[str] = field(default_factory=list)  # why a published version was not served


class LiveTree:
    """The tree published at ``out``, as snapshots: :meth:`use` gives a call the current one.

    Thread-safe. ``workdir`` holds the snapshots (default: a hidden folder beside ``out``, so
    they can be hard links; a temporary folder of copies where that folder cannot be made).
    """

    def __init__(self, out: str | os.PathLike[str], *, workdir: str | os.PathLike[str] | None = None):
        self.out = Path(out).expanduser().absolute()
        Tree(self.out)  # a clear TreeError now, rather than a bare missing-file error below
        self._lock = threading.Lock()  # snapshot state and reference counts
        self._building = threading.Lock()  # one snapshot copy at a time
        self._numbers = itertools.count(1)
        self._link = True  # false once hard links failed: copy from then on
        self._rejected: tuple | None = None  # identity of a published version that is broken
        self.stats = _Stats()
        self.on_reload: list[Callable[[Tree], None]] = []  # called with each newly served version
        self.workdir = self._make_workdir(workdir)
        atexit.register(_remove, self.workdir)  # whatever a caller forgets to close
        try:
            first = self._snapshot()
        except TreeError:
            self.close()
            raise
        if first is None:
            self.close()
            raise TreeError(f"{self.out} kept changing while it was read; retry when the compile has published")
        self._current: Snapshot | None = first

    # -- calls --------------------------------------------------------------------------

    @contextmanager
    def use(self) -> Iterator[Tree]:
        """The current version for the length of one call (a newer one is picked up first)."""
        snap = self._acquire()
        try:
            yield snap.tree
        finally:
            self._release(snap)

    def current(self) -> Snapshot:
        """The version a call starting now gets (checks ``out`` first)."""
        snap = self._acquire()
        self._release(snap)
        return snap

    def _acquire(self) -> Snapshot:
        identity = _identity(self.out)
        with self._lock:
            if self._current is None:
                raise TreeError("the tree server is closed")
            stale = identity is not None and identity not in (self._current.identity, self._rejected)
            snap = self._current
            if not stale:
                snap.refs += 1
                return snap
        # A new version is published. One call copies it; calls arriving meanwhile keep the
        # version they would have had (the copy takes milliseconds to seconds, by tree size).
        if self._building.acquire(blocking=False):
            try:
                self._reload()
            finally:
                self._building.release()
        with self._lock:
            if self._current is None:
                raise TreeError("the tree server is closed")
            snap = self._current
            snap.refs += 1
            return snap

    def _release(self, snap: Snapshot) -> None:
        with self._lock:
            snap.refs -= 1
            done = snap.retired and snap.refs == 0
        if done:
            _remove(snap.root)

    def _reload(self) -> None:
        with self._lock:
            current = self._current
        if current is None or _identity(self.out) in (current.identity, self._rejected, None):
            return  # another call got here first, or the swap is still under way
        try:
            snap = self._snapshot()
        except TreeError as e:
            self._rejected = _identity(self.out)
            self.stats.rejected.append(str(e))
            log.warning("not serving the tree published at %s: %s; still serving the previous one", self.out, e)
            return
        if snap is None:
            return  # kept changing: the next call tries again
        with self._lock:
            old, self._current = self._current, snap
            self.stats.reloads += 1
            if old is not None:
                old.retired = True
                done = old.refs == 0
        if old is not None and done:
            _remove(old.root)
        log.info("serving version %d of %s", snap.version, self.out)
        for hook in self.on_reload:
            try:
                hook(snap.tree)
            except Exception:  # a hook must not fail the call that found the new version
                log.exception("reload hook failed")

    # -- snapshots ----------------------------------------------------------------------

    def _snapshot(self) -> Snapshot | None:
        """Copy the version now at ``out``; None when every try saw it replaced mid-copy."""
        for _ in range(SNAPSHOT_ATTEMPTS):
            before = _identity(self.out)
            if before is None:
                return None
            number = next(self._numbers)
            dest = self.workdir / f"v{number}"
            try:
                self._copy(self.out, dest)
            except FileNotFoundError:  # a publish moved it away mid-copy
                _remove(dest)
                continue
            if _identity(self.out) != before:
                _remove(dest)
                continue
            try:
                tree = Tree(dest)
                tree.manifest, tree.skills  # noqa: B018 - check it is whole before serving it
            except TreeError as e:
                _remove(dest)
                raise TreeError(str(e).replace(str(dest), str(self.out))) from None
            return Snapshot(tree, before, number)
        return None

    def _copy(self, src: Path, dest: Path) -> None:
        """``src`` into ``dest``: files hard-linked (a compile never rewrites a published file,
        it publishes a new directory), symlinks kept as symlinks so the sandbox still refuses
        them, anything else (FIFOs, devices) left out."""
        dest.mkdir()
        for folder, dirs, files in os.walk(src):
            rel = Path(folder).relative_to(src)
            for name in dirs + files:
                s, d = Path(folder) / name, dest / rel / name
                mode = s.lstat().st_mode
                if stat.S_ISLNK(mode):
                    os.symlink(os.readlink(s), d)
                elif stat.S_ISDIR(mode):
                    d.mkdir()
                elif stat.S_ISREG(mode):
                    self._file(s, d)
            dirs[:] = [n for n in dirs if not (Path(folder) / n).is_symlink()]

    def _file(self, src: Path, dest: Path) -> None:
        if self._link:
            try:
                os.link(src, dest, follow_symlinks=False)
                return
            except FileNotFoundError:
                raise
            except OSError:  # another file system, or no hard links there
                self._link = False
        shutil.copy2(src, dest)

    def _make_workdir(self, workdir: str | os.PathLike[str] | None) -> Path:
        if workdir is not None:
            path = Path(workdir)
            path.mkdir(parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix="c2s-serve-", dir=path))
        prefix = f".{self.out.name}.serving-"
        _remove_stale(self.out.parent, prefix)
        try:
            return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=self.out.parent))
        except OSError:  # a read-only parent: copies in the temporary folder instead
            self._link = False
            return Path(tempfile.mkdtemp(prefix="c2s-serve-"))

    def close(self) -> None:
        """Delete every snapshot (calls still running keep their open files until they end)."""
        with self._lock:
            self._current = None
        _remove(self.workdir)

    def __enter__(self) -> "LiveTree":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _identity(out: Path) -> tuple | None:
    """What changes when a new tree is published at ``out``: the directory itself (publishing
    renames a new one over it) and its manifest. None while ``out`` is missing (mid-swap)."""
    try:
        d = os.stat(out)
        m = os.stat(out / MANIFEST_FILE)
    except OSError:
        return None
    return (d.st_dev, d.st_ino, m.st_ino, m.st_mtime_ns, m.st_size)


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _remove_stale(parent: Path, prefix: str) -> None:
    """Snapshot folders left by servers that were killed (their pid is in the name)."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            _remove(parent / name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- the MCP server -----------------------------------------------------------------------


MAX_QUESTION_CHARS = 2000  # a question, not a document: longer ones are refused by name
MAX_RESOURCE_PATH_CHARS = 1024


@dataclass
class ServeContext:
    """What every tool call reads, from the server's lifespan (``ctx.request_context.lifespan_context``):
    the live tree and how ``ask`` answers."""

    live: LiveTree
    navigator: str = "offline"
    max_turns: int = 10
    navigator_options: dict = field(default_factory=dict)
    ask_slots: int = 1

    _limiters: Any = None  # a RunVar: one limiter per event loop (in-process clients run several)

    def limiter(self):
        """This event loop's limit on questions answered at once."""
        import anyio
        from anyio.lowlevel import RunVar

        if self._limiters is None:
            self._limiters = RunVar("c2s_ask_slots")
        try:
            return self._limiters.get()
        except LookupError:
            limiter = anyio.CapacityLimiter(self.ask_slots)
            self._limiters.set(limiter)
            return limiter


def _serve_context(ctx) -> ServeContext:
    return ctx.request_context.lifespan_context


def _tool_error(message: str):
    from mcp.server.mcpserver.exceptions import ToolError

    return ToolError(message)


def _checked(tools: TreeTools, output: str):
    """A tool's reply; a failed call (refused, stopped, an unknown id, a missing file) as a tool
    error (``isError: true``) carrying the agent's own one-line reason, word for word."""
    from mcp_types import CallToolResult, TextContent

    call = tools.trace[-1]
    if call.error or (call.tool == "code_execution" and tools.sandbox.last_status):
        return CallToolResult(content=[TextContent(type="text", text=output)], is_error=True)
    return output


def _schema(tool: str) -> dict:
    return next(s for s in [*TOOL_SCHEMAS, SEARCH_SCHEMA] if s["name"] == tool)


def _described(tool: str, param: str) -> str:
    return _schema(tool)["input_schema"]["properties"][param]["description"]


# -- the tools: typed functions over the lifespan's context -------------------------------

Context = Any  # replaced by mcp's Context on first build (the SDK loads only when serving)


def code_execution(command: Annotated[str, Field(description=_described("code_execution", "command"))],
                   ctx: "Context") -> str:
    with _serve_context(ctx).live.use() as t:
        tools = TreeTools(t)
        return _checked(tools, tools.code_execution(command))


def get_document(doc_id: Annotated[str, Field(description=_described("get_document", "doc_id"))],
                 ctx: "Context",
                 offset: Annotated[int, Field(ge=0, description=_described("get_document", "offset"))] = 0) -> str:
    with _serve_context(ctx).live.use() as t:
        tools = TreeTools(t)
        return _checked(tools, tools.get_document(doc_id, offset))


def search(query: Annotated[str, Field(description=_described("search", "query"))], ctx: "Context",
           k: Annotated[int, Field(ge=1, le=MAX_SEARCH_K, description=_described("search", "k"))] = SEARCH_K,
           mode: Annotated[Literal["bm25", "dense", "hybrid"],
                           Field(description=_described("search", "mode"))] = DEFAULT_MODE) -> str:
    # Offered whatever the tree: one compiled before search indexes existed answers with the
    # tool's own error, and a republish may add or drop the index without a restart.
    with _serve_context(ctx).live.use() as t:
        tools = TreeTools(t)
        return _checked(tools, tools.search(query, k, mode))


class AskResult(BaseModel):
    answer: str = Field(description="the answer, citing documents as [doc_id]")
    citations: list[str] = Field(description="doc ids the answer cites, in order")
    path: str = Field(description="the branch of the tree the answer came from")
    flags: list[str] = Field(description="citation check problems (empty: every citation was read)")


async def ask(question: Annotated[str, Field(description="the question, in natural language")],
              ctx: "Context") -> AskResult:
    import anyio

    state = _serve_context(ctx)
    if not question.strip():
        raise _tool_error("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise _tool_error(f"the question is {len(question):,} characters; the limit is {MAX_QUESTION_CHARS:,}")
    # The offline navigator is CPU-bound (and its encoder runs one batch at a time): more
    # questions at once than cores only add threads and memory; the rest wait their turn.
    return await anyio.to_thread.run_sync(_answer, state, question, limiter=state.limiter())


def _answer(state: ServeContext, question: str) -> AskResult:
    from c2s_core.llm.clients import LLMError

    from .agent import answer

    with state.live.use() as t:
        try:
            result = answer(question, t, navigator=state.navigator, max_turns=state.max_turns,
                            **state.navigator_options)
        except LLMError as e:
            raise _tool_error(str(e)) from None
    return AskResult(answer=result.answer, citations=result.citations, path=result.path, flags=result.flags)


def tree_file(path: str, ctx: "Context") -> str:
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    if not path or path.startswith(("/", "\\", "~")) or "\0" in path:
        raise MCPError(INVALID_PARAMS, f"refused: {_shown(path)!r} is not a path relative to the tree")
    if len(path) > MAX_RESOURCE_PATH_CHARS:
        raise MCPError(INVALID_PARAMS, f"refused: the path is {len(path):,} characters; "
                                       f"the limit is {MAX_RESOURCE_PATH_CHARS:,}")
    if _GLOB.search(path):
        raise MCPError(INVALID_PARAMS, "refused: a resource names one file; use code_execution for globs")
    with _serve_context(ctx).live.use() as t:
        tools = TreeTools(t, max_output_bytes=RESOURCE_MAX_BYTES)
        text = tools.code_execution(f"cat -- {shlex.quote(path)}")
        status = tools.sandbox.last_status
    if status == 2:
        raise MCPError(INVALID_PARAMS, text)
    if status:
        raise ResourceNotFoundError(text)
    return text + "\n"


def document(doc_id: str, ctx: "Context") -> str:
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError

    with _serve_context(ctx).live.use() as t:
        tools = TreeTools(t, page_chars=sys.maxsize)
        text = tools.get_document(doc_id)
        failed = tools.trace[-1].error
    if failed:
        raise ResourceNotFoundError(text)
    return text


def _shown(text: str, keep: int = 80) -> str:
    return text if len(text) <= keep else text[:keep] + "…"


def build_server(tree: LiveTree | str | os.PathLike[str], *, navigator: str = "offline",
                 max_turns: int = 10, ask_concurrency: int | None = None, **navigator_options: object):
    """An ``MCPServer`` over ``tree`` (a path, or a :class:`LiveTree` to share); ``navigator``
    (who navigates: ``offline``, ``anthropic``, ``openai`` or a registered one), ``max_turns`` and
    ``navigator_options`` (``model``, ``base_url``) drive the ``ask`` tool, which answers at most
    ``ask_concurrency`` questions at once (default: one per CPU for the offline navigator, 16 for
    an LLM one). Run it with :func:`run_stdio` / :func:`run_http`, or
    connect ``mcp.Client(server)`` in-process."""
    from mcp.server.mcpserver import Context as McpContext
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.resources import ResourceSecurity

    from .agent import RULES, check_navigator, preloaded_context

    check_navigator(navigator)
    live = tree if isinstance(tree, LiveTree) else LiveTree(tree)
    state = ServeContext(live, navigator, max_turns, dict(navigator_options),
                         ask_concurrency or ((os.cpu_count() or 2) if navigator == "offline" else 16))

    @asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[ServeContext]:
        yield state  # the tree stays open across connections; close() of the LiveTree ends it

    def instructions(t: Tree) -> str:  # the agent's system prompt: the method's rules, the skills
        return f"{RULES}\n\n{preloaded_context(t)}"

    with live.use() as t:
        server = MCPServer(SERVER_NAME, instructions=instructions(t), log_level="WARNING", lifespan=lifespan,
                           description="A compiled c2s skill tree: navigate it, read its documents, ask it.")

    def refresh_instructions(t: Tree) -> None:  # clients that connect later see the new skills
        lowlevel = getattr(server, "_lowlevel_server", None)
        if lowlevel is not None and hasattr(lowlevel, "instructions"):
            lowlevel.instructions = instructions(t)

    live.on_reload.append(refresh_instructions)
    _bind_context(McpContext)
    for fn in (code_execution, get_document, search):
        server.add_tool(fn, description=_schema(fn.__name__)["description"], structured_output=False)
    server.add_tool(ask, description=(
        "Answer a question from the tree's documents: the server navigates the tree itself "
        f"(navigator {navigator!r}) and returns the answer with [doc_id] citations and the path taken."))
    server.resource(TREE_URI, name="tree-file", mime_type="text/markdown",
                    security=ResourceSecurity(exempt_params={"path"}),  # the sandbox's rules apply
                    description=("A file of the tree, e.g. c2s://tree/skills/<skill>/SKILL.md, read with the "
                                 "sandbox's rules: no '..' out of the tree, absolute paths, hidden names or "
                                 "symbolic links. manifest.json is shown with host paths redacted."))(tree_file)
    server.resource(DOC_URI, name="document", mime_type="text/plain",
                    security=ResourceSecurity(exempt_params={"doc_id"}),  # ids are keys, never paths
                    description=("A document's full text by exact doc_id (percent-encode '#' and '?' as "
                                 "%23 and %3F), with the same header as get_document."))(document)

    @server.resource(SKILLS_URI, name="skills", mime_type="text/markdown",
                     description="The top-level skills with their descriptions: where navigation starts.")
    def skills() -> str:  # a static resource gets no ctx (the SDK's rule): the tree by closure
        with live.use() as t:
            return preloaded_context(t) + "\n"

    server.live_tree = live  # type: ignore[attr-defined]  # for callers that built it from a path
    return server


def _bind_context(context_type: type) -> None:
    """The tools' ``ctx: "Context"`` is the SDK's Context, which it injects by type (the SDK is
    imported only once a server is built: the CLI stays quick to start)."""
    global Context
    Context = context_type


class BearerToken:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app, token: str):
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and not self._allowed(scope):
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"www-authenticate", b'Bearer realm="c2s"')]})
            await send({"type": "http.response.body",
                        "body": b'{"error": "unauthorized: send Authorization: Bearer <token>"}'})
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope) -> bool:
        header = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
        scheme, _, value = header.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), self.token)


def http_app(server, *, token: str | None = None, host: str = DEFAULT_HOST):
    """The server's streamable HTTP ASGI app at ``/mcp``, behind the token when one is given."""
    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    return BearerToken(app, token) if token else app


def bind(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> socket.socket:
    """A listening socket (port 0: any free port; read it back with getsockname). It listens at
    once, so a client that connects as soon as the URL is printed waits in the backlog until the
    HTTP server accepts, instead of being refused."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    sock.listen(2048)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{HTTP_PATH}"


def run_http(server, sock: socket.socket, *, token: str | None = None,
             request_timeout_s: float = REQUEST_TIMEOUT_S) -> None:
    """Serve streamable HTTP on ``sock`` until interrupted (Ctrl-C, SIGTERM). A request must
    arrive whole (headers and body) within ``request_timeout_s`` of its first byte, or of the
    connection: a client that sends half a request is disconnected, not waited for."""
    import uvicorn

    host = sock.getsockname()[0]
    config = uvicorn.Config(http_app(server, token=token, host=host), log_level="warning",
                            timeout_graceful_shutdown=5, timeout_keep_alive=5,
                            http=timed_http_protocol(request_timeout_s))
    uvicorn.Server(config).run(sockets=[sock])


def timed_http_protocol(seconds: float):
    """uvicorn's HTTP protocol (httptools) with a deadline for receiving each request; without
    httptools, uvicorn's own (idle keep-alive connections still close after 5 s)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        log.warning("httptools is not installed: HTTP requests have no receive deadline")
        return "auto"

    class TimedRequests(HttpToolsProtocol):
        _deadline = None

        def _arm(self) -> None:
            if self._deadline is None:
                self._deadline = self.loop.call_later(seconds, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()  # until its first request has arrived

        def on_message_begin(self) -> None:
            self._arm()
            super().on_message_begin()

        def on_message_complete(self) -> None:
            self._disarm()  # the response may take as long as it needs (ask, event streams)
            super().on_message_complete()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

    return TimedRequests


def run_stdio(server) -> None:
    """Serve one client over stdin/stdout until it closes them."""
    import anyio

    anyio.run(server.run_stdio_async)
