"""Where c2s keeps its state: the corpus registry, per-corpus stage artifacts, the item cache.

One home directory (``$DAGSTER_HOME``, default ``./.c2s``) holds the Dagster instance too, so
``c2s compile`` and ``dagster dev`` see the same partitions, runs and artifacts.
"""

from __future__ import annotations

import os
import re
import shutil
from functools import cached_property
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator

from c2s_core.cache import ItemCache
from c2s_core.llm.settings import LLMSettings
from .ingest import MAX_FILE_BYTES

REGISTRY_FILE = "corpora.yaml"
PARTITION_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def default_home() -> Path:
    return Path(os.environ.get("DAGSTER_HOME") or ".c2s").resolve()


class CorpusSpec(BaseModel):
    """One corpus partition: where its documents come from and how to compile them. Every run of
    the partition, whoever launches it, compiles with these settings."""

    name: str
    source: str
    out: str
    p: int = Field(10, ge=2, description="branching ratio: items per cluster at each level")
    k: int = Field(10, ge=2, description="stop when fewer than k clusters remain: the top level")
    tau: float = Field(0.05, ge=0.0, le=1.0, description="soft-assignment cosine margin")
    publish: str | None = Field(None, description="also publish the tree to this S3 prefix (s3://bucket/prefix/)")
    follow_symlinks: bool = Field(False, description="read symlinks whose target stays inside the corpus")
    max_file_bytes: int = Field(MAX_FILE_BYTES, ge=1, description="larger input files (JSONL: records) are rejected unread")
    llm: LLMSettings = Field(default_factory=LLMSettings)

    def read_options(self, home: Path) -> dict:
        """How a compile walks the source: never into its own output or the c2s home."""
        return {"follow_symlinks": self.follow_symlinks, "max_file_bytes": self.max_file_bytes,
                "exclude": [Path(self.out), Path(home)]}

    @field_validator("name")
    @classmethod
    def _partition_safe(cls, name: str) -> str:
        if not PARTITION_KEY.match(name):
            raise ValueError(
                f"corpus name {name!r} must be 1-64 characters of letters, digits, '_', '.', '-', "
                "starting with a letter or digit"
            )
        return name


    @field_validator("publish")
    @classmethod
    def _s3_uri(cls, uri: str | None) -> str | None:
        if uri is not None and not uri.startswith("s3://"):
            raise ValueError(f"publish target {uri!r} must be an s3:// URI")
        return uri


class RegistryError(ValueError):
    """corpora.yaml cannot be read; the message names the file and the problem."""


class Workspace:
    def __init__(self, home: Path | str | None = None):
        self.home = Path(home).resolve() if home else default_home()

    @property
    def registry_path(self) -> Path:
        return self.home / REGISTRY_FILE

    def corpora(self) -> dict[str, CorpusSpec]:
        if not self.registry_path.exists():
            return {}
        fix = "fix or remove it, then register corpora again with c2s compile or c2s corpus add"
        try:
            data = yaml.safe_load(self.registry_path.read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise RegistryError(f"{self.registry_path} is not a valid corpus registry (unreadable YAML: "
                                f"{detail[:300]}); {fix}") from None
        corpora = data.get("corpora") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(corpora, (dict, type(None))):
            raise RegistryError(f"{self.registry_path} is not a valid corpus registry: expected a mapping "
                                f"'corpora: {{NAME: {{source: ..., out: ...}}}}'; {fix}")
        found = {}
        for name, spec in (corpora or {}).items():
            if not isinstance(spec, dict):
                raise RegistryError(f"{self.registry_path} is not a valid corpus registry: corpus {str(name)!r} "
                                    f"is a {type(spec).__name__}, expected a mapping of settings; {fix}")
            try:
                found[str(name)] = CorpusSpec(name=str(name), **{str(k): v for k, v in spec.items()})
            except (ValidationError, TypeError) as exc:
                detail = ("; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors())
                          if isinstance(exc, ValidationError) else " ".join(str(exc).split()))
                raise RegistryError(f"{self.registry_path} is not a valid corpus registry: corpus {str(name)!r}: "
                                    f"{detail[:300]}; {fix}") from None
        return found

    def corpus(self, name: str) -> CorpusSpec:
        corpora = self.corpora()
        if name not in corpora:
            raise KeyError(
                f"corpus '{name}' is not registered in {self.registry_path}; "
                f"register it with: c2s compile PATH --corpus {name}"
            )
        return corpora[name]

    def register(self, spec: CorpusSpec) -> None:
        corpora = self.corpora()
        corpora[spec.name] = spec
        self.home.mkdir(parents=True, exist_ok=True)
        body = {"corpora": {n: s.model_dump(exclude={"name"}, exclude_none=True) for n, s in sorted(corpora.items())}}
        tmp = self.registry_path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(body, sort_keys=True))
        tmp.replace(self.registry_path)

    def artifacts(self, corpus: str) -> Path:
        path = self.home / "artifacts" / corpus
        path.mkdir(parents=True, exist_ok=True)
        return path

    @cached_property
    def cache(self) -> ItemCache:
        return ItemCache(self.home / "cache.sqlite")

    def close(self) -> None:
        """Close the item cache if it was opened; a later ``cache`` opens it again."""
        cache = self.__dict__.pop("cache", None)
        if cache is not None:
            cache.close()

    def ensure_instance_config(self) -> Path:
        """Give the home a dagster.yaml (the project's instance settings) if it has none."""
        self.home.mkdir(parents=True, exist_ok=True)
        target = self.home / "dagster.yaml"
        if not target.exists():
            template = resources.files("c2s_pipeline") / "dagster_instance.yaml"
            with resources.as_file(template) as src:
                shutil.copyfile(src, target)
        return target
