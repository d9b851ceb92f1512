"""GoogleNativeProvider: Gemini through the google-genai SDK (backend ``google-native``).

Used for native thinking: streamed thought parts, thought signatures carried across
turns, per-model thinking configuration, Gemini native tools (google_search,
code_execution, url_context) with their code execution and grounding output.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from google import genai
from google.genai import types

from .. import chunks
from ..errors import ErrorCode, LLMServiceError
from ..proto import llm_service_pb2 as pb
from ..retry import RetryPolicy, Sleep, call_with_retries, stream_with_retries
from . import embeddings
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
from .gemini_schema import to_gemini_schema
from .google_common import (
    GOOGLE_PROVIDERS,
    VERTEX_PROVIDERS,
    load_google_credentials,
)
from .thought_signatures import ThoughtSignatureCache, call_key, text_key

log = logging.getLogger(__name__)

# Environment variables whose keys are turned into cached clients at startup.
PREWARM_KEY_ENVS = ("GOOGLE_API_KEY", "GEMINI_API_KEY")

_NATIVE_TOOLS = {
    "google_search": lambda: types.Tool(google_search=types.GoogleSearch()),
    "code_execution": lambda: types.Tool(code_execution=types.ToolCodeExecution()),
    "url_context": lambda: types.Tool(url_context=types.UrlContext()),
}


def thinking_config_for(model: str) -> types.ThinkingConfig:
    """Thinking configuration by model name: thoughts always included; Gemini 3 at level HIGH,
    2.5 Pro with a 32,768-token budget, other models 24,576."""
    name = model.lower().removeprefix("models/")
    if name.startswith("gemini-3"):
        return types.ThinkingConfig(include_thoughts=True, thinking_level=types.ThinkingLevel.HIGH)
    if "2.5-pro" in name:
        return types.ThinkingConfig(include_thoughts=True, thinking_budget=32768)
    return types.ThinkingConfig(include_thoughts=True, thinking_budget=24576)


@dataclass(frozen=True)
class _ClientKey:
    provider: str
    api_key_env: str
    credentials_env: str
    base_url: str
    project: str
    location: str


class GoogleNativeProvider(LLMProvider):
    """Gemini via google-genai, with thought signatures cached per execution."""

    def __init__(
        self,
        *,
        retry_policy: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        signatures: ThoughtSignatureCache | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._policy = retry_policy or RetryPolicy()
        self._sleep = sleep
        self.signatures = signatures if signatures is not None else ThoughtSignatureCache()
        self._environ = environ
        self._clients: dict[_ClientKey, genai.Client] = {}

    @property
    def _env(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    # -- clients ---------------------------------------------------------------

    def prewarm(self, environ: Mapping[str, str], providers: frozenset[str] = ALL) -> None:
        for env_name in PREWARM_KEY_ENVS:
            if environ.get(env_name):
                cfg = pb.LLMConfig(provider="google", api_key_env=env_name)
                try:
                    self.client_for(cfg)
                except LLMServiceError as exc:
                    log.warning(
                        "could not create a Gemini client at startup",
                        extra={"api_key_env": env_name, "code": str(exc.code)},
                    )

    def client_for(self, cfg: pb.LLMConfig) -> genai.Client:
        """The cached SDK client for this configuration (created on first use)."""
        provider = (cfg.provider or "google").lower()
        key = _ClientKey(
            provider, cfg.api_key_env, cfg.credentials_env, cfg.base_url, cfg.project, cfg.location
        )
        client = self._clients.get(key)
        if client is None:
            client = self._build_client(provider, cfg)
            self._clients[key] = client
        return client

    def _build_client(self, provider: str, cfg: pb.LLMConfig) -> genai.Client:
        http_options = types.HttpOptions(base_url=cfg.base_url) if cfg.base_url else None
        if provider in GOOGLE_PROVIDERS:
            api_key = read_api_key(cfg.api_key_env, self._env)
            return genai.Client(api_key=api_key, http_options=http_options)
        if provider in VERTEX_PROVIDERS:
            if cfg.credentials_env:
                credentials, project = load_google_credentials(cfg.credentials_env, self._env)
                return genai.Client(
                    vertexai=True,
                    credentials=credentials,
                    project=cfg.project or project,
                    location=cfg.location or "global",
                    http_options=http_options,
                )
            if cfg.api_key_env:
                # Vertex AI express mode: an API key instead of a service account.
                api_key = read_api_key(cfg.api_key_env, self._env)
                return genai.Client(vertexai=True, api_key=api_key, http_options=http_options)
            try:  # Application default credentials (workload identity, metadata server).
                return genai.Client(
                    vertexai=True,
                    project=cfg.project or None,
                    location=cfg.location or "global",
                    http_options=http_options,
                )
            except Exception as exc:
                raise LLMServiceError(
                    ErrorCode.CREDENTIALS,
                    f"no Vertex AI credentials: set credentials_env or api_key_env ({exc})",
                    retryable=False,
                ) from exc
        raise LLMServiceError(
            ErrorCode.INVALID_REQUEST,
            f"backend google-native serves providers google and vertexai, not {cfg.provider!r}",
            retryable=False,
        )

    # -- request conversion ------------------------------------------------------

    def to_gemini_contents(
        self, request: pb.GenerateRequest, mapper: ToolNameMapper
    ) -> tuple[str, list[types.Content]]:
        """Proto messages → (system instruction, Gemini contents)."""
        system: list[str] = []
        contents: list[types.Content] = []
        call_names = tool_names_by_call_id(request.messages)
        for index, message in enumerate(request.messages):
            if message.role == "system":
                if message.content:
                    system.append(message.content)
            elif message.role == "user":
                contents.append(
                    types.Content(role="user", parts=[types.Part(text=message.content)])
                )
            elif message.role == "assistant":
                parts = self._assistant_parts(request.execution_id, message, index, mapper)
                if parts:
                    contents.append(types.Content(role="model", parts=parts))
            else:  # tool
                name = message.tool_name or call_names.get(message.tool_call_id, "")
                if not name:
                    raise LLMServiceError(
                        ErrorCode.INVALID_REQUEST,
                        f"messages[{index}]: tool result without tool_name or a known tool_call_id",
                        retryable=False,
                    )
                part = types.Part(
                    function_response=types.FunctionResponse(
                        name=mapper.to_provider(name), response={"result": message.content}
                    )
                )
                previous = contents[-1] if contents else None
                # Results of parallel calls go back together, in one user turn.
                if (
                    previous is not None
                    and previous.role == "user"
                    and previous.parts
                    and all(p.function_response is not None for p in previous.parts)
                ):
                    previous.parts.append(part)
                else:
                    contents.append(types.Content(role="user", parts=[part]))
        if not contents:
            raise LLMServiceError(
                ErrorCode.INVALID_REQUEST,
                "no user, assistant or tool messages to send",
                retryable=False,
            )
        return "\n\n".join(system), contents

    def _assistant_parts(
        self,
        execution_id: str,
        message: pb.ConversationMessage,
        index: int,
        mapper: ToolNameMapper,
    ) -> list[types.Part]:
        parts: list[types.Part] = []
        text_signature = self.signatures.get(execution_id, text_key(message.content))
        if message.content:
            parts.append(types.Part(text=message.content, thought_signature=text_signature))
            text_signature = None
        for call in message.tool_calls:
            args = parse_arguments(call.arguments, where=f"messages[{index}] call {call.id!r}")
            parts.append(
                types.Part(
                    function_call=types.FunctionCall(name=mapper.to_provider(call.name), args=args),
                    thought_signature=self.signatures.get(execution_id, call_key(call.id)),
                )
            )
        # A signature that arrived on a thought part of a turn without text belongs
        # on the first part of that turn.
        if text_signature is not None and parts and all(p.thought_signature is None for p in parts):
            parts[0].thought_signature = text_signature
        return parts

    def gemini_tools(
        self, request: pb.GenerateRequest, log_fields: dict[str, Any]
    ) -> list[types.Tool]:
        """MCP tools as function declarations, or the configured native tools (Q6)."""
        cfg = request.llm_config
        enabled_native = [name for name, on in cfg.native_tools.items() if on]
        if request.tools:
            if enabled_native:
                log.warning(
                    "native tools suppressed: Gemini cannot combine them with function calling",
                    extra={**log_fields, "native_tools": sorted(enabled_native)},
                )
            declarations = [
                types.FunctionDeclaration(
                    name=ToolNameMapper.to_provider(tool.name),
                    description=tool.description,
                    parameters=to_gemini_schema(parse_schema(tool)),
                )
                for tool in request.tools
            ]
            return [types.Tool(function_declarations=declarations)]
        tools = []
        for name in sorted(enabled_native):
            factory = _NATIVE_TOOLS.get(name)
            if factory is None:
                log.warning(
                    "unknown native tool ignored", extra={**log_fields, "native_tool": name}
                )
                continue
            tools.append(factory())
        return tools

    # -- embeddings ------------------------------------------------------------

    async def embed(self, cfg: pb.LLMConfig, texts: list[str]) -> list[list[float]]:
        """Provider ``google`` (Gemini API): ``batchEmbedContents`` through the
        same cached client as ``Generate``, 429s retried as there."""
        if cfg.provider.strip().lower() not in GOOGLE_PROVIDERS:
            return await super().embed(cfg, texts)
        embeddings.validate(cfg)
        client = self.client_for(cfg)
        fields = {"provider": cfg.provider, "model": cfg.model, "backend": "google-native"}

        async def attempt(part: list[str]) -> list[list[float] | None]:
            # One content per text: a list of bare strings may be merged into
            # one content (one vector) by the SDK for some models.
            contents = [types.Content(parts=[types.Part(text=text)]) for text in part]
            response = await client.aio.models.embed_content(model=cfg.model, contents=contents)
            return [e.values for e in response.embeddings or []]

        async def batch(part: list[str]) -> list[list[float] | None]:
            return await call_with_retries(
                lambda: attempt(part), policy=self._policy, sleep=self._sleep, log_fields=fields
            )

        return await embeddings.in_batches(texts, batch)

    # -- generation ------------------------------------------------------------

    async def generate(self, request: pb.GenerateRequest) -> AsyncIterator[pb.GenerateResponse]:
        validate_request(request)
        cfg = request.llm_config
        fields = {
            "session_id": request.session_id,
            "execution_id": request.execution_id,
            "provider": cfg.provider,
            "model": cfg.model,
            "backend": "google-native",
        }
        if request.clear_cache and request.execution_id:
            self.signatures.clear(request.execution_id)
        mapper = ToolNameMapper(tool.name for tool in request.tools)
        system, contents = self.to_gemini_contents(request, mapper)
        config = types.GenerateContentConfig(
            system_instruction=system or None,
            tools=self.gemini_tools(request, fields) or None,
            thinking_config=thinking_config_for(cfg.model),
            max_output_tokens=cfg.max_output_tokens or None,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        client = self.client_for(cfg)

        def attempt() -> AsyncIterator[pb.GenerateResponse]:
            return self._stream(client, request, contents, config, mapper)

        async for chunk in stream_with_retries(
            attempt, policy=self._policy, sleep=self._sleep, log_fields=fields
        ):
            yield chunk

    async def _stream(
        self,
        client: genai.Client,
        request: pb.GenerateRequest,
        contents: list[types.Content],
        config: types.GenerateContentConfig,
        mapper: ToolNameMapper,
    ) -> AsyncIterator[pb.GenerateResponse]:
        signatures: dict[str, bytes] = {}
        text_parts: list[str] = []
        text_signature: bytes | None = None
        grounding_metadata: types.GroundingMetadata | None = None
        url_metadata: types.UrlContextMetadata | None = None
        usage: types.GenerateContentResponseUsageMetadata | None = None

        stream = await client.aio.models.generate_content_stream(
            model=request.llm_config.model, contents=contents, config=config
        )
        async for response in stream:
            if response.usage_metadata is not None:
                usage = response.usage_metadata
            candidate = response.candidates[0] if response.candidates else None
            if candidate is None:
                continue
            if candidate.grounding_metadata is not None:
                grounding_metadata = candidate.grounding_metadata
            if candidate.url_context_metadata is not None:
                url_metadata = candidate.url_context_metadata
            parts = candidate.content.parts if candidate.content and candidate.content.parts else []
            for part in parts:
                signature = part.thought_signature
                if part.function_call is not None:
                    call = part.function_call
                    call_id = call.id or new_call_id()
                    if signature:
                        signatures[call_key(call_id)] = signature
                    yield chunks.tool_call(
                        call_id,
                        mapper.to_canonical(call.name or ""),
                        json.dumps(call.args or {}, ensure_ascii=False),
                    )
                    continue
                if signature and text_signature is None:
                    text_signature = signature
                if part.executable_code is not None:
                    yield chunks.code_execution(code=part.executable_code.code or "")
                elif part.code_execution_result is not None:
                    yield chunks.code_execution(result=part.code_execution_result.output or "")
                elif part.text:
                    if part.thought:
                        yield chunks.thinking(part.text)
                    else:
                        text_parts.append(part.text)
                        yield chunks.text(part.text)

        if text_signature is not None:
            signatures[text_key("".join(text_parts))] = text_signature
        self.signatures.put(request.execution_id, signatures)
        delta = grounding_delta(grounding_metadata, url_metadata)
        if delta is not None:
            yield chunks.grounding(delta)
        if usage is not None:
            # Gemini's prompt count includes the cached content; its candidates
            # count excludes the thoughts. Prompt tokens of server-side tool use
            # (search, URL context) are input too, as the LangChain path counts them.
            yield chunks.usage(
                input_tokens=(usage.prompt_token_count or 0)
                + (usage.tool_use_prompt_token_count or 0),
                output_tokens=usage.candidates_token_count or 0,
                total_tokens=usage.total_token_count or 0,
                thinking_tokens=usage.thoughts_token_count or 0,
                cached_input_tokens=usage.cached_content_token_count or 0,
            )


def grounding_delta(
    metadata: types.GroundingMetadata | None, url_context: types.UrlContextMetadata | None
) -> pb.GroundingDelta | None:
    """Gemini grounding and URL-context metadata → ``GroundingDelta`` (None when empty)."""
    delta = pb.GroundingDelta()
    if metadata is not None:
        delta.web_search_queries.extend(metadata.web_search_queries or [])
        for chunk in metadata.grounding_chunks or []:
            source = chunk.web or chunk.retrieved_context
            if source is not None:
                delta.grounding_chunks.add(uri=source.uri or "", title=source.title or "")
        for support in metadata.grounding_supports or []:
            segment = support.segment or types.Segment()
            delta.grounding_supports.add(
                start_index=segment.start_index or 0,
                end_index=segment.end_index or 0,
                text=segment.text or "",
                grounding_chunk_indices=support.grounding_chunk_indices or [],
            )
    if url_context is not None:
        for item in url_context.url_metadata or []:
            status = item.url_retrieval_status
            delta.url_context.add(
                url=item.retrieved_url or "",
                status=str(getattr(status, "value", status or "")),
            )
    if not (
        delta.web_search_queries
        or delta.grounding_chunks
        or delta.grounding_supports
        or delta.url_context
    ):
        return None
    return delta
