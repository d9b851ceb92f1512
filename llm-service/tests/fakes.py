"""A scriptable local HTTP server standing in for LLM provider APIs.

Runs in a thread, answers each POST with the next scripted response (plain JSON
or a server-sent-event stream), and records every request so tests can assert
what the SDKs actually sent over the wire.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Recorded:
    """One request the fake received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Reply:
    """A scripted response.

    ``events`` are written one by one (a stream); before event ``gate_at`` the
    server waits for ``gate`` to be set. ``hang`` keeps the connection open after
    the events until the client goes away (or 30 s pass).
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    events: list[bytes] | None = None
    gate: threading.Event | None = None
    gate_at: int = 1
    hang: bool = False
    delay_between: float = 0.0
    # Announce a longer body than is sent, then close: the client sees the
    # connection die mid-stream.
    truncate: bool = False


def json_reply(status: int, payload: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply(
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
        body=json.dumps(payload).encode(),
    )


def sse_reply(events: list[bytes], **kwargs: Any) -> Reply:
    return Reply(headers={"Content-Type": "text/event-stream"}, events=events, **kwargs)


def sse_data(payload: Any) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {data}\n\n".encode()


def sse_event(name: str, payload: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()


class FakeProviderServer:
    """The fake provider endpoint; use as a context manager or call close()."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.script: deque[Reply] = deque()
        self.routes: dict[str, Reply] = {}
        self.disconnected = threading.Event()
        self.request_seen = threading.Event()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # close-delimited bodies: no chunking needed

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                fake._handle(self)

            def do_GET(self) -> None:
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def post_requests(self, path_part: str = "") -> list[Recorded]:
        return [r for r in self.requests if r.method == "POST" and path_part in r.path]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeProviderServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        parts = urlsplit(handler.path)
        with self._lock:
            self.requests.append(
                Recorded(
                    method=handler.command,
                    path=parts.path,
                    query=parse_qs(parts.query),
                    headers={k.lower(): v for k, v in handler.headers.items()},
                    body=body,
                )
            )
            reply = self.routes.get(parts.path)
            if reply is None:
                reply = self.script.popleft() if self.script else None
        self.request_seen.set()
        if reply is None:
            reply = json_reply(500, {"error": {"message": "no scripted response"}})
        try:
            handler.send_response(reply.status)
            for key, value in reply.headers.items():
                handler.send_header(key, value)
            if reply.events is None:
                handler.send_header("Content-Length", str(len(reply.body)))
            elif reply.truncate:
                handler.send_header("Content-Length", "1000000")
            handler.end_headers()
            if reply.events is None:
                handler.wfile.write(reply.body)
                handler.wfile.flush()
                return
            for index, event in enumerate(reply.events):
                if reply.gate is not None and index == reply.gate_at:
                    reply.gate.wait(timeout=30)
                if reply.delay_between and index:
                    time.sleep(reply.delay_between)
                handler.wfile.write(event)
                handler.wfile.flush()
            if reply.hang:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    time.sleep(0.05)
                    handler.wfile.write(b": keep-alive\n\n")
                    handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.disconnected.set()


# -- provider wire formats ----------------------------------------------------


def gemini_chunk(
    parts: list[dict[str, Any]] | None = None,
    *,
    usage: dict[str, int] | None = None,
    finish: str | None = None,
    grounding: dict[str, Any] | None = None,
    url_context: dict[str, Any] | None = None,
) -> bytes:
    """One streamGenerateContent SSE event (Gemini REST JSON)."""
    candidate: dict[str, Any] = {"index": 0}
    if parts is not None:
        candidate["content"] = {"role": "model", "parts": parts}
    if finish:
        candidate["finishReason"] = finish
    if grounding:
        candidate["groundingMetadata"] = grounding
    if url_context:
        candidate["urlContextMetadata"] = url_context
    payload: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-test"}
    if usage:
        payload["usageMetadata"] = usage
    return sse_data(payload)


def openai_chunk(
    *,
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    role: str | None = None,
) -> bytes:
    """One chat.completion.chunk SSE event."""
    choices: list[dict[str, Any]] = []
    if content is not None or tool_calls is not None or finish is not None or role is not None:
        delta: dict[str, Any] = {}
        if role:
            delta["role"] = role
        if content is not None:
            delta["content"] = content
        if tool_calls is not None:
            delta["tool_calls"] = tool_calls
        choices.append({"index": 0, "delta": delta, "finish_reason": finish})
    payload: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "test-model",
        "choices": choices,
    }
    if usage is not None:
        payload["usage"] = usage
    return sse_data(payload)


def openai_done() -> bytes:
    return sse_data("[DONE]")


def openai_usage(
    prompt: int, completion: int, reasoning: int = 0, cached: int = 0
) -> dict[str, Any]:
    """OpenAI usage: ``completion`` includes ``reasoning``, ``prompt`` includes ``cached``."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage
