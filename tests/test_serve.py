"""c2s serve: the tree over MCP, checked with the SDK's own client in-process, over stdio and over
streamable HTTP, and while a recompile republishes the tree under it."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from typer.testing import CliRunner

pytest.importorskip("mcp.server.mcpserver")

from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from c2s_core.atomic_publish import publish, staged_path

from .conftest import ROOT

DOC = "account-and-sign-in/account-locked-after-failed-sign-ins.md"
QUESTION = "I keep getting TW-1002 when I try to log in. How long until I can get back in?"
TOOLS = {"code_execution", "get_document", "search", "ask"}
TEMPLATES = {"c2s://tree/{+path}", "c2s://doc/{+doc_id}"}


def copy_tree(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


def republish(out: Path, version: int) -> str:
    """Publish a copy of ``out`` with one nav file and one document changed, by renames as a
    compile does; returns the line added to the nav file."""
    stage = staged_path(out)
    shutil.copytree(out, stage, symlinks=True)
    line = f"republished as version {version}"
    skill = next((stage / "skills").glob("*/SKILL.md"))
    skill.write_text(skill.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    con = sqlite3.connect(stage / "documents.sqlite")
    con.execute("UPDATE documents SET text = text || ? WHERE doc_id = ?", (f"\n{line}", DOC))
    con.commit()
    con.close()
    publish(stage, out, "sample")
    return line


def first_skill(out: Path) -> str:
    return next((out / "skills").glob("*/SKILL.md")).relative_to(out).as_posix()


async def within(seconds: float, main):
    with anyio.fail_after(seconds):  # a hung server fails the test instead of stalling it
        return await main()


def others_snapshots(tree: Path) -> list[Path]:
    """Snapshot folders of servers other than this process's own (the in-process one)."""
    return [p for p in tree.parent.glob(f".{tree.name}.serving-*")
            if not p.name.startswith(f".{tree.name}.serving-{os.getpid()}-")]


def text(result) -> str:
    assert not result.is_error, result.content
    return result.content[0].text


def failure(result) -> str:
    assert result.is_error, result.content
    return result.content[0].text


@pytest.fixture(scope="module")
def tree(sample_tree, tmp_path_factory) -> Path:
    """A private copy of the sample tree (other tests' trees are never republished)."""
    return copy_tree(sample_tree.out, tmp_path_factory.mktemp("serve") / "sample")


@pytest.fixture(scope="module")
def server(tree):
    from c2s_agent.serve import build_server

    server = build_server(tree)
    yield server
    server.live_tree.close()


def test_in_process_tools_match_the_agent_tools(server, tree):
    from c2s_agent.tools import TreeTools

    async def main():
        async with Client(server) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            assert {t.uri_template for t in (await client.list_resource_templates()).resource_templates} == TEMPLATES
            assert "Skills (skills/<name>/SKILL.md)" in client.instructions
            agent = TreeTools(tree)
            for command in ("ls skills", f"grep -il tw-1002 {first_skill(tree)}"):
                assert text(await client.call_tool("code_execution", {"command": command})) == \
                    agent.code_execution(command)
            # Failures are tool errors (isError), with the agent's own one-line reason.
            for command in ("cat ../manifest.json", "ls; rm -rf /", "cat no-such.md"):
                assert failure(await client.call_tool("code_execution", {"command": command})) == \
                    agent.code_execution(command)
            for args in ({"doc_id": DOC}, {"doc_id": DOC, "offset": 100}):
                assert text(await client.call_tool("get_document", args)) == agent.get_document(**args)
            assert failure(await client.call_tool("get_document", {"doc_id": "no-such-doc"})) == \
                agent.get_document("no-such-doc")
            assert agent.has_search
            for args in ({"query": "TW-1002 locked"}, {"query": "refund", "k": 3}, {"query": "zzzqqq", "mode": "bm25"},
                         {"query": "I forgot my password", "mode": "dense"}, {"query": "refund", "mode": "hybrid"}):
                assert text(await client.call_tool("search", args)) == agent.search(**args)
            schema = next(t for t in (await client.list_tools()).tools if t.name == "search").input_schema
            assert schema["properties"]["mode"]["enum"] == ["bm25", "dense", "hybrid"]
            assert schema["properties"]["mode"]["default"] == "hybrid"
            assert f"`{DOC}`" in agent.search("TW-1002 locked")

    anyio.run(main)


