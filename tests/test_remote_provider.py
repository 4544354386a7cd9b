"""RemoteProvider (the compile tasks done by a real LLM) against the local fake servers: scripted
JSON answers for every task, re-asks on malformed or truncated answers, errors naming the item,
concurrency, usage accounting, and the per-item cache through TaskRunner."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from c2s_core.cache import ItemCache
from c2s_core.llm import prompts
from c2s_core.llm.base import TaskRunner
from c2s_core.llm.clients import AnthropicClient, OpenAIClient, RetryPolicy
from c2s_core.llm.remote import CompileTaskError, RemoteProvider, extract_json
from c2s_core.llm.schemas import (
    Card,
    CardInput,
    ClusterInput,
    ClusterSummary,
    Entities,
    EntitiesInput,
    MemberExcerpt,
    RepartitionCluster,
    RepartitionInput,
    SimilarPair,
)
from c2s_pipeline.resources import LLMResource
from tests.fakes.llm_servers import (
    FakeLLMServer,
    Request,
    anthropic_server,  # noqa: F401 - fixtures
    json_text,
    openai_server,  # noqa: F401
    overloaded,
    text,
    truncated,
)

FAST = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                 "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


# -- a fake model that does every compile task -----------------------------------------------------


def first_user_text(request: Request) -> str:
    content = next(m for m in request.messages if m["role"] == "user")["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def compile_model(request: Request):
    """Answers each task's prompt with valid JSON built from the ids in the prompt."""
    system, user = request.system, first_user_text(request)
    if system == prompts.CARD_SYSTEM:
        doc_id = re.search(r"Document id: (\S+)", user).group(1)
        return json_text({"title": f"Shipping rules {doc_id}", "one_line": f"How {doc_id} sets delivery regions.",
                          "phrases": ["delivery regions", "shipping rules", "flat rate"]})
    if system in (prompts.SUMMARY_L1_SYSTEM, prompts.SUMMARY_UPPER_SYSTEM):
        cluster = re.search(r"Cluster (\S+) \(level", user).group(1)
        return json_text({"title": f"Store shipping {cluster}", "description": "Shipping rules and regions.",
                          "summary": "Topic area: shipping. Answers questions like: how to set rates. "
                                     "Key terms: flat rate. Covers: Shipping rules.",
                          "label": f"Store Shipping & Delivery ({cluster})", "key_terms": ["flat rate", "regions"]})
    if system == prompts.REPARTITION_SYSTEM:
        ids = re.findall(r'<cluster id="([^"]+)"', user)
        return json_text({"confusable": [ids[:2]], "mixed": [ids[-1]], "moves": [],
                          "notes": f"{ids[0]} and {ids[1]} overlap"})
    if system == prompts.ENTITIES_SYSTEM:
        return text('```json\n{"entities": ["Wix Stores", "PayPal", "PayPal"], "doc_types": ["How-To"]}\n```')
    raise AssertionError(f"unexpected prompt: {system[:60]}")


def cards_in(n: int) -> list[CardInput]:
    return [CardInput(doc_id=f"doc{i:03d}", title="" if i % 2 else f"Doc {i}",
                      text=f"# Shipping {i}\nSet delivery regions and flat rates for store {i}.") for i in range(n)]


def cluster_in(cluster_id: str = "L1-0000", level: int = 1) -> ClusterInput:
    members = [MemberExcerpt(item_id=f"doc{i}", title=f"Shipping rules {i}", text=f"Rates for region {i}.")
               for i in range(3)]
    return ClusterInput(cluster_id=cluster_id, level=level, size=3, members=members,
                        member_titles=[m.title for m in members])


def repartition_in(with_titles: bool = False) -> RepartitionInput:
    clusters = [RepartitionCluster(cluster_id=f"L1-000{i}", title=f"Topic {i}", summary=f"Summary {i}", size=4,
                                   cohesion=0.6 + i / 100, member_ids=[f"d{i}{j}" for j in range(4)],
                                   member_titles=[f"Title {i}{j}" for j in range(4)] if with_titles else [])
                for i in range(3)]
    return RepartitionInput(level=1, branching=10, clusters=clusters,
                            similar_pairs=[SimilarPair(a="L1-0000", b="L1-0001", similarity=0.93)])


def entities_in() -> EntitiesInput:
    return EntitiesInput(cluster_id="L2-0001", level=2, title="Payments", summary="Payments with PayPal.",
                         texts=["Connect PayPal to Wix Stores.", "Refunds in Wix Stores."])


