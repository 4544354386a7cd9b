"""Which executor runs the compile job's steps: ``$C2S_EXECUTOR`` when the code location loads.

- ``in_process`` (default): steps are short and share the loaded encoder and the item cache.
- ``multiprocess``: one process per step on this machine.
- ``celery``: steps go to Celery workers (``dagster-celery worker start``); with
  ``$C2S_CELERY_CONFIG`` naming the YAML file the workers start with (``-y``), runs use its broker
  and backend without run config.
- ``k8s``: one Kubernetes Job per step (dagster-k8s); configured by run config.
"""

from __future__ import annotations

import os
import warnings
from importlib import import_module
from pathlib import Path

import yaml
from dagster import ExecutorDefinition, in_process_executor, multiprocess_executor

EXECUTOR_ENV = "C2S_EXECUTOR"
CELERY_CONFIG_ENV = "C2S_CELERY_CONFIG"
CHOICES = ("in_process", "multiprocess", "celery", "k8s")


class ExecutorChoiceError(ValueError):
    """$C2S_EXECUTOR names no executor, or one whose package is not installed."""


def _library(choice: str, module: str, attr: str, package: str) -> ExecutorDefinition:
    try:
        return getattr(import_module(module), attr)
    except ImportError:
        from importlib.metadata import version

        # Dagster libraries release in lock-step, so dagster-aws's version is the one that fits.
        raise ExecutorChoiceError(f"{EXECUTOR_ENV}={choice} needs the {package} package: "
                                  f"pip install {package}=={version('dagster-aws')}") from None


def _celery() -> ExecutorDefinition:
    executor = _library("celery", "dagster_celery", "celery_executor", "dagster-celery")
    # dagster-celery registers its step task on the run's app twice; celery warns on every run.
    warnings.filterwarnings("ignore", message="Task name 'execute_plan' is already registered")
    path = os.environ.get(CELERY_CONFIG_ENV)
    if not path:
        return executor
    # The same file as the workers' -y: `execution: config: {broker, backend, config_source}`.
    config = (yaml.safe_load(Path(path).read_text()) or {}).get("execution", {}).get("config", {})
    if str(config.get("broker", "")).startswith("filesystem://"):
        from .celery_broker import TRANSPORT

        # Kombu's own filesystem channel lets a worker read a message before it is written.
        config = {**config, "config_source": {"broker_transport": TRANSPORT, **(config.get("config_source") or {})}}
    return executor.configured(config, name="celery")


def compile_executor(name: str | None = None) -> ExecutorDefinition:
    """The executor ``name`` (default: ``$C2S_EXECUTOR``, else in_process) names."""
    choice = (os.environ.get(EXECUTOR_ENV, "") if name is None else name).strip() or "in_process"
    if choice == "in_process":
        return in_process_executor
    if choice == "multiprocess":
        return multiprocess_executor
    if choice == "celery":
        return _celery()
    if choice == "k8s":
        return _library("k8s", "dagster_k8s", "k8s_job_executor", "dagster-k8s")
    raise ExecutorChoiceError(f"{EXECUTOR_ENV}={choice!r} is not an executor; choose one of: {', '.join(CHOICES)}")

