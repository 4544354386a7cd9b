"""The Dagster side for real: definitions load, and a dagster-webserver started on 127.0.0.1
serves the asset graph (every stage, partitioned by corpus) and a compiled partition's
materializations over GraphQL."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from dagster import AssetKey, Definitions

from c2s_pipeline.definitions import defs
from c2s_pipeline.recipe import RECIPE, STAGED_TREE_CHECKS, STAGES

from .conftest import SAMPLE_CORPUS
from .fakes.checks import fail_check
from .webserver import dagster_webserver

SPINE = ["documents", "doc_cards", "doc_embeddings", "clusters_l1", "summaries_l1", "repartition_l1",
         "clusters_l2", "summaries_l2", "repartition_l2", "clusters_l3", "summaries_l3", "clusters_l4",
         "summaries_l4", "clusters_l5", "summaries_l5", "entities", "staged_tree", "skill_tree"]


def test_definitions_load():
    Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    assert [k.to_user_string() for k in graph.toposorted_asset_keys] == SPINE == list(STAGES)
    for key in graph.get_all_asset_keys():
        assert graph.get(key).partitions_def.name == "corpus"
    assert set(defs.resources) >= {"workspace", "llm", "encoder"}


def test_the_recipe_is_the_graph():
    """One asset per row, named by its row, in its phase's group, after the row before it; the
    LLM stages are pooled and retried, and every side read is a stage further up the spine (so
    the chained data versions cover it)."""
    graph = defs.resolve_asset_graph()
    groups = {}
    for before, spec in zip([None, *RECIPE], RECIPE):
        node = graph.get(AssetKey(spec.name))
        groups.setdefault(node.group_name, []).append(spec.name)
        assert [k.to_user_string() for k in node.parent_keys] == ([before.name] if before else [])
        assert node.code_version == spec.code_version and node.pools == ({"llm"} if spec.task else set())
        assert set(spec.reads) <= set(SPINE[:SPINE.index(spec.name)]), spec.name
    assert list(groups) == ["ingest", "level_1", "level_2", "level_3", "level_4", "level_5", "publish"]
    assert groups["level_1"] == ["clusters_l1", "summaries_l1", "repartition_l1"]
    assert groups["level_3"] == ["clusters_l3", "summaries_l3"]
    assert len({key.path[-1] for key in graph.get_all_asset_keys()}) == len(SPINE)
    job = defs.resolve_job_def("compile_corpus")
    assert job.graph.node_named("clusters_l1").definition.config_schema is not None

    # A sharded row is one asset backed by a graph: a step planning the shards, a step per shard
    # (retried, and pooled, when the stage calls the LLM) and a step collecting them.
    assert [spec.name for spec in RECIPE if spec.shard] == ["doc_cards", "doc_embeddings"]
    for spec in (s for s in RECIPE if s.shard):
        ops = {n.name: n.definition for n in job.graph.node_named(spec.name).definition.nodes}
        assert set(ops) == {f"{spec.name}_shards", f"{spec.name}_shard", f"{spec.name}_collect"}
        assert ops[f"{spec.name}_shards"].output_defs[0].is_dynamic
        shard = ops[f"{spec.name}_shard"]
        assert (shard.retry_policy is not None, shard.pool) == ((True, "llm") if spec.task else (False, None))


def test_shard_size_is_run_config_or_environment(monkeypatch):
    from dagster import DagsterInvalidConfigError, Failure, validate_run_config
    from dagster._core.system_config.objects import ResolvedRunConfig

    from c2s_pipeline.assets._shards import DEFAULT_SHARD_SIZE, ShardConfig, plan_shards, shard_size

    # The stage's config reaches its planning op.
    job = defs.resolve_job_def("compile_corpus")
    resolved = ResolvedRunConfig.build(job, {"ops": {"doc_embeddings": {"config": {"documents_per_shard": 7}}}})
    assert resolved.ops["doc_embeddings.doc_embeddings_shards"].config == {"documents_per_shard": 7}
    assert resolved.ops["doc_cards.doc_cards_shards"].config == {"documents_per_shard": None}
    with pytest.raises(DagsterInvalidConfigError):
        validate_run_config(job, {"ops": {"doc_cards": {"config": {"documents_per_shard": "many"}}}})
    monkeypatch.delenv("C2S_SHARD_SIZE", raising=False)
    assert shard_size(ShardConfig()) == DEFAULT_SHARD_SIZE == 2000
    monkeypatch.setenv("C2S_SHARD_SIZE", "250")
    assert (shard_size(ShardConfig()), shard_size(ShardConfig(documents_per_shard=7))) == (250, 7)
    for bad, origin in [("many", "$C2S_SHARD_SIZE='many'"), ("0", "$C2S_SHARD_SIZE='0'")]:
        monkeypatch.setenv("C2S_SHARD_SIZE", bad)
        with pytest.raises(Failure) as error:
            shard_size(ShardConfig())
        assert error.value.description == f"{origin} is not a shard size: give a whole number of documents, 1 or more"
    assert [(s.start, s.stop) for s in plan_shards(5, 2)] == [(0, 2), (2, 4), (4, 5)]
    assert [(s.start, s.stop) for s in plan_shards(4, 2000)] == [(0, 4)]


@pytest.fixture
def failed_check(sample_tree, tmp_path, monkeypatch):
    """A compile, in the webserver's instance, whose rendered tree fails a blocking check."""
    from c2s_pipeline.compiler import CompileError, compile_corpus
    from c2s_pipeline.workspace import CorpusSpec, Workspace

    fail_check(monkeypatch, "no_empty_cluster", "skills/x/INDEX.md lists nothing")
    source = tmp_path / "broken"
    source.mkdir()
    for path in sorted(SAMPLE_CORPUS.rglob("*.md"))[:12]:
        (source / path.name).write_bytes(path.read_bytes())
    spec = CorpusSpec(name="broken", source=str(source), out=str(tmp_path / "out"))
    with pytest.raises(CompileError, match="failed its checks and was not published.*no_empty_cluster"):
        compile_corpus(spec, Workspace(sample_tree.home))
    assert not (tmp_path / "out").exists()
    return spec


