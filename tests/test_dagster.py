"""The Dagster side for real: definitions load, and a dagster-webserver started on 127.0.0.1
serves the asset graph (every stage, partitioned by corpus) and a compiled partition's
materializations over GraphQL."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from dagster import AssetKey, Definitions

from c2s_pipeline.assets.graph import upstream_of
from c2s_pipeline.assets.publish import CHECKS
from c2s_pipeline.definitions import defs

from .conftest import ROOT, SAMPLE_CORPUS

STAGES = {"documents", "doc_cards", "doc_embeddings", "clusters/level_1", "summaries/level_1",
          "repartition/level_1", "clusters/level_2", "summaries/level_2", "repartition/level_2",
          "entities", "staged_tree", "skill_tree"}


def test_definitions_load():
    Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert STAGES <= keys
    for key in graph.get_all_asset_keys():
        assert graph.get(key).partitions_def.name == "corpus"
    assert set(defs.resources) >= {"workspace", "llm", "encoder"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def failed_check(sample_tree, tmp_path, monkeypatch):
    """A compile, in the webserver's instance, whose rendered tree fails a blocking check."""
    from c2s_pipeline.assets import publish as publish_stage
    from c2s_pipeline.compiler import CompileError, compile_corpus
    from c2s_pipeline.validate import check_tree
    from c2s_pipeline.workspace import CorpusSpec, Workspace

    def broken(*args, **kwargs):
        outcomes = check_tree(*args, **kwargs)
        for o in outcomes:
            if o.name == "no_empty_cluster":
                o.passed, o.description = False, "skills/x/INDEX.md lists nothing"
        return outcomes

    monkeypatch.setattr(publish_stage, "check_tree", broken)
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
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(sample_tree.home)}
    log = open(sample_tree.home / "webserver.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "dagster_webserver", "-w", str(ROOT / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/graphql"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, (sample_tree.home / "webserver.log").read_text()[-3000:]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            pytest.fail("dagster-webserver did not come up within 120 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


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
    assert STAGES <= set(by_key)
    assert all(n["partitionDefinition"]["name"] == "corpus" for n in nodes)
    # Every artifact an asset reads is an edge: level 2 reads level 1's nodes, status and change
    # files and the cards its members are embedded with; publishing reads the staged tree.
    deps = {key: {"/".join(d["path"]) for d in node["dependencyKeys"]} for key, node in by_key.items()}
    assert {key: set(map(AssetKey.to_user_string, upstream_of(key))) for key in STAGES} == {k: deps[k] for k in STAGES}
    assert deps["clusters/level_2"] >= {"repartition/level_1", "clusters/level_1", "summaries/level_1", "doc_cards"}
    assert deps["clusters/level_3"] >= {"repartition/level_2", "repartition/level_1"}
    assert deps["summaries/level_1"] >= {"clusters/level_1", "documents", "doc_cards"}
    assert deps["staged_tree"] >= {"doc_embeddings", "entities", "clusters/level_1", "repartition/level_2"}
    assert deps["skill_tree"] >= {"staged_tree", "documents", "entities"}

    # The structural checks live on the staged tree; all but the size warning block publishing,
    # and the failing one shows as failed, with ERROR severity, for the corpus that failed it.
    checks = graphql(webserver, """
        { assetNodeOrError(assetKey: {path: ["staged_tree"]}) { ... on AssetNode { assetChecksOrError {
            ... on AssetChecks { checks { name blocking } } } } } }""")["assetNodeOrError"]["assetChecksOrError"]["checks"]
    assert {c["name"]: c["blocking"] for c in checks} == {name: name != "nav_file_sizes" for name in CHECKS}
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

    # Every stage's output is current for the compiled partition: data versions line up.
    stale = graphql(webserver, """
        { assetNodes { assetKey { path } staleStatus(partition: "sample") } }""")["assetNodes"]
    assert {"/".join(n["assetKey"]["path"]): n["staleStatus"] for n in stale} == {k: "FRESH" for k in by_key}

    partitions = graphql(webserver, """
        { partitionSetsOrError(repositorySelector: {repositoryName: "__repository__", repositoryLocationName: "c2s"},
                               pipelineName: "__ASSET_JOB") { __typename } }""")
    # The code location is named "c2s" in workspace.yaml, pyproject and the CLI alike.
    assert partitions["partitionSetsOrError"]["__typename"] == "PartitionSets"
