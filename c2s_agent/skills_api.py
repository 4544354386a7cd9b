"""``c2s publish skills-api``: each top-level skill of a compiled tree uploaded as a custom skill of
the Anthropic Skills API (``client.beta.skills``), so Messages API requests can load it.

A skill is uploaded as its self-contained Agent Skills export (``c2s_agent.export``: SKILL.md,
nested INDEX.md files, every document under ``docs/``). One upload holds one skill folder and
the API takes at most 200 files and 30 MB per upload, so a larger skill is split,
deterministically, into ``<skill>``, ``<skill>-part-2``, ... whose links reach one another.

Each skill's content hash is kept in a state file beside the tree (``.<tree>.skills-api.json``,
per API endpoint): a publish uploads a new version only for a skill whose hash changed or whose
latest version in the API is not the one recorded; the API listing is the authority on what
exists. c2s's skills are the custom skills titled ``c2s/<corpus>/<skill>``; ``--prune`` deletes
those no longer in the tree (their versions first, as the API requires), nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional


from .export import ExportError, export_tree
from c2s_core.tree import Tree, open_tree

MAX_FILES = 200  # per upload, the API's limit
MAX_BYTES = 30_000_000  # per upload (30 MB), the API's limit
ENVELOPE_BYTES = 256 * 1024  # multipart headers of up to 200 parts stay well inside this
DOC_PIECE_BYTES = 8 * 1024 * 1024  # a larger document is uploaded as several files
MAX_IN_FLIGHT = 8  # uploads at once; one upload request carries exactly one skill
DEFAULT_BASE_URL = "https://api.anthropic.com"
MAX_DISPLAY_NAME = 255
STATE_VERSION = 1


class PublishError(ValueError):
    """Publishing failed or cannot start; the message says why, in one line."""


@dataclass
class LocalSkill:
    folder: str  # the skill's name and top-level directory of its upload
    path: Path  # the exported folder
    files: list[str]  # relative to ``path``, sorted
    bytes: int
    hash: str


@dataclass
class Action:
    kind: str  # create | new version | unchanged | delete | stale
    folder: str
    reason: str = ""
    skill_id: str = ""
    local: Optional[LocalSkill] = None


@dataclass
class PublishReport:
    base_url: str
    corpus: str
    actions: list[Action]
    dry_run: bool
    notes: list[str] = field(default_factory=list)  # from the export (parts, documents split)
    done: list[str] = field(default_factory=list)  # "create billing" etc., as they succeeded
    state_path: Optional[Path] = None

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for a in self.actions:
            out[a.kind] = out.get(a.kind, 0) + 1
        return out


def display_name(corpus: str, folder: str) -> str:
    return f"c2s/{corpus}/{folder}"


def default_state_path(tree_root: Path) -> Path:
    return tree_root.parent / f".{tree_root.name}.skills-api.json"


def content_hash(path: Path, files: list[str]) -> str:
    h = hashlib.sha256()
    for rel in files:
        data = (path / rel).read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def local_skills(tree: Tree, workdir: Path, *, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES,
                 max_doc_bytes: int = DOC_PIECE_BYTES) -> tuple[list[LocalSkill], list[str]]:
    """The tree exported into ``workdir`` in upload-sized skill folders: (skills, export notes)."""
    result = export_tree(tree, workdir / "export", "agent-skills", description_budget=None, max_files=max_files,
                         max_bytes=max_bytes - ENVELOPE_BYTES if max_bytes > 2 * ENVELOPE_BYTES else max_bytes,
                         max_doc_bytes=min(max_doc_bytes, max(max_bytes // 2, 1024)))
    skills = []
    for s in result.skills:
        path = result.skills_root / s.name
        skills.append(LocalSkill(s.name, path, s.files, s.bytes, content_hash(path, s.files)))
    return sorted(skills, key=lambda s: s.folder), result.notes


# -- state -----------------------------------------------------------------------------------------


class State:
    """What the last publishes uploaded, per endpoint: folder → {skill_id, version_id, hash}."""

    def __init__(self, path: Path, base_url: str, corpus: str):
        self.path, self.base_url, self.corpus = path, base_url, corpus
        self._lock = threading.Lock()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = {}
        except (OSError, ValueError) as e:
            raise PublishError(f"unreadable state file {path}: {e}; delete it to publish afresh") from None
        if not isinstance(data, dict):
            data = {}
        self.data = data
        endpoints = data.setdefault("endpoints", {})
        self.skills: dict[str, dict] = endpoints.setdefault(base_url, {}).setdefault(corpus, {})

    def record(self, folder: str, entry: dict | None) -> None:
        with self._lock:
            if entry is None:
                self.skills.pop(folder, None)
            else:
                self.skills[folder] = entry
            self.data["c2s_skills_api_state"] = STATE_VERSION
            tmp = self.path.with_name(self.path.name + f".tmp-{os.getpid()}")
            tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, self.path)


# -- the API ---------------------------------------------------------------------------------------


@dataclass
class Remote:
    skill_id: str
    folder: str
    latest_version_id: str


class SkillsAPI:
    """The few ``client.beta.skills`` calls a publish makes, with API errors as PublishError."""

    def __init__(self, client: Any, corpus: str):
        self.client, self.corpus = client, corpus

    def ours(self) -> tuple[dict[str, Remote], list[Remote]]:
        """c2s's skills of this corpus in the API: (folder → skill, duplicates of a folder)."""
        prefix = display_name(self.corpus, "")
        found: dict[str, Remote] = {}
        duplicates = []
        for skill in self._call("list skills", lambda: list(self.client.beta.skills.list(source="custom", limit=100))):
            title = skill.display_name or ""
            if not title.startswith(prefix):
                continue
            remote = Remote(skill.id, title[len(prefix):], skill.latest_version_id)
            if remote.folder in found:  # titles are not unique: keep the first listed, the rest are stale
                duplicates.append(remote)
            else:
                found[remote.folder] = remote
        return found, duplicates

    def upload(self, skill: LocalSkill, skill_id: str | None) -> tuple[str, str]:
        """Create the skill (``skill_id`` None) or a new version of it: (skill_id, version_id)."""
        files = [(f"{skill.folder}/{rel}", (skill.path / rel).read_bytes(), _mime(rel)) for rel in skill.files]
        if skill_id is None:
            created = self._call(f"create {skill.folder}", lambda: self.client.beta.skills.create(
                display_name=display_name(self.corpus, skill.folder), files=files))
            return created.id, created.latest_version_id
        version = self._call(f"new version of {skill.folder}",
                             lambda: self.client.beta.skills.versions.create(skill_id, files=files))
        return skill_id, version.id

    def delete(self, remote: Remote) -> None:
        what = f"delete {remote.folder}"
        versions = self._call(what, lambda: list(self.client.beta.skills.versions.list(remote.skill_id, limit=100)))
        for v in versions:  # the API deletes a skill only once it has no versions
            self._call(what, lambda v=v: self.client.beta.skills.versions.delete(v.id, skill_id=remote.skill_id))
        self._call(what, lambda: self.client.beta.skills.delete(remote.skill_id))

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        import anthropic

        try:
            return fn()
        except anthropic.APIStatusError as e:
            raise PublishError(f"skills API refused to {what}: {_status_line(e)}") from None
        except anthropic.APIConnectionError as e:
            url = getattr(getattr(e, "request", None), "url", None)
            where = f"{url.scheme}://{url.host}:{url.port}" if url is not None and url.port else str(url or "")
            raise PublishError(f"cannot reach the skills API{' at ' + where if where else ''} to {what}: "
                               f"{_one_line(str(e)) or type(e).__name__}") from None


