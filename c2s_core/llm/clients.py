"""One small chat client layer over the official ``anthropic`` and ``openai`` SDKs, shared by the
compiler (``RemoteProvider``) and the navigating agent.

Both clients take the same provider-neutral conversation and return the same ``ChatResult``:

    messages = [
        {"role": "user", "content": "question"},
        {"role": "assistant", "content": "text", "tool_calls": [ToolCall(...)]},   # result.message()
        {"role": "tool", "tool_call_id": "call-1", "content": "tool output", "is_error": False},
    ]
    tools = [{"name": "ls", "description": "...", "input_schema": {...JSON schema...}}]   # or Tool(...)

``AnthropicClient`` speaks the Messages API: tool results go back as ``tool_result`` blocks in the
next user turn, and the stable prefix (the last tool definition and the system prompt) carries
``cache_control: {"type": "ephemeral"}`` so repeated calls read it from the prompt cache.
``OpenAIClient`` speaks chat completions with function calling and works against any
OpenAI-compatible server (vLLM, Ollama, llama.cpp) through ``base_url``.

Retries are ours, not the SDKs' (their ``max_retries`` is 0), so they are bounded, logged and
testable with short delays: 408/409/429/5xx/529 and connection errors and timeouts are retried up
to ``RetryPolicy.max_attempts`` times in all; a ``retry-after`` (or ``retry-after-ms``) header is
honoured (capped at ``max_retry_after``), otherwise the wait is exponential with jitter; an
``x-should-retry`` header from the server overrides the status-code rule.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence, TypedDict, Union, Unpack

from . import pricing
from .pricing import Usage

log = logging.getLogger("c2s.llm")

# Neutral stop reasons (the Anthropic vocabulary; OpenAI finish reasons are mapped onto it).
END_TURN, TOOL_USE, MAX_TOKENS, STOP_SEQUENCE, REFUSAL = "end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal"
PAUSE_TURN, CONTEXT_EXCEEDED = "pause_turn", "model_context_window_exceeded"
_OPENAI_FINISH = {"stop": END_TURN, "tool_calls": TOOL_USE, "function_call": TOOL_USE, "length": MAX_TOKENS,
                  "content_filter": REFUSAL}
CACHE_CONTROL = {"type": "ephemeral"}


# -- results ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    error: str | None = None  # the arguments were not a JSON object (the raw text is in arguments["_raw"])


@dataclass
class ChatResult:
    text: str
    tool_calls: list[ToolCall]
    stop_reason: str  # end_turn | tool_use | max_tokens | stop_sequence | refusal | pause_turn | ...
    usage: Usage
    raw_model: str  # the model that answered, as the server reports it
    model: str = ""  # the model we asked for (prices are looked up by it)
    attempts: int = 1  # HTTP attempts, retries included
    raw_stop_reason: str | None = None  # the provider's own value (e.g. OpenAI "length")

    @property
    def truncated(self) -> bool:
        return self.stop_reason in (MAX_TOKENS, CONTEXT_EXCEEDED)

    @property
    def refused(self) -> bool:
        return self.stop_reason == REFUSAL

    @property
    def cost(self) -> float:
        return pricing.cost(self.model or self.raw_model, self.usage)

    def message(self) -> dict[str, Any]:
        """This answer as the neutral assistant message, to append to the conversation."""
        return {"role": "assistant", "content": self.text, "tool_calls": list(self.tool_calls)}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


def tool_result(call: ToolCall | str, content: str, is_error: bool = False) -> dict[str, Any]:
    """The neutral message answering one tool call."""
    return {"role": "tool", "tool_call_id": call.id if isinstance(call, ToolCall) else call,
            "content": content, "is_error": is_error}


Messages = Union[str, Sequence[Mapping[str, Any]]]
ToolSpec = Union[Tool, Mapping[str, Any]]


# -- errors ----------------------------------------------------------------------------------------
class LLMError(RuntimeError):
    """Any failure of the LLM layer the user can act on."""


class MissingAPIKeyError(LLMError):
    pass


class MalformedResponseError(LLMError):
    """A 2xx response that is not a well-formed API answer."""


class LLMAPIError(LLMError):
    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.attempts = attempts
        self.retryable = retryable


# -- retries ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6  # HTTP attempts in all, the first included
    base_delay: float = 1.0  # first backoff; doubles per retry
    max_delay: float = 30.0  # cap on a computed backoff
    max_retry_after: float = 120.0  # cap on a wait the server asks for
    jitter: float = 0.25  # a backoff is scaled by a random factor in [1 - jitter, 1]

    def backoff(self, retry_number: int) -> float:
        delay = min(self.base_delay * (2 ** (retry_number - 1)), self.max_delay)
        return max(0.0, delay * (1 - self.jitter * random.random()))


RETRYABLE_STATUS = {408, 409, 429}


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, ``retry-after`` as (possibly
    fractional) seconds, or ``retry-after`` as an HTTP date."""
    if not headers:
        return None
    try:
        return float(headers.get("retry-after-ms")) / 1000  # type: ignore[arg-type]
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - time.time())


