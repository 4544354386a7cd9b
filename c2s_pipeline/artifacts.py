"""Stage artifacts of one corpus partition, as Parquet tables (polars) and .npy matrices.

Every asset writes its own files here and hands Dagster only metadata and a data version, so
large values never go through an IO manager.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from c2s_core.text import sha256_hex

from .recipe import LEVELS, STAGES, final_nodes_file, final_placements_file, level_file, stage_rank


class ArtifactError(ValueError):
    """An artifact file exists but cannot be read; the message names it, the reason and the fix."""

    def __init__(self, path: Path, exc: BaseException):
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        super().__init__(f"artifact {path} is unreadable ({type(exc).__name__}: {reason}); rerun the compile "
                         "with --full to rebuild it (c2s compile --full, or run config "
                         "ops: {clusters_l1: {config: {full: true}}})")


def _read(path: Path, load):
    """``load(path)``, with a missing file asking for its upstream and a damaged one for a rebuild."""
    if not path.exists():
        raise FileNotFoundError(f"artifact {path} is missing: materialize its upstream asset first")
    try:
        return load(path)
    except (OSError, ValueError, EOFError, pl.exceptions.PolarsError) as exc:
        raise ArtifactError(path, exc) from exc


@dataclass(frozen=True)
class CorpusArtifacts:
    root: Path

    # -- generic I/O ---------------------------------------------------------------------------
    def path(self, *parts: str) -> Path:
        path = self.root.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def write_table(self, name: str, frame: pl.DataFrame) -> Path:
        path = self.path(name)
        frame.write_parquet(path)
        return path

    def read_table(self, name: str) -> pl.DataFrame:
        return _read(self.root / name, pl.read_parquet)

    def document_count(self) -> int:
        """The corpus's accepted documents, from the Parquet footer (no text is read)."""
        return _read(self.root / "documents.parquet", lambda path: pl.scan_parquet(path).select(pl.len()).collect().item())

    def write_matrix(self, name: str, matrix: np.ndarray) -> Path:
        path = self.path(name)
        np.save(path, matrix.astype(np.float32))
        return path

    def read_matrix(self, name: str) -> np.ndarray:
        return _read(self.root / name, np.load)

    def document_rows(self) -> dict[str, int]:
        """Doc id -> its row in doc_vectors.npy (documents.parquet order)."""
        return {d: i for i, d in enumerate(self.read_table("documents.parquet")["doc_id"].to_list())}

    def write_json(self, name: str, data: Any) -> Path:
        path = self.path(name)
        path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))
        return path

    def read_json(self, name: str) -> Any:
        return _read(self.root / name, lambda path: json.loads(path.read_text(encoding="utf-8")))

    # -- per-level files -----------------------------------------------------------------------
    @staticmethod
    def level(level: int, name: str) -> str:
        return level_file(level, name)

    def level_status(self, level: int) -> dict:
        return self.read_json(self.level(level, "status.json"))

    def final_nodes(self, level: int) -> pl.DataFrame:
        """A level's nodes after every stage that shapes it (repartition where it applies)."""
        return self.read_table(final_nodes_file(level))

    def final_placements(self, level: int) -> pl.DataFrame:
        return self.read_table(final_placements_file(level))

    def used_levels(self) -> list[int]:
        return [lvl for lvl in LEVELS if (self.root / self.level(lvl, "status.json")).exists()
                and self.level_status(lvl)["used"]]

    # -- stage bookkeeping ---------------------------------------------------------------------
    def record_stage(self, stage: str, started: float, **counts: Any) -> dict:
        stats = {"seconds": round(time.perf_counter() - started, 3), **counts}
        self.write_json(f"stages/{stage}.json", stats)
        return stats

    def stage_records(self, before: str | None = None) -> dict[str, dict]:
        """Each stage's last timing and call counts, in the recipe's order (records of stages no
        longer in the recipe, left by an older c2s, are not listed); with ``before``, only the
        stages that run before that one (a run's later records are still the previous run's)."""
        files = {p.stem: p for p in (self.root / "stages").glob("*.json") if p.stem in STAGES}
        if before is not None:
            files = {name: p for name, p in files.items() if stage_rank(name) < stage_rank(before)}
        return {name: _read(files[name], lambda path: json.loads(path.read_text(encoding="utf-8")))
                for name in sorted(files, key=stage_rank)}

    def record_version(self, stage: str, version: str) -> None:
        self.path("versions", stage).write_text(version)

    def recorded_version(self, stage: str) -> str:
        """The data version ``stage`` last materialized with (what the stage after it chains)."""
        path = self.root / "versions" / stage
        if not path.exists():
            raise FileNotFoundError(f"artifact {path} is missing: materialize {stage} first")
        return path.read_text()


def table_version(*frames: pl.DataFrame, extra: str = "") -> str:
    """A hash of a stage's output tables (``Stage.done`` chains it into the stage's data version)."""
    parts = [frame.write_ipc(None).getvalue() if frame.height else b"empty" for frame in frames]
    return sha256_hex(*parts, extra)[:24]


def matrix_version(matrix: np.ndarray) -> str:
    return sha256_hex(np.ascontiguousarray(matrix).tobytes())[:24]
