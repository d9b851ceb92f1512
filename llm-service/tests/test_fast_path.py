"""What keeps a call cheap: provider preloading, lazy SDKs, the lean OpenAI path
(tool-call fragments merged like LangChain merged them) and sockets that never
wait on delayed ACKs."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import collect, kinds, make_request
from fakes import openai_chunk, openai_done, openai_usage, sse_reply

from tarsy_llm.providers import sockets
from tarsy_llm.providers.base import ALL
from tarsy_llm.providers.langchain_provider import LangChainProvider
from tarsy_llm.providers.registry import (
    GOOGLE_NATIVE,
    PreloadError,
    ProviderRegistry,
    default_registry,
    parse_preload,
)

ENV = {"TARSY_TEST_API_KEY": "sk-test-4f9d0c2b7a1e6f3d8c5b"}


def test_preload_lists() -> None:
    assert parse_preload("") == ALL == parse_preload("all") == parse_preload(" ALL ")
    assert parse_preload("none") == frozenset()
    assert parse_preload("openai, anthropic") == {"openai", "anthropic"}
    with pytest.raises(PreloadError, match="mistral"):
        parse_preload("openai,mistral")


def test_google_native_loads_only_when_wanted() -> None:
    registry = default_registry()
    registry.prewarm({}, frozenset({"openai"}))
    # Not created by a prewarm that does not preload Google...
    assert "google-native" in registry.backends()
    created: list[str] = []

    class Probe(LangChainProvider):
        def prewarm(self, environ, providers=ALL) -> None:
            created.append("prewarmed")

    lazy = ProviderRegistry()
    lazy.register_lazy(GOOGLE_NATIVE, lambda: (created.append("created"), Probe())[1], {"google"})
    lazy.prewarm({}, frozenset({"openai"}))
    assert created == []
    lazy.prewarm({}, frozenset({"google"}))
    assert created == ["created", "prewarmed"]
    assert isinstance(lazy.get(GOOGLE_NATIVE), Probe)


def test_a_service_preloading_openai_imports_neither_langchain_nor_google() -> None:
    code = (
        "import os, sys\n"
        "from tarsy_llm.providers.registry import default_registry\n"
        "default_registry().prewarm(os.environ, frozenset({'openai'}))\n"
        "wanted = ('openai', 'anyio._backends._asyncio', 'langchain_core', 'google.genai',\n"
        "          'langchain_google_genai')\n"
        "print(' '.join(m for m in wanted if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    # What the first call would import is imported; LangChain and Google are not.
    assert out == ["openai", "anyio._backends._asyncio"]


async def test_tool_call_fragments_merge_by_index(fake) -> None:
    def call(index: int, **fields) -> dict:
        function = {k: v for k, v in fields.items() if k in ("name", "arguments")}
        out = {"index": index, "function": function}
        if "id" in fields:
            out["id"] = fields["id"]
        return out

    fake.add(
        sse_reply(
            [
                openai_chunk(
                    role="assistant",
                    tool_calls=[
                        call(0, id="call_a", name="k8s__pods", arguments=""),
                        call(1, id="call_b", name="k8s__", arguments="{"),
                    ],
                ),
                openai_chunk(tool_calls=[call(1, name="events", arguments="}")]),
                # A repeated id is kept once, as LangChain kept it.
                openai_chunk(tool_calls=[call(0, id="call_a", arguments='{"a"')]),
                openai_chunk(tool_calls=[call(0, arguments=": 1}")]),
                openai_chunk(finish="tool_calls"),
                openai_chunk(usage=openai_usage(10, 5, reasoning=2, cached=6)),
                openai_chunk(usage=openai_usage(1, 1, cached=1)),
                openai_done(),
            ]
        )
    )
    request = make_request("openai", f"{fake.url}/v1")
    chunks = await collect(LangChainProvider(environ=ENV).generate(request))
    assert kinds(chunks) == ["tool_call", "tool_call", "usage"]
    calls = [(c.tool_call.call_id, c.tool_call.name, c.tool_call.arguments) for c in chunks[:2]]
    assert calls == [("call_a", "k8s.pods", '{"a": 1}'), ("call_b", "k8s.events", "{}")]
    usage = chunks[2].usage
    # completion_tokens include the reasoning tokens: the answer is the rest.
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (11, 4, 17)
    assert (usage.thinking_tokens, usage.cached_input_tokens) == (2, 7)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # (input, output, total, thinking, cached)
        (openai_usage(100, 40, reasoning=30, cached=64), (100, 10, 140, 30, 64)),
        (openai_usage(100, 40), (100, 40, 140, 0, 0)),
        # A server that counts reasoning apart from completion: never negative.
        (openai_usage(100, 5, reasoning=30), (100, 0, 105, 30, 0)),
        # Details present but null, as some compatible servers send them.
        (
            {
                "prompt_tokens": 9,
                "completion_tokens": 3,
                "total_tokens": 12,
                "prompt_tokens_details": None,
                "completion_tokens_details": {"reasoning_tokens": None},
            },
            (9, 3, 12, 0, 0),
        ),
    ],
)
async def test_usage_follows_the_common_convention(fake, usage, expected) -> None:
    fake.add(sse_reply([openai_chunk(content="ok"), openai_chunk(usage=usage), openai_done()]))
    request = make_request("openai", f"{fake.url}/v1")
    chunks = await collect(LangChainProvider(environ=ENV).generate(request))
    got = chunks[-1].usage
    assert (
        got.input_tokens,
        got.output_tokens,
        got.total_tokens,
        got.thinking_tokens,
        got.cached_input_tokens,
    ) == expected


def test_sockets_fall_back_to_defaults_behind_a_proxy(monkeypatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert sockets.proxy_configured()
    assert sockets.async_transport() is None
    monkeypatch.delenv("HTTPS_PROXY")
    for name in ("HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert sockets.async_transport() is not None


async def _nagle_server(
    events: list[bytes], ssl_context: ssl.SSLContext | None = None
) -> tuple[asyncio.Server, int]:
    """A keep-alive HTTP/1.1 server that leaves Nagle on and writes each event
    on its own, like a streaming provider."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                for event in events:
                    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                    await writer.drain()
                    await asyncio.sleep(0)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_context)
    return server, server.sockets[0].getsockname()[1]


