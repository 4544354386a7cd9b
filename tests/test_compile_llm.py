"""Compiling with a real LLM provider, end to end through the Dagster asset graph, against the
local fake Anthropic / OpenAI servers answering every compile task with plausible JSON: the tree
and its checks, re-asks and retries bounded, token and dollar accounting (manifest and asset
metadata) equal to what the server billed, zero calls on recompile, --max-cost stopping cleanly
and resuming, an item failing for good failing its step once and resuming after the fix,
--dry-run calling nothing, and verify-and-repartition judging every level-1 cluster."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance
from typer.testing import CliRunner

from c2s_pipeline import progress
from c2s_cli.main import app
from c2s_pipeline.artifacts import CorpusArtifacts
from c2s_core.cache import ItemCache
from c2s_pipeline.compiler import CompileError, compile_corpus
from c2s_core.llm.base import BudgetExceededError, CompileTaskError, TaskRunner
from c2s_core.llm.schemas import Card, CardInput
from c2s_core.llm import prompts
from c2s_pipeline.validate import nav_files
from c2s_pipeline.workspace import CorpusSpec, Workspace
from tests.fakes.compile_model import CompileModel, first_user_text, task_of
from tests.fakes.llm_servers import FakeLLMServer, server_error

from .conftest import SAMPLE_CORPUS

USAGE_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@pytest.fixture(scope="module", autouse=True)
def shared_encoder():
    """One loaded encoder for this module's compiles (each compile would load its own)."""
    from c2s_core.encoder import Encoder

    loaded: dict = {}
    original = Encoder._load

    def load(self):
        key = (self.model_name, self.device)
        if key not in loaded:
            loaded[key] = original(self)
        self._model = loaded[key]
        return self._model

    patch = pytest.MonkeyPatch()
    patch.setattr(Encoder, "_load", load)
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


@pytest.fixture(scope="module")
def corpus30(tmp_path_factory) -> Path:
    """30 documents of the bundled sample corpus, spread over its topics."""
    root = tmp_path_factory.mktemp("corpus30")
    for path in sorted(SAMPLE_CORPUS.rglob("*.md"))[::6][:30]:
        shutil.copy(path, root / path.name)
    return root


@pytest.fixture
def server():
    with FakeLLMServer("anthropic") as fake:
        yield fake


def spec_for(home: Path, source: Path, name: str = "c30", **params) -> CorpusSpec:
    return CorpusSpec(name=name, source=str(source), out=str(home / "trees" / name), **params)


_instances: dict[Path, DagsterInstance] = {}


def instance_for(home: Path) -> DagsterInstance:
    """An in-memory Dagster instance per c2s home: what these tests check lives in the home (the
    per-item cache, the artifacts, the tree), and the SQLite event log would only slow them down."""
    return _instances.setdefault(home, DagsterInstance.ephemeral())


def compile_with(server: FakeLLMServer, home: Path, source: Path, **kw) -> dict:
    spec = spec_for(home, source, **{k: kw.pop(k) for k in ("name", "p") if k in kw})
    kw.setdefault("provider", server.flavor)
    return compile_corpus(spec, Workspace(home), base_url=server.base_url, instance=instance_for(home), **kw)


class Recorder:
    """A progress listener that takes the LLM counts."""

    def __init__(self):
        self.last: dict[str, tuple] = {}

    def update(self, stage, done, total, llm=None):
        self.last[stage] = (done, total, llm)


# -- the happy path, accounting, recompile, dry run ----------------------------------------------


