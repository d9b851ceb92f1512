"""The provider interface and helpers every provider shares."""

from __future__ import annotations

import json
import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from ..errors import ErrorCode, LLMServiceError
from ..logs import register_secret
from ..proto import llm_service_pb2 as pb

ROLES = frozenset({"system", "user", "assistant", "tool"})
# Provider types (``llm_config.provider``) whose libraries can be preloaded.
PROVIDER_TYPES = ("openai", "anthropic", "xai", "google", "vertexai")
ALL = frozenset(PROVIDER_TYPES)


class LLMProvider(ABC):
    """A backend that turns one ``GenerateRequest`` into a streamed provider call."""

    @abstractmethod
    def generate(self, request: pb.GenerateRequest) -> AsyncIterator[pb.GenerateResponse]:
        """Streams content chunks (text, thinking, tool calls, ...) and then usage.

        Implementations do not emit the final chunk and do not emit error chunks:
        they raise :class:`LLMServiceError`, which the servicer turns into the
        terminal ``ErrorInfo`` chunk.
        """

    async def embed(self, cfg: pb.LLMConfig, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order, all of one length (``Embed``).

        ``texts`` is not empty. Failures raise :class:`LLMServiceError`; a
        backend without embeddings rejects the call.
        """
        raise LLMServiceError(
            ErrorCode.INVALID_REQUEST,
            f"this backend does not embed texts of provider type {cfg.provider!r}",
            retryable=False,
        )

    def prewarm(  # noqa: B027 - optional hook
        self, environ: Mapping[str, str], providers: frozenset[str] = ALL
    ) -> None:
        """Imports the libraries of ``providers`` and creates the SDK clients that
        can be built from the environment, at start-up: first calls are then as
        fast as the next ones."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Closes the provider's clients and their connections (at shutdown)."""


class ToolNameMapper:
    """Converts canonical ``server.tool`` names to provider-safe names and back (Q7).

    Gemini, OpenAI and Anthropic all reject dots in function names, so every
    provider sends ``server__tool``. The reverse mapping is exact for the tools
    of the request; names the request did not define fall back to replacing the
    first ``__`` with a dot.
    """

    SEPARATOR = "__"

    def __init__(self, canonical_names: Iterable[str] = ()) -> None:
        self._to_canonical: dict[str, str] = {}
        for name in canonical_names:
            self._to_canonical[self.to_provider(name)] = name

    @classmethod
    def to_provider(cls, canonical: str) -> str:
        """``server.tool`` → ``server__tool``."""
        return canonical.replace(".", cls.SEPARATOR)

    def to_canonical(self, provider_name: str) -> str:
        """``server__tool`` → ``server.tool``."""
        known = self._to_canonical.get(provider_name)
        if known is not None:
            return known
        if "." not in provider_name and self.SEPARATOR in provider_name:
            return provider_name.replace(self.SEPARATOR, ".", 1)
        return provider_name


def new_call_id() -> str:
    """An id for a tool call the provider returned without one."""
    return f"call_{uuid.uuid4().hex}"


def parse_arguments(arguments: str, *, where: str) -> dict[str, Any]:
    """Parses a tool call's JSON arguments (empty means no arguments)."""
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise LLMServiceError(
            ErrorCode.INVALID_REQUEST,
            f"{where}: tool call arguments are not valid JSON ({exc.msg})",
            retryable=False,
        ) from exc
    if not isinstance(value, dict):
        raise LLMServiceError(
            ErrorCode.INVALID_REQUEST,
            f"{where}: tool call arguments must be a JSON object",
            retryable=False,
        )
    return value


def parse_schema(tool: pb.ToolDefinition) -> dict[str, Any]:
    """Parses a tool's JSON Schema (empty means an object without parameters)."""
    if not tool.parameters_schema.strip():
        return {"type": "object", "properties": {}}
    try:
        value = json.loads(tool.parameters_schema)
    except json.JSONDecodeError as exc:
        raise LLMServiceError(
            ErrorCode.INVALID_REQUEST,
            f"tool {tool.name!r}: parameters_schema is not valid JSON ({exc.msg})",
            retryable=False,
        ) from exc
    if not isinstance(value, dict):
        raise LLMServiceError(
            ErrorCode.INVALID_REQUEST,
            f"tool {tool.name!r}: parameters_schema must be a JSON object",
            retryable=False,
        )
    return value


def tool_names_by_call_id(messages: Iterable[pb.ConversationMessage]) -> dict[str, str]:
    """Canonical tool names of the assistant tool calls in the history, by call id."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.tool_calls:
            if call.id:
                names[call.id] = call.name
    return names


def validate_request(request: pb.GenerateRequest) -> None:
    """Rejects requests no provider could serve."""
    cfg = request.llm_config
    if not cfg.model:
        raise LLMServiceError(
            ErrorCode.INVALID_REQUEST, "llm_config.model is empty", retryable=False
        )
    if not request.messages:
        raise LLMServiceError(ErrorCode.INVALID_REQUEST, "messages is empty", retryable=False)
    for index, message in enumerate(request.messages):
        if message.role not in ROLES:
            raise LLMServiceError(
                ErrorCode.INVALID_REQUEST,
                f"messages[{index}]: unknown role {message.role!r}",
                retryable=False,
            )
    seen: set[str] = set()
    for tool in request.tools:
        if not tool.name:
            raise LLMServiceError(
                ErrorCode.INVALID_REQUEST, "a tool definition has no name", retryable=False
            )
        if tool.name in seen:
            raise LLMServiceError(
                ErrorCode.INVALID_REQUEST, f"tool {tool.name!r} is defined twice", retryable=False
            )
        seen.add(tool.name)


def read_api_key(env_name: str, environ: Mapping[str, str] | None = None) -> str:
    """Reads the API key from the environment variable the request names.

    Raises a non-retryable ``credentials`` error when the variable is unset or empty.
    The value is registered for log redaction.
    """
    env = os.environ if environ is None else environ
    if not env_name:
        raise LLMServiceError(
            ErrorCode.CREDENTIALS, "llm_config.api_key_env is empty", retryable=False
        )
    value = env.get(env_name, "").strip()
    if not value:
        raise LLMServiceError(
            ErrorCode.CREDENTIALS,
            f"environment variable {env_name} (api_key_env) is not set",
            retryable=False,
        )
    register_secret(value)
    return value
