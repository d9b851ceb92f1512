"""The lean HTTP/1.1 path of provider ``openai`` (providers/http1.py) against the
SDK's own: the same bytes on the wire, the same events, the same exceptions,
and connections kept, dropped and encrypted as the SDK's would be."""

from __future__ import annotations

import asyncio
import datetime
import gzip
import json
import random
import ssl
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import openai
import pytest
from conftest import API_KEY, ENV, call, collect, kinds, make_request, msg, tool_def
from fakes import openai_chunk, openai_done, openai_usage
from openai._streaming import SSEDecoder

from tarsy_llm.errors import ErrorCode, LLMServiceError
from tarsy_llm.providers import http1, openai_chat
from tarsy_llm.providers.base import ToolNameMapper
from tarsy_llm.providers.langchain_provider import LangChainProvider

# -- a raw HTTP/1.1 server: what is written, and how, is up to each test ------

Reply = Callable[[int, bytes, bytes], Awaitable[list[bytes]] | list[bytes]]


@dataclass
class RawServer:
    """Answers each request with the pieces ``reply`` returns, each in its own
    write; records requests and counts connections."""

    reply: Reply
    close_after: bool = False
    requests: list[tuple[bytes, bytes]] = field(default_factory=list)
    connections: int = 0
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    server: asyncio.Server | None = None

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=ssl_context)
        return self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
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
                body = await reader.readexactly(length)
                self.requests.append((head, body))
                pieces = self.reply(len(self.requests), head, body)
                if not isinstance(pieces, list):
                    pieces = await pieces
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0)
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.disconnected.set()
            writer.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def chunked(events: list[bytes], status: str = "200 OK", headers: bytes = b"") -> list[bytes]:
    head = (
        b"HTTP/1.1 " + status.encode() + b"\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n" + headers + b"\r\n"
    )
    return [head, *(b"%x\r\n%s\r\n" % (len(e), e) for e in events), b"0\r\n\r\n"]


def with_length(status: str, body: bytes, headers: bytes = b"") -> list[bytes]:
    return [
        b"HTTP/1.1 "
        + status.encode()
        + b"\r\ncontent-length: %d\r\n" % len(body)
        + headers
        + b"\r\n"
        + body
    ]


def tool_stream() -> list[bytes]:
    return [
        openai_chunk(role="assistant", content=""),
        openai_chunk(content="Looking ü "),
        openai_chunk(
            tool_calls=[
                {
                    "index": 0,
                    "id": "call_7",
                    "type": "function",
                    "function": {"name": "kubernetes-server__pods_list", "arguments": ""},
                }
            ]
        ),
        openai_chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"namespace"'}}]),
        openai_chunk(tool_calls=[{"index": 0, "function": {"arguments": ': "prod"}'}}]),
        openai_chunk(finish="tool_calls"),
        openai_chunk(usage=openai_usage(30, 7, reasoning=3)),
        openai_done(),
    ]


def lean_and_sdk(port: int, **cfg) -> tuple[openai_chat.ChatClient, openai_chat.ChatClient]:
    request = make_request("openai", f"http://127.0.0.1:{port}/v1", **cfg)
    lean = openai_chat.build_client(request.llm_config, ENV)
    assert lean.endpoint is not None
    return lean, openai_chat.ChatClient(lean.sdk)


async def run(client: openai_chat.ChatClient, request=None, port: int = 0) -> list:
    request = request or make_request("openai", f"http://127.0.0.1:{port}/v1")
    mapper = ToolNameMapper(tool.name for tool in request.tools)
    tools = openai_chat.ToolSet(request.tools) if request.tools else None
    body = openai_chat.request_body(request, mapper, tools)
    return await collect(openai_chat.stream_chat(client, body, mapper))


# -- the request ----------------------------------------------------------------


