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
        path = self.root / name
        if not path.exists():
            raise FileNotFoundError(f"artifact {path} is missing: materialize its upstream asset first")
        return pl.read_parquet(path)

    def write_matrix(self, name: str, matrix: np.ndarray) -> Path:
        path = self.path(name)
        np.save(path, matrix.astype(np.float32))
        return path

    def read_matrix(self, name: str) -> np.ndarray:
        return np.load(self.root / name)

    def write_json(self, name: str, data: Any) -> Path:
        path = self.path(name)
        path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))
        return path

    def read_json(self, name: str) -> Any:
        path = self.root / name
        if not path.exists():
            raise FileNotFoundError(f"artifact {path} is missing: materialize its upstream asset first")
        return json.loads(path.read_text())

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

    def stage_records(self) -> dict[str, dict]:
        """Each stage's last timing and call counts, in the recipe's order (records of stages no
        longer in the recipe, left by an older c2s, are not listed)."""
        records = {p.stem: json.loads(p.read_text()) for p in (self.root / "stages").glob("*.json")}
        return {name: records[name] for name in sorted(records.keys() & STAGES.keys(), key=stage_rank)}

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
