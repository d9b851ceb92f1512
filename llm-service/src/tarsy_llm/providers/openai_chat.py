"""Provider ``openai`` of the ``langchain`` backend: chat completions, streamed lean.

OpenAI and OpenAI-compatible servers (vLLM, Ollama, ...) are called through the
openai SDK's raw request API instead of LangChain's ``ChatOpenAI``: the same
request on the wire, the same chunks back, the same SDK exceptions on failure,
at a fraction of the cost. Through LangChain a call with a dozen messages cost
≈ 8 ms of CPU in this service (the SDK's per-request type transforms of the
whole conversation, LangChain's run managers and per-chunk message merging),
more than the rest of TARSy's own work per agent iteration; here it is well
under a millisecond.

What LangChain did and this keeps, so that nothing changes for a provider:

* request: ``model``, ``messages`` (system, user, assistant with ``tool_calls``
  whose arguments are re-serialised JSON and ``content: null`` beside them,
  tool results with ``tool_call_id`` only), ``tools`` in the OpenAI function
  format unchanged, ``stream: true``, ``stream_options.include_usage``,
  ``max_completion_tokens`` when set; the base URL from ``base_url`` or
  ``OPENAI_API_BASE``;
* answer: the first choice's text deltas as they arrive; tool-call fragments
  merged by index (names and arguments concatenated, the first id kept) and
  forwarded verbatim at the end; usage summed over the chunks that carry it,
  reasoning tokens included;
* failures: the SDK's own exceptions (HTTP status errors, error events in the
  stream), classified as before; no SDK retries.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

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
    (the gRPC call's deadline and cancellation bound a call), TCP_NODELAY and
    prompt ACKs on its connections."""
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
        openai.DefaultAsyncHttpxClient(transport=transport, timeout=None)
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


def to_openai_messages(messages: Any, mapper: ToolNameMapper) -> list[dict[str, Any]]:
    """Proto messages → chat completions messages (tool names in provider form)."""
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.role
        if role in ("system", "user"):
            out.append({"content": message.content, "role": role})
        elif role == "assistant":
            entry: dict[str, Any] = {"content": message.content, "role": "assistant"}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "type": "function",
                        "id": call.id,
                        "function": {
                            "name": mapper.to_provider(call.name),
                            # Parsed and re-serialised: malformed history is an
                            # invalid request, as it was through LangChain.
                            "arguments": json.dumps(
                                parse_arguments(
                                    call.arguments, where=f"messages[{index}] call {call.id!r}"
                                ),
                                ensure_ascii=False,
                            ),
                        },
                    }
                    for call in message.tool_calls
                ]
                entry["content"] = message.content or None
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


def request_body(
    request: pb.GenerateRequest, mapper: ToolNameMapper, tools: list[dict[str, Any]]
) -> dict[str, Any]:
    """The JSON body of one streamed chat completion."""
    cfg = request.llm_config
    body: dict[str, Any] = {
        "model": cfg.model,
        "stream": True,
        "messages": to_openai_messages(request.messages, mapper),
        "stream_options": {"include_usage": True},
    }
    if cfg.max_output_tokens:
        body["max_completion_tokens"] = cfg.max_output_tokens
    if tools:
        body["tools"] = tools
    return body


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
        default_factory=lambda: {"input": 0, "output": 0, "total": 0, "reasoning": 0}
    )

    def add(self, usage: Mapping[str, Any]) -> None:
        self.seen = True
        prompt = usage.get("prompt_tokens") or 0
        completion = usage.get("completion_tokens") or 0
        details = usage.get("completion_tokens_details") or {}
        self.values["input"] += prompt
        self.values["output"] += completion
        self.values["total"] += usage.get("total_tokens") or (prompt + completion)
        self.values["reasoning"] += (details.get("reasoning_tokens") or 0) if details else 0


async def stream_chat(
    client: Any, body: dict[str, Any], mapper: ToolNameMapper
) -> AsyncIterator[pb.GenerateResponse]:
    """One streamed chat completion as response chunks (no final chunk)."""
    from openai import AsyncStream  # noqa: PLC0415 - loaded with the client

    stream = await client.post(
        CHAT_PATH, body=body, cast_to=object, stream=True, stream_cls=AsyncStream[object]
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
        v = usage.values
        yield chunks.usage(
            input_tokens=v["input"],
            output_tokens=v["output"],
            total_tokens=v["total"],
            thinking_tokens=v["reasoning"],
        )