# -- the shared client -----------------------------------------------------------------------------
class CompleteOptions(TypedDict, total=False):
    """The options of one model turn.

    ``tool_choice``: "auto", "any", "none" or a tool name. ``json_mode`` asks for a JSON object
    where the API has a switch for it (OpenAI ``response_format``). ``cache`` marks the tools and
    system prompt for prompt caching; ``cache_conversation`` also marks the last message
    (multi-turn agents re-send the whole conversation). ``model`` and ``max_tokens`` default to
    the client's."""

    system: str | None
    tools: Sequence[ToolSpec] | None
    tool_choice: Any
    max_tokens: int | None
    temperature: float | None
    stop: Sequence[str] | None
    model: str | None
    json_mode: bool
    cache: bool
    cache_conversation: bool


TURN_DEFAULTS: dict[str, Any] = {"system": None, "tools": None, "tool_choice": None, "temperature": None, "stop": None,
                                 "json_mode": False, "cache": True, "cache_conversation": False}


class ChatClient:
    """What both clients share: configuration, retries, error wording. Subclasses build the SDK
    clients, turn the neutral request into the provider's, and parse the answer."""

    provider = ""
    key_env = ""
    base_url_env = ""
    default_max_tokens = 1024

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 max_retries: int = 5, timeout: float = 300.0, retry: RetryPolicy | None = None):
        if not model:
            raise LLMError(f"{self.provider}: a model name is required")
        self.model = model
        self.base_url = base_url or os.environ.get(self.base_url_env) or None
        self.api_key = self._resolve_key(api_key)
        self.timeout = timeout
        self.retry = retry or RetryPolicy(max_attempts=max_retries + 1)
        self._sync: Any = None
        self._async: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # subclass hooks
    def _resolve_key(self, api_key: str | None) -> str:
        raise NotImplementedError

    def _make_sync(self) -> Any:
        raise NotImplementedError

    def _make_async(self) -> Any:
        raise NotImplementedError

    def _create(self, sdk: Any, kwargs: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _request(self, messages: Messages, *, system: str | None, tools: Sequence[ToolSpec] | None,
                 tool_choice: Any, max_tokens: int, temperature: float | None, stop: Sequence[str] | None,
                 model: str, json_mode: bool, cache: bool, cache_conversation: bool) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, response: Any, model: str) -> ChatResult:
        raise NotImplementedError

    def _sdk_module(self) -> Any:
        """The SDK package; both official SDKs name their error classes alike."""
        raise NotImplementedError

    def _sdk_errors(self) -> tuple[type, type]:
        """(APIStatusError, APIConnectionError) of the SDK."""
        sdk = self._sdk_module()
        return sdk.APIStatusError, sdk.APIConnectionError

    def _timeout_error(self) -> type:
        return self._sdk_module().APITimeoutError

    def _sdk_base_error(self) -> type:
        """The SDK's base API error (e.g. a response that fails the SDK's own validation)."""
        return self._sdk_module().APIError

    # SDK clients: one sync client, one async client per event loop (an async connection pool
    # belongs to the loop that opened it).
    @property
    def sdk(self) -> Any:
        with self._lock:
            if self._sync is None:
                self._sync = self._make_sync()
            return self._sync

    def _async_sdk(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async.get(loop)
            if client is None:
                client = self._async[loop] = self._make_async()
            return client

    def close(self) -> None:
        with self._lock:
            if self._sync is not None:
                self._sync.close()
                self._sync = None

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async.pop(loop, None)
        if client is not None:
            await client.close()

    # the calls
    def complete(self, messages: Messages, **options: Unpack[CompleteOptions]) -> ChatResult:
        """One model turn (see :class:`CompleteOptions`), retried on transient errors."""
        model, kwargs = self._prepare(messages, options)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._create(self.sdk, {**kwargs, "extra_headers": _retry_header(attempt)})
                return self._read(response, model, attempt)
            except Exception as err:  # noqa: BLE001 - classified by _retry_delay
                time.sleep(self._retry_delay(err, attempt))

    async def acomplete(self, messages: Messages, **options: Unpack[CompleteOptions]) -> ChatResult:
        """``complete`` for asyncio."""
        model, kwargs = self._prepare(messages, options)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._create(self._async_sdk(), {**kwargs, "extra_headers": _retry_header(attempt)})
                return self._read(response, model, attempt)
            except Exception as err:  # noqa: BLE001 - classified by _retry_delay
                await asyncio.sleep(self._retry_delay(err, attempt))

    def _prepare(self, messages: Messages, options: CompleteOptions) -> tuple[str, dict[str, Any]]:
        """(the model asked for, the SDK's request keywords) for one turn."""
        unknown = set(options) - set(CompleteOptions.__annotations__)
        if unknown:
            raise TypeError(f"unknown option(s) for a model turn: {', '.join(sorted(unknown))}")
        model = options.get("model") or self.model
        max_tokens = options.get("max_tokens") or self.default_max_tokens
        return model, self._request(messages, **{**TURN_DEFAULTS, **options, "model": model, "max_tokens": max_tokens})

    def _read(self, response: Any, model: str, attempt: int) -> ChatResult:
        try:
            result = self._parse(response, model)
            result.attempts = attempt
            return result
        except LLMError:
            raise
        except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
            raise MalformedResponseError(f"unreadable response ({type(exc).__name__}: {exc})") from exc

    def _retry_delay(self, err: Exception, attempt: int) -> float:
        """How long to wait before the next attempt; raises ``LLMAPIError`` (or ``err`` itself when
        it is not an API error) when the failure is final."""
        status_error, connection_error = self._sdk_errors()
        if isinstance(err, status_error):
            status = err.status_code
            headers = err.response.headers
            verdict = headers.get("x-should-retry")
            retryable = verdict == "true" or (verdict != "false" and (status in RETRYABLE_STATUS or status >= 500))
            what = f"{status} {_error_text(err.body) or err.message}"
            wait = parse_retry_after(headers)
        elif isinstance(err, connection_error):
            status, retryable, wait = None, True, None
            what = (f"request timed out (timeout {self.timeout:g}s)" if isinstance(err, self._timeout_error())
                    else f"connection error: {err.__cause__ or err}")
        elif isinstance(err, (MalformedResponseError, json.JSONDecodeError, self._sdk_base_error())):
            # A 200 whose body is not the API's (a proxy's error page, a cut connection): transient.
            status, retryable, wait = None, True, None
            what = str(err) if isinstance(err, MalformedResponseError) else f"unreadable response ({err})"
        else:
            raise err
        if not retryable or attempt >= self.retry.max_attempts:
            hint = f" - check {self.key_env}" if status in (401, 403) else ""
            tail = f" (gave up after {attempt} attempts)" if retryable else ""
            raise LLMAPIError(f"{self.provider} ({self.base_url or 'default endpoint'}): {what}{hint}{tail}",
                              status=status, attempts=attempt, retryable=retryable) from err
        delay = min(wait, self.retry.max_retry_after) if wait is not None and wait > 0 else self.retry.backoff(attempt)
        log.warning("%s: %s; retry %d of %d in %.2fs", self.provider, what, attempt, self.retry.max_attempts - 1, delay)
        return delay


def _retry_header(attempt: int) -> dict[str, str]:
    return {"x-stainless-retry-count": str(attempt - 1)}


def _error_text(body: Any) -> str:
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            kind, message = error.get("type") or error.get("code") or "", error.get("message") or ""
            return f"{kind}: {message}".strip(": ") if kind or message else ""
        return str(error)
    return str(body)[:300] if body else ""


def _tool_dict(tool: ToolSpec) -> dict[str, Any]:
    return tool.as_dict() if isinstance(tool, Tool) else dict(tool)


def _as_messages(messages: Messages) -> list[Mapping[str, Any]]:
    return [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)


def _call_dict(call: ToolCall | Mapping[str, Any]) -> ToolCall:
    if isinstance(call, ToolCall):
        return call
    return ToolCall(id=call["id"], name=call["name"], arguments=dict(call.get("arguments") or {}))


# -- Anthropic -------------------------------------------------------------------------------------
class AnthropicClient(ChatClient):
    provider = "anthropic"
    key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"

    def _resolve_key(self, api_key: str | None) -> str:
        key = api_key or os.environ.get(self.key_env)
        if not key:
            raise MissingAPIKeyError(f"anthropic: no API key - set the {self.key_env} environment variable "
                                     "(or pass api_key)")
        return key

    def _make_sync(self) -> Any:
        import anthropic

        return anthropic.Anthropic(api_key=self.api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout)

    def _make_async(self) -> Any:
        import anthropic

        return anthropic.AsyncAnthropic(api_key=self.api_key, base_url=self.base_url, max_retries=0,
                                        timeout=self.timeout)

    def _create(self, sdk: Any, kwargs: dict[str, Any]) -> Any:
        return sdk.messages.create(**kwargs)

    def _sdk_module(self) -> Any:
        import anthropic

        return anthropic

    def _request(self, messages, *, system, tools, tool_choice, max_tokens, temperature, stop, model, json_mode,
                 cache, cache_conversation) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": model, "max_tokens": max_tokens,
                                  "messages": anthropic_messages(_as_messages(messages))}
        if system:
            block: dict[str, Any] = {"type": "text", "text": system}
            if cache:
                block["cache_control"] = dict(CACHE_CONTROL)
            kwargs["system"] = [block]
        if tools:
            specs = [_tool_dict(t) for t in tools]
            if cache:
                specs[-1] = {**specs[-1], "cache_control": dict(CACHE_CONTROL)}
            kwargs["tools"] = specs
        if tool_choice is not None:
            kwargs["tool_choice"] = ({"type": tool_choice} if tool_choice in ("auto", "any", "none")
                                     else {"type": "tool", "name": tool_choice})
        if cache_conversation and kwargs["messages"]:
            last = kwargs["messages"][-1]
            blocks = [dict(b) for b in last["content"]]
            blocks[-1]["cache_control"] = dict(CACHE_CONTROL)
            kwargs["messages"][-1] = {**last, "content": blocks}
        # No temperature: the Messages API this SDK speaks has no sampling parameters any more, so
        # ``temperature`` is an OpenAI-side knob only.
        if stop:
            kwargs["stop_sequences"] = list(stop)
        return kwargs

    def _parse(self, response: Any, model: str) -> ChatResult:
        texts, calls = [], []
        for block in response.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                args = block.input if isinstance(block.input, dict) else {"_raw": block.input}
                calls.append(ToolCall(id=block.id, name=block.name, arguments=args,
                                      error=None if isinstance(block.input, dict) else "arguments are not an object"))
        u = response.usage
        usage = Usage(input_tokens=u.input_tokens or 0, output_tokens=u.output_tokens or 0,
                      cache_read_tokens=u.cache_read_input_tokens or 0,
                      cache_write_tokens=u.cache_creation_input_tokens or 0)
        stop = response.stop_reason or (TOOL_USE if calls else END_TURN)
        return ChatResult(text="".join(texts), tool_calls=calls, stop_reason=stop, usage=usage,
                          raw_model=response.model, model=model, raw_stop_reason=response.stop_reason)


