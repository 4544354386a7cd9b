"""A local fake of the Anthropic Skills API (``/v1/skills`` and its versions) over HTTP on 127.0.0.1,
so the official SDK's ``client.beta.skills`` runs its real code path (multipart uploads, cursor
pages, error shapes) against it.

    with FakeSkillsAPI() as api:                       # or the ``skills_api`` fixture
        client = anthropic.Anthropic(api_key="test", base_url=api.url)
        ...
        api.uploads                 # every create / new-version request: its files, sizes, timing
        api.skills                  # what the API holds now: id → FakeSkill (versions, files)
        api.fail(401, "authentication_error", "invalid x-api-key")   # the next request fails so

The server checks what the real API checks and answers 4xx with the real error shape
(``{"type": "error", "error": {"type", "message"}}``): the API key (``x-api-key`` or bearer) and
``anthropic-version`` headers; an upload's files all in one top-level directory with SKILL.md at
its root, valid frontmatter whose ``name`` is that directory (and, for a new version, the skill's
name); at most ``max_files`` files and ``max_bytes`` bytes of content per upload; a skill is
deleted only once it has no versions. Limits broken by a request are also kept in
``violations``, so a test sees them even when the client gives up.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email import policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from .loopback import LoopbackServer

NAME_RULE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names lower-cased
    raw_bytes: int
    fields: dict[str, str] = field(default_factory=dict)  # multipart form fields other than files
    files: list[tuple[str, bytes]] = field(default_factory=list)  # (filename, content)
    started: float = 0.0
    finished: Optional[float] = None

    @property
    def is_upload(self) -> bool:
        return self.method == "POST" and bool(re.fullmatch(r"/v1/skills(/[^/]+/versions)?", self.path))

    @property
    def top_dirs(self) -> set[str]:
        return {name.split("/", 1)[0] for name, _ in self.files}

    @property
    def content_bytes(self) -> int:
        return sum(len(data) for _, data in self.files)


@dataclass
class FakeVersion:
    id: str
    name: str
    description: str
    files: dict[str, bytes]  # path inside the skill directory → content
    created_at: str


@dataclass
class FakeSkill:
    id: str
    display_name: str
    name: str
    source: str = "custom"
    versions: list[FakeVersion] = field(default_factory=list)
    created_at: str = ""
    updated_at: str = ""

    @property
    def latest(self) -> FakeVersion:
        return self.versions[-1]


class APIError(Exception):
    def __init__(self, status: int, error_type: str, message: str):
        super().__init__(message)
        self.status, self.error_type = status, error_type


class FakeSkillsAPI(LoopbackServer):
    """A ThreadingHTTPServer in a background thread on 127.0.0.1 (port 0 = any free port)."""

    def __init__(self, *, api_key: str | None = None, max_files: int = 200, max_bytes: int = 30_000_000,
                 upload_latency: float = 0.0, page_size: int = 1000):
        super().__init__()
        self.api_key = api_key  # None: any key is accepted (a key must still be sent)
        self.max_files, self.max_bytes = max_files, max_bytes
        self.upload_latency = upload_latency  # seconds each upload takes (to see uploads overlap)
        self.page_size = page_size  # at most this many skills a page, whatever the client's limit
        self.requests: list[Request] = []
        self.violations: list[str] = []
        self.skills: dict[str, FakeSkill] = {}
        self.in_flight = self.max_in_flight = 0
        self.uploads_in_flight = self.max_uploads_in_flight = 0
        self._failures: list[tuple[Callable[[Request], bool], int, str, str]] = []
        self._lock = threading.Lock()

    # scripting and inspection
    def fail(self, status: int, error_type: str, message: str = "", *, when: Callable[[Request], bool] | None = None,
             times: int = 1) -> None:
        """The next ``times`` requests (those ``when`` accepts) are answered with this error."""
        with self._lock:
            self._failures += [(when or (lambda r: True), status, error_type, message or error_type)] * times

    def add_skill(self, display_name: str, name: str, source: str = "custom",
                  files: dict[str, bytes] | None = None) -> FakeSkill:
        """A skill someone else made (another tool's, or one of Anthropic's)."""
        skill = FakeSkill(_id("skill"), display_name, name, source, created_at=_now(), updated_at=_now())
        skill.versions.append(FakeVersion(_id("skillver"), name, "", files or {}, _now()))
        with self._lock:
            self.skills[skill.id] = skill
        return skill

    @property
    def uploads(self) -> list[Request]:
        return [r for r in self.requests if r.is_upload]

    def by_name(self) -> dict[str, FakeSkill]:
        return {s.name: s for s in self.skills.values() if s.source == "custom"}

    def reset_log(self) -> None:
        with self._lock:
            self.requests.clear()
            self.violations.clear()
            self.max_in_flight = self.max_uploads_in_flight = 0

    # serving
    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        parts = urlsplit(h.path)
        request = Request(h.command, parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()},
                          {k.lower(): v for k, v in h.headers.items()}, len(raw), started=time.monotonic())
        upload = request.is_upload
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if upload:
                self.uploads_in_flight += 1
                self.max_uploads_in_flight = max(self.max_uploads_in_flight, self.uploads_in_flight)
        request_id = f"req_{uuid.uuid4().hex[:20]}"
        try:
            try:
                if upload:
                    self._parse_multipart(request, h.headers.get("content-type", ""), raw)
                    if self.upload_latency:
                        time.sleep(self.upload_latency)
                status, body = 200, self._route(request)
            except APIError as e:
                status, body = e.status, {"type": "error", "error": {"type": e.error_type, "message": str(e)},
                                          "request_id": request_id}
            except Exception as e:  # noqa: BLE001 - a fake bug: 500, not retried, visible to the test
                status, body = 500, {"type": "error", "error": {"type": "api_error", "message": f"fake failed: {e!r}"},
                                     "request_id": request_id}
            payload = json.dumps(body).encode()
            try:
                h.send_response(status)
                h.send_header("content-type", "application/json")
                h.send_header("content-length", str(len(payload)))
                h.send_header("request-id", request_id)
                if status >= 500:
                    h.send_header("x-should-retry", "false")  # errors the test asked for come at once
                h.end_headers()
                h.wfile.write(payload)
                h.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                h.close_connection = True
        finally:
            request.finished = time.monotonic()
            with self._lock:
                self.in_flight -= 1
                if upload:
                    self.uploads_in_flight -= 1

    def _parse_multipart(self, r: Request, content_type: str, raw: bytes) -> None:
        if not content_type.startswith("multipart/form-data"):
            raise APIError(400, "invalid_request_error", "files: uploads must be multipart/form-data")
        message = BytesParser(policy=policy.HTTP).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\nMIME-Version: 1.0\r\n\r\n" + raw)
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            data = part.get_payload(decode=True) or b""
            filename = part.get_filename()
            if filename is not None:
                r.files.append((filename, data))
            elif name:
                r.fields[name] = data.decode("utf-8")

    def _route(self, r: Request) -> Any:
        self._check_headers(r)
        with self._lock:
            failure = next((f for f in self._failures if f[0](r)), None)
            if failure:
                self._failures.remove(failure)
        if failure:
            raise APIError(failure[1], failure[2], failure[3])
        m = re.fullmatch(r"/v1/skills(?:/(?P<skill>[^/]+)(?:/versions(?:/(?P<version>[^/]+))?(?P<v>/?))?)?", r.path)
        if not m:
            raise APIError(404, "not_found_error", f"Not found: {r.method} {r.path}")
        skill_id, version_id = m["skill"], m["version"]
        versions = "/versions" in r.path
        with self._lock:
            if skill_id is None:
                if r.method == "GET":
                    return self._list(r)
                if r.method == "POST":
                    return self._create(r)
            elif not versions:
                skill = self._skill(skill_id)
                if r.method == "GET":
                    return _skill_json(skill)
                if r.method == "DELETE":
                    if skill.versions:
                        raise APIError(400, "invalid_request_error", "Cannot delete a skill with existing versions; "
                                                                     "delete its versions first")
                    del self.skills[skill_id]
                    return {"id": skill_id, "type": "skill_deleted"}
            else:
                skill = self._skill(skill_id)
                if version_id is None and r.method == "GET":
                    return self._page([_version_json(skill, v) for v in reversed(skill.versions)], r)
                if version_id is None and r.method == "POST":
                    return self._new_version(skill, r)
                version = next((v for v in skill.versions if v.id == version_id), None)
                if version is None:
                    raise APIError(404, "not_found_error", f"Skill version {version_id} not found")
                if r.method == "GET":
                    return _version_json(skill, version)
                if r.method == "DELETE":
                    skill.versions.remove(version)
                    return {"id": version.id, "type": "skill_version_deleted"}
        raise APIError(405, "invalid_request_error", f"Method not allowed: {r.method} {r.path}")

    def _check_headers(self, r: Request) -> None:
        auth = r.headers.get("authorization", "")
        key = r.headers.get("x-api-key") or (auth[7:] if auth.startswith("Bearer ") else "")
        if not key or (self.api_key is not None and key != self.api_key):
            raise APIError(401, "authentication_error", "invalid x-api-key")
        if not r.headers.get("anthropic-version"):
            raise APIError(400, "invalid_request_error", "anthropic-version: header is required")

    def _skill(self, skill_id: str) -> FakeSkill:
        skill = self.skills.get(skill_id)
        if skill is None:
            raise APIError(404, "not_found_error", f"Skill {skill_id} not found")
        return skill

    def _list(self, r: Request) -> dict:
        source = r.query.get("source")
        skills = [s for s in self.skills.values() if source in (None, s.source)]
        skills.sort(key=lambda s: s.created_at, reverse=True)
        return self._page([_skill_json(s) for s in skills], r)

    def _page(self, items: list[dict], r: Request) -> dict:
        limit = int(r.query.get("limit") or 20)
        if not 1 <= limit <= 1000:
            raise APIError(400, "invalid_request_error", "limit: must be between 1 and 1000")
        limit = min(limit, self.page_size)
        start = int(r.query.get("page") or 0)
        page = items[start:start + limit]
        more = start + limit < len(items)
        return {"data": page, "has_more": more, "next_page": str(start + limit) if more else None}

    def _check_upload(self, r: Request) -> tuple[str, str, dict[str, bytes]]:
        """(directory, description, files inside it) of a valid upload, else a 400 as the API gives."""
        if not r.files:
            raise APIError(400, "invalid_request_error", "files: at least one file is required")
        if len(r.files) > self.max_files:
            self.violations.append(f"{r.path}: {len(r.files)} files")
            raise APIError(400, "invalid_request_error", f"files: at most {self.max_files} files per upload")
        if r.content_bytes > self.max_bytes:
            self.violations.append(f"{r.path}: {r.content_bytes} bytes")
            raise APIError(413, "request_too_large", f"files: at most {self.max_bytes} bytes per upload")
        if len(r.top_dirs) != 1 or any("/" not in name for name, _ in r.files):
            self.violations.append(f"{r.path}: top-level directories {sorted(r.top_dirs)}")
            raise APIError(400, "invalid_request_error", "files: all files must be in the same top-level directory")
        directory = next(iter(r.top_dirs))
        files = {name.split("/", 1)[1]: data for name, data in r.files}
        if len(files) != len(r.files):
            raise APIError(400, "invalid_request_error", "files: duplicate file paths")
        if "SKILL.md" not in files:
            raise APIError(400, "invalid_request_error", "files: SKILL.md is required at the root of the directory")
        text = files["SKILL.md"].decode("utf-8")
        end = text.find("\n---\n", 4)
        meta = yaml.safe_load(text[4:end]) if text.startswith("---\n") and end > 0 else None
        if not isinstance(meta, dict):
            raise APIError(400, "invalid_request_error", "SKILL.md: YAML frontmatter is required")
        name, description = meta.get("name"), meta.get("description")
        if not isinstance(name, str) or not NAME_RULE.match(name) or len(name) > 64 or \
                any(w in name for w in ("anthropic", "claude")):
            raise APIError(400, "invalid_request_error", f"SKILL.md: invalid name {name!r}")
        if name != directory:
            raise APIError(400, "invalid_request_error", f"SKILL.md: name {name!r} must match its directory "
                                                         f"{directory!r}")
        if not isinstance(description, str) or not description.strip() or len(description) > 1024:
            raise APIError(400, "invalid_request_error", "SKILL.md: description must be 1-1024 characters")
        return directory, description, files

    def _create(self, r: Request) -> dict:
        directory, description, files = self._check_upload(r)
        title = r.fields.get("display_name") or directory
        if len(title) > 255:
            raise APIError(400, "invalid_request_error", "display_name: at most 255 characters")
        skill = FakeSkill(_id("skill"), title, directory, created_at=_now(), updated_at=_now())
        skill.versions.append(FakeVersion(_id("skillver"), directory, description, files, _now()))
        self.skills[skill.id] = skill
        return _skill_json(skill)

    def _new_version(self, skill: FakeSkill, r: Request) -> dict:
        directory, description, files = self._check_upload(r)
        if directory != skill.name:
            raise APIError(400, "invalid_request_error", f"SKILL.md: name {directory!r} must stay {skill.name!r}")
        version = FakeVersion(_id("skillver"), directory, description, files, _now())
        skill.versions.append(version)
        skill.updated_at = _now()
        return _version_json(skill, version)


def _skill_json(s: FakeSkill) -> dict:
    return {"id": s.id, "type": "skill", "display_name": s.display_name, "source": s.source,
            "latest_version_id": s.versions[-1].id if s.versions else None, "created_at": s.created_at,
            "updated_at": s.updated_at}


def _version_json(s: FakeSkill, v: FakeVersion) -> dict:
    return {"id": v.id, "type": "skill_version", "skill_id": s.id, "name": v.name, "description": v.description,
            "created_at": v.created_at}


_clock = [0]
_clock_lock = threading.Lock()


def _now() -> str:
    # Strictly increasing timestamps: creation order survives equal wall-clock times.
    with _clock_lock:
        _clock[0] += 1
        tick = _clock[0]
    return datetime.fromtimestamp(1_760_000_000 + tick, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


@pytest.fixture
def skills_api():
    with FakeSkillsAPI() as server:
        yield server
