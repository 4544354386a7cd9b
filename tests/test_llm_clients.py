"""The chat clients against local fake servers speaking the real Anthropic and OpenAI protocols:
what we send, how answers and usage are read, retries, and configuration errors."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from c2s_core.llm import pricing
from c2s_core.llm.clients import (
    AnthropicClient,
    LLMAPIError,
    MissingAPIKeyError,
    OpenAIClient,
    RetryPolicy,
    Tool,
    ToolCall,
    Usage,
    make_client,
    parse_retry_after,
    tool_result,
)
from tests.fakes.llm_servers import (
    FakeLLMServer,
    Reply,
    anthropic_server,  # noqa: F401 - fixtures
    error,
    openai_server,  # noqa: F401
    overloaded,
    rate_limited,
    refusal,
    server_error,
    slow,
    text,
    tool_use,
    truncated,
)

FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05)

LS = Tool("ls", "List a directory of the skill tree.",
          {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
GET_DOC = Tool("get_document", "Full text of one document.",
               {"type": "object", "properties": {"doc_id": {"type": "string"}}, "required": ["doc_id"]})


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                 "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def anthropic(server: FakeLLMServer, **kw) -> AnthropicClient:
    kw.setdefault("retry", FAST)
    return AnthropicClient("claude-sonnet-4-6", api_key="sk-test", base_url=server.base_url, **kw)


def openai_client(server: FakeLLMServer, **kw) -> OpenAIClient:
    kw.setdefault("retry", FAST)
    return OpenAIClient("qwen2.5-7b-instruct", api_key="sk-local", base_url=server.base_url, **kw)


@pytest.fixture(params=["anthropic", "openai"])
def flavored(request):
    """A fake server and a client for it, once per protocol."""
    with FakeLLMServer(request.param) as server:
        make = anthropic if request.param == "anthropic" else openai_client
        yield server, (lambda **kw: make(server, **kw))


# -- Anthropic: what we send -----------------------------------------------------------------------


def test_anthropic_request_carries_model_tools_system_and_cache_breakpoints(anthropic_server):
    client = anthropic(anthropic_server)
    result = client.complete("Where is the shipping doc?", system="You navigate a skill tree.", tools=[LS, GET_DOC],
                             tool_choice="auto", max_tokens=300, temperature=0.2, stop=["</answer>"])
    assert result.text == "ok" and result.stop_reason == "end_turn"
    req = anthropic_server.requests[0]
    assert (req.method, req.path) == ("POST", "/v1/messages")
    assert req.headers.get("x-api-key") == "sk-test" or req.headers.get("authorization") == "Bearer sk-test"
    assert req.headers["anthropic-version"]
    body = req.body
    assert body["model"] == "claude-sonnet-4-6" and body["max_tokens"] == 300
    assert body["stop_sequences"] == ["</answer>"]
    assert "temperature" not in body  # the current Messages API has no sampling parameters
    assert body["tool_choice"] == {"type": "auto"}
    # The stable prefix is cached: the last tool and the system block carry the breakpoints, nothing else.
    assert [t["name"] for t in body["tools"]] == ["ls", "get_document"]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][1]["input_schema"] == GET_DOC.input_schema
    assert body["system"] == [{"type": "text", "text": "You navigate a skill tree.",
                               "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Where is the shipping doc?"}]}]


def test_anthropic_cache_can_be_disabled_or_extended_to_the_conversation(anthropic_server):
    client = anthropic(anthropic_server)
    client.complete("q", system="sys", tools=[LS], cache=False)
    body = anthropic_server.requests[0].body
    assert "cache_control" not in json.dumps(body)
    client.complete("q", system="sys", tools=[LS], cache_conversation=True)
    body = anthropic_server.requests[1].body
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert json.dumps(body).count("cache_control") == 3


def test_anthropic_tool_use_conversation_threads_tool_results(anthropic_server):
    anthropic_server.enqueue(
        tool_use(("ls", {"path": "/"}), ("get_document", {"doc_id": "d1"}), text="Looking."),
        tool_use(("get_document", {"doc_id": "d2"})),
        text("Shipping takes 3 days [d1]."),
    )
    client = anthropic(anthropic_server)
    messages: list = [{"role": "user", "content": "How long does shipping take?"}]
    first = client.complete(messages, system="sys", tools=[LS, GET_DOC])
    assert first.stop_reason == "tool_use" and first.text == "Looking."
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("ls", {"path": "/"}), ("get_document", {"doc_id": "d1"})]
    messages += [first.message(), tool_result(first.tool_calls[0], "shipping/ billing/"),
                 tool_result(first.tool_calls[1], "no such document", is_error=True)]
    second = client.complete(messages, system="sys", tools=[LS, GET_DOC])
    messages += [second.message(), tool_result(second.tool_calls[0], "Shipping takes 3 days.")]
    final = client.complete(messages, system="sys", tools=[LS, GET_DOC])
    assert final.text == "Shipping takes 3 days [d1]." and final.stop_reason == "end_turn"

    sent = anthropic_server.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"][0] == {"type": "text", "text": "Looking."}
    uses = [b for b in sent[1]["content"] if b["type"] == "tool_use"]
    assert [(u["id"], u["name"], u["input"]) for u in uses] == [
        (c.id, c.name, c.arguments) for c in first.tool_calls]
    # Both results in the one user turn right after the tool_use turn, ids matching, error flagged.
    assert sent[2]["content"] == [
        {"type": "tool_result", "tool_use_id": first.tool_calls[0].id, "content": "shipping/ billing/"},
        {"type": "tool_result", "tool_use_id": first.tool_calls[1].id, "content": "no such document",
         "is_error": True},
    ]
    assert anthropic_server.requests[1].tool_results == [
        {"id": first.tool_calls[0].id, "content": "shipping/ billing/", "is_error": False},
        {"id": first.tool_calls[1].id, "content": "no such document", "is_error": True}]
    assert len(anthropic_server.requests[2].body["messages"]) == 5
    assert anthropic_server.errors == []


def test_fake_anthropic_refuses_an_unanswered_tool_use_like_the_real_api(anthropic_server):
    anthropic_server.enqueue(tool_use(("ls", {"path": "/"})))
    client = anthropic(anthropic_server)
    first = client.complete("q", tools=[LS])
    with pytest.raises(LLMAPIError) as info:
        client.complete([{"role": "user", "content": "q"}, first.message(), {"role": "user", "content": "and?"}],
                        tools=[LS])
    assert info.value.status == 400 and "tool_result" in str(info.value)
    assert len(anthropic_server.requests) == 2  # a 400 is not retried


# -- usage and stop reasons ------------------------------------------------------------------------


def test_anthropic_usage_is_read_field_by_field_and_adds_up(anthropic_server):
    anthropic_server.enqueue(
        text("a", usage={"input_tokens": 120, "output_tokens": 30, "cache_write_tokens": 2000}),
        text("b", usage={"input_tokens": 80, "output_tokens": 12, "cache_read_tokens": 2000}),
    )
    client = anthropic(anthropic_server)
    first, second = client.complete("q1", system="s"), client.complete("q2", system="s")
    assert first.usage == Usage(input_tokens=120, output_tokens=30, cache_read_tokens=0, cache_write_tokens=2000)
    assert second.usage == Usage(input_tokens=80, output_tokens=12, cache_read_tokens=2000, cache_write_tokens=0)
    total = sum([first.usage, second.usage])
    assert total == Usage(200, 42, 2000, 2000) and total.total_input_tokens == 4200
    # Sonnet: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million tokens.
    assert first.cost == pytest.approx((120 * 3 + 30 * 15 + 2000 * 3.75) / 1e6)
    assert pricing.cost("claude-sonnet-4-6", total) == pytest.approx(first.cost + second.cost)


def test_anthropic_prompt_cache_is_written_then_read(anthropic_server):
    """The fake simulates prompt caching, so the breakpoints we place must actually hit it."""
    client = anthropic(anthropic_server)
    system = "You compile knowledge bases. " * 40
    first = client.complete("card for doc 1", system=system, tools=[LS])
    second = client.complete("card for doc 2", system=system, tools=[LS])
    assert first.usage.cache_write_tokens > 0 and first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens and second.usage.cache_write_tokens == 0
    assert second.usage.input_tokens < first.usage.cache_write_tokens


@pytest.mark.parametrize("reply, stop, truncated_, refused", [
    (text("done"), "end_turn", False, False),
    (tool_use(("ls", {"path": "/"})), "tool_use", False, False),
    (truncated('{"title": "Ship'), "max_tokens", True, False),
    (refusal("I can't help with that."), "refusal", False, True),
    (Reply(text="<answer>x", stop_reason="stop_sequence"), "stop_sequence", False, False),
])
def test_stop_reasons(flavored, reply, stop, truncated_, refused):
    server, make = flavored
    server.enqueue(reply)
    result = make().complete("q", tools=[LS])
    expected = "end_turn" if server.flavor == "openai" and stop == "stop_sequence" else stop  # OpenAI says "stop"
    assert result.stop_reason == expected
    assert result.truncated is truncated_ and result.refused is refused


# -- OpenAI: what we send and read -----------------------------------------------------------------


def test_openai_request_uses_function_tools_and_system_message(openai_server):
    client = openai_client(openai_server)
    client.complete("q", system="You navigate.", tools=[LS], tool_choice="any", max_tokens=200, json_mode=True)
    req = openai_server.requests[0]
    assert (req.method, req.path) == ("POST", "/v1/chat/completions")
    assert req.headers["authorization"] == "Bearer sk-local"
    body = req.body
    assert body["model"] == "qwen2.5-7b-instruct"
    assert body["messages"] == [{"role": "system", "content": "You navigate."}, {"role": "user", "content": "q"}]
    assert body["tools"] == [{"type": "function", "function": {"name": "ls", "description": LS.description,
                                                               "parameters": LS.input_schema}}]
    assert body["tool_choice"] == "required"
    assert body["max_tokens"] == 200  # a local server: max_tokens
    assert body["response_format"] == {"type": "json_object"}
    client = openai_client(openai_server, max_tokens_param="max_completion_tokens", json_response_format=False)
    client.complete("q", tool_choice="get_document", tools=[GET_DOC], max_tokens=50, json_mode=True)
    body = openai_server.requests[1].body
    assert body["max_completion_tokens"] == 50 and "max_tokens" not in body and "response_format" not in body
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_document"}}


def test_openai_tool_conversation_threads_tool_messages(openai_server):
    openai_server.enqueue(tool_use(("ls", {"path": "/"}), ("get_document", {"doc_id": "d9"})), text("Answer [d9]."))
    client = openai_client(openai_server)
    messages: list = [{"role": "user", "content": "q"}]
    first = client.complete(messages, system="sys", tools=[LS, GET_DOC])
    assert first.stop_reason == "tool_use" and len(first.tool_calls) == 2
    messages += [first.message(), *(tool_result(c, f"result {i}") for i, c in enumerate(first.tool_calls))]
    final = client.complete(messages, system="sys", tools=[LS, GET_DOC])
    assert final.text == "Answer [d9]."
    sent = openai_server.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert sent[2]["content"] is None
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in sent[2]["tool_calls"]] == [
        (c.id, c.name, c.arguments) for c in first.tool_calls]
    assert [r["id"] for r in openai_server.requests[1].tool_results] == [c.id for c in first.tool_calls]
    assert [(m["tool_call_id"], m["content"]) for m in sent[3:]] == [
        (first.tool_calls[0].id, "result 0"), (first.tool_calls[1].id, "result 1")]
    assert openai_server.errors == []


def test_openai_usage_separates_cached_prompt_tokens(openai_server):
    openai_server.enqueue(text("x", usage={"input_tokens": 700, "cache_read_tokens": 300, "output_tokens": 40}))
    result = openai_client(openai_server).complete("q")
    assert result.usage == Usage(input_tokens=700, output_tokens=40, cache_read_tokens=300, cache_write_tokens=0)
    assert result.cost == 0.0 and not pricing.price_for("qwen2.5-7b-instruct").known


def test_openai_bad_tool_arguments_are_flagged_not_dropped(openai_server):
    openai_server.enqueue({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "qwen",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{path: /}"}}]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    })
    call = openai_client(openai_server).complete("q", tools=[LS]).tool_calls[0]
    assert call.name == "ls" and call.error and call.arguments == {"_raw": "{path: /}"}


# -- retries ---------------------------------------------------------------------------------------


def test_429_retry_after_is_honoured(flavored):
    server, make = flavored
    server.enqueue(rate_limited(retry_after=0.3), text("ok"))
    started = time.monotonic()
    result = make().complete("q")
    assert result.text == "ok" and result.attempts == 2
    first, second = server.requests
    waited = second.started - first.started
    assert 0.3 <= waited < 1.5, waited  # the backoff alone would be ~0.01 s
    assert time.monotonic() - started >= 0.3
    assert second.headers["x-stainless-retry-count"] == "1"


def test_retry_after_is_capped(flavored):
    server, make = flavored
    server.enqueue(rate_limited(retry_after=3600), text("ok"))
    policy = RetryPolicy(max_attempts=3, base_delay=0.01, max_retry_after=0.1)
    started = time.monotonic()
    assert make(retry=policy).complete("q").text == "ok"
    assert time.monotonic() - started < 1.0


def test_5xx_and_overloaded_are_retried_then_succeed(flavored):
    server, make = flavored
    server.enqueue(server_error(500), overloaded(), server_error(503), text("finally"))
    result = make().complete("q")
    assert result.text == "finally" and result.attempts == 4 and len(server.requests) == 4


def test_backoff_grows_exponentially_with_jitter():
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, jitter=0.25)
    for n, base in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        delays = [policy.backoff(n) for _ in range(50)]
        assert all(0.75 * base <= d <= base for d in delays)
        assert len(set(delays)) > 1  # jittered


def test_attempts_are_bounded(flavored):
    server, make = flavored
    server.handler = lambda request: overloaded()
    with pytest.raises(LLMAPIError) as info:
        make(retry=RetryPolicy(max_attempts=3, base_delay=0.01)).complete("q")
    assert len(server.requests) == 3
    err = info.value
    assert err.attempts == 3 and err.status == 529 and err.retryable
    assert "overloaded" in str(err) and "gave up after 3 attempts" in str(err)


def test_client_errors_are_not_retried(flavored):
    server, make = flavored
    server.enqueue(error(400, "invalid_request_error", "max_tokens: too large"))
    with pytest.raises(LLMAPIError) as info:
        make().complete("q")
    assert len(server.requests) == 1 and info.value.status == 400 and not info.value.retryable
    assert "max_tokens: too large" in str(info.value)


def test_unreadable_success_responses_are_retried_then_reported(flavored):
    server, make = flavored
    server.enqueue(Reply(body=b"<html>502 Bad Gateway</html>"), text("ok"))
    assert make().complete("q").attempts == 2
    server.handler = lambda request: Reply(body={"unexpected": "shape"})
    with pytest.raises(LLMAPIError, match="unreadable response|no choices") as info:
        make(retry=RetryPolicy(max_attempts=2, base_delay=0.01)).complete("q")
    assert info.value.attempts == 2


def test_server_can_veto_a_retry_with_x_should_retry(anthropic_server):
    anthropic_server.enqueue(server_error(500, headers={"x-should-retry": "false"}))
    with pytest.raises(LLMAPIError):
        anthropic(anthropic_server).complete("q")
    assert len(anthropic_server.requests) == 1


def test_timeouts_are_retried_and_bounded(flavored):
    server, make = flavored
    server.enqueue(slow("late", 1.0), text("in time"))
    result = make(timeout=0.25).complete("q")
    assert result.text == "in time" and result.attempts == 2
    server.handler = lambda request: slow("late", 1.0)
    started = time.monotonic()
    with pytest.raises(LLMAPIError) as info:
        make(timeout=0.2, retry=RetryPolicy(max_attempts=2, base_delay=0.01)).complete("q")
    assert "timed out" in str(info.value) and info.value.attempts == 2
    assert time.monotonic() - started < 1.5


def test_parse_retry_after_forms():
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "150", "retry-after": "9"}) == 0.15
    soon = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= parse_retry_after({"retry-after": soon}) <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after({}) is None


# -- async -----------------------------------------------------------------------------------------


def test_acomplete_runs_concurrently_and_survives_new_event_loops(flavored):
    server, make = flavored
    server.latency = 0.2
    client = make()

    async def many(n: int):
        return await asyncio.gather(*(client.acomplete(f"q{i}") for i in range(n)))

    started = time.monotonic()
    results = asyncio.run(many(10))
    assert [r.text for r in results] == ["ok"] * 10
    assert time.monotonic() - started < 1.2 and server.max_in_flight >= 5
    assert [r.text for r in asyncio.run(many(2))] == ["ok", "ok"]  # a second loop gets its own connections


# -- configuration ---------------------------------------------------------------------------------


def test_missing_anthropic_key_names_the_variable():
    with pytest.raises(MissingAPIKeyError, match="ANTHROPIC_API_KEY"):
        AnthropicClient("claude-sonnet-4-6")


def test_missing_openai_key_names_the_variable_but_local_servers_need_none(openai_server):
    with pytest.raises(MissingAPIKeyError, match="OPENAI_API_KEY"):
        OpenAIClient("gpt-4o-mini")
    with pytest.raises(MissingAPIKeyError, match="OPENAI_API_KEY"):
        OpenAIClient("gpt-4o-mini", base_url="https://api.openai.com/v1")
    local = OpenAIClient("llama3", base_url=openai_server.base_url, retry=FAST)
    assert local.complete("q").text == "ok"
    assert openai_server.requests[0].headers["authorization"] == "Bearer none"


def test_keys_and_base_urls_come_from_the_environment(monkeypatch, anthropic_server, openai_server):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-openai")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    assert make_client("anthropic").complete("q").text == "ok"
    headers = anthropic_server.requests[0].headers
    assert "sk-env" in (headers.get("x-api-key"), headers.get("authorization", "")[7:])
    assert anthropic_server.requests[0].body["model"] == "claude-sonnet-4-6"
    assert make_client("openai", "llama3").complete("q").text == "ok"
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-env-openai"


def test_bad_key_error_names_the_variable():
    with FakeLLMServer("anthropic", api_key="right") as server:
        with pytest.raises(LLMAPIError, match="ANTHROPIC_API_KEY") as info:
            AnthropicClient("claude-haiku-4-5", api_key="wrong", base_url=server.base_url, retry=FAST).complete("q")
        assert info.value.status == 401 and len(server.requests) == 1


def test_unknown_client_and_missing_model():
    with pytest.raises(Exception, match="unknown LLM client"):
        make_client("gemini")
    with pytest.raises(Exception, match="model name is required"):
        make_client("openai", api_key="x")


# -- pricing ---------------------------------------------------------------------------------------


def test_pricing_table():
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=1_000_000,
                  cache_write_tokens=1_000_000)
    assert pricing.cost("claude-sonnet-4-6", usage) == pytest.approx(3 + 15 + 0.3 + 3.75)
    assert pricing.cost("claude-haiku-4-5-20251001", usage) == pytest.approx(1 + 5 + 0.1 + 1.25)
    assert pricing.cost("claude-opus-4-6", Usage(output_tokens=1_000_000)) == pytest.approx(25)
    assert pricing.cost("claude-opus-4-1", Usage(input_tokens=1_000_000)) == pytest.approx(15)
    assert pricing.cost("qwen2.5:7b", usage) == 0.0 and not pricing.price_for("qwen2.5:7b").known
    assert pricing.price_for("anthropic/claude-sonnet-4-6").known
    assert ToolCall("a", "b", {}).error is None


def test_an_unknown_turn_option_is_refused_before_any_request():
    from c2s_core.llm.clients import make_client

    for provider in ("anthropic", "openai"):
        client = make_client(provider, "some-model", api_key="sk-test", base_url="http://127.0.0.1:9/")
        with pytest.raises(TypeError, match="unknown option.*temprature"):
            client.complete([{"role": "user", "content": "hi"}], temprature=0.2)
