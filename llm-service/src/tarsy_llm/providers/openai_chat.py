"""Provider ``openai`` of the ``langchain`` backend: chat completions, streamed lean.

OpenAI and OpenAI-compatible servers (vLLM, Ollama, ...) are called through the
openai SDK's raw request API instead of LangChain's ``ChatOpenAI``: the same
request on the wire, the same chunks back, the same SDK exceptions on failure,
at a fraction of the cost. Through LangChain a call with a dozen messages cost
≈ 8 ms of CPU in this service (the SDK's per-request type transforms of the
whole conversation, LangChain's run managers and per-chunk message merging).
Here the body is encoded once, by this module (orjson for the conversation,
tools once per tool set: the bytes the SDK's own encoder would make), and
handed to the SDK as the request's ``content``; the SDK sends it over its
aiohttp transport (``openai[aiohttp]``, cheaper per call than its default
httpx stack) and decodes the streamed answer.

What LangChain did and this keeps, so that nothing changes for a provider:

* request: ``model``, ``messages`` (system, user, assistant with ``tool_calls``
  whose arguments are re-serialised JSON and ``content: null`` beside them,
  tool results with ``tool_call_id`` only), ``tools`` in the OpenAI function
  format unchanged, ``stream: true``, ``stream_options.include_usage``,
  ``max_completion_tokens`` when set; the base URL from ``base_url`` or
  ``OPENAI_API_BASE``;
* answer: the first choice's text deltas as they arrive; tool-call fragments
  merged by index (names and arguments concatenated, the first id kept) and
  forwarded verbatim at the end; usage summed over the chunks that carry it
  and reported in the service's common convention (``completion_tokens``
  include the reasoning tokens, so the answer is ``completion_tokens -
  reasoning_tokens``; cached prompt tokens from
  ``prompt_tokens_details.cached_tokens``);
* failures: the SDK's own exceptions (HTTP status errors, error events in the
  stream), classified as before; no SDK retries.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import chunks
from ..errors import ErrorCode, LLMServiceError
from ..proto import llm_service_pb2 as pb
from .base import (
    ToolNameMapper,
    new_call_id,
    parse_arguments,
    parse_schema,
    read_api_key,
)
from .sockets import async_transport

# OpenAI-compatible servers (vLLM, Ollama) usually need no key, but the SDK
# insists on one; this placeholder is sent when the request names none.
NO_KEY_PLACEHOLDER = "not-needed"
CHAT_PATH = "/chat/completions"


def build_client(cfg: pb.LLMConfig, environ: Mapping[str, str]) -> Any:
    """The SDK client for one configuration: no SDK retries, no client timeout
    (the gRPC call's deadline and cancellation bound a call), the SDK's aiohttp
    transport with TCP_NODELAY and prompt ACKs on its connections (behind a
    proxy, the SDK's default client)."""
    import openai  # noqa: PLC0415 - imported at start-up by prewarm(), not at module load

    base_url = cfg.base_url or environ.get("OPENAI_API_BASE") or None
    if cfg.api_key_env:
        api_key = read_api_key(cfg.api_key_env, environ)
    elif base_url:
        api_key = NO_KEY_PLACEHOLDER
    else:
        raise LLMServiceError(
            ErrorCode.CREDENTIALS,
            "llm_config.api_key_env is empty (required unless base_url is set)",
            retryable=False,
        )
    transport = async_transport()
    http_client = (
        openai.DefaultAioHttpClient(transport=transport, timeout=None)
        if transport is not None
        else None
    )
    return openai.AsyncOpenAI(
        api_key=api_key,
        base_url=base_url,
        max_retries=0,
        timeout=None,
        http_client=http_client,
    )


# Imported by the first call otherwise: anyio's asyncio backend (≈ 15 ms; the
# SDK ends every stream within an anyio cancel scope) and the IDNA codec that
# host names are resolved with.
_FIRST_CALL_MODULES = ("anyio._backends._asyncio", "encodings.idna")


def prewarm() -> None:
    """Makes a client once, as a call would, without sending anything: what
    the first call of a configuration would otherwise pay (the SDK's lazy
    imports, its platform headers, which run ``uname``, the CA bundle behind
    :func:`.sockets.default_ssl_context`, the modules a first request
    imports) is paid at start-up."""
    build_client(
        pb.LLMConfig(provider="openai", model="prewarm", base_url="http://127.0.0.1:9/v1"), {}
    )
    for module in _FIRST_CALL_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)


# json.dumps(value, ensure_ascii=False), without a new encoder per call.
_ARGUMENTS_ENCODER = json.JSONEncoder(ensure_ascii=False)
# Re-serialised arguments of the tool calls in the history, by their text: an
# agent's conversation sends the same calls again on every iteration. Bounded:
# at most 1024 entries of at most 2 KB (tool arguments are usually far smaller).
_ARGUMENTS_CACHE: dict[str, str] = {}
MAX_CACHED_ARGUMENTS = 1024
MAX_CACHED_ARGUMENTS_LENGTH = 2048


def _history_arguments(call: Any, index: int) -> str:
    """A history tool call's arguments, parsed and re-serialised: malformed
    history is an invalid request, as it was through LangChain."""
    arguments = call.arguments
    encoded = _ARGUMENTS_CACHE.get(arguments)
    if encoded is None:
        encoded = _ARGUMENTS_ENCODER.encode(
            parse_arguments(arguments, where=f"messages[{index}] call {call.id!r}")
        )
        if len(arguments) <= MAX_CACHED_ARGUMENTS_LENGTH:
            if len(_ARGUMENTS_CACHE) >= MAX_CACHED_ARGUMENTS:
                _ARGUMENTS_CACHE.clear()
            _ARGUMENTS_CACHE[arguments] = encoded
    return encoded


def to_openai_messages(messages: Any, mapper: ToolNameMapper) -> list[dict[str, Any]]:
    """Proto messages → chat completions messages (tool names in provider form)."""
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.role
        if role in ("system", "user"):
            out.append({"content": message.content, "role": role})
        elif role == "assistant":
            entry: dict[str, Any] = {"content": message.content, "role": "assistant"}
            calls = message.tool_calls
            if calls:
                entry["tool_calls"] = [
                    {
                        "type": "function",
                        "id": call.id,
                        "function": {
                            "name": mapper.to_provider(call.name),
                            "arguments": _history_arguments(call, index),
                        },
                    }
                    for call in calls
                ]
                entry["content"] = entry["content"] or None
            out.append(entry)
        else:  # tool
            if not message.tool_call_id:
                raise LLMServiceError(
                    ErrorCode.INVALID_REQUEST,
                    f"messages[{index}]: tool result without tool_call_id",
                    retryable=False,
                )
            # Chat completions has no field for the tool's name.
            out.append(
                {"content": message.content, "role": "tool", "tool_call_id": message.tool_call_id}
            )
    return out


def to_openai_tools(tools: Any) -> list[dict[str, Any]]:
    """Tool definitions in the OpenAI function format."""
    return [
        {
            "type": "function",
            "function": {
                "name": ToolNameMapper.to_provider(tool.name),
                "description": tool.description,
                "parameters": parse_schema(tool),
            },
        }
        for tool in tools
    ]


class ToolSet:
    """A request's tools in the OpenAI format, and their JSON (encoded once)."""

    def __init__(self, tools: Any) -> None:
        self.definitions = to_openai_tools(tools)
        self._json: bytes | None = None

    def json(self) -> bytes:
        if self._json is None:
            self._json = sdk_dumps(self.definitions)
        return self._json


# The settings of the SDK's json.dumps of request bodies.
_SDK_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def sdk_dumps(value: Any) -> bytes:
    """JSON as the openai SDK encodes request bodies."""
    return _SDK_ENCODER.encode(value).encode()


def request_body(
    request: pb.GenerateRequest, mapper: ToolNameMapper, tools: ToolSet | None
) -> dict[str, Any]:
    """The JSON body of one streamed chat completion (tools as a :class:`ToolSet`)."""
    cfg = request.llm_config
    body: dict[str, Any] = {
        "model": cfg.model,
        "stream": True,
        "messages": to_openai_messages(request.messages, mapper),
        "stream_options": {"include_usage": True},
    }
    if cfg.max_output_tokens:
        body["max_completion_tokens"] = cfg.max_output_tokens
    if tools is not None and tools.definitions:
        body["tools"] = tools
    return body


_KEYS = {key: sdk_dumps(key) + b":" for key in ("model", "stream", "messages", "stream_options")}
_KEYS |= {key: sdk_dumps(key) + b":" for key in ("max_completion_tokens", "tools")}
_INCLUDE_USAGE = {"include_usage": True}
_INCLUDE_USAGE_JSON = sdk_dumps(_INCLUDE_USAGE)


def encode_body(body: Mapping[str, Any]) -> bytes:
    """The bytes the SDK would send for ``body``: compact UTF-8 JSON. The
    conversation (strings only) is encoded by orjson, byte for byte what the
    SDK's ``json.dumps`` makes of it, and tools once per tool set; raises as
    the SDK's encoding would (inside the call, so that it is classified alike)."""
    parts = []
    for key, value in body.items():
        if key == "messages":
            encoded = orjson.dumps(value)
        elif isinstance(value, ToolSet):
            encoded = value.json()
        elif value is True:
            encoded = b"true"
        elif key == "stream_options" and value == _INCLUDE_USAGE:
            encoded = _INCLUDE_USAGE_JSON
        else:
            encoded = sdk_dumps(value)
        parts.append(_KEYS.get(key) or sdk_dumps(key) + b":")
        parts.append(encoded)
        parts.append(b",")
    parts[-1] = b"}"
    return b"{" + b"".join(parts)


def _merge(left: str | None, right: str | None, *, keep_equal: bool = False) -> str | None:
    """LangChain's merge of one string field of tool-call fragments."""
    if left is None:
        return right
    if right is None or (keep_equal and left == right):
        return left
    return left + right


@dataclass
class _CallFragments:
    id: str | None = None
    name: str | None = None
    arguments: str | None = None


@dataclass
class _Usage:
    seen: bool = False
    values: dict[str, int] = field(
        default_factory=lambda: {"input": 0, "output": 0, "total": 0, "reasoning": 0, "cached": 0}
    )

    def add(self, usage: Mapping[str, Any]) -> None:
        self.seen = True
        prompt = usage.get("prompt_tokens") or 0
        completion = usage.get("completion_tokens") or 0
        details = usage.get("completion_tokens_details") or {}
        prompt_details = usage.get("prompt_tokens_details") or {}
        self.values["input"] += prompt
        self.values["output"] += completion
        self.values["total"] += usage.get("total_tokens") or (prompt + completion)
        self.values["reasoning"] += (details.get("reasoning_tokens") or 0) if details else 0
        self.values["cached"] += prompt_details.get("cached_tokens") or 0

    def chunk(self) -> pb.GenerateResponse:
        """The usage chunk: ``completion_tokens`` include the reasoning tokens,
        the answer is the rest (never negative)."""
        v = self.values
        return chunks.usage(
            input_tokens=v["input"],
            output_tokens=max(v["output"] - v["reasoning"], 0),
            total_tokens=v["total"],
            thinking_tokens=v["reasoning"],
            cached_input_tokens=v["cached"],
        )


async def stream_chat(
    client: Any, body: dict[str, Any], mapper: ToolNameMapper
) -> AsyncIterator[pb.GenerateResponse]:
    """One streamed chat completion as response chunks (no final chunk)."""
    from openai import AsyncStream  # noqa: PLC0415 - loaded with the client

    stream = await client.post(
        CHAT_PATH,
        cast_to=object,
        content=encode_body(body),
        stream=True,
        stream_cls=AsyncStream[object],
    )
    calls: dict[int, _CallFragments] = {}
    usage = _Usage()
    async with stream, aclosing(stream.__aiter__()) as events:
        async for data in events:
            if not isinstance(data, dict):
                continue
            if data.get("usage"):
                usage.add(data["usage"])
            choices = data.get("choices") or []
            if not choices:
                continue
            delta = choices[0].get("delta") or {}
            content = delta.get("content")
            if content:
                yield chunks.text(content)
            for fragment in delta.get("tool_calls") or []:
                index = fragment.get("index")
                if not isinstance(index, int):
                    continue
                function = fragment.get("function") or {}
                call = calls.setdefault(index, _CallFragments())
                call.id = _merge(call.id, fragment.get("id"), keep_equal=True)
                call.name = _merge(call.name, function.get("name"))
                call.arguments = _merge(call.arguments, function.get("arguments"))
    # Arguments arrive in fragments; complete calls are only known at the end.
    # They are forwarded verbatim: the orchestrator must see what the model
    # really produced.
    for call in calls.values():
        if call.name:
            yield chunks.tool_call(
                call.id or new_call_id(), mapper.to_canonical(call.name), call.arguments or "{}"
            )
    if usage.seen:
        yield usage.chunk()
