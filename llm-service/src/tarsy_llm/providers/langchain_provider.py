"""LangChainProvider: every provider through LangChain (backend ``langchain``, the default).

Providers: google (Gemini API), vertexai (Gemini on Vertex AI, through the same
langchain-google-genai integration), openai (including OpenAI-compatible servers
such as vLLM or Ollama via ``base_url``), anthropic and xai. Chat models are
created once per configuration and reused, so their HTTP connection pools are,
and so are the models with tools bound, per set of tools.

Provider ``openai`` is the exception: it is served by :mod:`.openai_chat`, the
same request and answer without LangChain's per-call cost.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib
import json
import logging
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # langchain-core is imported when a LangChain provider is first used (or
    # preloaded): importing it pulls in LangSmith, ≈ 0.4 s and 10 MiB that a
    # service serving only OpenAI-compatible endpoints does not need.
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessageChunk, BaseMessage

from .. import chunks
from ..errors import ErrorCode, LLMServiceError
from ..proto import llm_service_pb2 as pb
from ..retry import RetryPolicy, Sleep, call_with_retries, stream_with_retries
from . import embeddings, openai_chat
from .base import (
    ALL,
    LLMProvider,
    ToolNameMapper,
    new_call_id,
    parse_arguments,
    parse_schema,
    read_api_key,
    tool_names_by_call_id,
    validate_request,
)
from .google_common import GOOGLE_PROVIDERS, VERTEX_PROVIDERS, load_google_credentials
from .openai_chat import NO_KEY_PLACEHOLDER
from .thought_signatures import ThoughtSignatureCache, call_key

log = logging.getLogger(__name__)

# Where langchain-google-genai keeps Gemini function-call thought signatures
# ({tool call id: base64 signature}) in AIMessage.additional_kwargs.
GEMINI_SIGNATURES_KEY = "__gemini_function_call_thought_signatures__"
SignatureLookup = Callable[[str], bytes | None]

ModelFactory = Callable[[pb.LLMConfig, Mapping[str, str]], "BaseChatModel"]
# What the first call of each provider imports (preloaded at start-up).
PROVIDER_MODULES: dict[str, tuple[str, ...]] = {
    "openai": ("openai", "openai._streaming"),
    "anthropic": ("langchain_core.messages", "langchain_anthropic"),
    "xai": ("langchain_core.messages", "langchain_xai"),
    "google": ("langchain_core.messages", "langchain_google_genai"),
    "vertexai": ("langchain_core.messages", "langchain_google_genai", "google.auth"),
}
# Models with tools bound kept per (configuration, tool set): an execution sends
# the same tools on every call, and binding converts and validates them all.
MAX_BOUND_MODELS = 256


@dataclass(frozen=True)
class _ClientKey:
    api_key_env: str
    base_url: str


@dataclass(frozen=True)
class _ModelKey:
    provider: str
    model: str
    api_key_env: str
    credentials_env: str
    base_url: str
    project: str
    location: str
    max_output_tokens: int


def build_chat_model(cfg: pb.LLMConfig, environ: Mapping[str, str]) -> BaseChatModel:
    """Creates the LangChain chat model for one provider configuration.

    SDK-level retries are disabled everywhere: retries are this service's job
    (and must stop the moment the gRPC call is cancelled).
    """
    provider = cfg.provider.lower()
    max_tokens = cfg.max_output_tokens or None
    base_url = cfg.base_url or None
    if provider == "openai":
        from langchain_openai import ChatOpenAI  # noqa: PLC0415 - import only what is used

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
        return ChatOpenAI(
            model=cfg.model,
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            stream_usage=True,
            max_tokens=max_tokens,
        )
    if provider == "anthropic":
        from langchain_anthropic import ChatAnthropic  # noqa: PLC0415

        kwargs: dict[str, Any] = {}
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        return ChatAnthropic(
            model=cfg.model,
            api_key=read_api_key(cfg.api_key_env, environ),
            base_url=base_url,
            max_retries=0,
            stream_usage=True,
            **kwargs,
        )
    if provider == "xai":
        from langchain_xai import ChatXAI  # noqa: PLC0415

        kwargs = {"xai_api_base": base_url} if base_url else {}
        return ChatXAI(
            model=cfg.model,
            xai_api_key=read_api_key(cfg.api_key_env, environ),
            max_retries=0,
            stream_usage=True,
            max_tokens=max_tokens,
            **kwargs,
        )
    if provider in GOOGLE_PROVIDERS or provider in VERTEX_PROVIDERS:
        from langchain_google_genai import ChatGoogleGenerativeAI  # noqa: PLC0415

        # max_retries counts attempts in the google-genai SDK: 1 means no retry.
        kwargs = {"model": cfg.model, "max_retries": 1, "max_output_tokens": max_tokens}
        if base_url:
            kwargs["base_url"] = base_url
        if provider in GOOGLE_PROVIDERS:
            kwargs["google_api_key"] = read_api_key(cfg.api_key_env, environ)
        else:
            kwargs["vertexai"] = True
            if cfg.credentials_env:
                credentials, project = load_google_credentials(cfg.credentials_env, environ)
                kwargs.update(
                    credentials=credentials,
                    project=cfg.project or project or None,
                    location=cfg.location or "global",
                )
            elif cfg.api_key_env:
                # Express mode: the key alone selects the project; a location here
                # would make the SDK treat base_url as a gateway.
                kwargs["google_api_key"] = read_api_key(cfg.api_key_env, environ)
            else:
                kwargs.update(project=cfg.project or None, location=cfg.location or "global")
        return ChatGoogleGenerativeAI(**kwargs)
    raise LLMServiceError(
        ErrorCode.INVALID_REQUEST,
        f"unsupported provider {cfg.provider!r} (google, vertexai, openai, anthropic, xai)",
        retryable=False,
    )


def to_langchain_messages(
    messages: list[pb.ConversationMessage] | Any,
    mapper: ToolNameMapper,
    signature_for_call: SignatureLookup | None = None,
) -> list[BaseMessage]:
    """Proto messages → LangChain messages (tool names in provider form).

    ``signature_for_call`` (Gemini only) returns the cached thought signature of a
    tool call id, so that it is sent back on that function call.
    """
    from langchain_core.messages import (  # noqa: PLC0415 - see the imports at the top
        AIMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )

    out: list[BaseMessage] = []
    call_names = tool_names_by_call_id(messages)
    for index, message in enumerate(messages):
        if message.role == "system":
            out.append(SystemMessage(content=message.content))
        elif message.role == "user":
            out.append(HumanMessage(content=message.content))
        elif message.role == "assistant":
            tool_calls = [
                {
                    "type": "tool_call",
                    "id": call.id,
                    "name": mapper.to_provider(call.name),
                    "args": parse_arguments(
                        call.arguments, where=f"messages[{index}] call {call.id!r}"
                    ),
                }
                for call in message.tool_calls
            ]
            extra: dict[str, Any] = {}
            if signature_for_call is not None:
                signatures = {
                    call.id: base64.b64encode(sig).decode("ascii")
                    for call in message.tool_calls
                    if (sig := signature_for_call(call.id))
                }
                if signatures:
                    extra[GEMINI_SIGNATURES_KEY] = signatures
            out.append(
                AIMessage(content=message.content, tool_calls=tool_calls, additional_kwargs=extra)
            )
        else:  # tool
            name = message.tool_name or call_names.get(message.tool_call_id, "")
            if not message.tool_call_id:
                raise LLMServiceError(
                    ErrorCode.INVALID_REQUEST,
                    f"messages[{index}]: tool result without tool_call_id",
                    retryable=False,
                )
            out.append(
                ToolMessage(
                    content=message.content,
                    tool_call_id=message.tool_call_id,
                    name=mapper.to_provider(name) if name else None,
                )
            )
    return out


def to_langchain_tools(tools: Any) -> list[dict[str, Any]]:
    """Tool definitions in the OpenAI function format every integration accepts."""
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


def _tools_key(request: pb.GenerateRequest) -> bytes:
    """Identity of a request's tool set (names, descriptions, schemas)."""
    return b"\0".join(tool.SerializeToString(deterministic=True) for tool in request.tools)


