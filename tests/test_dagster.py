"""The Dagster side for real: definitions load, and a dagster-webserver started on 127.0.0.1
serves the asset graph (every stage, partitioned by corpus) and a compiled partition's
materializations over GraphQL."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
from dagster import Definitions

from c2s_pipeline.definitions import defs

from .conftest import ROOT

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
def webserver(sample_tree):
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
    assert {"/".join(d["path"]) for d in by_key["clusters/level_2"]["dependencyKeys"]} == {"repartition/level_1"}
    assert {"/".join(d["path"]) for d in by_key["doc_cards"]["dependencyKeys"]} == {"documents"}

    data = graphql(webserver, """
        query($key: AssetKeyInput!) { assetOrError(assetKey: $key) { ... on Asset {
            assetMaterializations(partitions: ["sample"], limit: 5) { partition
              metadataEntries { label ... on IntMetadataEntry { intValue } } } } } }""",
                   key={"path": ["skill_tree"]})
    materializations = data["assetOrError"]["assetMaterializations"]
    assert materializations and materializations[0]["partition"] == "sample"
    entries = {e["label"]: e.get("intValue") for e in materializations[0]["metadataEntries"]}
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