def test_anthropic_compile_end_to_end(tmp_path, server, corpus30):
    model = CompileModel(malformed_once={"L1-0001"}, rate_limit_once={"L1-0002"})
    server.handler = model
    home = tmp_path / "home"

    estimate = compile_with(server, home, corpus30, card_model="claude-haiku-4-5", dry_run=True)
    assert server.requests == [] and not (home / "corpora.yaml").exists()  # nothing called, nothing registered
    stages = {s["stage"]: s for s in estimate["stages"]}
    assert (stages["doc_cards"]["items"], stages["doc_cards"]["cached"], stages["doc_cards"]["calls"]) == (30, 0, 30)
    assert stages["summaries_l1"]["items"] == 3 and stages["repartition_l1"]["items"] == 1
    assert stages["entities"]["items"] == 3 and estimate["total"]["cost_usd"] > 0

    listener = Recorder()
    progress.set_listener(listener)
    try:
        manifest = compile_with(server, home, corpus30, card_model="claude-haiku-4-5", concurrency=8)
    finally:
        progress.set_listener(None)

    # The tree is there, its checks pass, and every text is the model's (no placeholder).
    out = home / "trees" / "c30"
    assert len(manifest["doc_paths"]) == 30 and manifest["stats"]["skills"] >= 2
    assert all(v["passed"] for v in manifest["checks"].values()), manifest["checks"]
    for path in nav_files(out):
        assert "and related topics" in path.read_text()  # the model's cluster titles
    cards = {a.item for a in model.valid("card")}
    assert cards == set(manifest["doc_paths"])
    assert {r.body["model"] for r in server.requests if task_of(r) == "card"} == {"claude-haiku-4-5"}
    assert {r.body["model"] for r in server.requests if task_of(r) != "card"} == {"claude-sonnet-4-6"}

    # A malformed summary is re-asked once with the error, then accepted; a 429 retried once.
    l1 = [a for a in model.requests_for("summary") if a.item == "L1-0001"]
    assert [(a.attempt, a.valid) for a in l1][:2] == [(1, False), (2, True)]
    asked_again = next(r for r in server.requests if task_of(r) == "summary" and len(r.messages) == 3)
    assert "not JSON" in asked_again.messages[2]["content"][0]["text"]
    usage = manifest["stats"]["llm_usage"]
    assert (usage["total"]["reasks"], usage["total"]["retries"]) == (1, 1)
    assert usage["stages"]["summaries_l1"]["reasks"] == 1

    # Accounting equals what the server billed, per token kind and in dollars.
    billed = model.usage_total()
    assert {k: usage["total"][k] for k in USAGE_TOKENS} == billed
    assert usage["total"]["cost_usd"] == pytest.approx(model.cost(), abs=1e-5) and model.cost() > 0
    assert usage["total"]["calls"] == len([a for a in model.answers if a.status == 200])
    assert set(usage["stages"]) == {"doc_cards", "summaries_l1", "repartition_l1", "entities"}
    assert usage["stages"]["doc_cards"]["calls"] == 30
    # Each stage's share of prompt tokens read from the prompt cache (this fake caches any length).
    for name, share in usage["cache_read_share"].items():
        u = usage["total"] if name == "total" else usage["stages"][name]
        assert share == round(u["cache_read_tokens"] / (u["input_tokens"] + u["cache_read_tokens"]
                                                        + u["cache_write_tokens"]), 4)
    assert 0 < usage["cache_read_share"]["doc_cards"] < 1
    assert sum(s["cost_usd"] for s in usage["stages"].values()) == pytest.approx(usage["total"]["cost_usd"], abs=1e-5)
    assert manifest["provider"]["card_model"] == "claude-haiku-4-5"
    meta = instance_for(home).get_latest_materialization_event(AssetKey("doc_cards")).asset_materialization.metadata
    assert meta["llm_api_calls"].value == 30 and meta["llm_cost_usd"].value == pytest.approx(
        usage["stages"]["doc_cards"]["cost_usd"])
    assert meta["llm_input_tokens"].value == usage["stages"]["doc_cards"]["input_tokens"]

    # Live progress carried the LLM counts and dollars.
    done, total, llm = listener.last["doc_cards"]
    assert (done, total, llm.made, llm.cached, llm.failed) == (30, 30, 30, 0, 0)
    assert llm.cost_usd == pytest.approx(usage["stages"]["doc_cards"]["cost_usd"], abs=1e-6)

    # Repartition prompts list member ids with their card titles, so moves can name documents.
    repartition = next(r for r in server.requests if task_of(r) == "repartition")
    prompt = first_user_text(repartition)
    assert "Members:" in prompt and re.search(r"^- \S+\.md: \S", prompt, re.MULTILINE)

    # An unchanged corpus recompiles with zero calls and costs nothing.
    before = len(server.requests)
    again = compile_with(server, home, corpus30, card_model="claude-haiku-4-5")
    assert len(server.requests) == before
    assert again["stats"]["llm_calls"]["made"] == 0 and again["stats"]["llm_usage"]["total"]["cost_usd"] == 0
    assert again["doc_paths"] == manifest["doc_paths"]

    # The dry run now finds every card in the cache, still without a request.
    estimate = compile_with(server, home, corpus30, card_model="claude-haiku-4-5", dry_run=True)
    cards_row = next(s for s in estimate["stages"] if s["stage"] == "doc_cards")
    assert (cards_row["cached"], cards_row["calls"], cards_row["cost_usd"]) == (30, 0, 0)
    assert len(server.requests) == before


