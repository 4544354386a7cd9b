"""A compiled tree opened for serving: its root, manifest, top-level skills and document store."""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import yaml

from c2s_core.docstore import DocumentStore
from c2s_core.frontmatter import parse_frontmatter
from c2s_core.layout import DOCUMENT_STORE_FILE, MANIFEST_FILE, SKILL_FILE, SKILLS_DIR


class TreeError(ValueError):
    """The path is not a usable compiled tree; the message says why."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: str  # skills/<name>/SKILL.md, relative to the tree root
    documents: int
    level: int = 0  # its height in the tree (1: it lists documents itself); 0: not recorded


class Tree:
    """Read-only view of a compiled tree (see ``c2s_core.layout``); thread-safe."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).expanduser().resolve()
        if not self.root.exists():
            raise TreeError(f"tree not found: {self.root}")
        if not (self.root / MANIFEST_FILE).is_file():
            raise TreeError(f"not a c2s tree (no {MANIFEST_FILE}): {self.root}; "
                            "compile one with `c2s compile`")
        if not (self.root / SKILLS_DIR).is_dir():
            raise TreeError(f"not a c2s tree (no {SKILLS_DIR}/ directory): {self.root}")
        try:
            self.store = DocumentStore(self.root / DOCUMENT_STORE_FILE)
        except FileNotFoundError:
            raise TreeError(f"not a c2s tree (no {DOCUMENT_STORE_FILE}): {self.root}") from None

    @cached_property
    def manifest(self) -> dict:
        try:
            return json.loads((self.root / MANIFEST_FILE).read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise TreeError(f"unreadable {MANIFEST_FILE} in {self.root}: {e}") from None

    @cached_property
    def skills(self) -> list[Skill]:
        """Every top-level skill, from its SKILL.md frontmatter (the agent's preloaded context)."""
        out = []
        for path in sorted((self.root / SKILLS_DIR).glob(f"*/{SKILL_FILE}")):
            skill = parse_skill(path.read_text(encoding="utf-8"), path.relative_to(self.root).as_posix())
            if skill is not None:  # a malformed skill is skipped rather than breaking every question
                out.append(skill)
        if not out:
            raise TreeError(f"no skills in {self.root / SKILLS_DIR}")
        return out

    def __repr__(self) -> str:
        return f"Tree({str(self.root)!r})"


def parse_skill(text: str, path: str) -> Skill | None:
    """A skill from its SKILL.md text (``path``: relative to the tree root); None if its
    frontmatter is malformed."""
    try:
        meta = parse_frontmatter(text)
    except (ValueError, yaml.YAMLError):
        return None
    extra = meta.get("metadata") or {}
    return Skill(str(meta.get("name") or posixpath.basename(posixpath.dirname(path))),
                 " ".join(str(meta.get("description", "")).split()), path,
                 _whole(extra.get("documents")), _whole(extra.get("level")))


def _whole(value: object) -> int:
    try:
        return max(0, int(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0


def open_tree(tree: Tree | str | os.PathLike[str]) -> Tree:
    return tree if isinstance(tree, Tree) else Tree(tree)
