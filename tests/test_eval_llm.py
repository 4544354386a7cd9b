"""The evaluation harness with LLM navigators, against the fake Anthropic / OpenAI servers (the
official SDKs run their real code paths): flat baselines and the navigator answering with the
same LLM, the agentic method's tool loop, and the judge."""

from __future__ import annotations

import json
import re

import pytest

from c2s_agent.evaluation import bertscore
from c2s_agent.evaluation.agentic import FINAL_PROMPT, SEARCH_K, TOOLS, Agentic
from c2s_agent.evaluation.answering import ANSWER_SYSTEM, Answerer
from c2s_agent.evaluation.baselines import Baselines, Corpus
from c2s_agent.evaluation.judge import CONTEXT_CHARS, Judge, standard_context
from c2s_agent.evaluation.metrics import QAItem
from c2s_agent.evaluation.report import write_outputs
from c2s_agent.evaluation.runner import evaluate
from c2s_core.tree import open_tree
from c2s_core.llm import pricing
from c2s_core.llm.clients import RetryPolicy, Usage

from .fakes.llm_servers import FakeLLMServer, json_text, openai_unparsable_tool_call, text, tool_use

FAST = RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.05)
MODEL = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1"}
KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
DOCUMENT = re.compile(r'<document id="([^"]+)"')


@pytest.fixture(params=["anthropic", "openai"])
def server(request, monkeypatch):
    monkeypatch.setenv(KEY_ENV[request.param], "test")
    monkeypatch.delenv("C2S_AGENT_MODEL", raising=False)
    with FakeLLMServer(request.param) as s:
        yield s


@pytest.fixture(autouse=True)
def no_bertscore(monkeypatch):
    monkeypatch.setattr(bertscore, "installed", lambda: False)  # BERTScore is tested offline


