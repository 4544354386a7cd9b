"""The LLM navigators (``anthropic``, ``openai``) against the fake servers, which speak the
real protocols to the official SDKs: the tool-use loop, what we send, retries, malformed calls,
the turn budget, stop reasons, the citation check, usage accounting and the CLI."""

from __future__ import annotations

import glob
import json
import re
import time

import pytest
from typer.testing import CliRunner

from c2s_agent import answer
from c2s_agent.agent import RULES, preloaded_context
from c2s_cli.main import app
from c2s_agent.llm_navigator import CONTINUE_PROMPT, FINAL_PROMPT
from c2s_agent.tools import TreeTools
from c2s_core.llm import pricing
from c2s_core.llm.clients import MissingAPIKeyError, RetryPolicy, Usage

from .fakes.llm_servers import (FakeLLMServer, anthropic_server, openai_server,  # noqa: F401 - fixtures
                                openai_unparsable_tool_call, rate_limited, refusal, server_error, text, tool_use,
                                truncated)

FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05)
MODEL = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1"}
TOOL_NAMES = {"code_execution", "get_document", "search"}  # compiled trees carry a search index


@pytest.fixture(scope="module")
def tree(sample_tree):
    return sample_tree.out


@pytest.fixture(scope="module")
def nav(tree):
    """A real walk through the tree: a skill, its SKILL.md, a term, and a doc id from an INDEX.md."""
    tools = TreeTools(tree)
    skill = tools.tree.skills[0].name
    ids = set(tools.tree.store.ids())
    doc_id = other = None
    for path in sorted(glob.glob(f"{tree}/skills/{skill}/**/INDEX.md", recursive=True)):
        found = [i for i in re.findall(r"`([^`\s]+)`", open(path, encoding="utf-8").read()) if i in ids]
        if found:
            doc_id = found[0]
            break
    assert doc_id, "no INDEX.md row with a doc id in the sample tree"
    other = next(i for i in sorted(ids) if i != doc_id)
    term = re.findall(r"[A-Za-z]{5,}", tools.tree.store.get(doc_id).title)[0].lower()
    commands = ["ls skills", f"cat skills/{skill}/SKILL.md", f"grep -ril {term} skills | head"]
    outputs = [tools.code_execution(c) for c in commands] + [tools.get_document(doc_id)]
    return {"skill": skill, "doc_id": doc_id, "other": other, "commands": commands, "outputs": outputs}


@pytest.fixture(params=["anthropic", "openai"])
def server(request):
    with FakeLLMServer(request.param) as s:
        yield s


def ask(server, tree, question="How do I do the thing?", **opts):
    opts = {"api_key": "test", "base_url": server.base_url, "model": MODEL[server.flavor], "retry": FAST, **opts}
    return answer(question, tree, navigator=server.flavor, **opts)


def U(i, o, r=0, w=0):
    return {"input_tokens": i, "output_tokens": o, "cache_read_tokens": r, "cache_write_tokens": w}


def test_scripted_session(server, tree, nav):
    doc_id = nav["doc_id"]
    w = 1500 if server.flavor == "anthropic" else 0  # OpenAI reports cache reads only
    usages = [U(900, 20, 0, w), U(300, 25, 1500), U(250, 30, 1500), U(400, 15, 1500), U(1200, 60, 1500)]
    ids = ["t1", "t2", "t3", "t4"]
    calls = [("code_execution", {"command": c}) for c in nav["commands"]] + [("get_document", {"doc_id": doc_id})]
    server.enqueue(*[tool_use((i, n, a), usage=u) for i, (n, a), u in zip(ids, calls, usages)],
                   text(f"Do it this way [{doc_id}].", usage=usages[-1]))
    result = ask(server, tree)

    assert server.pending == 0 and len(server.requests) == 5
    assert result.answer == f"Do it this way [{doc_id}]."
    assert result.citations == [doc_id] and result.fetched == [doc_id] and result.grounded
    assert [c.tool for c in result.trace] == ["code_execution"] * 3 + ["get_document"]
    assert result.turns == 5 and result.navigator == server.flavor
    assert f"skills/{nav['skill']}/SKILL.md" in result.visited
    assert result.reached is None  # an LLM navigator does not record what its descent reached
    # usage: exactly the sum of what the server reported, priced by the model asked for
    total = sum((Usage(**u) for u in usages), Usage())
    for key, value in total.as_dict().items():
        assert result.usage[key] == value, key
    assert result.usage["llm_calls"] == 5 and result.usage["http_attempts"] == 5
    assert result.usage["cost_usd"] == pytest.approx(pricing.cost(MODEL[server.flavor], total), abs=1e-6)

    for n, req in enumerate(server.requests):
        body = req.body
        names = ({t["name"] for t in body["tools"]} if server.flavor == "anthropic"
                 else {t["function"]["name"] for t in body["tools"]})
        assert names == TOOL_NAMES
        assert RULES in req.system and preloaded_context(tree) in req.system
        if server.flavor == "anthropic":  # the stable prefix is marked for the prompt cache
            assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
            assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        if n:  # each request answers the previous call with the real sandbox output
            assert req.tool_results == [{"id": ids[n - 1], "content": nav["outputs"][n - 1], "is_error": False}]
    assert "tool_choice" not in server.requests[0].body