def _detail(details: Mapping[str, Any] | None, name: str) -> int:
    """One token detail of LangChain's usage metadata. langchain-openai names it
    ``<tier>_<name>`` (``priority_cache_read``, ``flex_reasoning``) for calls on
    a priority or flex service tier; only one of the names is set."""
    if not details:
        return 0
    suffix = f"_{name}"
    return sum(
        value
        for key, value in details.items()
        if (key == name or key.endswith(suffix)) and isinstance(value, int)
    )


def _usage_chunk(usage: Mapping[str, Any]) -> pb.GenerateResponse:
    """LangChain's usage metadata in this service's convention.

    Every integration fills ``input_tokens`` with the whole prompt, cached tokens
    included (langchain-anthropic adds Anthropic's cache reads and writes to its
    ``input_tokens``), and ``output_tokens`` with the reasoning tokens included
    (langchain-google-genai adds Gemini's thoughts, langchain-xai xAI's
    reasoning): the answer is the rest.
    """
    input_details = usage.get("input_token_details")
    reasoning = _detail(usage.get("output_token_details"), "reasoning")
    return chunks.usage(
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=max((usage.get("output_tokens") or 0) - reasoning, 0),
        total_tokens=usage.get("total_tokens") or 0,
        thinking_tokens=reasoning,
        cached_input_tokens=_detail(input_details, "cache_read"),
    )