def test_resources_read_tree_files_with_the_sandbox_rules(server, tree):
    skill = first_skill(tree)

    async def main():
        async with Client(server) as client:
            nav = (await client.read_resource(f"c2s://tree/{skill}")).contents[0].text
            assert nav.rstrip("\n") == (tree / skill).read_text(encoding="utf-8").rstrip("\n")
            manifest = json.loads((await client.read_resource("c2s://tree/manifest.json")).contents[0].text)
            assert str(tree) not in json.dumps(manifest)  # host paths redacted, as the sandbox shows it
            for uri, reason in ((f"c2s://tree/../{tree.name}/{skill}", "outside the tree"),
                                ("c2s://tree/skills/../../etc/passwd", "outside the tree"),
                                ("c2s://tree//etc/passwd", "not a path relative to the tree"),
                                ("c2s://tree/.c2s-tree", "hidden"),
                                ("c2s://tree/documents.sqlite", "binary"),
                                ("c2s://tree/skills/*/SKILL.md", "one file"),
                                ("c2s://tree/no-such.md", "No such file")):
                with pytest.raises(MCPError, match=re.escape(reason)):
                    await client.read_resource(uri)
            doc = (await client.read_resource(f"c2s://doc/{DOC}")).contents[0].text
            assert doc.startswith(f"doc_id: {DOC}\n") and "end of document" in doc
            with pytest.raises(MCPError, match="no document has doc_id"):
                await client.read_resource("c2s://doc/no-such-doc")
            skills = (await client.read_resource("c2s://skills")).contents[0].text
            assert skills.startswith("Skills (skills/<name>/SKILL.md):")

    anyio.run(main)


def test_ask_gives_the_answer_of_answer_and_c2s_ask(server, tree):
    from c2s_agent.agent import answer
    from c2s_cli.main import app

    async def main():
        async with Client(server) as client:
            return (await client.call_tool("ask", {"question": QUESTION})).structured_content, \
                await client.call_tool("ask", {"question": "  "})

    got, empty = anyio.run(main)
    expected = answer(QUESTION, tree=tree)
    assert got == {"answer": expected.answer, "citations": expected.citations, "path": expected.path,
                   "flags": expected.flags}
    assert expected.citations and DOC in expected.citations
    cli = CliRunner().invoke(app, ["ask", "--tree", str(tree), "--json", QUESTION])
    assert cli.exit_code == 0, cli.output
    assert {k: json.loads(cli.output)[k] for k in ("answer", "citations", "path")} == \
        {k: got[k] for k in ("answer", "citations", "path")}
    assert empty.is_error and "the question is empty" in empty.content[0].text


def test_stdio(tree):
    params = StdioServerParameters(command=sys.executable, args=["-m", "c2s_cli", "serve", "--tree", str(tree)],
                                   cwd=str(ROOT), env={"HF_HUB_OFFLINE": "1"})

    async def main():
        async with Client(params) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            assert {t.uri_template for t in (await client.list_resource_templates()).resource_templates} == TEMPLATES
            assert "skills/" in text(await client.call_tool("code_execution", {"command": "ls"}))
            assert text(await client.call_tool("get_document", {"doc_id": DOC})).startswith(f"doc_id: {DOC}")
            nav = (await client.read_resource(f"c2s://tree/{first_skill(tree)}")).contents[0].text
            assert nav.startswith("---\nname: ")
            with pytest.raises(MCPError, match="outside the tree"):
                await client.read_resource("c2s://tree/../x")

    anyio.run(within, 60, main)
    assert not others_snapshots(tree)  # the server removed its snapshots on the way out


@pytest.fixture
def http_server(tree):
    """``c2s serve --transport http`` with a token, on a free port of 127.0.0.1."""
    token = "t0ken-for-tests"
    proc = subprocess.Popen([sys.executable, "-m", "c2s_cli", "serve", "--tree", str(tree), "--transport", "http",
                             "--port", "0"], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "C2S_SERVE_TOKEN": token})
    try:
        line = proc.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/mcp", line)
        assert found, line + proc.stderr.read()
        yield found.group(), token
    finally:
        proc.terminate()
        assert proc.wait(15) == 0, proc.stderr.read()


def test_http_with_a_token(http_server, tree):
    from c2s_agent.agent import answer

    url, token = http_server
    hello = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
        refused = httpx.post(url, json=hello, headers=headers)
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")

    async def main():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            templates = (await client.list_resource_templates()).resource_templates
            assert {t.uri_template for t in templates} == TEMPLATES
            listing = text(await client.call_tool("code_execution", {"command": "ls skills"}))
            assert listing.splitlines() == sorted(p.name + "/" for p in (tree / "skills").iterdir())
            page = text(await client.call_tool("get_document", {"doc_id": DOC, "offset": 0}))
            assert page.startswith(f"doc_id: {DOC}")
            nav = (await client.read_resource(f"c2s://tree/{first_skill(tree)}")).contents[0].text
            assert nav.startswith("---\nname: ")
            with pytest.raises(MCPError, match="outside the tree"):
                await client.read_resource("c2s://tree/../x")
            return (await client.call_tool("ask", {"question": QUESTION})).structured_content

    got = anyio.run(within, 60, main)
    expected = answer(QUESTION, tree=tree)
    assert (got["answer"], got["citations"], got["path"]) == (expected.answer, expected.citations, expected.path)


