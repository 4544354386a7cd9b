"""Local fake LLM servers for tests: the real Anthropic Messages API (``POST /v1/messages``) and the
OpenAI chat completions API (``POST /v1/chat/completions``) over HTTP on 127.0.0.1, so the
official SDKs run their real code paths against them.

    with FakeLLMServer("anthropic") as server:          # or the ``anthropic_server`` fixture
        server.enqueue(rate_limited(0.2), text('{"title": "x"}'))
        client = AnthropicClient("claude-sonnet-4-6", api_key="test", base_url=server.base_url)
        ...
        server.requests[1].body["messages"]       # every request: headers + JSON body + timing

What a request gets: the next queued reply if any, else ``server.handler(request)`` if set, else
``text("ok")``. A reply is a ``Reply`` (built with the helpers below: ``text``, ``json_text``,
``tool_use``, ``truncated``, ``refusal``, ``error``, ``rate_limited``, ``overloaded``,
``server_error``, ``slow``), a ``str`` (the model's text), a ``dict`` (a raw JSON body, status 200)
or a callable taking the ``Request`` and returning one of those. Replies are written in one
vocabulary (Anthropic stop reasons) and rendered in the server's flavour.

The servers check what the real APIs check and answer 4xx with the real error shapes: the API key
header, ``anthropic-version``, required fields, tool_use/tool_result threading (every tool call
answered in the very next turn, no answer without a call), at most 4 ``cache_control`` blocks.
Usage is estimated (4 characters a token) unless a reply fixes it, and the Anthropic server
simulates prompt caching: the prefix up to a ``cache_control`` breakpoint is written on first
sight and read afterwards (``cache_min_tokens`` sets the minimum cacheable length).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable, Union

import pytest

from .loopback import LoopbackServer

# -- what the server records -----------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # the parsed JSON body (None when it was not JSON)
    raw: bytes
    started: float  # time.monotonic() on arrival
    finished: float | None = None  # when the reply was written

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])

    @property
    def system(self) -> str:
        """The system prompt's text (Anthropic ``system`` or the OpenAI system message)."""
        body = self.body or {}
        if "system" in body:
            system = body["system"]
            return system if isinstance(system, str) else "".join(b.get("text", "") for b in system)
        return "".join(_text_of(m.get("content")) for m in self.messages if m.get("role") == "system")

    @property
    def user_text(self) -> str:
        """The text of the last user message (tool results left out)."""
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return _text_of(m.get("content"))
        return ""

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        """The tool results in the last turn, as ``{"id", "content", "is_error"}``."""
        results: list[dict[str, Any]] = []
        for m in reversed(self.messages):
            if m.get("role") == "tool":
                results.insert(0, {"id": m.get("tool_call_id"), "content": m.get("content"), "is_error": False})
                continue
            if m.get("role") == "user" and isinstance(m.get("content"), list):
                for b in m["content"]:
                    if b.get("type") == "tool_result":
                        results.append({"id": b.get("tool_use_id"), "content": b.get("content"),
                                        "is_error": bool(b.get("is_error"))})
            break
        return results


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