async def test_the_request_is_byte_for_byte_the_sdks() -> None:
    server = RawServer(lambda n, head, body: chunked(tool_stream()))
    port = await server.start()
    schema = {
        "type": "object",
        "properties": {"ratio": {"type": "number", "minimum": 1e-05, "default": 0.5}},
    }
    request = make_request(
        "openai",
        f"http://127.0.0.1:{port}/v1",
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
    try:
        lean, sdk = lean_and_sdk(port)
        for client in (sdk, lean, lean):
            await run(client, request)
    finally:
        server.close()
    (sdk_head, sdk_body), (lean_head, lean_body), second = server.requests
    assert lean_head == sdk_head and lean_body == sdk_body and second == (lean_head, lean_body)
    assert f"Bearer {API_KEY}".encode() in lean_head
    assert json.loads(lean_body)["tools"][1]["function"]["parameters"]["properties"]["ratio"][
        "minimum"
    ] == pytest.approx(1e-05)


async def test_a_proxy_leaves_the_request_to_the_sdk(monkeypatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    client = openai_chat.build_client(
        make_request("openai", "http://127.0.0.1:1/v1").llm_config, ENV
    )
    assert client.endpoint is None


# -- the answer ------------------------------------------------------------------


def as_tuples(chunks: list) -> list[tuple]:
    out = []
    for c in chunks:
        kind = c.WhichOneof("content")
        out.append((kind, str(getattr(c, kind))))
    return out


@pytest.mark.parametrize("split", ["events", "bytes", "one"])
async def test_the_answer_is_the_sdks_however_it_is_cut(split: str) -> None:
    events = tool_stream()
    raw = b"".join(chunked(events))
    rng = random.Random(7)

    def reply(n: int, head: bytes, body: bytes) -> list[bytes]:
        if split == "events":
            return chunked(events)
        if split == "one":
            return [raw]
        cuts = sorted(rng.sample(range(1, len(raw)), 40))
        return [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]

    server = RawServer(reply)
    port = await server.start()
    try:
        lean, sdk = lean_and_sdk(port)
        expected = await run(sdk, port=port)
        assert kinds(expected) == ["text", "tool_call", "usage"]
        for _ in range(3):
            assert as_tuples(await run(lean, port=port)) == as_tuples(expected)
    finally:
        server.close()
    # The SDK's connection and the lean one, each kept alive.
    assert server.connections == 2


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_compressed_answers_are_decoded(encoding: str) -> None:
    plain = b"".join(tool_stream())
    body = gzip.compress(plain) if encoding == "gzip" else zlib.compress(plain)
    header = b"content-encoding: " + encoding.encode() + b"\r\n"
    server = RawServer(lambda n, head, _: chunked([body[:10], body[10:]], headers=header))
    port = await server.start()
    try:
        lean, sdk = lean_and_sdk(port)
        expected = await run(sdk, port=port)
        assert kinds(expected) == ["text", "tool_call", "usage"]
        assert as_tuples(await run(lean, port=port)) == as_tuples(expected)
    finally:
        server.close()


def test_sse_decoding_matches_the_sdks_decoder() -> None:
    rng = random.Random(11)
    pieces = [
        b"data: {}\n\n",
        b"data: a\r\ndata: b\r\n\r\n",
        b"data:no-space\r\r",
        b": comment\n",
        b"event: thread.x\ndata: 1\n\n",
        b"event:\ndata: 2\n\n",
        b"id: 5\n\n",
        b"retry: 10\n\n",
        b"retry: x\n",
        b"unknown: 1\n\n",
        b"data: \xc3\xa4\xe2\x80\xa8\n\n",
        b"\n",
        b"data",
        b"data: tail",
    ]
    for _ in range(300):
        stream = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        cuts = sorted({rng.randint(0, len(stream)) for _ in range(rng.randint(0, 6))})
        reads = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        expected = [(e.event, e.data) for e in SSEDecoder().iter_bytes(iter(reads))]
        got: list[tuple[str | None, str]] = []
        parser = http1.SSEParser(lambda event, data, out=got: out.append((event, data)))
        for read in reads:
            parser.feed(read)
        parser.finish()
        assert got == expected, stream


async def test_an_error_event_raises_the_sdks_api_error() -> None:
    events = [
        openai_chunk(content="partial"),
        b'data: {"error": {"message": "model overloaded", "type": "server_error"}}\n\n',
    ]
    server = RawServer(lambda n, head, body: chunked(events))
    port = await server.start()
    try:
        lean, sdk = lean_and_sdk(port)
        failures = []
        for client in (sdk, lean):
            with pytest.raises(openai.APIError) as info:
                await run(client, port=port)
            failures.append((type(info.value), info.value.message, info.value.body))
    finally:
        server.close()
    assert failures[0] == failures[1]
    assert failures[0][1] == "model overloaded"


# -- failures ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "headers"),
    [
        ("429 Too Many Requests", b'{"error": {"message": "slow down"}}', b"retry-after: 7\r\n"),
        ("401 Unauthorized", b'{"error": {"message": "bad key", "code": "invalid_api_key"}}', b""),
        ("400 Bad Request", b'{"error": {"message": "maximum context length is 8k"}}', b""),
        ("503 Service Unavailable", b"upstream connect error", b"content-type: text/plain\r\n"),
    ],
)
async def test_status_errors_are_the_sdks(status: str, body: bytes, headers: bytes) -> None:
    server = RawServer(lambda n, head, _: with_length(status, body, headers))
    port = await server.start()
    try:
        lean, sdk = lean_and_sdk(port)
        failures = []
        for client in (sdk, lean):
            with pytest.raises(openai.APIStatusError) as info:
                await run(client, port=port)
            exc = info.value
            failures.append(
                (
                    type(exc),
                    str(exc),
                    exc.status_code,
                    exc.body,
                    exc.response.headers.get("retry-after"),
                )
            )
    finally:
        server.close()
    assert failures[0] == failures[1]


async def test_a_chunked_error_body_is_read_whole() -> None:
    body = json.dumps({"error": {"message": "quota exceeded"}}).encode()
    server = RawServer(lambda n, head, _: chunked([body[:7], body[7:]], status="429 Too Many"))
    port = await server.start()
    try:
        lean, _ = lean_and_sdk(port)
        with pytest.raises(openai.RateLimitError, match="quota exceeded"):
            await run(lean, port=port)
        # The connection was read to the end of the error: it is kept.
        with pytest.raises(openai.RateLimitError):
            await run(lean, port=port)
    finally:
        server.close()
    assert server.connections == 1


async def test_a_cut_stream_is_a_connection_error_and_the_connection_is_dropped() -> None:
    first = chunked([openai_chunk(content="half")])[:2]  # head and one event, then EOF
    server = RawServer(
        lambda n, head, body: first if n == 1 else chunked(tool_stream()), close_after=True
    )
    port = await server.start()
    try:
        lean, _ = lean_and_sdk(port)
        with pytest.raises(openai.APIConnectionError):
            await run(lean, port=port)
        assert kinds(await run(lean, port=port)) == ["text", "tool_call", "usage"]
    finally:
        server.close()
    assert server.connections == 2


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    server = RawServer(lambda n, head, body: chunked(tool_stream()), close_after=True)
    port = await server.start()
    try:
        lean, _ = lean_and_sdk(port)
        for _ in range(3):
            assert kinds(await run(lean, port=port)) == ["text", "tool_call", "usage"]
            await asyncio.sleep(0.05)  # the server's FIN arrives
    finally:
        server.close()
    assert server.connections == 3


async def test_a_cancelled_call_closes_its_connection() -> None:
    # The first answer stops after one event and never ends.
    first = chunked([openai_chunk(content="first")])[:2]
    server = RawServer(lambda n, head, body: first if n == 1 else chunked(tool_stream()))
    port = await server.start()
    try:
        lean, _ = lean_and_sdk(port)
        request = make_request("openai", f"http://127.0.0.1:{port}/v1")
        mapper = ToolNameMapper()
        body = openai_chat.request_body(request, mapper, None)
        stream = openai_chat.stream_chat(lean, body, mapper)
        chunk = await asyncio.wait_for(stream.__anext__(), timeout=10)
        assert chunk.text.content == "first"
        await stream.aclose()
        await asyncio.wait_for(server.disconnected.wait(), timeout=10)
        assert kinds(await run(lean, port=port)) == ["text", "tool_call", "usage"]
    finally:
        server.close()
    assert server.connections == 2


async def test_a_redirect_is_followed_by_the_sdk() -> None:
    def reply(n: int, head: bytes, body: bytes) -> list[bytes]:
        if head.startswith(b"POST /v1/"):
            return [
                b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /v2/chat/completions\r\n"
                b"content-length: 0\r\n\r\n"
            ]
        return chunked(tool_stream())

    server = RawServer(reply)
    port = await server.start()
    try:
        lean, _ = lean_and_sdk(port)
        assert kinds(await run(lean, port=port)) == ["text", "tool_call", "usage"]
    finally:
        server.close()
    paths = [head.split(b" ")[1] for head, _ in server.requests]
    # Ours, then the SDK's own request and the one it was redirected to.
    assert paths == [b"/v1/chat/completions", b"/v1/chat/completions", b"/v2/chat/completions"]
    assert server.requests[0][1] == server.requests[2][1]


async def test_through_the_provider_errors_keep_their_codes() -> None:
    server = RawServer(
        lambda n, head, _: with_length("401 Unauthorized", b'{"error": {"message": "no"}}')
    )
    port = await server.start()
    try:
        provider = LangChainProvider(environ=ENV)
        with pytest.raises(LLMServiceError) as info:
            await collect(provider.generate(make_request("openai", f"http://127.0.0.1:{port}/v1")))
    finally:
        server.close()
    assert info.value.code is ErrorCode.CREDENTIALS and "401" in info.value.message


# -- TLS --------------------------------------------------------------------------------


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
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


async def test_https_endpoints_verify_the_server(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    server = RawServer(lambda n, head, body: chunked(tool_stream()))
    port = await server.start(server_ctx)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
    trusting = ssl.create_default_context(cafile=str(cert))
    try:
        endpoint = http1.Endpoint(
            scheme="https", host="localhost", port=port, head=head, ssl_context=trusting
        )
        for _ in range(2):
            async with endpoint.post(b"{}") as response:
                events = [data async for _, data in response.events()]
            assert events[-1] == "[DONE]" and len(events) == len(tool_stream())
        assert server.connections == 1
        untrusting = http1.Endpoint(
            scheme="https",
            host="localhost",
            port=port,
            head=head,
            ssl_context=ssl.create_default_context(),
        )
        with pytest.raises(http1.ConnectFailed):
            async with untrusting.post(b"{}"):
                pass
    finally:
        server.close()


# -- framing details ----------------------------------------------------------------


async def _events_of(server: RawServer, calls: int = 1) -> list[list[str]]:
    port = await server.start()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
    endpoint = http1.Endpoint(
        scheme="http", host="127.0.0.1", port=port, head=head, ssl_context=None
    )
    out = []
    try:
        for _ in range(calls):
            async with endpoint.post(b"{}") as response:
                out.append([data async for _, data in response.events()])
            await asyncio.sleep(0.02)
    finally:
        server.close()
    return out


async def test_chunk_extensions_trailers_and_informational_heads() -> None:
    def reply(n: int, head: bytes, body: bytes) -> list[bytes]:
        return [
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
            b"9;name=value\r\ndata: 1\n\n\r\n",
            b"9\ndata: 2\n\n\n",  # bare LF line ends
            b"0\r\nx-trailer: yes\r\n\r\n",
        ]

    server = RawServer(reply)
    assert await _events_of(server, calls=2) == [["1", "2"], ["1", "2"]]
    assert server.connections == 1


@pytest.mark.parametrize(
    "pieces",
    [
        # The server says it closes.
        [b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 9\r\n\r\ndata: 1\n\n"],
        # HTTP/1.0: no keep-alive.
        [b"HTTP/1.0 200 OK\r\ncontent-length: 9\r\n\r\ndata: 1\n\n"],
        # Bytes after the answer: out of step.
        [b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\ndata: 1\n\nHTTP/1.1 200 OK\r\n"],
    ],
)
async def test_connections_that_cannot_be_reused_are_not(pieces: list[bytes]) -> None:
    server = RawServer(lambda n, head, body: pieces)
    assert await _events_of(server, calls=2) == [["1"], ["1"]]
    assert server.connections == 2


async def test_a_malformed_answer_is_a_broken_stream() -> None:
    server = RawServer(
        lambda n, head, body: [b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"]
    )
    with pytest.raises(http1.StreamBroken, match="chunk"):
        await _events_of(server)