async def test_provider_sockets_set_nodelay_and_acknowledge_at_once(monkeypatch) -> None:
    """The service's own sockets: TCP_NODELAY, and TCP_QUICKACK re-armed after
    every write and read (the bench shows the effect: no 40 ms stall per call
    against a server that leaves Nagle on)."""
    events = [
        openai_chunk(role="assistant", content=""),
        openai_chunk(content="one "),
        openai_chunk(content="two"),
        openai_chunk(finish="stop"),
        openai_chunk(usage=openai_usage(3, 2)),
        openai_done(),
    ]
    server, port = await _nagle_server(events)
    seen: list[socket.socket] = []
    original = sockets.quickack

    def recording(sock: socket.socket | None) -> None:
        assert sock is not None
        seen.append(sock)
        original(sock)

    monkeypatch.setattr(sockets, "quickack", recording)
    provider = LangChainProvider(environ=ENV)
    request = make_request("openai", f"http://127.0.0.1:{port}/v1")
    try:
        for _ in range(2):
            chunks = await collect(provider.generate(request))
            assert kinds(chunks) == ["text", "text", "usage"]
    finally:
        server.close()
    # One kept-alive connection, re-armed on every write and read.
    assert len({id(s) for s in seen}) == 1
    assert len(seen) >= 4
    assert seen[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tarsy-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


async def test_https_providers_are_verified_and_acknowledged_at_once(
    monkeypatch, tmp_path: Path
) -> None:
    """TLS goes through the same sockets (TCP_QUICKACK re-armed) and verifies
    the server against the shared context's trust store."""
    from tarsy_llm.errors import ErrorCode, LLMServiceError

    cert, key = _self_signed(tmp_path)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    events = [openai_chunk(content="secure"), openai_chunk(finish="stop"), openai_done()]
    server, port = await _nagle_server(events, server_context)
    seen: list[socket.socket] = []
    original = sockets.quickack

    def recording(sock: socket.socket | None) -> None:
        seen.append(sock)
        original(sock)

    monkeypatch.setattr(sockets, "quickack", recording)
    request = make_request("openai", f"https://127.0.0.1:{port}/v1")
    try:
        sockets.default_ssl_context.cache_clear()
        with pytest.raises(LLMServiceError) as info:
            await collect(LangChainProvider(environ=ENV).generate(request))
        assert info.value.code is ErrorCode.PROVIDER_ERROR
        causes, err = [], info.value
        while err is not None:
            causes.append(repr(err))
            err = err.__cause__ or err.__context__
        assert "certificate" in " ".join(causes).lower()
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        sockets.default_ssl_context.cache_clear()
        seen.clear()
        chunks = await collect(LangChainProvider(environ=ENV).generate(request))
        assert kinds(chunks) == ["text"]
    finally:
        server.close()
        sockets.default_ssl_context.cache_clear()
    assert len(seen) >= 3 and len({id(s) for s in seen}) == 1


def test_history_arguments_are_reencoded_once_and_still_validated() -> None:
    from conftest import call, msg

    from tarsy_llm.errors import LLMServiceError
    from tarsy_llm.proto import llm_service_pb2 as pb
    from tarsy_llm.providers import openai_chat
    from tarsy_llm.providers.base import ToolNameMapper

    args = {"x": "ü", "n": 1}
    history = [
        msg("assistant", tool_calls=[call("c1", "k8s.pods", args)]),
        msg("tool", "result", tool_call_id="c1"),
    ]
    for _ in range(2):
        out = openai_chat.to_openai_messages(history, ToolNameMapper())
        function = out[0]["tool_calls"][0]["function"]
        assert function == {
            "name": "k8s__pods",
            "arguments": json.dumps(args, ensure_ascii=False),
        }
        assert out[0]["content"] is None
    bad = [
        pb.ConversationMessage(
            role="assistant", tool_calls=[pb.ToolCall(id="c2", name="k8s.pods", arguments="[1]")]
        )
    ]
    for _ in range(2):
        with pytest.raises(LLMServiceError, match="must be a JSON object"):
            openai_chat.to_openai_messages(bad, ToolNameMapper())


def _transport_ssl_context(client) -> object:
    """The TLS context of an SDK client's (aiohttp) transport."""
    return client._client._transport.ssl_context


def test_openai_clients_share_one_tls_context_made_at_start_up() -> None:
    from tarsy_llm.proto import llm_service_pb2 as pb
    from tarsy_llm.providers import openai_chat

    default_registry().prewarm({}, frozenset({"openai"}))
    assert sockets.default_ssl_context.cache_info().currsize == 1
    shared = sockets.default_ssl_context()
    for url in ("https://llm.invalid/v1", "https://other.invalid/v1"):
        client = openai_chat.build_client(
            pb.LLMConfig(provider="openai", model="m", base_url=url), {}
        )
        assert _transport_ssl_context(client) is shared


async def test_the_body_is_what_the_sdk_would_encode(fake) -> None:
    """The body encoded here (orjson for the conversation, tools once per tool
    set) is byte for byte the SDK's own encoding of the same request, and is
    sent as the SDK sends a JSON body."""
    from conftest import API_KEY, call, msg, tool_def
    from openai._utils._json import openapi_dumps

    from tarsy_llm.providers import openai_chat
    from tarsy_llm.providers.base import ToolNameMapper

    schema = {
        "type": "object",
        "properties": {"ratio": {"type": "number", "minimum": 1e-05, "default": 0.5}},
    }
    request = make_request(
        "openai",
        f"{fake.url}/v1",
        messages=[
            msg("system", 'You are TARSy. \u2028 \x00\x1f "quoted" \\ </script> 😀'),
            msg("user", "Why is pod ä failing?\n\ttab"),
            msg(
                "assistant",
                "",
                tool_calls=[call("call_1", "kubernetes-server.pods_list", {"namespace": "prod ü"})],
            ),
            msg("tool", "pod x: CrashLoopBackOff", tool_call_id="call_1"),
            msg("assistant", "Checking é."),
        ],
        tools=[tool_def(), tool_def("kubernetes-server.events_list", schema)],
        max_output_tokens=1234,
    )
    mapper = ToolNameMapper(tool.name for tool in request.tools)
    tools = openai_chat.ToolSet(request.tools)
    body = openai_chat.request_body(request, mapper, tools)
    plain = {**body, "tools": tools.definitions}
    assert openai_chat.encode_body(body) == openapi_dumps(plain)
    fake.add(sse_reply([openai_chunk(content="ok"), openai_chunk(finish="stop"), openai_done()]))
    chunks = await collect(LangChainProvider(environ=ENV).generate(request))
    assert kinds(chunks) == ["text"]
    (sent,) = fake.post_requests("/chat/completions")
    assert sent.path == "/v1/chat/completions"
    assert sent.body == openapi_dumps(plain)
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"


async def test_an_error_event_in_the_stream_fails_the_call(fake) -> None:
    from conftest import texts

    from tarsy_llm.errors import LLMServiceError

    fake.add(
        sse_reply(
            [
                openai_chunk(content="partial"),
                b'data: {"error": {"message": "model overloaded", "type": "server_error"}}\n\n',
            ]
        )
    )
    received = []
    with pytest.raises(LLMServiceError, match="model overloaded"):
        async for chunk in LangChainProvider(environ=ENV).generate(
            make_request("openai", f"{fake.url}/v1")
        ):
            received.append(chunk)
    assert texts(received) == "partial"