# -- what it answers -------------------------------------------------------------------------------


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[Any] = field(default_factory=list)  # (name, args), (id, name, args) or {"id", "name", "arguments"}
    stop_reason: str | None = None  # end_turn | tool_use | max_tokens | stop_sequence | refusal; None: inferred
    usage: dict[str, int] | None = None  # input_tokens, output_tokens, cache_read_tokens, cache_write_tokens
    status: int = 200
    error_type: str | None = None
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering (on top of the server's latency)
    body: Any = None  # a raw body instead of the rendered one (dict → JSON, str/bytes as they are)
    model: str | None = None  # the model named in the answer (default: the one asked for)


ReplyLike = Union[Reply, str, dict, Callable[["Request"], Any]]


def text(answer: str, **kw: Any) -> Reply:
    return Reply(text=answer, **kw)


def json_text(obj: Any, **kw: Any) -> Reply:
    """The model answering with ``obj`` as JSON text."""
    return Reply(text=json.dumps(obj), **kw)


def tool_use(*calls: Any, text: str = "", **kw: Any) -> Reply:
    return Reply(text=text, tool_calls=list(calls), **kw)


def openai_unparsable_tool_call(call_id: str, name: str, raw_arguments: str) -> dict[str, Any]:
    """A raw OpenAI chat completion calling ``name`` with arguments that are not JSON at all (the
    Anthropic API always sends parsed objects, so only OpenAI-compatible servers can do this)."""
    return {"id": _id("chatcmpl"), "object": "chat.completion", "created": 0, "model": "gpt-4.1",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw_arguments}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def truncated(partial: str, **kw: Any) -> Reply:
    return Reply(text=partial, stop_reason="max_tokens", **kw)


def refusal(answer: str = "", **kw: Any) -> Reply:
    return Reply(text=answer, stop_reason="refusal", **kw)


def error(status: int, error_type: str, message: str = "", retry_after: float | None = None, **kw: Any) -> Reply:
    headers = dict(kw.pop("headers", {}))
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    return Reply(status=status, error_type=error_type, message=message or error_type, headers=headers, **kw)


def rate_limited(retry_after: float | None = 0.2, **kw: Any) -> Reply:
    return error(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit", retry_after, **kw)


def overloaded(retry_after: float | None = None, **kw: Any) -> Reply:
    return error(529, "overloaded_error", "Overloaded", retry_after, **kw)


def server_error(status: int = 500, retry_after: float | None = None, **kw: Any) -> Reply:
    return error(status, "api_error", "Internal server error", retry_after, **kw)


def slow(reply: ReplyLike, seconds: float) -> Reply:
    """``reply`` after ``seconds`` (longer than the client's timeout: a timeout)."""
    base = reply if isinstance(reply, Reply) else Reply(text=reply) if isinstance(reply, str) else Reply(body=reply)
    return Reply(**{**base.__dict__, "delay": base.delay + seconds})


class ProtocolError(Exception):
    """A request the real API would refuse (400 invalid_request_error)."""

    def __init__(self, message: str, status: int = 400, error_type: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.error_type = status, error_type


# -- the server ------------------------------------------------------------------------------------


class FakeLLMServer(LoopbackServer):
    """A ThreadingHTTPServer in a background thread on 127.0.0.1 (port 0 = any free port)."""

    def __init__(self, flavor: str, *, handler: Callable[[Request], ReplyLike] | None = None, latency: float = 0.0,
                 api_key: str | None = None, cache_min_tokens: int = 0):
        if flavor not in ("anthropic", "openai"):
            raise ValueError(f"unknown flavor {flavor!r}")
        super().__init__()
        self.flavor = flavor
        self.thread_name = f"fake-{flavor}"
        self.handler = handler
        self.latency = latency
        self.api_key = api_key  # None: any key is accepted (a key must still be sent)
        self.cache_min_tokens = cache_min_tokens
        self.requests: list[Request] = []
        self.errors: list[BaseException] = []  # exceptions raised by handlers
        self.in_flight = 0
        self.max_in_flight = 0
        self._queue: list[ReplyLike] = []
        self._cached_prefixes: set[str] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    # lifecycle
    def stop(self) -> None:
        self._stopping.set()
        super().stop()

    @property
    def base_url(self) -> str:
        """What the SDK's ``base_url`` should be (the OpenAI SDK expects the ``/v1`` prefix)."""
        return self.url if self.flavor == "anthropic" else self.url + "/v1"

    # scripting
    def enqueue(self, *replies: ReplyLike) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.errors.clear()
            self._cached_prefixes.clear()
            self.max_in_flight = 0

    # serving
    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = Request(h.command, h.path.split("?")[0], {k.lower(): v for k, v in h.headers.items()}, body, raw,
                          time.monotonic())
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            status, payload, headers = self._respond(request)
            try:
                h.send_response(status)
                h.send_header("content-type", "application/json")
                h.send_header("content-length", str(len(payload)))
                for k, v in headers.items():
                    h.send_header(k, v)
                h.end_headers()
                h.wfile.write(payload)
                h.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
                h.close_connection = True
        finally:
            request.finished = time.monotonic()
            with self._lock:
                self.in_flight -= 1

    def _respond(self, request: Request) -> tuple[int, bytes, dict[str, str]]:
        request_id = f"req_{uuid.uuid4().hex[:20]}"
        ids = {"request-id": request_id} if self.flavor == "anthropic" else {"x-request-id": request_id}
        try:
            self._check(request)
            if request.method == "GET":
                return 200, json.dumps(self._models()).encode(), ids
            reply = self._next_reply(request)
        except ProtocolError as exc:
            return exc.status, json.dumps(self._error_body(exc.error_type, str(exc), request_id)).encode(), ids
        except Exception as exc:  # noqa: BLE001 - a broken handler: answer 500, keep it for the test
            self.errors.append(exc)
            body = self._error_body("api_error", f"fake server handler failed: {exc!r}", request_id)
            return 500, json.dumps(body).encode(), {**ids, "x-should-retry": "false"}  # fail the test fast
        wait = self.latency + reply.delay
        if wait and self._stopping.wait(wait):
            return 503, b"{}", ids
        headers = {**ids, **reply.headers}
        if reply.body is not None:
            data = reply.body
            payload = json.dumps(data).encode() if isinstance(data, (dict, list)) else (
                data.encode() if isinstance(data, str) else data)
            return reply.status, payload, headers
        if reply.status >= 400:
            body = self._error_body(reply.error_type or "api_error", reply.message, request_id)
            return reply.status, json.dumps(body).encode(), headers
        render = self._anthropic_message if self.flavor == "anthropic" else self._openai_completion
        return reply.status, json.dumps(render(request, reply)).encode(), headers

    def _next_reply(self, request: Request) -> Reply:
        with self._lock:
            item: Any = self._queue.pop(0) if self._queue else None
        if item is None:
            item = self.handler(request) if self.handler else Reply(text="ok")
        while callable(item) and not isinstance(item, Reply):
            item = item(request)
        if isinstance(item, str):
            return Reply(text=item)
        if isinstance(item, dict):
            return Reply(body=item)
        if not isinstance(item, Reply):
            raise TypeError(f"a fake reply must be a Reply, str, dict or callable, not {type(item).__name__}")
        return item

    # protocol checks
    def _check(self, request: Request) -> None:
        if self.flavor == "anthropic":
            self._check_anthropic(request)
        else:
            self._check_openai(request)

    def _check_anthropic(self, r: Request) -> None:
        if (r.method, r.path) != ("POST", "/v1/messages"):
            raise ProtocolError(f"Not found: {r.method} {r.path}", 404, "not_found_error")
        # Older SDKs send the key as x-api-key, newer ones as a bearer token: the API takes both.
        auth = r.headers.get("authorization", "")
        key = r.headers.get("x-api-key") or (auth[7:] if auth.startswith("Bearer ") else "")
        if not key or (self.api_key is not None and key != self.api_key):
            raise ProtocolError("invalid x-api-key", 401, "authentication_error")
        if not r.headers.get("anthropic-version"):
            raise ProtocolError("anthropic-version: header is required")
        body = r.body
        if not isinstance(body, dict):
            raise ProtocolError("The request body is not valid JSON.")
        for name in ("model", "max_tokens", "messages"):
            if name not in body:
                raise ProtocolError(f"{name}: Field required")
        messages = body["messages"]
        if not isinstance(messages, list) or not messages:
            raise ProtocolError("messages: at least one message is required")
        for tool in body.get("tools") or []:
            if "name" not in tool or ("input_schema" not in tool and "type" not in tool):
                raise ProtocolError("tools: each tool needs a name and an input_schema")
        previous_calls: set[str] = set()
        for i, m in enumerate(messages):
            role, content = m.get("role"), m.get("content")
            if role not in ("user", "assistant"):
                raise ProtocolError(f"messages.{i}.role: Input should be 'user' or 'assistant'")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            if role == "assistant" and any(b.get("type") == "tool_result" for b in blocks):
                raise ProtocolError(f"messages.{i}: tool_result blocks belong in a user message")
            if role == "user":
                unexpected = answered - previous_calls
                if unexpected:
                    raise ProtocolError(f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` "
                                        f"blocks: {sorted(unexpected)}. Each `tool_result` block must have a "
                                        "corresponding `tool_use` block in the previous message.")
            missing = previous_calls - answered
            if missing:
                raise ProtocolError(f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                                    f"immediately after: {sorted(missing)}. Each `tool_use` block must have a "
                                    "corresponding `tool_result` block in the next message.")
            previous_calls = {b.get("id") for b in blocks if b.get("type") == "tool_use"} if role == "assistant" else set()
        if previous_calls:
            raise ProtocolError("the conversation ends with tool_use blocks that have no tool_result")
        marked = sum(1 for seg in _segments(body) if seg[1])
        if marked > 4:
            raise ProtocolError(f"A maximum of 4 blocks with cache_control may be provided. Found {marked}.")

    def _check_openai(self, r: Request) -> None:
        if r.method == "GET" and r.path == "/v1/models":
            self._check_bearer(r)
            return
        if (r.method, r.path) != ("POST", "/v1/chat/completions"):
            raise ProtocolError(f"Invalid URL ({r.method} {r.path})", 404, "invalid_request_error")
        self._check_bearer(r)
        body = r.body
        if not isinstance(body, dict):
            raise ProtocolError("We could not parse the JSON body of your request.")
        for name in ("model", "messages"):
            if name not in body:
                raise ProtocolError(f"Missing required parameter: '{name}'.")
        if not body["messages"]:
            raise ProtocolError("Invalid 'messages': empty array.")
        for tool in body.get("tools") or []:
            if tool.get("type") != "function" or not (tool.get("function") or {}).get("name"):
                raise ProtocolError("Missing required parameter: 'tools[0].function.name'.")
        open_calls: set[str] = set()
        for i, m in enumerate(body["messages"]):
            role = m.get("role")
            if role == "tool":
                if m.get("tool_call_id") not in open_calls:
                    raise ProtocolError(f"Invalid parameter: messages with role 'tool' must be a response to a "
                                        f"preceeding message with 'tool_calls'. (messages[{i}])")
                open_calls.discard(m.get("tool_call_id"))
                continue
            if open_calls:
                raise ProtocolError("An assistant message with 'tool_calls' must be followed by tool messages "
                                    "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                                    f"response messages: {', '.join(sorted(open_calls))}")
            if role not in ("system", "developer", "user", "assistant"):
                raise ProtocolError(f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', "
                                    "'user', 'tool', and 'developer'.")
            if role == "assistant":
                open_calls = {c.get("id") for c in m.get("tool_calls") or []}
        if open_calls:
            raise ProtocolError("An assistant message with 'tool_calls' must be followed by tool messages "
                                f"responding to each 'tool_call_id': {', '.join(sorted(open_calls))}")

    def _check_bearer(self, r: Request) -> None:
        auth = r.headers.get("authorization", "")
        key = auth[7:] if auth.startswith("Bearer ") else ""
        if not key or (self.api_key is not None and key != self.api_key):
            raise ProtocolError("Incorrect API key provided.", 401, "invalid_api_key")

    # rendering
    def _error_body(self, error_type: str, message: str, request_id: str) -> dict[str, Any]:
        if self.flavor == "anthropic":
            return {"type": "error", "error": {"type": error_type, "message": message}, "request_id": request_id}
        return {"error": {"message": message, "type": error_type, "param": None, "code": None}}

    def _models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "fake-model", "object": "model", "created": 0, "owned_by": "fake"}]}

    def _usage(self, request: Request, reply: Reply) -> dict[str, int]:
        if reply.usage is not None:
            return {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0,
                    **reply.usage}
        out = _tokens(reply.text + "".join(json.dumps(c, default=str) for c in reply.tool_calls)) + 1
        body = request.body or {}
        if self.flavor == "openai":
            return {"input_tokens": _tokens(json.dumps(body.get("messages", [])) + json.dumps(body.get("tools", []))),
                    "output_tokens": out, "cache_read_tokens": 0, "cache_write_tokens": 0}
        segments = _segments(body)
        cumulative, running = [], 0
        for s, _ in segments:
            running += _tokens(s)
            cumulative.append(running)
        total = running
        eligible = [i for i, (_, marked) in enumerate(segments) if marked and cumulative[i] >= self.cache_min_tokens]
        prefixes = {i: "".join(s for s, _ in segments[: i + 1]) for i in eligible}
        with self._lock:
            hit = max((i for i in eligible if prefixes[i] in self._cached_prefixes), default=None)
            self._cached_prefixes.update(prefixes.values())
        read = cumulative[hit] if hit is not None else 0
        write = cumulative[eligible[-1]] - read if eligible and eligible[-1] != hit else 0
        return {"input_tokens": total - read - write, "output_tokens": out, "cache_read_tokens": read,
                "cache_write_tokens": write}

    def _calls(self, reply: Reply) -> list[tuple[str, str, dict]]:
        calls = []
        for c in reply.tool_calls:
            if isinstance(c, dict):
                calls.append((c.get("id") or _id("toolu"), c["name"], c.get("arguments") or c.get("input") or {}))
            elif len(c) == 2:
                calls.append((_id("toolu" if self.flavor == "anthropic" else "call"), c[0], c[1]))
            else:
                calls.append(tuple(c))
        return calls

    def _anthropic_message(self, request: Request, reply: Reply) -> dict[str, Any]:
        calls = self._calls(reply)
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text or not calls else []
        content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
        u = self._usage(request, reply)
        return {
            "id": _id("msg"), "type": "message", "role": "assistant",
            "model": reply.model or request.body.get("model"),
            "content": content,
            "stop_reason": reply.stop_reason or ("tool_use" if calls else "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": u["input_tokens"], "output_tokens": u["output_tokens"],
                      "cache_creation_input_tokens": u["cache_write_tokens"],
                      "cache_read_input_tokens": u["cache_read_tokens"],
                      "cache_creation": {"ephemeral_5m_input_tokens": u["cache_write_tokens"],
                                         "ephemeral_1h_input_tokens": 0},
                      "service_tier": "standard"},
        }

    def _openai_completion(self, request: Request, reply: Reply) -> dict[str, Any]:
        calls = self._calls(reply)
        u = self._usage(request, reply)
        stop = reply.stop_reason or ("tool_use" if calls else "end_turn")
        finish = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
                  "refusal": "content_filter"}.get(stop, stop)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text if reply.text or not calls else None,
                                   "refusal": None}
        if calls:
            message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                                     for i, n, a in calls]
        prompt = u["input_tokens"] + u["cache_read_tokens"] + u["cache_write_tokens"]
        return {
            "id": _id("chatcmpl"), "object": "chat.completion", "created": int(time.time()),
            "model": reply.model or request.body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": u["output_tokens"],
                      "total_tokens": prompt + u["output_tokens"],
                      "prompt_tokens_details": {"cached_tokens": u["cache_read_tokens"]}},
        }


def _segments(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The Anthropic prompt in cache order (tools, system, messages) as (content, has cache_control)."""
    out: list[tuple[str, bool]] = []

    def add(block: Any) -> None:
        if isinstance(block, dict):
            marked = "cache_control" in block
            clean = {k: v for k, v in block.items() if k != "cache_control"}
            out.append((json.dumps(clean, sort_keys=True), marked))
        else:
            out.append((json.dumps(block), False))

    for tool in body.get("tools") or []:
        add(tool)
    system = body.get("system")
    if isinstance(system, str):
        add({"type": "text", "text": system})
    elif isinstance(system, list):
        for block in system:
            add(block)
    for m in body.get("messages") or []:
        content = m.get("content")
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            add({"role": m.get("role"), **block} if isinstance(block, dict) else block)
    return out


def _tokens(s: str) -> int:
    return (len(s) + 3) // 4


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


# -- pytest fixtures (import them into a test module: ``from tests.fakes.llm_servers import anthropic_server``) --


@pytest.fixture
def anthropic_server():
    with FakeLLMServer("anthropic") as server:
        yield server


@pytest.fixture
def openai_server():
    with FakeLLMServer("openai") as server:
        yield server
