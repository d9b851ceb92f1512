"""Shared fixtures: the fake provider endpoint, request builders, chunk helpers."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakes import FakeProviderServer

from tarsy_llm.logs import setup_logging
from tarsy_llm.proto import llm_service_pb2 as pb

# Shaped like an OpenAI key on purpose: redaction must catch it by value and shape.
API_KEY = "sk-test-4f9d0c2b7a1e6f3d8c5b"
KEY_ENV = "TARSY_TEST_API_KEY"
ENV = {KEY_ENV: API_KEY}

TOOL_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "namespace": {"type": "string", "description": "Kubernetes namespace"},
        "limit": {"type": ["integer", "null"], "default": 10},
    },
    "required": ["namespace"],
    "additionalProperties": False,
}


@pytest.fixture
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server


@pytest.fixture(autouse=True)
async def _close_openai_clients(monkeypatch) -> AsyncIterator[None]:
    """Closes the openai clients a test made (their aiohttp sessions would be
    reported unclosed at exit)."""
    from tarsy_llm.providers import openai_chat

    made: list[Any] = []
    build = openai_chat.build_client

    def recording(*args: Any, **kwargs: Any) -> Any:
        client = build(*args, **kwargs)
        made.append(client)
        return client

    monkeypatch.setattr(openai_chat, "build_client", recording)
    yield
    for client in made:
        await client.close()


class RecordingSleep:
    """A sleep stand-in that records the requested delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """Captures the service's JSON log lines."""
    stream = io.StringIO()
    setup_logging("INFO", stream=stream)
    yield stream
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_tarsy_handler", False):
            root.removeHandler(handler)


def log_records(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def tool_def(name: str = "kubernetes-server.pods_list", schema: Any = None) -> pb.ToolDefinition:
    return pb.ToolDefinition(
        name=name,
        description=f"the {name} tool",
        parameters_schema=json.dumps(TOOL_SCHEMA if schema is None else schema),
    )


def msg(role: str, content: str = "", **kwargs: Any) -> pb.ConversationMessage:
    return pb.ConversationMessage(role=role, content=content, **kwargs)


def call(call_id: str, name: str, args: dict[str, Any]) -> pb.ToolCall:
    return pb.ToolCall(id=call_id, name=name, arguments=json.dumps(args))


def make_request(
    provider: str,
    base_url: str,
    *,
    backend: str = "",
    messages: list[pb.ConversationMessage] | None = None,
    tools: list[pb.ToolDefinition] | None = None,
    execution_id: str = "exec-1",
    clear_cache: bool = False,
    model: str = "test-model",
    **cfg: Any,
) -> pb.GenerateRequest:
    cfg.setdefault("api_key_env", KEY_ENV)
    return pb.GenerateRequest(
        session_id="session-1",
        execution_id=execution_id,
        clear_cache=clear_cache,
        messages=messages
        or [msg("system", "You are TARSy."), msg("user", "Why is pod x failing?")],
        tools=tools or [],
        llm_config=pb.LLMConfig(
            provider=provider, model=model, base_url=base_url, backend=backend, **cfg
        ),
    )


async def collect(stream: AsyncIterator[pb.GenerateResponse]) -> list[pb.GenerateResponse]:
    return [chunk async for chunk in stream]


def kinds(chunks: list[pb.GenerateResponse]) -> list[str]:
    return [chunk.WhichOneof("content") or "final" for chunk in chunks]


def texts(chunks: list[pb.GenerateResponse], kind: str = "text") -> str:
    return "".join(getattr(c, kind).content for c in chunks if c.WhichOneof("content") == kind)


def service_account_info(token_uri: str) -> dict:
    """A service-account key file whose token endpoint is the fake server."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return {
        "type": "service_account",
        "project_id": "proj-from-file",
        "private_key_id": "kid",
        "private_key": pem,
        "client_email": "tarsy@proj-from-file.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }
