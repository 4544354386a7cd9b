"""The instance's run launcher: Dagster's default one, plus a health check that lets the daemon's
run monitoring fail a ``c2s compile`` run whose process died.

``c2s compile`` runs its job in its own process, so no launcher started it and none can look at
its worker; its run carries a heartbeat tag instead (``locks.heartbeat``). Run monitoring asks
this launcher about every STARTED run each ``poll_interval_seconds``: a CLI run whose heartbeat
is older than ``heartbeat_timeout_seconds`` is reported FAILED, tagged ``c2s/killed`` and
failed, so the queued runs of its corpus go ahead without waiting for a sensor tick. Runs the
daemon launched itself are not checked here (as with the default launcher).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from dagster import DagsterRun, Field, IntSource
from dagster._core.launcher import CheckRunHealthResult, DefaultRunLauncher, WorkerStatus
from dagster._serdes import ConfigurableClassData

from .locks import COMPILE_ID_TAG, HEARTBEAT_TAG, KILLED_TAG

HEARTBEAT_TIMEOUT_SECONDS = 120


class CompileRunLauncher(DefaultRunLauncher):
    def __init__(self, inst_data: ConfigurableClassData | None = None,
                 heartbeat_timeout_seconds: int = HEARTBEAT_TIMEOUT_SECONDS):
        super().__init__(inst_data=inst_data)
        self.heartbeat_timeout_seconds = heartbeat_timeout_seconds

    @classmethod
    def config_type(cls):
        return {"heartbeat_timeout_seconds": Field(
            IntSource, is_required=False, default_value=HEARTBEAT_TIMEOUT_SECONDS,
            description="a c2s compile run whose heartbeat is older than this is failed as killed")}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]):
        return cls(inst_data=inst_data, **config_value)

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        if COMPILE_ID_TAG not in run.tags or HEARTBEAT_TAG not in run.tags:
            return CheckRunHealthResult(WorkerStatus.RUNNING, "not a c2s compile run: not checked")
        try:
            age = time.time() - float(run.tags[HEARTBEAT_TAG])
        except ValueError:
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"unreadable {HEARTBEAT_TAG} tag: not checked")
        if age <= self.heartbeat_timeout_seconds:
            return CheckRunHealthResult(WorkerStatus.RUNNING)
        # Tagged before run monitoring fails it, so the sensor knows the run was killed.
        self._instance.add_run_tags(run.run_id, {KILLED_TAG: "true"})
        return CheckRunHealthResult(
            WorkerStatus.FAILED, f"the c2s compile process running this run stopped its heartbeat {age:.0f} s ago "
                                 "(killed, e.g. by the OOM killer?); rerun the compile, or re-execute this run "
                                 "from failure")
