"""Publishing a rendered tree: staged beside the live one, swapped in by renames, so readers
never see a half-written tree and a crash before the swap leaves the old tree serving."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .layout import MANIFEST_FILE


def staging_dir(out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.parent / f".{out.name}.staging-{os.getpid()}"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir()
    return stage


def publish(stage: Path, out: Path) -> None:
    out = Path(out)
    if out.exists():
        if any(out.iterdir()) and not (out / MANIFEST_FILE).exists():
            shutil.rmtree(stage)
            raise FileExistsError(f"refusing to replace {out}: it is not empty and holds no c2s {MANIFEST_FILE}")
        previous = out.parent / f".{out.name}.previous-{os.getpid()}"
        os.replace(out, previous)
        os.replace(stage, out)
        shutil.rmtree(previous, ignore_errors=True)
    else:
        os.replace(stage, out)