def _content_pieces(chunk: AIMessageChunk) -> list[tuple[str, str]]:
    """(kind, text) pieces of one streamed chunk: kind is "text" or "thinking"."""
    pieces: list[tuple[str, str]] = []
    try:
        blocks = chunk.content_blocks
    except Exception:  # an integration's translator failed: fall back to raw content
        blocks = [{"type": "text", "text": chunk.content}] if isinstance(chunk.content, str) else []
    for block in blocks:
        block_type = block.get("type")
        if block_type == "text":
            value = block.get("text") or ""
            if value:
                pieces.append(("text", value))
        elif block_type == "reasoning":
            value = block.get("reasoning") or ""
            if value:
                pieces.append(("thinking", value))
    return pieces


def _signatures_of(message: AIMessageChunk) -> dict[str, bytes]:
    """Thought signatures langchain-google-genai attached to the answer's tool calls."""
    found: dict[str, bytes] = {}
    raw = message.additional_kwargs.get(GEMINI_SIGNATURES_KEY)
    if isinstance(raw, dict):
        for call_id, value in raw.items():
            try:
                sig = base64.b64decode(value) if isinstance(value, str) else bytes(value)
            except (ValueError, TypeError):
                continue
            if sig:
                found[call_key(str(call_id))] = sig
    return found


def _tool_calls(message: AIMessageChunk) -> list[tuple[str, str, str]]:
    """(id, provider name, JSON arguments) of the complete tool calls of a streamed answer."""
    if message.tool_call_chunks:
        return [
            (chunk.get("id") or "", chunk.get("name") or "", chunk.get("args") or "{}")
            for chunk in message.tool_call_chunks
            if chunk.get("name")
        ]
    calls = [
        (call.get("id") or "", call["name"], json.dumps(call.get("args") or {}, ensure_ascii=False))
        for call in message.tool_calls
    ]
    calls.extend(
        (call.get("id") or "", call.get("name") or "", call.get("args") or "")
        for call in message.invalid_tool_calls
    )
    return calls