def test_openai_compatible_server(tmp_path, corpus30):
    model = CompileModel()
    with FakeLLMServer("openai", handler=model) as server:
        manifest = compile_with(server, tmp_path / "home", corpus30, model="qwen3-8b")
        assert all(r.body["model"] == "qwen3-8b" and r.body["response_format"] == {"type": "json_object"}
                   for r in server.requests)
        assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert len(manifest["doc_paths"]) == 30 and manifest["provider"]["name"] == "openai"
    total = manifest["stats"]["llm_usage"]["total"]
    assert total["calls"] == len(server.requests) and total["cost_usd"] == 0  # a local model: no price
    billed = model.usage_total()
    assert total["input_tokens"] + total["cache_read_tokens"] == billed["input_tokens"] + billed[
        "cache_read_tokens"] + billed["cache_write_tokens"]  # OpenAI reports no cache writes
    assert total["output_tokens"] == billed["output_tokens"]


# -- interrupted runs resume from the cache ------------------------------------------------------


def test_max_cost_stops_cleanly_and_a_rerun_resumes(tmp_path, server, corpus30, monkeypatch):
    model = CompileModel()
    server.handler = model
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    result = CliRunner().invoke(app, ["compile", str(corpus30), "--corpus", "c30", "--provider", "anthropic",
                                      "--base-url", server.base_url, "--max-cost", "0.02"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    # Off a terminal the compile logs timestamped progress lines first; the error is the one other line.
    message = [line for line in result.output.strip().splitlines() if not re.match(r"\d\d:\d\d:\d\d ", line)]
    assert len(message) == 1 and re.fullmatch(
        r"error: budget of \$0\.02 reached after \$0\.0\d in doc_cards; rerun with a higher --max-cost to resume "
        r"— completed items are cached", message[0]), result.output
    assert 0 < model.cost() <= 0.02
    first = {a.item for a in model.valid("card")}
    assert 0 < len(first) < 30

    manifest = compile_with(server, home, corpus30, max_cost=25.0)
    second = [a.item for a in model.valid("card")][len(first):]
    assert len(second) == 30 - len(first) and not set(second) & first  # only what was missing
    assert len(manifest["doc_paths"]) == 30
    assert manifest["stats"]["llm_calls"]["cached"] >= len(first)


def test_an_item_failing_for_good_fails_its_step_once_and_a_rerun_resumes(tmp_path, server, corpus30):
    docs = sorted(p.name for p in corpus30.iterdir())
    broken = docs[12]
    model = CompileModel(garbage_for={broken})
    server.handler = model
    home = tmp_path / "home"
    with pytest.raises(CompileError) as info:
        compile_with(server, home, corpus30, concurrency=4)
    message = str(info.value)
    assert f"card for document {broken}" in message and "after 3 attempts" in message
    assert "in doc_cards" in message and "completed items are cached" in message
    assert len(model.requests_for("card")) < 30 + 2  # it stopped starting new items
    # Three asks in all: re-asks are bounded and the step was not retried by Dagster.
    assert len([a for a in model.requests_for("card") if a.item == broken]) == 3
    done_first = {a.item for a in model.valid("card")}

    model.garbage_for.clear()
    asked = len(model.requests_for("card"))
    manifest = compile_with(server, home, corpus30)
    again = [a.item for a in model.requests_for("card")[asked:]]
    assert sorted(again) == sorted(set(docs) - done_first)  # calls only for the unfinished items
    assert len(manifest["doc_paths"]) == 30


class Outage:
    """Serves ``model``, except that once ``after`` prompts of ``task`` were answered the next
    ``failures`` of them get a 500: more than the client's HTTP attempts, so the step fails and
    the stage's RetryPolicy takes over. Records every answered prompt of ``task``."""

    def __init__(self, model: CompileModel, after: int, failures: int, task: str = "summary"):
        self.model, self.after, self.left, self.task = model, after, failures, task
        self.answered: list[str] = []
        self.failed = 0

    def __call__(self, request):
        if task_of(request) == self.task:
            if len(self.answered) >= self.after and self.left:
                self.left -= 1
                self.failed += 1
                return server_error(500, retry_after=0.01)
            self.answered.append(first_user_text(request))
        return self.model(request)


def test_a_summary_stage_failing_midway_is_retried_and_redoes_only_the_missing_items(tmp_path, server, corpus30):
    from dagster import DagsterEventType

    from c2s_core.llm.clients import RetryPolicy

    outage = Outage(CompileModel(move_one=False), after=1, failures=RetryPolicy().max_attempts)
    server.handler = outage
    home = tmp_path / "home"
    manifest = compile_with(server, home, corpus30, concurrency=1)

    assert outage.failed == RetryPolicy().max_attempts  # one item gave up: the step failed once
    instance = instance_for(home)
    run = instance.get_runs(limit=1)[0]
    retried = [e.step_key for e in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_UP_FOR_RETRY)]
    assert retried == ["summaries_l1"]
    assert run.is_success and len(manifest["doc_paths"]) == 30
    # No duplicate work: every summary prompt was answered once, the one answered before the
    # failure came from the cache on the retry, and every level-1 cluster got its summary.
    assert len(outage.answered) == len(set(outage.answered))
    art = CorpusArtifacts(home / "artifacts" / "c30")
    clusters = set(art.read_table(art.level(1, "clusters.parquet"))["node_id"])
    assert {a.item for a in outage.model.valid("summary")} >= clusters
    assert manifest["stages"]["summaries_l1"]["llm_calls"]["cached"] >= 1


def test_a_failed_shard_is_retried_alone_and_redoes_only_its_missing_items(tmp_path, server, corpus30, monkeypatch):
    """doc_cards in shards of 10: the card API fails for good halfway through a shard; that
    shard step alone is retried, and no document's card is asked for twice."""
    from dagster import DagsterEventType

    from c2s_core.llm.clients import RetryPolicy

    monkeypatch.setenv("C2S_SHARD_SIZE", "10")
    outage = Outage(CompileModel(), after=15, failures=RetryPolicy().max_attempts, task="card")
    server.handler = outage
    home = tmp_path / "home"
    manifest = compile_with(server, home, corpus30, concurrency=1)

    assert outage.failed == RetryPolicy().max_attempts
    instance = instance_for(home)
    run = instance.get_runs(limit=1)[0]
    retried = [e.step_key for e in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_UP_FOR_RETRY)]
    assert len(retried) == 1 and re.fullmatch(r"doc_cards\.doc_cards_shard\[000[0-2]\]", retried[0]), retried
    assert run.is_success and len(manifest["doc_paths"]) == 30
    # Every document's card prompt reached the server once: the retried shard took the items it
    # had finished before the failure from the cache (the stage counts the calls of the attempts
    # that succeeded, as an unsharded stage does).
    assert len(outage.answered) == len(set(outage.answered)) == 30
    finished_before = 15 - 10 * int(retried[0][-5:-1])
    assert finished_before > 0
    assert manifest["stages"]["doc_cards"]["llm_calls"] == {"made": 30 - finished_before, "cached": finished_before}