def test_anthropic_prompt_cache_reads_the_prefix(anthropic_server, tree, nav):
    anthropic_server.enqueue(tool_use(("code_execution", {"command": "ls skills"})), text("No documents answer it."))
    result = ask(anthropic_server, tree)
    assert result.usage["cache_write_tokens"] > 0 and result.usage["cache_read_tokens"] > 0
    assert "no citation" in result.flags[0]


def test_429_and_500_are_survived(server, tree, nav):
    doc_id = nav["doc_id"]
    server.enqueue(rate_limited(0.2), tool_use(("get_document", {"doc_id": doc_id})), server_error(),
                   text(f"Yes [{doc_id}]."))
    start = time.monotonic()
    result = ask(server, tree)
    assert time.monotonic() - start >= 0.2  # retry-after honoured
    assert len(server.requests) == 4 and server.requests[1].started - server.requests[0].started >= 0.2
    assert result.grounded and result.citations == [doc_id]
    assert result.usage["llm_calls"] == 2 and result.usage["http_attempts"] == 4


def test_malformed_tool_calls_get_error_results(server, tree, nav):
    server.enqueue(tool_use(("a", "rm_everything", {"path": "/"}), ("b", "code_execution", {}),
                            ("c", "get_document", {"doc_id": "no-such-doc"}), ("d", "code_execution", {"command": "ls"})))
    if server.flavor == "openai":  # arguments that are not JSON at all
        server.enqueue(openai_unparsable_tool_call("e", "get_document", "{doc_id: oops"))
    server.enqueue(f"Found it [{nav['doc_id']}].")
    result = ask(server, tree)
    assert result.answer.startswith("Found it")  # the loop went on
    results = server.requests[1].tool_results
    assert [r["id"] for r in results] == ["a", "b", "c", "d"]
    assert all(r["content"].startswith("error:") for r in results[:3]) and not results[3]["content"].startswith("error")
    assert "unknown tool" in results[0]["content"] and "'command'" in results[1]["content"]
    if server.flavor == "anthropic":
        assert [r["is_error"] for r in results] == [True, True, True, False]
    else:
        bad = server.requests[2].tool_results
        assert bad[0]["id"] == "e" and "not valid JSON" in bad[0]["content"]
    assert [c.error for c in result.trace][:3] == [True, True, True]
    assert all(c.seconds < 5 for c in result.trace)
    # cited but never fetched (get_document failed): flagged
    assert any("never retrieved" in f for f in result.flags)


def test_turn_budget_is_enforced(server, tree):
    def handler(req):
        choice = req.body.get("tool_choice")
        if choice in ("none", {"type": "none"}):
            return text("I could not find it in time.")
        return tool_use(("code_execution", {"command": "ls skills"}))

    server.handler = handler
    result = ask(server, tree, max_turns=3)
    assert len(server.requests) == 4 and result.turns == 4
    last = server.requests[-1]
    assert last.body["tool_choice"] in ("none", {"type": "none"}) and FINAL_PROMPT in last.user_text
    assert "Turn budget exhausted" in server.requests[-2].user_text  # the reminder before the last tool round
    assert result.answer == "I could not find it in time."
    assert any("exhausted" in n for n in result.notes) and len(result.trace) == 3


def _tool_names(server, req) -> set[str]:
    tools = req.body["tools"]
    return {t["name"] for t in tools} if server.flavor == "anthropic" else {t["function"]["name"] for t in tools}