def anthropic_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Neutral messages as Messages API turns: tool results (and any user text after them) form
    one user turn right after the assistant's tool_use turn; consecutive same-role turns merge."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        role, content = m["role"], m.get("content")
        if role == "system":
            raise LLMError("pass the system prompt as system=..., not as a message")
        if role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m["tool_call_id"],
                                     "content": content if isinstance(content, list) else str(content or "")}
            if m.get("is_error"):
                block["is_error"] = True
            add("user", [block])
            continue
        if isinstance(content, list):  # already content blocks
            blocks = [dict(b) for b in content]
        else:
            blocks = [{"type": "text", "text": content}] if content else []
        if role == "assistant":
            for call in m.get("tool_calls") or []:
                call = _call_dict(call)
                blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
        if not blocks:
            continue
        add(role, blocks)
    return out


# -- OpenAI ----------------------------------------------------------------------------------------
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


class OpenAIClient(ChatClient):
    """Chat completions with function calling, against OpenAI or any compatible server.

    ``max_tokens_param``: OpenAI's own API wants ``max_completion_tokens`` (reasoning models refuse
    ``max_tokens``); local servers understand ``max_tokens``. The default picks by endpoint.
    ``json_response_format``: send ``response_format={"type": "json_object"}`` when JSON is asked
    for (vLLM, Ollama and llama.cpp support it; turn it off for a server that does not)."""

    provider = "openai"
    key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 max_retries: int = 5, timeout: float = 300.0, retry: RetryPolicy | None = None,
                 max_tokens_param: str | None = None, json_response_format: bool = True):
        super().__init__(model, api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout,
                         retry=retry)
        self.max_tokens_param = max_tokens_param or ("max_completion_tokens" if self._official else "max_tokens")
        self.json_response_format = json_response_format

    @property
    def _official(self) -> bool:
        return self.base_url is None or "api.openai.com" in self.base_url

    def _resolve_key(self, api_key: str | None) -> str:
        key = api_key or os.environ.get(self.key_env)
        if key:
            return key
        if self.base_url and "api.openai.com" not in self.base_url:
            return "none"  # local OpenAI-compatible servers accept any key
        raise MissingAPIKeyError(f"openai: no API key - set the {self.key_env} environment variable (or pass "
                                 f"api_key); for a local OpenAI-compatible server set {self.base_url_env}")

    def _make_sync(self) -> Any:
        import openai

        return openai.OpenAI(api_key=self.api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout)

    def _make_async(self) -> Any:
        import openai

        return openai.AsyncOpenAI(api_key=self.api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout)

    def _create(self, sdk: Any, kwargs: dict[str, Any]) -> Any:
        return sdk.chat.completions.create(**kwargs)

    def _sdk_module(self) -> Any:
        import openai

        return openai

    def _request(self, messages, *, system, tools, tool_choice, max_tokens, temperature, stop, model, json_mode,
                 cache, cache_conversation) -> dict[str, Any]:
        chat = openai_messages(_as_messages(messages))
        if system:
            chat.insert(0, {"role": "system", "content": system})
        kwargs: dict[str, Any] = {"model": model, "messages": chat, self.max_tokens_param: max_tokens}
        if tools:
            kwargs["tools"] = [{"type": "function", "function": {
                "name": t["name"], "description": t.get("description", ""),
                "parameters": t.get("input_schema") or {"type": "object", "properties": {}}}}
                for t in map(_tool_dict, tools)]
        if tool_choice is not None:
            kwargs["tool_choice"] = ({"auto": "auto", "any": "required", "none": "none"}.get(tool_choice)
                                     or {"type": "function", "function": {"name": tool_choice}})
        if temperature is not None:
            kwargs["temperature"] = temperature
        if stop:
            kwargs["stop"] = list(stop)
        if json_mode and self.json_response_format:
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def _parse(self, response: Any, model: str) -> ChatResult:
        if not response.choices:
            raise MalformedResponseError(f"the response has no choices (model {response.model})")
        choice = response.choices[0]
        message = choice.message
        calls = []
        for call in message.tool_calls or []:
            function = getattr(call, "function", None)
            if function is None:  # a custom (non-function) tool call
                continue
            raw = function.arguments or "{}"
            try:
                args, error = json.loads(raw), None
                if not isinstance(args, dict):
                    args, error = {"_raw": raw}, "arguments are not a JSON object"
            except json.JSONDecodeError as exc:
                args, error = {"_raw": raw}, f"arguments are not valid JSON: {exc}"
            calls.append(ToolCall(id=call.id or f"call_{uuid.uuid4().hex[:12]}", name=function.name,
                                  arguments=args, error=error))
        u = response.usage
        if u is not None:
            details = u.prompt_tokens_details
            cached = (details.cached_tokens or 0) if details else 0
            written = (getattr(details, "cache_write_tokens", None) or 0) if details else 0
            usage = Usage(input_tokens=max(0, (u.prompt_tokens or 0) - cached - written),
                          output_tokens=u.completion_tokens or 0, cache_read_tokens=cached, cache_write_tokens=written)
        else:
            usage = Usage()
        finish = choice.finish_reason
        stop = _OPENAI_FINISH.get(finish or "", TOOL_USE if calls else END_TURN)
        if stop == END_TURN and calls:
            stop = TOOL_USE  # some local servers report "stop" with tool calls
        if getattr(message, "refusal", None) and not message.content:
            stop = REFUSAL
        return ChatResult(text=message.content or "", tool_calls=calls, stop_reason=stop, usage=usage,
                          raw_model=response.model or model, model=model, raw_stop_reason=finish)


