"""Beyond one process: the shipped instance settings, the executor switch, the Kubernetes
examples against dagster-k8s's schemas, and a compile whose steps run in a real Celery worker
while a webserver and a daemon share the same Postgres-backed instance."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRun, RunsFilter, validate_run_config

from c2s_core.cache import ItemCache
from c2s_pipeline.definitions import compile_job_def
from c2s_pipeline.executors import CHOICES, ExecutorChoiceError, compile_executor
from c2s_core.layout import MANIFEST_FILE

from .conftest import ROOT, SAMPLE_CORPUS
from .test_compile import assert_same_tree
from .test_dagster import graphql
from .postgres import shared_server, write_instance_config

BIN = Path(sys.executable).parent
K8S = ROOT / "deploy" / "k8s"


def test_the_suite_instance_is_postgres(dagster_home):
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert not instance.telemetry_enabled and instance.run_monitoring_enabled


def commented_block(text: str, first: str) -> dict:
    """The YAML block that the shipped dagster.yaml shows in comments, starting at ``first``."""
    lines = text.splitlines()
    start = lines.index(f"#   {first}")
    block = [lines[start][4:]]
    for line in lines[start + 1:]:
        if not line.startswith("#     "):
            break
        block.append(line[4:])
    return yaml.safe_load("\n".join(block))


def test_the_documented_postgres_storage_works(tmp_path, monkeypatch):
    shipped = (ROOT / "dagster.yaml").read_text()
    config = {**yaml.safe_load(shipped), **commented_block(shipped, "storage:")}
    assert config["storage"] == {"postgres": {"postgres_url": {"env": "C2S_POSTGRES_URL"}}}
    monkeypatch.setenv("C2S_POSTGRES_URL", shared_server().create_database("c2s_documented"))
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        instance.add_dynamic_partitions("corpus", ["alpha"])
        assert instance.get_dynamic_partitions("corpus") == ["alpha"]
    # The commented launcher block is the example's, abridged.
    launcher = commented_block(shipped, "run_launcher:")["run_launcher"]
    example = yaml.safe_load((K8S / "dagster.yaml").read_text())["run_launcher"]
    assert launcher["class"] == example["class"] and launcher["config"].items() <= example["config"].items()


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
    # ... and the filesystem broker whose messages appear whole (kombu's own can be read half-written).
    assert resolved["config_source"]["broker_transport"] == "c2s_pipeline.celery_broker:Transport"


def test_filesystem_broker_messages_appear_whole(tmp_path):
    """A worker polling the queue folder while a run writes steps into it reads every message
    whole. Kombu's own filesystem channel creates the file before it writes it, so a poll in
    between reads it empty (on this test: a few JSON errors in 300 messages); the project's
    channel renames a finished file into place."""
    import threading
    from queue import Empty

    from kombu import Connection

    from c2s_pipeline.celery_broker import TRANSPORT

    (tmp_path / "queue").mkdir()
    (tmp_path / "processed").mkdir()
    options = {"data_folder_in": str(tmp_path / "queue"), "data_folder_out": str(tmp_path / "queue"),
               "data_folder_processed": str(tmp_path / "processed"), "control_folder": str(tmp_path / "control")}
    sent, body = 300, "x" * 400_000  # large enough that a write takes a while
    received, errors = [], []

    def run_side() -> None:
        with Connection("filesystem://", transport=TRANSPORT, transport_options=options) as connection:
            for i in range(sent):
                connection.default_channel._put("steps", {"step": i, "body": body})

    with Connection("filesystem://", transport=TRANSPORT, transport_options=options) as connection:
        channel = connection.default_channel
        producer = threading.Thread(target=run_side)
        producer.start()
        deadline = time.monotonic() + 60
        while len(received) + len(errors) < sent and time.monotonic() < deadline:
            try:
                received.append(channel._get("steps")["step"])
            except Empty:
                continue
            except ValueError as exc:  # a message read before it was written
                errors.append(exc)
        producer.join()
    assert errors == []
    assert sorted(received) == list(range(sent))  # each once (files of one millisecond sort by their uuid)


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
    # and names real ops (the executor matches a step's op by its own name, inside a graph too):
    # the shard steps of doc_embeddings, which run the encoder, get the larger pods.
    monkeypatch.setenv("C2S_EXECUTOR", "k8s")
    job = compile_job_def()
    run_config = yaml.safe_load((K8S / "run_config.yaml").read_text())
    validate_run_config(job, run_config)
    per_step = run_config["execution"]["config"]["per_step_k8s_config"]
    ops = {handle.name for handle in job.graph.iterate_node_handles()}
    assert "doc_embeddings_shard" in per_step and set(per_step) <= ops


def sample_subset(folder: Path, every: int = 4, n: int = 40) -> Path:
    """``n`` documents of the bundled sample corpus, every ``every``-th, in their own folders."""
    for path in sorted(SAMPLE_CORPUS.rglob("*.md"))[::every][:n]:
        target = folder / path.relative_to(SAMPLE_CORPUS)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    return folder


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """A long-running command in its own process group, its output in a log file."""

    def __init__(self, name: str, args: list[str], env: dict, logs: Path):
        self.name = name
        self.log_path = logs / f"{name}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen([str(a) for a in args], cwd=logs, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, ready, what: str, timeout: float):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"{self.name} exited ({self.proc.returncode}) before {what}:\n{self.log()[-3000:]}")
            try:
                value = ready()
            except httpx.HTTPError:
                value = None
            if value:
                return value
            time.sleep(0.5)
        pytest.fail(f"no {what} within {timeout:.0f} s; {self.name} log:\n{self.log()[-3000:]}")

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._log.close()


RUNS = """query($corpus: String!) { runsOrError(filter: {tags: [{key: "c2s/corpus", value: $corpus}]}) {
    ... on Runs { results { runId status stepStats { stepKey status } } } } }"""
DAEMONS = "{ instance { daemonHealth { allDaemonStatuses { daemonType required healthy } } } }"


@pytest.mark.timeout(420)
def test_celery_compile_on_a_shared_postgres_instance(tmp_path):
    """One Postgres instance; two Celery workers run the compile's steps, the shards of its
    per-document stages spread over both, and the tree is the one an in-process compile makes;
    the webserver shows the run, the daemon's heartbeats arrive over GraphQL."""
    from c2s_pipeline.compiler import compile_corpus
    from c2s_pipeline.workspace import CorpusSpec, Workspace

    home = tmp_path / "home"
    write_instance_config(home, shared_server().create_database("c2s_scaleout"))
    broker, results = tmp_path / "broker", tmp_path / "results"
    for folder in (broker / "queue", broker / "processed", results):
        folder.mkdir(parents=True)
    # One file configures the workers (-y) and the runs' executor (C2S_CELERY_CONFIG).
    celery_config = tmp_path / "celery.yaml"
    celery_config.write_text(yaml.safe_dump({"execution": {"config": {
        "broker": "filesystem://",
        "backend": f"file://{results}",
        "config_source": {
            "broker_transport": "c2s_pipeline.celery_broker:Transport",  # messages appear whole
            "broker_transport_options": {"data_folder_in": str(broker / "queue"),
                                         "data_folder_out": str(broker / "queue"),
                                         "data_folder_processed": str(broker / "processed"),
                                         "control_folder": str(broker / "control"),
                                         "polling_interval": 0.2},
            "broker_connection_retry_on_startup": True,
            "worker_prefetch_multiplier": 1,  # a worker takes a step when it is free to run it
        }}}}))
    # Every process of the deployment gets the same settings: the CLI, the workers, webserver,
    # daemon. 40 documents in shards of 14: three shard steps per sharded stage. Two workers
    # share two cores here, so the encoder takes one thread in each.
    env = {**os.environ, "DAGSTER_HOME": str(home), "C2S_EXECUTOR": "celery", "C2S_CELERY_CONFIG": str(celery_config),
           "C2S_SHARD_SIZE": "14", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HF_HUB_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    # The schema is made once, before the deployment's processes start (README, "The instance"):
    # the workers and the webserver, started together on an empty database, each create it and
    # race ("type run_tags already exists").
    migrate = subprocess.run([BIN / "dagster", "instance", "migrate"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    services: list[Service] = []
    try:
        workers = {}
        for name in ("c2s-a", "c2s-b"):
            pidfile = tmp_path / f"{name}.pid"
            workers[name] = (Service(name, [BIN / "dagster-celery", "worker", "start", "-A", "dagster_celery.app",
                                            "-y", celery_config, "-n", name, "--", "--pool=solo",
                                            f"--pidfile={pidfile}"], env, tmp_path), pidfile)
            services.append(workers[name][0])
        webserver = Service("webserver", [sys.executable, "-m", "dagster_webserver", "-w", ROOT / "workspace.yaml",
                                          "-h", "127.0.0.1", "-p", port], env, tmp_path)
        services.append(webserver)

        corpus = sample_subset(tmp_path / "corpus")
        for worker, _ in workers.values():
            worker.wait_for(lambda: " ready." in worker.log(), f"celery worker {worker.name} ready", 120)
        worker_pids = {int(pidfile.read_text()): name for name, (_, pidfile) in workers.items()}

        # `c2s compile` as a user runs it, its steps going to the workers.
        compiler = subprocess.Popen([BIN / "c2s", "compile", str(corpus), "--corpus", "scaleout", "--out",
                                     str(tmp_path / "tree"), "--json"], env=env, cwd=tmp_path,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with DagsterInstance.from_config(str(home)) as instance:
            # The daemon starts once the run exists, so its corpus sensor leaves the corpus to that run.
            deadline = time.monotonic() + 60
            while not instance.get_run_ids(RunsFilter(tags={"c2s/corpus": "scaleout"})) and compiler.poll() is None:
                assert time.monotonic() < deadline, "the compile run was not created within 60 s"
                time.sleep(0.2)
            daemon = Service("daemon", [BIN / "dagster-daemon", "run", "-w", ROOT / "workspace.yaml"], env, tmp_path)
            services.append(daemon)

            try:
                _, errors = compiler.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                compiler.kill()
                pytest.fail(f"the compile did not finish within 300 s:\n"
                            + "".join(w.log()[-2000:] for w, _ in workers.values()))
            assert compiler.returncode == 0, errors[-3000:] + "".join(w.log()[-2000:] for w, _ in workers.values())
            result, = instance.get_runs(RunsFilter(tags={"c2s/corpus": "scaleout"}))
            assert result.is_success

            # Every step ran in a worker's process, not in the compile's.
            logs = instance.all_logs(result.run_id)
            started = {e.step_key: e.dagster_event.pid for e in logs if e.dagster_event_type == DagsterEventType.STEP_START}
            assert "documents" in started and "skill_tree" in started
            assert set(started.values()) <= set(worker_pids) and compiler.pid not in started.values()
            delegated = {e.step_key: e.dagster_event.engine_event_data.metadata["Celery worker"].value
                         for e in logs if e.dagster_event_type == DagsterEventType.ENGINE_EVENT
                         and "in celery worker" in (e.message or "")}
            assert set(delegated) == set(started)
            # Each sharded stage ran as three shard steps, and the two workers shared them.
            shards = sorted(key for key in started if "_shard[" in key)
            assert shards == [f"{stage}.{stage}_shard[{i:04d}]" for stage in ("doc_cards", "doc_embeddings")
                              for i in range(3)]
            ran_by = {key: worker_pids[started[key]] for key in shards}
            assert all(delegated[key].startswith(f"{ran_by[key]}@") for key in shards)
            assert set(ran_by.values()) == {"c2s-a", "c2s-b"}, ran_by
        manifest = json.loads((tmp_path / "tree" / MANIFEST_FILE).read_text())
        assert len(manifest["doc_paths"]) == 40
        assert manifest["stages"]["doc_embeddings"]["embeddings"] == {"computed": 40, "cached": 0}

        # The same corpus compiled in this process, in one shard, into a home of its own, gives the
        # same tree. It takes the workers' embeddings (encoding again would double this test's
        # time, and a hash seed does not reach the encoder's arithmetic) and computes the rest.
        reference_home = tmp_path / "reference-home"
        ItemCache(reference_home / "cache.sqlite").close()  # an empty cache, in the cache's own schema
        with sqlite3.connect(reference_home / "cache.sqlite") as cache:
            cache.execute("ATTACH ? AS workers", (str(home / "cache.sqlite"),))
            copied = cache.execute("INSERT INTO items SELECT * FROM workers.items WHERE namespace LIKE 'embedding:%'")
            assert copied.rowcount > 40
        reference = compile_corpus(CorpusSpec(name="scaleout", source=str(corpus), out=str(tmp_path / "reference")),
                                   Workspace(reference_home), instance=DagsterInstance.ephemeral())
        assert reference["stages"]["doc_cards"]["llm_calls"] == {"made": 40, "cached": 0}
        assert reference["stages"]["doc_embeddings"]["embeddings"] == {"computed": 0, "cached": 40}
        assert_same_tree(tmp_path / "tree", manifest, tmp_path / "reference", reference)

        # The webserver, on the same instance, shows that run and its steps.
        webserver.wait_for(lambda: httpx.get(f"{url}/server_info", timeout=2).status_code == 200,
                           "webserver up", 120)
        runs = graphql(f"{url}/graphql", RUNS, corpus="scaleout")["runsOrError"]["results"]
        assert [(r["runId"], r["status"]) for r in runs] == [(result.run_id, "SUCCESS")]
        assert {s["stepKey"] for s in runs[0]["stepStats"]} == set(started)

        # The daemon's heartbeats reach the instance: every daemon it must run is healthy,
        # the run queue and run monitoring among them.
        def daemons_healthy():
            statuses = graphql(f"{url}/graphql", DAEMONS)["instance"]["daemonHealth"]["allDaemonStatuses"]
            required = {s["daemonType"]: s["healthy"] for s in statuses if s["required"]}
            return required if required and all(required.values()) else None

        healthy = daemon.wait_for(daemons_healthy, "healthy daemon heartbeats", 150)
        assert {"SENSOR", "SCHEDULER", "QUEUED_RUN_COORDINATOR", "MONITORING"} <= set(healthy)
    finally:
        for service in reversed(services):
            service.stop()
