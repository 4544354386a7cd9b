"""Beyond one process: the shipped instance settings, the executor switch, the Kubernetes
examples against dagster-k8s's schemas, and a compile whose steps run in a real Celery worker
while a webserver and a daemon share the same Postgres-backed instance."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRun, execute_job, reconstructable, validate_run_config

from c2s_pipeline.executors import CHOICES, ExecutorChoiceError, compile_executor, compile_job_def
from c2s_pipeline.layout import MANIFEST_FILE
from c2s_pipeline.workspace import CorpusSpec, Workspace

from .conftest import ROOT
from .postgres import shared_server, write_instance_config

BIN = Path(sys.executable).parent
K8S = ROOT / "deploy" / "k8s"


def test_shipped_instance_config(tmp_path):
    from dagster._utils.tags import TagConcurrencyLimitsCounter

    shipped = (ROOT / "dagster.yaml").read_text()
    assert shipped == (ROOT / "c2s_pipeline" / "dagster_instance.yaml").read_text()
    (tmp_path / "dagster.yaml").write_text(shipped)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert not instance.telemetry_enabled
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_start_timeout_seconds == 300
        assert instance.run_monitoring_cancel_timeout_seconds == 180
        assert instance.run_monitoring_settings["poll_interval_seconds"] == 30
        config = instance.get_concurrency_config()
        assert config.pool_config.default_pool_limit == 4
        limits = config.run_queue_config.tag_concurrency_limits
        assert {"key": "c2s/corpus", "value": {"applyLimitPerUniqueValue": True}, "limit": 1} in limits
        assert config.run_queue_config.max_concurrent_runs == 4

    # What the queue does with them: a second run of a corpus waits, another corpus goes ahead,
    # whichever tag (c2s's own, or a backfill's/UI's partition tag) the runs carry.
    def run(**tags):
        return DagsterRun(job_name="compile_corpus", tags=tags)

    counter = TagConcurrencyLimitsCounter(limits, [run(**{"c2s/corpus": "alpha", "dagster/partition": "alpha"})])
    assert counter.is_blocked(run(**{"c2s/corpus": "alpha"}))
    assert counter.is_blocked(run(**{"dagster/partition": "alpha"}))
    assert not counter.is_blocked(run(**{"c2s/corpus": "beta", "dagster/partition": "beta"}))


def test_executor_choice(monkeypatch, tmp_path):
    for choice, name in [("", "in_process"), ("in_process", "in_process"), ("multiprocess", "multiprocess"),
                         ("celery", "celery"), ("k8s", "k8s")]:
        monkeypatch.setenv("C2S_EXECUTOR", choice)
        assert compile_executor().name == name
        assert compile_job_def().executor_def.name == name
    assert set(CHOICES) == {"in_process", "multiprocess", "celery", "k8s"}

    with pytest.raises(ExecutorChoiceError) as error:
        compile_executor("dask")
    assert str(error.value) == ("C2S_EXECUTOR='dask' is not an executor; "
                                "choose one of: in_process, multiprocess, celery, k8s")
    monkeypatch.setitem(sys.modules, "dagster_k8s", None)  # as if not installed
    with pytest.raises(ExecutorChoiceError, match=r"^C2S_EXECUTOR=k8s needs the dagster-k8s package: "
                                                  r"pip install dagster-k8s==0\.29\.\d+$"):
        compile_executor("k8s")

    # C2S_CELERY_CONFIG: runs take the broker the workers were started with, no run config needed.
    config = tmp_path / "celery.yaml"
    config.write_text(yaml.safe_dump({"execution": {"config": {"broker": "filesystem://", "backend": "file:///tmp/x"}}}))
    monkeypatch.setenv("C2S_CELERY_CONFIG", str(config))
    monkeypatch.setenv("C2S_EXECUTOR", "celery")
    resolved = validate_run_config(compile_job_def(), {})["execution"]["celery"]
    assert (resolved["broker"], resolved["backend"]) == ("filesystem://", "file:///tmp/x")


def test_k8s_examples_match_dagster_k8s(tmp_path, monkeypatch):
    from dagster._config import process_config
    from dagster_k8s import K8sRunLauncher

    instance_config = yaml.safe_load((K8S / "dagster.yaml").read_text())
    # The instance settings c2s relies on are the shipped ones, plus Postgres and the launcher.
    shipped = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    for key in ("telemetry", "run_coordinator", "concurrency", "run_monitoring"):
        assert instance_config[key] == shipped[key], key

    launcher = instance_config["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster_k8s", "K8sRunLauncher")
    for var in ("C2S_IMAGE", "C2S_POSTGRES_HOST", "C2S_POSTGRES_USER", "C2S_POSTGRES_PASSWORD", "C2S_POSTGRES_DB"):
        monkeypatch.setenv(var, "example")
    processed = process_config(K8sRunLauncher.config_type(), launcher["config"])
    assert processed.success, processed.errors
    # The launcher builds from that config (outside a cluster: from a kubeconfig instead).
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    built = K8sRunLauncher(**{**processed.value, "load_incluster_config": False, "kubeconfig_file": str(kubeconfig)})
    assert built.dagster_home == "/opt/dagster/c2s" and built.job_namespace == "c2s"
    assert "C2S_EXECUTOR=k8s" in built.env_vars

    # The whole instance file, with its Postgres block, passes Dagster's instance schema.
    from dagster._core.instance.config import dagster_instance_config

    (tmp_path / "dagster.yaml").write_text((K8S / "dagster.yaml").read_text())
    dagster_instance_config(str(tmp_path))

    # The executor's run config validates against the compile job built with C2S_EXECUTOR=k8s,
    # and names real steps.
    monkeypatch.setenv("C2S_EXECUTOR", "k8s")
    job = compile_job_def()
    run_config = yaml.safe_load((K8S / "run_config.yaml").read_text())
    validate_run_config(job, run_config)
    assert set(run_config["execution"]["config"]["per_step_k8s_config"]) <= {n.name for n in job.nodes}