def _status_line(e: Any) -> str:
    body = getattr(e, "body", None)
    detail = body.get("error") if isinstance(body, dict) else None
    if isinstance(detail, dict):
        return _one_line(f"{e.status_code} {detail.get('type', '')}: {detail.get('message', '')}")
    return _one_line(f"{e.status_code} {getattr(e, 'message', '') or e}")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:500]


def _mime(rel: str) -> str:
    return "text/markdown" if rel.endswith(".md") else "application/octet-stream"


# -- plan and run ----------------------------------------------------------------------------------


def plan(local: list[LocalSkill], remote: dict[str, Remote], duplicates: list[Remote], recorded: dict[str, dict],
         prune: bool) -> list[Action]:
    actions = []
    for skill in local:
        r, rec = remote.get(skill.folder), recorded.get(skill.folder) or {}
        if r is None:
            actions.append(Action("create", skill.folder, "not in the API" if not rec else
                                  "recorded, but no longer in the API", local=skill))
        elif rec.get("skill_id") != r.skill_id:
            actions.append(Action("new version", skill.folder, "no content hash recorded for this skill",
                                  r.skill_id, skill))
        elif rec.get("version_id") != r.latest_version_id:
            actions.append(Action("new version", skill.folder, "its latest version in the API is not the one "
                                  "c2s uploaded", r.skill_id, skill))
        elif rec.get("hash") != skill.hash:
            actions.append(Action("new version", skill.folder, "content changed", r.skill_id, skill))
        else:
            actions.append(Action("unchanged", skill.folder, "", r.skill_id, skill))
    names = {s.folder for s in local}
    stale = [r for f, r in sorted(remote.items()) if f not in names] + duplicates
    for r in stale:
        reason = "not in the tree" if r.folder not in names else "a second skill with the same title"
        actions.append(Action("delete" if prune else "stale", r.folder, reason if prune else
                              reason + " (kept; --prune deletes it)", r.skill_id))
    return actions