def provider_for(server: FakeLLMServer, **kw) -> RemoteProvider:
    client = AnthropicClient("claude-sonnet-4-6", api_key="sk-test", base_url=server.base_url, retry=FAST)
    return RemoteProvider(client, **kw)


# -- every task ------------------------------------------------------------------------------------


def test_every_task_is_asked_parsed_and_validated(anthropic_server):
    anthropic_server.handler = compile_model
    provider = provider_for(anthropic_server, card_model="claude-haiku-4-5")
    items = cards_in(4)
    cards = provider.cards(items, [0, 2, 3])
    assert set(cards) == {0, 2, 3} and all(isinstance(c, Card) for c in cards.values())
    assert cards[2].title == "Shipping rules doc002" and cards[2].phrases == ["delivery regions", "shipping rules",
                                                                              "flat rate"]
    summaries = provider.summaries([cluster_in("L1-0000"), cluster_in("L2-0007", level=2)], [0, 1])
    assert isinstance(summaries[0], ClusterSummary)
    assert summaries[0].label == "store-shipping-delivery-l1-0000"  # slugified
    assert summaries[1].title == "Store shipping L2-0007"
    verdict = provider.repartitions([repartition_in()], [0])[0]
    assert verdict.confusable == [("L1-0000", "L1-0001")] and verdict.mixed == ["L1-0002"]
    assert verdict.notes == "L1-0000 and L1-0001 overlap"
    ents = provider.entities([entities_in()], [0])[0]
    assert isinstance(ents, Entities)
    assert ents.entities == ["Wix Stores", "PayPal"] and ents.doc_types == ["how-to"]  # fence stripped, deduped

    bodies = [r.body for r in anthropic_server.requests]
    card_bodies = [b for b in bodies if b["system"][0]["text"] == prompts.CARD_SYSTEM]
    assert len(card_bodies) == 3
    assert all(b["model"] == "claude-haiku-4-5" and b["max_tokens"] == 250 for b in card_bodies)
    assert all(b["system"][0]["cache_control"] == {"type": "ephemeral"} for b in bodies)
    others = [b for b in bodies if b not in card_bodies]
    assert len(others) == 4 and all(b["model"] == "claude-sonnet-4-6" for b in others)
    upper = [b for b in others if b["system"][0]["text"] == prompts.SUMMARY_UPPER_SYSTEM]
    assert len(upper) == 1 and "Sub-group summaries" in upper[0]["messages"][0]["content"][0]["text"]
    level1 = next(b for b in others if b["system"][0]["text"] == prompts.SUMMARY_L1_SYSTEM)
    prompt = level1["messages"][0]["content"][0]["text"]
    assert "Shipping rules 2" in prompt and "Rates for region 0." in prompt

    report = provider.report()
    assert {t: v["calls"] for t, v in report["tasks"].items()} == {"card": 3, "entities": 1, "repartition": 1,
                                                                   "summary": 2}
    assert all(v["reasks"] == 0 for v in report["tasks"].values())
    usage = provider.usage_by_task["card"]
    assert usage.output_tokens > 0 and usage.total_input_tokens > 0
    assert provider.cost_by_task["card"] > 0 and provider.cost == pytest.approx(report["cost_usd"], abs=1e-6)
    provider.close()


def test_prompt_versions_key_the_card_model():
    with FakeLLMServer("anthropic") as server:
        same = provider_for(server)
        cheap = provider_for(server, card_model="claude-haiku-4-5")
    assert same.prompt_version("card") == prompts.VERSIONS["card"]
    assert cheap.prompt_version("card") == f"{prompts.VERSIONS['card']}@claude-haiku-4-5"
    assert cheap.prompt_version("summary") == prompts.VERSIONS["summary"]
    assert same.batch_context("summary", [cluster_in()]) == ""
    assert (same.name, same.model) == ("anthropic", "claude-sonnet-4-6")


def test_repartition_shows_member_ids_only_with_titles(anthropic_server):
    anthropic_server.handler = lambda r: json_text({"confusable": [], "mixed": [], "notes": "fine",
                                                    "moves": [{"item_id": "d00", "to_cluster": "L1-0001"}]})
    provider = provider_for(anthropic_server)
    verdict = provider.repartitions([repartition_in(with_titles=True)], [0])[0]
    assert [(m.item_id, m.to_cluster) for m in verdict.moves] == [("d00", "L1-0001")]
    prompt = first_user_text(anthropic_server.requests[0])
    assert "- d00: Title 00" in prompt and "0.93" in prompt
    provider.repartitions([repartition_in(with_titles=False)], [0])
    assert "d00" not in first_user_text(anthropic_server.requests[-1])