class LangChainProvider(LLMProvider):
    """Multi-provider streaming through LangChain chat models."""

    def __init__(
        self,
        *,
        retry_policy: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        environ: Mapping[str, str] | None = None,
        model_factory: ModelFactory = build_chat_model,
    ) -> None:
        self._policy = retry_policy or RetryPolicy()
        self._sleep = sleep
        self._environ = environ
        self._factory = model_factory
        self._models: dict[_ModelKey, BaseChatModel] = {}
        self._bound: OrderedDict[tuple[_ModelKey, bytes], Any] = OrderedDict()
        self._openai_clients: dict[_ClientKey, Any] = {}
        self._openai_tools: OrderedDict[bytes, openai_chat.ToolSet] = OrderedDict()
        # Gemini thought signatures of tool calls, per execution (as google-native does).
        self.signatures = ThoughtSignatureCache()

    def prewarm(self, environ: Mapping[str, str], providers: frozenset[str] = ALL) -> None:
        """Imports what the first call of each preloaded provider would import,
        so that its first call is as fast as the next ones."""
        for provider in sorted(providers):
            for module in PROVIDER_MODULES.get(provider, ()):
                importlib.import_module(module)
        if "openai" in providers:
            openai_chat.prewarm()

    async def aclose(self) -> None:
        """Closes the openai clients (their aiohttp sessions would otherwise be
        reported unclosed at exit)."""
        clients, self._openai_clients = list(self._openai_clients.values()), {}
        for client in clients:
            with contextlib.suppress(Exception):
                await client.close()

    @staticmethod
    def _model_key(cfg: pb.LLMConfig) -> _ModelKey:
        return _ModelKey(
            cfg.provider.lower(),
            cfg.model,
            cfg.api_key_env,
            cfg.credentials_env,
            cfg.base_url,
            cfg.project,
            cfg.location,
            cfg.max_output_tokens,
        )

    def model_for(self, cfg: pb.LLMConfig) -> BaseChatModel:
        """The cached chat model for this configuration (created on first use)."""
        key = self._model_key(cfg)
        model = self._models.get(key)
        if model is None:
            env = os.environ if self._environ is None else self._environ
            try:
                model = self._factory(cfg, env)
            except LLMServiceError:
                raise
            except Exception as exc:  # pydantic validation or SDK setup errors
                raise LLMServiceError(
                    ErrorCode.INVALID_REQUEST,
                    f"cannot configure provider {cfg.provider!r}: {exc}",
                    retryable=False,
                ) from exc
            self._models[key] = model
        return model

    def bound_model_for(self, cfg: pb.LLMConfig, request: pb.GenerateRequest) -> Any:
        """The chat model with the request's tools bound (cached per tool set)."""
        model = self.model_for(cfg)
        if not request.tools:
            return model
        key = (self._model_key(cfg), _tools_key(request))
        bound = self._bound.get(key)
        if bound is None:
            bound = model.bind_tools(to_langchain_tools(request.tools))
            self._bound[key] = bound
            if len(self._bound) > MAX_BOUND_MODELS:
                self._bound.popitem(last=False)
        else:
            self._bound.move_to_end(key)
        return bound

    def openai_client_for(self, cfg: pb.LLMConfig) -> Any:
        """The cached openai SDK client for this configuration."""
        key = _ClientKey(cfg.api_key_env, cfg.base_url)
        client = self._openai_clients.get(key)
        if client is None:
            env = os.environ if self._environ is None else self._environ
            try:
                client = openai_chat.build_client(cfg, env)
            except LLMServiceError:
                raise
            except Exception as exc:  # SDK setup errors
                raise LLMServiceError(
                    ErrorCode.INVALID_REQUEST,
                    f"cannot configure provider {cfg.provider!r}: {exc}",
                    retryable=False,
                ) from exc
            self._openai_clients[key] = client
        return client

    def openai_tools_for(self, request: pb.GenerateRequest) -> openai_chat.ToolSet | None:
        """The request's tools in the OpenAI format (cached per tool set)."""
        if not request.tools:
            return None
        key = _tools_key(request)
        tools = self._openai_tools.get(key)
        if tools is None:
            tools = openai_chat.ToolSet(request.tools)
            self._openai_tools[key] = tools
            if len(self._openai_tools) > MAX_BOUND_MODELS:
                self._openai_tools.popitem(last=False)
        else:
            self._openai_tools.move_to_end(key)
        return tools

    async def embed(self, cfg: pb.LLMConfig, texts: list[str]) -> list[list[float]]:
        """Provider ``openai`` (and OpenAI-compatible servers): ``/embeddings``
        through the same cached SDK client as ``Generate``, 429s retried as there."""
        if cfg.provider.strip().lower() != "openai":
            return await super().embed(cfg, texts)
        embeddings.validate(cfg)
        client = self.openai_client_for(cfg)
        fields = {"provider": cfg.provider, "model": cfg.model, "backend": "langchain"}

        async def batch(part: list[str]) -> Any:
            return await call_with_retries(
                lambda: embeddings.openai_embed(client, cfg.model, part),
                policy=self._policy,
                sleep=self._sleep,
                log_fields=fields,
            )

        return await embeddings.in_batches(texts, batch)

    async def generate(self, request: pb.GenerateRequest) -> AsyncIterator[pb.GenerateResponse]:
        validate_request(request)
        cfg = request.llm_config
        fields = {
            "session_id": request.session_id,
            "execution_id": request.execution_id,
            "provider": cfg.provider,
            "model": cfg.model,
            "backend": "langchain",
        }
        if any(cfg.native_tools.values()):
            log.warning(
                "native tools are only supported by the google-native backend; ignored",
                extra=fields,
            )
        if not cfg.provider:
            raise LLMServiceError(
                ErrorCode.INVALID_REQUEST, "llm_config.provider is empty", retryable=False
            )
        execution_id = request.execution_id
        if request.clear_cache and execution_id:
            self.signatures.clear(execution_id)
        mapper = ToolNameMapper(tool.name for tool in request.tools)
        if cfg.provider.lower() == "openai":
            client = self.openai_client_for(cfg)
            body = openai_chat.request_body(request, mapper, self.openai_tools_for(request))

            def direct() -> AsyncIterator[pb.GenerateResponse]:
                return openai_chat.stream_chat(client, body, mapper)

            async for chunk in stream_with_retries(
                direct, policy=self._policy, sleep=self._sleep, log_fields=fields
            ):
                yield chunk
            return
        gemini = cfg.provider.lower() in GOOGLE_PROVIDERS | VERTEX_PROVIDERS
        lookup = (
            (lambda call_id: self.signatures.get(execution_id, call_key(call_id)))
            if gemini
            else None
        )
        messages = to_langchain_messages(request.messages, mapper, lookup)
        runnable = self.bound_model_for(cfg, request)

        def attempt() -> AsyncIterator[pb.GenerateResponse]:
            return self._stream(runnable, messages, mapper, execution_id if gemini else "")

        async for chunk in stream_with_retries(
            attempt, policy=self._policy, sleep=self._sleep, log_fields=fields
        ):
            yield chunk

    async def _stream(
        self,
        runnable: Any,
        messages: list[BaseMessage],
        mapper: ToolNameMapper,
        signature_execution_id: str,
    ) -> AsyncIterator[pb.GenerateResponse]:
        from langchain_core.messages import AIMessageChunk  # noqa: PLC0415

        full: AIMessageChunk | None = None
        async for chunk in runnable.astream(messages):
            if not isinstance(chunk, AIMessageChunk):
                continue
            full = chunk if full is None else full + chunk
            for kind, value in _content_pieces(chunk):
                yield chunks.text(value) if kind == "text" else chunks.thinking(value)
        if full is None:
            return
        if signature_execution_id:
            self.signatures.put(signature_execution_id, _signatures_of(full))
        # Arguments arrive in fragments; complete calls are only known at the end.
        # The merged fragments are forwarded verbatim: LangChain's own parse of
        # them is lenient (truncated JSON becomes a partial object), and the
        # orchestrator must see what the model really produced.
        for call_id, name, arguments in _tool_calls(full):
            yield chunks.tool_call(call_id or new_call_id(), mapper.to_canonical(name), arguments)
        usage = full.usage_metadata
        if usage:
            yield _usage_chunk(usage)