def test_a_republished_tree_is_picked_up_with_no_failed_call(sample_tree, tmp_path):
    from c2s_agent.serve import build_server

    out = copy_tree(sample_tree.out, tmp_path / "trees" / "sample")
    skill = first_skill(out)
    server = build_server(out)
    live = server.live_tree
    seen: set[str] = set()
    calls = {"n": 0}

    async def client_loop(stop: anyio.Event):
        async with Client(server) as client:
            while not stop.is_set():
                nav = text(await client.call_tool("code_execution", {"command": f"tail -n 1 {skill}"}))
                doc = text(await client.call_tool("get_document", {"doc_id": DOC}))
                assert doc.startswith(f"doc_id: {DOC}") and "end of document" in doc
                seen.add(nav)
                calls["n"] += 2

    async def main():
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(client_loop, stop)
            lines = []
            for version in (2, 3, 4):
                await anyio.sleep(0.3)
                lines.append(await anyio.to_thread.run_sync(republish, out, version))
            await anyio.sleep(0.3)
            stop.set()
        async with Client(server) as client:
            nav = (await client.read_resource(f"c2s://tree/{skill}")).contents[0].text
            doc = text(await client.call_tool("get_document", {"doc_id": DOC}))
        return lines, nav, doc

    try:
        lines, nav, doc = anyio.run(main)
        assert calls["n"] > 50
        assert lines[-1] in nav.splitlines() and doc.rstrip().endswith(lines[-1])
        assert set(lines) & seen  # calls made during the load saw new versions
        assert live.stats.reloads == 3 and not live.stats.rejected
        assert [p.name for p in live.workdir.iterdir()] == [live.current().root.name]  # old ones removed
    finally:
        live.close()
    assert not live.workdir.exists()


def test_a_call_keeps_its_version_and_a_broken_publish_is_not_served(sample_tree, tmp_path):
    from c2s_agent.serve import LiveTree

    out = copy_tree(sample_tree.out, tmp_path / "sample")
    skill = first_skill(out)
    before = (out / skill).read_text(encoding="utf-8")
    with LiveTree(out) as live:
        reloaded = []
        live.on_reload.append(lambda tree: reloaded.append(tree.root))
        with live.use() as old:
            line = republish(out, 2)
            new = live.current()
            assert reloaded == [new.root]
            assert new.tree.root != old.root and line in (new.root / skill).read_text(encoding="utf-8")
            assert (old.root / skill).read_text(encoding="utf-8") == before  # the call's own version
            assert DOC in old.store and not old.store.get(DOC).text.endswith(line)
        assert not old.root.exists()  # removed once its last call ended

        stage = staged_path(out)  # published without its skills: not servable
        shutil.copytree(out, stage)
        shutil.rmtree(stage / "skills")
        publish(stage, out, "sample")
        with live.use() as tree:
            assert tree.root == new.root
        assert live.stats.rejected and "skills" in live.stats.rejected[0]


def test_serve_command(tree):
    import typer

    from c2s_cli.serve import register

    app = typer.Typer()
    register(app)

    @app.command("other")  # a second command, as in the c2s app: serve is a subcommand
    def other() -> None:
        pass

    runner = CliRunner()
    shown = runner.invoke(app, ["serve", "--help"])
    assert shown.exit_code == 0
    for option in ("--tree", "--transport", "--host", "--port", "--token", "--navigator"):
        assert option in shown.output
    missing = runner.invoke(app, ["serve", "--tree", str(tree.parent / "missing")])
    assert missing.exit_code == 2 and "tree not found" in missing.output
    bad = runner.invoke(app, ["serve", "--tree", str(tree), "--transport", "carrier-pigeon"])
    assert bad.exit_code == 2 and "stdio or http" in bad.output
    for spelling in ("--navigator", "--provider"):  # --provider: the old spelling
        unknown = runner.invoke(app, ["serve", "--tree", str(tree), spelling, "nope"])
        assert unknown.exit_code == 2 and "unknown navigator 'nope'" in unknown.output
    assert not others_snapshots(tree)


# -- failures and budgets over MCP ---------------------------------------------------------------