# -- verify-and-repartition judges every cluster -------------------------------------------------


def test_every_level_1_cluster_is_judged_when_there_are_more_than_60(tmp_path, server):
    topics = ["invoices", "calendar", "bookings", "payments", "reports", "accounts", "widgets", "staff"]
    source = tmp_path / "many.jsonl"
    with source.open("w") as f:
        for i in range(305):
            topic = topics[i % len(topics)]
            f.write(json.dumps({"id": f"d{i:03d}", "title": f"{topic.title()} note {i}",
                                "text": f"How to handle {topic} case {i}: open {topic} settings and pick option "
                                        f"{i % 7} for account {i}."}) + "\n")
    model = CompileModel(move_one=False)
    server.handler = model
    manifest = compile_with(server, tmp_path / "home", source, name="many", p=5, concurrency=32)
    level1 = [r for r in server.requests if task_of(r) == "repartition" and "Level 1 of" in first_user_text(r)]
    judged = [a.clusters for a in model.requests_for("repartition") if a.clusters[0].startswith("L1-")]
    assert len(level1) == len(judged) == 2  # 61 clusters: two sibling batches of ≤60
    assert all(len(batch) <= 60 for batch in judged)
    assert sorted(c for batch in judged for c in batch) == [f"L1-{c:04d}" for c in range(61)]
    assert all(prompt.count("\n- d") >= 100 for prompt in map(first_user_text, level1))  # member titles shown
    upper = [a for a in model.requests_for("repartition") if a.clusters[0].startswith("L2-")]
    assert len(upper) == 1 and len(upper[0].clusters) == 13  # level 2 is judged too
    assert manifest["stats"]["levels"] == 3 and len(manifest["doc_paths"]) == 305