def openai_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        role, content = m["role"], m.get("content")
        if role == "tool":
            text = content if isinstance(content, str) else json.dumps(content)
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": text})
        elif role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": content or None}
            calls = [_call_dict(c) for c in m.get("tool_calls") or []]
            if calls:
                entry["tool_calls"] = [{"id": c.id, "type": "function",
                                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                                       for c in calls]
            out.append(entry)
        else:
            out.append({"role": role, "content": content})
    return out


# -- factory ---------------------------------------------------------------------------------------
CLIENTS: dict[str, type[ChatClient]] = {"anthropic": AnthropicClient, "openai": OpenAIClient}
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-6"}


def make_client(provider: str, model: str | None = None, **kwargs: Any) -> ChatClient:
    """A client by provider name ("anthropic" or "openai")."""
    if provider not in CLIENTS:
        raise LLMError(f"unknown LLM client {provider!r}; choose one of: {', '.join(CLIENTS)}")
    model = model or DEFAULT_MODELS.get(provider)
    if not model:
        raise LLMError(f"{provider}: a model name is required (e.g. the model your server serves)")
    return CLIENTS[provider](model, **kwargs)


__all__ = [
    "AnthropicClient", "ChatClient", "ChatResult", "LLMAPIError", "LLMError", "MissingAPIKeyError", "OpenAIClient",
    "RetryPolicy", "Tool", "ToolCall", "Usage", "make_client", "parse_retry_after", "tool_result",
]