def test_failures_are_tool_errors_naming_no_internals(server, tree):
    async def main():
        async with Client(server) as client:
            calls = {
                "unknown doc id": ("get_document", {"doc_id": "no-such-doc"}),
                "refused path": ("code_execution", {"command": "cat ../../etc/passwd"}),
                "over-long name": ("code_execution", {"command": "cat " + "x" * 256}),
                "stopped": ("code_execution", {"command": "grep -E '(?R)*x' term_index.txt"}),
                "long question": ("ask", {"question": "refund " * 1000}),
                "empty search": ("search", {"query": " "}),
            }
            return {why: await client.call_tool(name, args) for why, (name, args) in calls.items()}

    results = anyio.run(main)
    for why, result in results.items():
        message = result.content[0].text
        assert result.is_error, (why, message)
        assert "\n" not in message and "Traceback" not in message, (why, message)
        # Neither the served tree nor the server's private snapshot folder is ever named.
        assert str(tree.parent) not in message and ".serving-" not in message, (why, message)
        assert "command line" not in message, (why, message)  # the client sent no command line for ask
    assert results["long question"].content[0].text.endswith("the question is 7,000 characters; the limit is 2,000")
    assert "over 255 bytes long" in results["over-long name"].content[0].text


def _rss(pid: int, field: str = "VmRSS") -> int:
    from c2s_agent.sandbox.worker import proc_status_bytes

    return proc_status_bytes(pid, field)


def _workers() -> list[int]:
    """This process's children: the sandbox's worker processes."""
    mine = []
    for name in os.listdir("/proc"):
        if name.isdigit() and f"PPid:\t{os.getpid()}\n" in _status_text(int(name)):
            mine.append(int(name))
    return mine


def _status_text(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_the_budget_holds_over_mcp(sample_tree, tmp_path):
    """Hostile commands over MCP: the server process's peak resident size barely moves (commands
    run in workers) and no worker's peak passes its budget; every call is answered."""
    from c2s_agent.serve import build_server

    out = copy_tree(sample_tree.out, tmp_path / "big")
    (out / "words.txt").write_text(("ab " * 20 + "\n") * 1_000_000)
    (out / "lines.txt").write_text("x\n" * 3_000_000)
    server = build_server(out)
    commands = ["grep -E '(?R)*x' term_index.txt", "wc -w words.txt", "cat -n lines.txt | wc -l",
                "sort lines.txt | uniq -c", "grep -cE '(x|xx)+$' lines.txt"]

    async def main():
        async with Client(server) as client:
            await client.call_tool("code_execution", {"command": "ls"})  # first-use imports
            replies = []
            for command in commands:
                Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here
                before = _rss(os.getpid())
                result = await client.call_tool("code_execution", {"command": command})
                replies.append((command, result, _rss(os.getpid(), "VmHWM") - before,
                                [_rss(pid, "VmHWM") for pid in _workers()]))
            return replies

    try:
        replies = anyio.run(within, 120, main)
    finally:
        server.live_tree.close()
    for command, result, server_growth, worker_peaks in replies:
        assert server_growth < 48 << 20, (command, server_growth >> 20)
        assert worker_peaks and max(worker_peaks) < (256 + 64) << 20, (command, [p >> 20 for p in worker_peaks])
    answers = {command: result.content[0].text for command, result, *_ in replies}
    assert answers["wc -w words.txt"] == "20000000 words.txt"
    assert answers["cat -n lines.txt | wc -l"] == "3000000"
    assert "calls a group recursively" in answers["grep -E '(?R)*x' term_index.txt"]


def test_half_sent_http_requests_are_dropped(tree):
    import socket
    import time

    code = ("import sys; from c2s_agent.serve import bind, build_server, run_http, url_of; "
            "s = build_server(sys.argv[1]); k = bind('127.0.0.1', 0); print(url_of(k), flush=True); "
            "run_http(s, k, request_timeout_s=1.0)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tree)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        url = proc.stdout.readline().strip()
        host, port = re.match(r"http://([\d.]+):(\d+)/mcp", url).groups()
        slow = []
        for _ in range(50):
            sock = socket.create_connection((host, int(port)))
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")  # never finished
            slow.append(sock)
        body = socket.create_connection((host, int(port)))  # headers whole, the body never
        body.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        slow.append(body)
        time.sleep(2.5)
        for sock in slow:
            sock.settimeout(5)  # recv raises TimeoutError on a connection still held open
            while sock.recv(1024):  # whatever the server wrote before closing, then end of stream
                pass
            sock.close()
        # Whole requests are still served.
        assert httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10).status_code < 500
    finally:
        proc.terminate()
        proc.wait(15)