# -- the command line --------------------------------------------------------------------------------


def test_cli_missing_key_and_dry_run(tmp_path, server, corpus30, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    runner = CliRunner()
    result = runner.invoke(app, ["compile", str(corpus30), "--corpus", "c30", "--provider", "anthropic"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip().count("\n") == 0 and "ANTHROPIC_API_KEY" in result.output

    server.handler = CompileModel()
    result = runner.invoke(app, ["compile", str(corpus30), "--corpus", "c30", "--provider", "anthropic",
                                 "--base-url", server.base_url, "--card-model", "claude-haiku-4-5", "--dry-run",
                                 "--json"])
    assert result.exit_code == 0, result.output
    estimate = json.loads(result.stdout)
    assert estimate["card_model"] == "claude-haiku-4-5" and server.requests == []
    cards = estimate["stages"][0]
    assert cards["stage"] == "doc_cards" and cards["output_tokens"] == 30 * prompts.MAX_TOKENS["card"]
    per = estimate["total"]["per_1000_documents"]
    assert per["cost_usd"] == pytest.approx(estimate["total"]["cost_usd"] * 1000 / 30, abs=1e-3)
    # The cards' shared instructions are shorter than Haiku 4.5 caches: billed in full, and said so.
    assert any(n.startswith("card: its shared instructions") and "claude-haiku-4-5's 4,096-token minimum" in n
               for n in estimate["notes"])
    assert cards["cache_read_tokens"] == 0
    result = runner.invoke(app, ["compile", str(corpus30), "--corpus", "c30", "--provider", "anthropic", "--dry-run",
                                 "--max-cost", "0.01"])
    assert result.exit_code == 0 and "doc_cards" in result.output and "exceeds --max-cost" in result.output
    assert "per 1,000 documents: $" in result.output


def test_dry_run_prices_cached_instructions_as_cache_reads(tmp_path, server, corpus30, monkeypatch):
    """Where the model caches a prefix as long as a task's shared instructions, every call after
    the first reads them from the prompt cache, at its price."""
    from dataclasses import replace

    from c2s_core.llm import pricing

    server.handler = CompileModel()
    haiku = pricing.price_for("claude-haiku-4-5")
    plain = compile_with(server, tmp_path / "home", corpus30, card_model="claude-haiku-4-5", dry_run=True)
    monkeypatch.setitem(pricing.PRICES, "claude-haiku-4-5", replace(haiku, cache_min_tokens=100))
    cached = compile_with(server, tmp_path / "home", corpus30, card_model="claude-haiku-4-5", dry_run=True)
    before, after = plain["stages"][0], cached["stages"][0]
    instructions = prompts.estimate_tokens(prompts.CARD_SYSTEM)
    assert after["cache_read_tokens"] == instructions * 29  # 30 calls: one writes the cache, 29 read it
    assert after["input_tokens"] == before["input_tokens"]  # the same tokens, billed differently
    saved = instructions * 29 * (haiku.input - haiku.cache_read) - instructions * (haiku.cache_write - haiku.input)
    assert before["cost_usd"] - after["cost_usd"] == pytest.approx(saved / 1e6, abs=1e-4)
    assert server.requests == []


# -- the runner and the stage: what a failure keeps, and whether Dagster retries it ---------------


class Interrupted:
    """A provider that completes two items, then is interrupted (Ctrl-C) mid-batch."""

    name, model = "fake", "fake-1"

    def __init__(self):
        self.asked: list[int] = []

    def prompt_version(self, task):
        return "v1"

    def batch_context(self, task, items):
        return ""

    def cards(self, items, only, on_result=None):
        self.asked += list(only)
        for i in only[:2]:
            on_result(i, Card(title=f"Card {i}", one_line="done"))
        raise KeyboardInterrupt

    def report(self):
        return {"tasks": {}, "cost_usd": 0.0}


def test_an_interrupted_batch_keeps_exactly_the_items_completed(tmp_path):
    cache = ItemCache(tmp_path / "cache.sqlite")
    items = [CardInput(doc_id=f"d{i}", title="", text=f"text {i}") for i in range(6)]
    provider = Interrupted()
    with pytest.raises(KeyboardInterrupt):
        TaskRunner(provider, cache, "v").run("card", items, Card)
    again = Interrupted()
    runner = TaskRunner(again, cache, "v")
    assert set(runner.cached("card", items)) == {0, 1}
    with pytest.raises(KeyboardInterrupt):
        runner.run("card", items, Card)
    assert again.asked == [2, 3, 4, 5] and runner.stats.cached == 2


class Failing(Interrupted):
    def __init__(self, error):
        super().__init__()
        self.error = error

    def cards(self, items, only, on_result=None):
        raise self.error


def test_final_task_errors_fail_the_step_without_retries_and_transient_ones_keep_them(tmp_path):
    from dagster import Failure

    from c2s_pipeline.assets._stage import StageRunner

    cache = ItemCache(tmp_path / "cache.sqlite")
    items = [CardInput(doc_id="d0", title="", text="text")]
    with pytest.raises(Failure) as info:
        StageRunner(Failing(CompileTaskError("card for document d0: no valid answer")), cache, "v",
                    stage="doc_cards").run("card", items, Card)
    assert info.value.allow_retries is False and "card for document d0" in info.value.description
    with pytest.raises(Failure) as info:
        StageRunner(Failing(BudgetExceededError(1.0, 0.98, "summary")), cache, "v",
                    stage="summaries_l1").run("card", items, Card)
    assert info.value.allow_retries is False
    assert info.value.description.startswith("budget of $1.00 reached after $0.98 in summaries_l1;")
    with pytest.raises(CompileTaskError):  # a 429 that outlasted the HTTP retries: the RetryPolicy's turn
        StageRunner(Failing(CompileTaskError("rate limited", transient=True)), cache, "v",
                    stage="doc_cards").run("card", items, Card)


def test_three_argument_progress_listeners_still_work():
    calls = []

    class Old:
        def update(self, stage, done, total):
            calls.append((stage, done, total))

    progress.set_listener(Old())
    try:
        progress.reporter("doc_cards")(3, 10, progress.LLMProgress(made=3, cost_usd=0.5))
        progress.reporter("doc_embeddings")(4, 10)
    finally:
        progress.set_listener(None)
    assert calls == [("doc_cards", 3, 10), ("doc_embeddings", 4, 10)]


def test_dry_run_counts_the_level_one_clusters_a_crowded_group_splits_into():
    """As the compile's level 1 splits a cluster too crowded for one leaf's file, the estimate
    splits its stand-in groups: a group of thirty 300-byte rows would fill three leaves' files,
    so it is split into parts that each fit; ten such rows fit one."""
    from c2s_pipeline.estimate import _fitting
    from c2s_pipeline.subgroups import leaf_room

    group = list(range(30))
    parts = _fitting(group, [300] * 30)
    assert [i for part in parts for i in part] == group and len(parts) >= 3
    assert all(300 * len(part) <= leaf_room(len(part)) for part in parts)
    assert _fitting(group[:10], [300] * 10) == [group[:10]]
