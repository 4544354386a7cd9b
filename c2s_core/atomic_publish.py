"""Publishing a rendered tree: staged beside the live one, swapped in by renames, so readers
never see a half-written tree and a crash before the swap leaves the old tree serving.

A published tree carries a marker naming its corpus; c2s replaces only a folder that holds the
marker of the same corpus (or is empty, or absent), never anything else a user points --out at.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from .layout import MANIFEST_FILE

MARKER_FILE = ".c2s-tree"


class OutputError(ValueError):
    """The output path is not one c2s may write to; the message says why."""


def staged_path(out: Path) -> Path:
    """Where a corpus's next tree is rendered and checked: beside ``out``, so the swap is a rename."""
    out = Path(out)
    return out.parent / f".{out.name}.staged"


def staging_dir(out: Path) -> Path:
    stage = staged_path(out)
    stage.parent.mkdir(parents=True, exist_ok=True)
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir()
    return stage


def tree_owner(out: Path) -> str | None:
    """The corpus whose published tree ``out`` is, or None when c2s did not publish it. Only the
    marker counts: a ``manifest.json`` is easy to have (or copy) in a folder c2s does not own."""
    try:
        found = json.loads((Path(out) / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(found, dict) and isinstance(found.get("corpus"), str):
        return found["corpus"]
    return None


def check_output(out: Path, corpus: str) -> None:
    """Refuse, before any work, an output path c2s must not replace."""
    out = Path(out)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise OutputError(f"--out {out} is not a directory; choose a folder for the compiled tree")
    if os.path.ismount(out):
        # Publishing renames --out aside and the new tree into its place; a mount point cannot move.
        raise OutputError(f"--out {out} is a mount point, which c2s cannot replace by renaming; "
                          f"choose a folder inside it (e.g. {out / 'tree'})")
    if not out.exists() or not any(out.iterdir()):
        return
    owner = tree_owner(out)
    if owner is None:
        raise OutputError(f"refusing to replace {out}: it is not empty and is not a tree c2s published "
                          f"(no {MARKER_FILE}); choose an empty or new folder for --out")
    if owner != corpus:
        raise OutputError(f"refusing to replace {out}: it holds the published tree of corpus '{owner}', "
                          f"not '{corpus}'")


def publish(stage: Path, out: Path, corpus: str) -> None:
    out = Path(out)
    try:
        check_output(out, corpus)
    except OutputError:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    try:
        (stage / MARKER_FILE).write_text(json.dumps({"corpus": corpus, "manifest": MANIFEST_FILE}) + "\n",
                                         encoding="utf-8")
        swap_in(stage, out)
    except OSError as exc:
        shutil.rmtree(stage, ignore_errors=True)
        raise OutputError(f"could not publish into {out}: {exc.strerror or exc}; the staged tree was removed "
                          "and the previous tree, if any, keeps serving") from exc


def swap_in(stage: Path, dest: Path) -> None:
    """Put the folder ``stage`` at ``dest`` by renames: readers see the old folder or the new one.
    When a rename fails, the old folder stays (or is put back) at ``dest`` and ``stage`` is removed."""
    dest = Path(dest)
    try:
        if dest.exists():
            previous = dest.parent / f".{dest.name}.previous-{os.getpid()}"
            os.replace(dest, previous)
            try:
                os.replace(stage, dest)
            except OSError:
                os.replace(previous, dest)
                raise
            shutil.rmtree(previous, ignore_errors=True)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage, dest)
    except OSError:
        shutil.rmtree(stage, ignore_errors=True)
        raise