@pytest.fixture(scope="module")
def tree(sample_tree):
    return sample_tree.out


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One cache for the module: the sample corpus is encoded for the dense index once."""
    return tmp_path_factory.mktemp("eval-cache")


@pytest.fixture(scope="module")
def baselines(tree, cache):
    found = Baselines(open_tree(tree), cache)
    found.prepare(["hybrid"])
    return found


@pytest.fixture(scope="module")
def items(baselines):
    """Questions about real documents of the sample tree, each document its gold id."""
    corpus = baselines.corpus
    picked = [0, len(corpus.ids) // 2, len(corpus.ids) - 1]
    return [QAItem(f"q{n}", f"How does {' '.join(corpus.titles[i].split())} work?",
                   " ".join(corpus.texts[i].split()[:30]), (corpus.ids[i],)) for n, i in enumerate(picked)]


def U(i, o):
    return {"input_tokens": i, "output_tokens": o, "cache_read_tokens": 0, "cache_write_tokens": 0}


def tool_names(req) -> set[str]:
    tools = req.body.get("tools") or []
    return {t.get("name") or t["function"]["name"] for t in tools}


def forced(req) -> bool:
    return req.body.get("tool_choice") in ("none", {"type": "none"})


# -- every method answers with the navigator's LLM -----------------------------------------------


def test_methods_answer_with_the_navigators_llm(server, tree, items, cache, tmp_path):
    def handler(req):
        names = tool_names(req)
        if "code_execution" in names:  # the navigator: gives up at once
            return text("I could not find this.", usage=U(2000, 10))
        if names == set(TOOLS):  # the agentic method: one search, then an answer citing its best hit
            if not req.tool_results:
                return tool_use(("search_hybrid", {"query": "booking settings"}), usage=U(900, 20))
            first = re.search(r"doc_id: (\S+)", req.tool_results[0]["content"]).group(1)
            return text(f"Agentic answer [{first}].", usage=U(1500, 30))
        ids = DOCUMENT.findall(req.user_text)  # a flat method: one call over its documents
        return text(f"Open the settings [{ids[0]}].", usage=U(1200, 40))

    server.handler = handler
    model = MODEL[server.flavor]
    run = evaluate(tree, items[:2], ["navigator", "bm25", "agentic"], navigator=server.flavor, model=model,
                   base_url=server.base_url, cache_dir=cache)
    assert run.model == model and all(r.body["model"] == model for r in server.requests)
    flat = [r for r in server.requests if not tool_names(r)]
    records = [r for r in run.records if r["method"] == "bm25"]
    assert len(flat) == len(records) == 2
    corpus = Baselines(open_tree(tree), cache).corpus
    for req, record, item in zip(flat, records, items):
        assert req.system == ANSWER_SYSTEM and f"Question: {item.question}" in req.user_text
        assert DOCUMENT.findall(req.user_text) == record["context"] and len(record["context"]) == 5
        for doc_id in record["context"]:  # each document's text is in the prompt
            assert corpus.texts[corpus.positions[doc_id]][:200] in req.user_text
        assert record["answer"] == f"Open the settings [{record['context'][0]}]." and record["flags"] == []
        assert record["usage"]["input_tokens"] == 1200 and record["usage"]["output_tokens"] == 40
        assert (record["llm_calls"], record["tokens_in"], record["tokens_out"], record["tokens_cached"]) == (1, 1200, 40, 0)
        assert record["cost_usd"] == pytest.approx(pricing.cost(model, Usage(1200, 40)), abs=1e-6)
    one_call = pricing.cost(model, Usage(1200, 40))
    assert run.summary["bm25"]["cost_usd"] == pytest.approx(one_call, abs=1e-6)
    assert run.summary["bm25"]["cost_usd_total"] == pytest.approx(2 * one_call, abs=1e-6)

    for record in (r for r in run.records if r["method"] == "navigator"):
        assert record["answer"] == "I could not find this." and record["llm_calls"] == 1
        assert record["tokens_in"] == 2000 and record["cost_usd"] == pytest.approx(pricing.cost(model, Usage(2000, 10)),
                                                                                     abs=1e-6)
    for record in (r for r in run.records if r["method"] == "agentic"):
        assert record["turns"] == 2 and record["tool_calls"] == 1 and record["llm_calls"] == 2
        assert record["tokens_in"] == 2400 and record["tokens_out"] == 50
        assert record["trace"][0]["tool"] == "search_hybrid" and len(record["trace"][0]["doc_ids"]) == SEARCH_K
        assert record["answer"] == f"Agentic answer [{record['trace'][0]['doc_ids'][0]}]." and not record["flags"]
        assert record["ranked"][0] == record["trace"][0]["doc_ids"][0]
        assert record["context"] == record["trace"][0]["doc_ids"]

    write_outputs(run, tmp_path / "out")
    md = (tmp_path / "out" / "results.md").read_text()
    assert "$/query" in md and "Tokens in" in md and f"model `{model}`" in md
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["methods"]["bm25"]["llm_calls"] == 1.0 and data["bertscore"] == "not installed"
    assert data["navigator"] == server.flavor and data["model"] == model


# -- the agentic tool loop -----------------------------------------------------------------------


def agent(server, baselines) -> Agentic:
    return Agentic(baselines, Answerer(server.flavor, model=MODEL[server.flavor], base_url=server.base_url,
                                       retry=FAST))


def titles_and_ids(baselines, method: str, query: str) -> list[tuple[str, str]]:
    c = baselines.corpus
    return [(c.ids[i], " ".join(c.titles[i].split())) for i in baselines.search(method, query, SEARCH_K)]


def test_agentic_tool_loop(server, baselines):
    queries = {"t1": ("bm25", "refund invoice"), "t2": ("dense", "how to cancel a booking"),
               "t3": ("hybrid", "sync my calendar")}
    expected = {k: titles_and_ids(baselines, m, q) for k, (m, q) in queries.items()}
    server.enqueue(tool_use(("t1", "search_bm25", {"query": "refund invoice"}),
                            ("t2", "search_dense", {"query": "how to cancel a booking"})),
                   tool_use(("t3", "search_hybrid", {"query": "sync my calendar"}), ("t4", "search_bm25", {}),
                            ("t5", "search_web", {"query": "x"}), ("t6", "search_dense", {"query": "  "})))
    if server.flavor == "openai":  # arguments that are not JSON at all
        server.enqueue(openai_unparsable_tool_call("t7", "search_bm25", "{query: oops"))
    best = expected["t3"][0][0]
    server.enqueue(text(f"Connect the calendar in settings [{best}]."))
    got = agent(server, baselines).run("How do I sync my calendar?")

    assert got.answer == f"Connect the calendar in settings [{best}]."
    first = server.requests[1].tool_results
    assert [r["id"] for r in first] == ["t1", "t2"] and not any(r["is_error"] for r in first)
    for result in first:  # each result lists the search's top 5: ids and titles, best first
        listed = re.findall(r"doc_id: (\S+)\ntitle: ([^\n]*)", result["content"])
        assert listed == expected[result["id"]]
    second = server.requests[2].tool_results
    assert [r["id"] for r in second] == ["t3", "t4", "t5", "t6"]
    assert re.findall(r"doc_id: (\S+)\ntitle: ([^\n]*)", second[0]["content"]) == expected["t3"]
    assert all(r["content"].startswith("error:") for r in second[1:])
    assert "'query'" in second[1]["content"] and "unknown tool 'search_web'" in second[2]["content"]
    if server.flavor == "anthropic":
        assert [r["is_error"] for r in second] == [False, True, True, True]
    else:
        bad = server.requests[3].tool_results
        assert bad[0]["id"] == "t7" and "not a JSON object" in bad[0]["content"]
    calls = 3 if server.flavor == "anthropic" else 4
    assert len(server.requests) == calls and got.turns == calls and got.usage["llm_calls"] == calls
    assert got.tool_calls == len(got.trace) == calls + 3
    for req in server.requests:
        assert tool_names(req) == set(TOOLS) and "at most 10 rounds" in req.system
    retrieved = [d for k in ("t1", "t2", "t3") for d, _ in expected[k]]
    assert got.context == list(reversed(list(dict.fromkeys(reversed(retrieved)))[:5]))
    assert got.ranked[0] == best and set(got.ranked) <= set(retrieved)


def test_agentic_round_cap(server, baselines):
    def turn(req):
        if forced(req):
            return text("Final answer from what I found.")
        return tool_use(("search_bm25", {"query": f"refund {len(server.requests)}"}))

    server.enqueue(*[turn] * 12)  # a model that would search 12 times
    got = agent(server, baselines).run("How do I get a refund?")
    assert len(server.requests) == 11 and server.pending == 1
    assert not any(forced(r) for r in server.requests[:10]) and forced(server.requests[10])
    assert FINAL_PROMPT in server.requests[10].user_text
    assert got.answer == "Final answer from what I found." and got.tool_calls == 10 and got.turns == 11


# -- the judge -------------------------------------------------------------------------------------


def long_corpus() -> Corpus:
    ids = [f"d{i}" for i in range(6)]
    return Corpus(ids, [f"Title {i}" for i in range(6)], [f"word{i} " * 500 for i in range(6)], ["h"] * 6)


def judge(server, tmp_path, corpus=None) -> Judge:
    return Judge(server.flavor, corpus or long_corpus(), model=MODEL[server.flavor], base_url=server.base_url,
                 cache_dir=tmp_path, retry=FAST)


def verdict(f=5, h=4, r=4, p=4):
    return json_text({"factuality": f, "faithfulness": h, "context_recall": r, "context_precision": p})


def test_judge_scales_scores_and_flags_hallucinations(server, tmp_path):
    j = judge(server, tmp_path)
    server.enqueue(verdict(5, 3, 4, 2), verdict(1, 4, 1, 5))
    ids = [f"d{i}" for i in range(6)]
    low = j.assess("How?", "Do X.", ids, "Do X and Y.")
    assert low == {"factuality": 1.0, "faithfulness": 0.5, "judge_context_recall": 0.75,
                   "judge_context_precision": 0.25, "hallucination": 1.0, "judge_cached": False}
    high = j.assess("How?", "Do Y.", ids, "Do X and Y.")
    assert high["faithfulness"] == 0.75 and high["hallucination"] == 0.0 and high["factuality"] == 0.0

    # the standardised context: the last 5 documents, concatenated, cut to 8,000 characters
    sent = server.requests[0].user_text
    context = re.search(r"<context>\n(.*)\n</context>", sent, re.S).group(1)
    assert len(context) == CONTEXT_CHARS and context == standard_context(j.corpus, ids)
    assert context.startswith("[d1] Title 1\nword1 ") and "[d0]" not in context and "[d4]" not in context
    assert "QUESTION:\nHow?" in sent and "REFERENCE ANSWER:\nDo X and Y." in sent and "<answer>\nDo X.\n" in sent
    if server.flavor == "openai":
        assert server.requests[0].body["response_format"] == {"type": "json_object"}
    assert j.summary()["calls"] == 2 and j.summary()["cost_usd"] > 0


def test_judge_reasks_malformed_replies_then_records_an_error(server, tmp_path):
    j = judge(server, tmp_path)
    server.enqueue("Sure, the answer is great!", verdict(f=9), "{broken")
    failed = j.assess("How?", "Do X.", ["d1"], "Do X.")
    assert failed["judge_error"].startswith("JudgeReplyError") and "after 2 re-asks" in failed["judge_error"]
    assert all(failed[k] is None for k in ("factuality", "faithfulness", "hallucination"))
    assert len(server.requests) == 3 and "not usable: no JSON object" in server.requests[1].user_text
    assert "factuality" in server.requests[2].user_text and "less than or equal to 5" in server.requests[2].user_text
    assert j.errors == 1 and not list((tmp_path / "judge").glob("*.json"))  # errors are not cached

    server.enqueue("```json\n{\"faithfulness\": 2}\n```", "```json\n" + verdict(4, 5, 5, 5).text + "\n```")
    ok = j.assess("How?", "Do Y.", ["d1"], "Do Y.")
    assert ok["factuality"] == 0.75 and ok["faithfulness"] == 1.0 and len(server.requests) == 5
    # no gold answer: only faithfulness and context precision are asked for
    server.enqueue(json_text({"faithfulness": 5, "context_precision": 1}))
    no_gold = j.assess("How?", "Do Z.", ["d1"], None)
    assert no_gold["factuality"] is None and no_gold["judge_context_recall"] is None and no_gold["faithfulness"] == 1.0
    assert "REFERENCE" not in server.requests[-1].user_text and "factuality" not in server.requests[-1].user_text


def test_judge_in_a_run_is_cached(server, tree, items, cache, tmp_path):
    server.handler = lambda req: verdict(4, 5, 4, 3)
    opts = dict(judge=server.flavor, judge_model=MODEL[server.flavor], judge_base_url=server.base_url,
                cache_dir=cache)
    first = evaluate(tree, items, ["navigator", "bm25"], **opts)
    judged = len(server.requests)
    assert judged + first.judge["cache_hits"] == 6 and judged >= 3 and first.judge["errors"] == 0
    for name in ("navigator", "bm25"):
        s = first.summary[name]
        assert (s["factuality"], s["faithfulness"], s["judge_context_recall"], s["judge_context_precision"],
                s["hallucination"], s["judge_errors"]) == (0.75, 1.0, 0.75, 0.5, 0.0, 0)
    assert set(first.bootstrap) == {"token_f1", "recall@5", "factuality"}

    second = evaluate(tree, items, ["navigator", "bm25"], **opts)
    assert len(server.requests) == judged  # every verdict came from the cache
    assert second.judge["cache_hits"] == 6 and second.judge["calls"] == 0
    assert second.summary["bm25"]["factuality"] == first.summary["bm25"]["factuality"]

    write_outputs(second, tmp_path)
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["methods"]["navigator"]["factuality"] == 0.75 and data["judge"]["model"] == MODEL[server.flavor]
    md = (tmp_path / "results.md").read_text()
    assert "Factuality" in md and "Halluc." in md and "- factuality: navigator" in md
    assert "factuality" in data["intervals"]["bm25"] and (tmp_path / "chart.png").is_file()