def test_search_tool_in_the_loop(server, tree, nav):
    """The model searches (the fallback), reads a hit with get_document and cites it."""
    doc_id = nav["doc_id"]
    title = TreeTools(tree).tree.store.get(doc_id).title
    server.enqueue(tool_use(("s1", "search", {"query": title, "k": 3})),
                   tool_use(("s2", "search", {"k": 2})),  # no query: an error result, the loop goes on
                   tool_use(("g1", "get_document", {"doc_id": doc_id})),
                   text(f"Here [{doc_id}]."))
    result = ask(server, tree)
    assert result.answer == f"Here [{doc_id}]." and result.grounded and result.fetched == [doc_id]
    found = server.requests[1].tool_results[0]
    rows = found["content"].splitlines()
    assert 1 <= len(rows) <= 3 and f"`{doc_id}`" in rows[0] and "INDEX.md" in rows[0] and "score" in rows[0]
    assert not found["is_error"] if server.flavor == "anthropic" else not found["content"].startswith("error")
    missing = server.requests[2].tool_results[0]
    assert "'query'" in missing["content"] and missing["content"].startswith("error:")
    assert [c.tool for c in result.trace] == ["search", "search", "get_document"]
    assert result.usage["search_calls"] == 2 and result.usage["search_bytes"] > 0
    for req in server.requests:
        assert _tool_names(server, req) == TOOL_NAMES
        assert "search(query, k)" in req.system and "evidence is thin" in req.system


def test_route_false_offers_no_search_tool(server, tree, nav):
    server.enqueue(tool_use(("s1", "search", {"query": "anything"})), text("Nothing found."))
    result = ask(server, tree, route=False)
    assert _tool_names(server, server.requests[0]) == {"code_execution", "get_document"}
    # a model that calls it anyway gets an error result, though the tree has the index
    assert "unknown tool 'search'" in server.requests[1].tool_results[0]["content"]
    assert result.answer == "Nothing found." and [c.error for c in result.trace] == [True]


def test_citations_checked(server, tree, nav):
    server.enqueue(tool_use(("get_document", {"doc_id": nav["doc_id"]})),
                   text(f"A [{nav['doc_id']}]. B [{nav['other']}]. C [made-up-id]."))
    result = ask(server, tree)
    assert result.citations == [nav["doc_id"], nav["other"], "made-up-id"]
    assert result.fetched == [nav["doc_id"]]
    assert any(nav["other"] in f and "never retrieved" in f for f in result.flags)
    assert any("made-up-id" in f and "not a document" in f for f in result.flags)
    assert not result.grounded


def test_refusal_is_flagged(server, tree):
    server.enqueue(refusal("I can't help with that."))
    result = ask(server, tree)
    assert result.answer == "I can't help with that." and any(f.startswith("refusal") for f in result.flags)
    assert len(server.requests) == 1


def test_max_tokens_asks_once_to_conclude(server, tree, nav):
    server.enqueue(tool_use(("get_document", {"doc_id": nav["doc_id"]})), truncated("Step 1: open the"),
                   text(f" settings [{nav['doc_id']}]."))
    result = ask(server, tree)
    assert result.answer == f"Step 1: open the settings [{nav['doc_id']}]." and result.grounded
    assert CONTINUE_PROMPT in server.requests[-1].user_text and len(server.requests) == 3


def test_missing_key_names_the_variable(monkeypatch, tree):
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(MissingAPIKeyError, match="ANTHROPIC_API_KEY"):
        answer("q?", tree, navigator="anthropic")
    with pytest.raises(MissingAPIKeyError, match="OPENAI_API_KEY"):
        answer("q?", tree, navigator="openai")
    run = CliRunner().invoke(app, ["ask", "q?", "--tree", str(tree), "--navigator", "anthropic"])
    assert run.exit_code == 2 and "ANTHROPIC_API_KEY" in run.output


def test_cli_ask_with_an_llm_navigator(monkeypatch, openai_server, tree, nav):  # noqa: F811
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    openai_server.enqueue(tool_use(("get_document", {"doc_id": nav["doc_id"]})), text(f"Yes [{nav['doc_id']}]."))
    run = CliRunner().invoke(app, ["ask", "q?", "--tree", str(tree), "--navigator", "openai", "--model", "my-model",
                                   "--base-url", openai_server.base_url, "--json"])
    assert run.exit_code == 0, run.output
    data = json.loads(run.output)
    assert data["citations"] == [nav["doc_id"]] and data["flags"] == [] and data["usage"]["model"] == "my-model"
    assert data["navigator"] == "openai"
    assert openai_server.requests[0].body["model"] == "my-model"
    openai_server.enqueue(tool_use(("get_document", {"doc_id": nav["doc_id"]})), text(f"Yes [{nav['doc_id']}]."))
    run = CliRunner().invoke(app, ["ask", "q?", "--tree", str(tree), "--provider", "openai", "--model", "my-model",
                                   "--base-url", openai_server.base_url])  # --provider: the old spelling
    assert run.exit_code == 0, run.output
    assert "Sources" in run.output and nav["doc_id"] in run.output and "my-model: 2 calls" in run.output
    run = CliRunner().invoke(app, ["ask", "q?", "--tree", str(tree), "--model", "m"])
    assert run.exit_code == 2 and "for an LLM navigator (--navigator anthropic or openai)" in run.output