def publish(tree: Tree | str | os.PathLike[str], *, base_url: str | None = None, api_key: str | None = None,
            prune: bool = False, dry_run: bool = False, state_path: Path | None = None,
            max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES, client: Any = None,
            on_plan: Callable[[PublishReport], None] | None = None,
            on_done: Callable[[Action], None] | None = None) -> PublishReport:
    """Publish ``tree``'s skills; ``dry_run`` plans from the state file alone and calls nothing.
    ``on_plan`` sees the plan before anything is uploaded, ``on_done`` each action as it succeeds."""
    tree = open_tree(tree)
    corpus = str(tree.manifest.get("corpus") or tree.root.name)
    base_url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    if len(display_name(corpus, "x" * 64)) > MAX_DISPLAY_NAME:
        raise PublishError(f"corpus name {corpus[:40]!r}… is too long for a skill's display name")
    state = State(Path(state_path) if state_path else default_state_path(tree.root), base_url, corpus)
    if client is None and not dry_run:
        api_key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not api_key:
            raise PublishError("ANTHROPIC_API_KEY is not set; the skills API needs a key (--dry-run needs none)")
        import anthropic

        client = anthropic.Anthropic(api_key=api_key, base_url=base_url)
    with tempfile.TemporaryDirectory(prefix="c2s-publish-") as work:
        try:
            local, notes = local_skills(tree, Path(work), max_files=max_files, max_bytes=max_bytes)
        except ExportError as e:
            raise PublishError(str(e)) from None
        if dry_run:
            remote = {f: Remote(r.get("skill_id", ""), f, r.get("version_id", "")) for f, r in state.skills.items()}
            report = PublishReport(base_url, corpus, plan(local, remote, [], state.skills, prune), True, notes,
                                   state_path=state.path)
            if on_plan:
                on_plan(report)
            return report
        api = SkillsAPI(client, corpus)
        remote, duplicates = api.ours()
        for folder in [f for f in state.skills if f not in remote]:  # gone from the API: forget it
            state.record(folder, None)
        actions = plan(local, remote, duplicates, state.skills, prune)
        report = PublishReport(base_url, corpus, actions, False, notes, state_path=state.path)
        if on_plan:
            on_plan(report)
        _run(api, actions, state, report, on_done)
    return report


def _run(api: SkillsAPI, actions: list[Action], state: State, report: PublishReport,
         on_done: Callable[[Action], None] | None) -> None:
    uploads = [a for a in actions if a.kind in ("create", "new version")]
    failures: list[str] = []
    stop = threading.Event()

    def upload(a: Action) -> Action:
        if stop.is_set():
            raise PublishError("not attempted after an earlier failure")
        skill_id, version_id = api.upload(a.local, a.skill_id if a.kind == "new version" else None)
        state.record(a.folder, {"skill_id": skill_id, "version_id": version_id, "hash": a.local.hash,
                                "files": len(a.local.files), "bytes": a.local.bytes})
        a.skill_id = skill_id
        return a

    with ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT, thread_name_prefix="c2s-skills-upload") as pool:
        futures = {pool.submit(upload, a): a for a in uploads}
        for future in as_completed(futures):
            try:
                done = future.result()
            except PublishError as e:
                stop.set()
                failures.append(str(e))
                continue
            report.done.append(f"{done.kind} {done.folder}")
            if on_done:
                on_done(done)
    if not failures:
        for a in (a for a in actions if a.kind == "delete"):
            try:
                api.delete(Remote(a.skill_id, a.folder, ""))
            except PublishError as e:
                failures.append(str(e))
                break
            if state.skills.get(a.folder, {}).get("skill_id") == a.skill_id:
                state.record(a.folder, None)
            report.done.append(f"delete {a.folder}")
            if on_done:
                on_done(a)
    if failures:
        real = [f for f in failures if not f.startswith("not attempted")]
        more = f" (and {len(failures) - 1} more failed or not attempted)" if len(failures) > 1 else ""
        raise PublishError((real or failures)[0] + more + f"; {len(report.done)} completed, rerun to finish")