@pytest.fixture
def webserver(sample_tree, failed_check):
    with dagster_webserver(sample_tree.home) as base:
        yield f"{base}/graphql"


def graphql(url: str, query: str, **variables) -> dict:
    response = httpx.post(url, json={"query": query, "variables": variables}, timeout=60)
    response.raise_for_status()
    body = response.json()
    assert "errors" not in body, body["errors"]
    return body["data"]


def test_webserver_serves_graph_and_materializations(webserver, sample_tree):
    nodes = graphql(webserver, """
        { assetNodes { assetKey { path } partitionDefinition { type name } dependencyKeys { path } } }""")["assetNodes"]
    by_key = {"/".join(n["assetKey"]["path"]): n for n in nodes}
    assert set(by_key) == set(SPINE)
    assert all(n["partitionDefinition"]["name"] == "corpus" for n in nodes)
    # The lineage is the spine: each stage's one edge comes from the stage before it.
    deps = {key: ["/".join(d["path"]) for d in node["dependencyKeys"]] for key, node in by_key.items()}
    assert deps == {key: SPINE[i - 1:i] for i, key in enumerate(SPINE)}

    # The structural checks live on the staged tree; all but the size warning block publishing,
    # and the failing one shows as failed, with ERROR severity, for the corpus that failed it.
    checks = graphql(webserver, """
        { assetNodeOrError(assetKey: {path: ["staged_tree"]}) { ... on AssetNode { assetChecksOrError {
            ... on AssetChecks { checks { name blocking } } } } } }""")["assetNodeOrError"]["assetChecksOrError"]["checks"]
    assert {c["name"]: c["blocking"] for c in checks} == {c.name: c.name != "nav_file_sizes" for c in STAGED_TREE_CHECKS}
    # Runs started by c2s compile belong to the code location, so the UI can re-execute them.
    runs = graphql(webserver, """
        { runsOrError(filter: {tags: [{key: "c2s/corpus", value: "broken"}]}) { ... on Runs { results {
            runId status pipelineName repositoryOrigin { repositoryLocationName repositoryName } } } } }""")
    run, = runs["runsOrError"]["results"]
    assert {k: v for k, v in run.items() if k != "runId"} == {
        "status": "FAILURE", "pipelineName": "compile_corpus",
        "repositoryOrigin": {"repositoryLocationName": "c2s", "repositoryName": "__repository__"}}
    executions = graphql(webserver, """
        { assetCheckExecutions(assetKey: {path: ["staged_tree"]}, checkName: "no_empty_cluster", limit: 20) {
            runId status evaluation { success severity } } }""")["assetCheckExecutions"]
    failed = [e for e in executions if e["runId"] == run["runId"]]
    assert failed == [{"runId": run["runId"], "status": "FAILED", "evaluation": {"success": False, "severity": "ERROR"}}]
    job = graphql(webserver, """
        { pipelineOrError(params: {repositoryLocationName: "c2s", repositoryName: "__repository__",
                                   pipelineName: "compile_corpus"}) { __typename } }""")
    assert job["pipelineOrError"]["__typename"] == "Pipeline"
    # The UI's "Re-execute from failure": the run is accepted (queued for the daemon) with only the
    # failed step and its downstream to run.
    launched = graphql(webserver, """
        mutation($parent: String!) { launchPipelineReexecution(reexecutionParams: {parentRunId: $parent,
                                                                                  strategy: FROM_FAILURE}) {
            __typename ... on LaunchRunSuccess { run { runId status stepKeysToExecute tags { key value } } }
            ... on PythonError { message } } }""", parent=run["runId"])["launchPipelineReexecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    child = launched["run"]
    assert child["stepKeysToExecute"] == ["staged_tree", "skill_tree"] and child["status"] == "QUEUED"
    assert {"key": "dagster/partition", "value": "broken"} in child["tags"]
    graphql(webserver, "mutation($id: String!) { deleteRun(runId: $id) { __typename } }", id=child["runId"])

    data = graphql(webserver, """
        query($key: AssetKeyInput!) { assetOrError(assetKey: $key) { ... on Asset {
            assetMaterializations(partitions: ["sample"], limit: 5) { partition
              metadataEntries { label ... on IntMetadataEntry { intValue } ... on PathMetadataEntry { path } } } } } }""",
                   key={"path": ["skill_tree"]})
    materializations = data["assetOrError"]["assetMaterializations"]
    assert materializations and materializations[0]["partition"] == "sample"
    entries = {e["label"]: e.get("intValue") or e.get("path") for e in materializations[0]["metadataEntries"]}
    assert entries["view"].endswith("artifacts/sample/view/index.html") and Path(entries["view"]).exists()
    assert entries["skills"] == sample_tree.manifest["stats"]["skills"]
    assert entries["nav_files"] == sample_tree.manifest["stats"]["nav_files"]

    # Every stage's output is current for the compiled partition: data versions line up, and
    # each is the one the stage recorded for the stage after it to chain.
    stale = graphql(webserver, """
        { assetNodes { assetKey { path } staleStatus(partition: "sample") } }""")["assetNodes"]
    assert {"/".join(n["assetKey"]["path"]): n["staleStatus"] for n in stale} == {k: "FRESH" for k in by_key}
    versions = {}
    for key in SPINE:
        record, = graphql(webserver, """
            query($key: AssetKeyInput!) { assetOrError(assetKey: $key) { ... on Asset {
                assetMaterializations(partitions: ["sample"], limit: 1) { tags { key value } } } } }""",
                          key={"path": [key]})["assetOrError"]["assetMaterializations"]
        versions[key] = {t["key"]: t["value"] for t in record["tags"]}["dagster/data_version"]
    artifacts = sample_tree.home / "artifacts" / "sample" / "versions"
    assert versions == {key: (artifacts / key).read_text() for key in SPINE}
    assert len(set(versions.values())) == len(SPINE)

    partitions = graphql(webserver, """
        { partitionSetsOrError(repositorySelector: {repositoryName: "__repository__", repositoryLocationName: "c2s"},
                               pipelineName: "__ASSET_JOB") { __typename } }""")
    # The code location is named "c2s" in workspace.yaml, pyproject and the CLI alike.
    assert partitions["partitionSetsOrError"]["__typename"] == "PartitionSets"