# -- bad answers -----------------------------------------------------------------------------------


def test_malformed_json_is_reasked_with_the_error(anthropic_server):
    anthropic_server.enqueue(text('{"title": "Shipping", "one_line": "Sets rates", phrases: [}'))
    anthropic_server.handler = compile_model
    provider = provider_for(anthropic_server)
    card = provider.cards(cards_in(1), [0])[0]
    assert card.title == "Shipping rules doc000"
    assert len(anthropic_server.requests) == 2
    retry = anthropic_server.requests[1].body["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert retry[1]["content"][0]["text"].startswith('{"title": "Shipping"')
    assert "not valid JSON" in retry[2]["content"][0]["text"]
    assert provider.reasks_by_task["card"] == 1 and provider.calls_by_task["card"] == 2


def test_schema_violations_are_reasked_with_the_validation_error(anthropic_server):
    anthropic_server.enqueue(json_text({"title": "Shipping", "one_line": "Sets rates.",
                                        "phrases": ["a phrase that is far too long"]}))
    anthropic_server.handler = compile_model
    provider = provider_for(anthropic_server)
    assert provider.cards(cards_in(1), [0])[0].phrases[0] == "delivery regions"
    error = anthropic_server.requests[1].body["messages"][2]["content"][0]["text"]
    assert "phrases" in error and "1-4 words" in error


def test_persistent_garbage_raises_naming_the_item(anthropic_server):
    anthropic_server.handler = lambda r: text("Sure! Here is the card you asked for.")
    provider = provider_for(anthropic_server)
    with pytest.raises(CompileTaskError) as info:
        provider.cards(cards_in(3), [2])
    message = str(info.value)
    assert "document doc002" in message and "3 attempts" in message and "not JSON" in message
    assert len(anthropic_server.requests) == 3  # bounded


def test_garbage_for_a_cluster_names_the_cluster(openai_server):
    openai_server.handler = lambda r: text("[1, 2, 3]")
    client = OpenAIClient("qwen2.5-7b-instruct", base_url=openai_server.base_url, retry=FAST)
    provider = RemoteProvider(client, max_attempts=2)
    with pytest.raises(CompileTaskError, match=r"summary for cluster L1-0042: .*2 attempts.*not an object"):
        provider.summaries([cluster_in("L1-0042")], [0])
    assert all(r.body["response_format"] == {"type": "json_object"} for r in openai_server.requests)


def test_truncated_answer_is_reasked_with_a_bigger_budget(anthropic_server):
    anthropic_server.enqueue(truncated('{"title": "Shipping rules", "one_line": "How to set'))
    anthropic_server.handler = compile_model
    provider = provider_for(anthropic_server)
    assert provider.cards(cards_in(1), [0])[0].title == "Shipping rules doc000"
    first, second = anthropic_server.requests
    assert first.body["max_tokens"] == 250 and second.body["max_tokens"] == 500
    assert second.body["messages"][2]["content"][0]["text"] == prompts.REASK_TRUNCATED


def test_always_truncated_raises_naming_the_cluster(anthropic_server):
    anthropic_server.handler = lambda r: truncated('{"entities": ["Wix')
    provider = provider_for(anthropic_server)
    with pytest.raises(CompileTaskError, match=r"entities for cluster L2-0001: .*cut off"):
        provider.entities([entities_in()], [0])
    assert [r.body["max_tokens"] for r in anthropic_server.requests] == [300, 600, 1200]


def test_unknown_repartition_ids_are_reasked_then_dropped_with_a_note(anthropic_server):
    anthropic_server.handler = lambda r: json_text({"confusable": [["L1-0000", "L1-0099"]], "mixed": ["L1-0002"],
                                                    "moves": [], "notes": "overlap"})
    provider = provider_for(anthropic_server)
    verdict = provider.repartitions([repartition_in()], [0])[0]
    assert len(anthropic_server.requests) == 3
    assert "L1-0099" in anthropic_server.requests[1].body["messages"][2]["content"][0]["text"]
    assert verdict.confusable == [] and verdict.mixed == ["L1-0002"]
    assert "dropped" in verdict.notes and "L1-0099" in verdict.notes


def test_api_failure_after_retries_names_the_item(anthropic_server):
    anthropic_server.handler = lambda r: overloaded()
    provider = provider_for(anthropic_server)
    with pytest.raises(CompileTaskError, match=r"card for document doc001: anthropic .*529.*3 attempts"):
        provider.cards(cards_in(2), [1])


def test_one_failing_item_stops_the_batch(anthropic_server):
    def model(request: Request):
        if "doc005" in first_user_text(request):
            return text("no JSON here")
        time.sleep(0.05)
        return compile_model(request)

    anthropic_server.handler = model
    provider = provider_for(anthropic_server, concurrency=2, max_attempts=1)
    with pytest.raises(CompileTaskError, match="doc005"):
        provider.cards(cards_in(40), list(range(40)))
    time.sleep(0.1)
    assert len(anthropic_server.requests) < 40  # the rest were cancelled, not paid for


def test_code_fences_and_stray_prose_are_tolerated():
    assert extract_json('```json\n{"a": 1}\n```') == {"a": 1}
    assert extract_json('Here you go:\n{"a": {"b": 2}}\nDone.') == {"a": {"b": 2}}
    with pytest.raises(ValueError, match="empty"):
        extract_json("```\n```")


# -- concurrency and the cache ---------------------------------------------------------------------


def test_calls_overlap_up_to_the_concurrency_limit():
    with FakeLLMServer("anthropic", handler=compile_model, latency=0.2) as server:
        provider = provider_for(server, concurrency=20)
        started = time.monotonic()
        cards = provider.cards(cards_in(20), list(range(20)))
        elapsed = time.monotonic() - started
        assert len(cards) == 20 and elapsed < 1.5, elapsed  # serially: 20 × 0.2 s = 4 s
        assert server.max_in_flight >= 10
        server.reset()
        limited = provider_for(server, concurrency=4)
        limited.cards(cards_in(12), list(range(12)))
        assert server.max_in_flight <= 4


def test_sync_methods_work_inside_a_running_event_loop(anthropic_server):
    anthropic_server.handler = compile_model
    provider = provider_for(anthropic_server)

    async def inside():
        return provider.cards(cards_in(2), [0, 1])

    assert len(asyncio.run(inside())) == 2


def test_task_runner_with_item_cache_makes_no_calls_the_second_time(tmp_path, anthropic_server):
    anthropic_server.handler = compile_model
    cache = ItemCache(tmp_path / "cache.sqlite")
    items = cards_in(10)
    first = TaskRunner(provider_for(anthropic_server), cache, "doc_cards-1")
    cards = first.run("card", items, Card)
    assert first.stats.made == 10 and len(anthropic_server.requests) == 10
    second = TaskRunner(provider_for(anthropic_server), cache, "doc_cards-1")
    assert second.run("card", items, Card) == cards
    assert second.stats.as_dict() == {"made": 0, "cached": 10} and len(anthropic_server.requests) == 10
    # A different card model is a different cache key: recomputed.
    third = TaskRunner(provider_for(anthropic_server, card_model="claude-haiku-4-5"), cache, "doc_cards-1")
    third.run("card", items[:3], Card)
    assert third.stats.made == 3 and len(anthropic_server.requests) == 13
    cache.close()


# -- the Dagster resource --------------------------------------------------------------------------


def test_llm_resource_builds_remote_providers(anthropic_server, openai_server):
    anthropic_server.handler = compile_model
    openai_server.handler = compile_model
    resource = LLMResource(provider="anthropic", api_key="sk-test", base_url=anthropic_server.base_url,
                           card_model="claude-haiku-4-5", concurrency=5, max_retries=1)
    provider = resource.compile_provider
    assert isinstance(provider, RemoteProvider) and provider.concurrency == 5
    assert (provider.model, provider.card_model) == ("claude-sonnet-4-6", "claude-haiku-4-5")
    assert provider.cards(cards_in(1), [0])[0].title == "Shipping rules doc000"
    local = LLMResource(provider="openai", model="qwen2.5-7b-instruct", base_url=openai_server.base_url,
                        max_retries=0)
    assert local.compile_provider.summaries([cluster_in()], [0])[0].title == "Store shipping L1-0000"
    assert openai_server.requests[0].headers["authorization"] == "Bearer none"
    resource.teardown_after_execution(None)


def test_llm_resource_errors_are_clear():
    with pytest.raises(ValueError, match="unknown LLM provider 'gemini'.*offline, anthropic, openai"):
        LLMResource(provider="gemini").compile_provider
    with pytest.raises(Exception, match="ANTHROPIC_API_KEY"):
        LLMResource(provider="anthropic").compile_provider
    with pytest.raises(Exception, match="model name is required"):
        LLMResource(provider="openai").compile_provider
    with pytest.raises(Exception, match="OPENAI_API_KEY"):
        LLMResource(provider="openai", model="gpt-4o-mini").compile_provider
