"""A lean HTTP/1.1 client for streamed POSTs (server-sent events).

What the openai SDK's httpx stack does for one streamed chat completion — a
kept-alive connection from a pool, one POST, the response's framing (chunked,
Content-Length or close-delimited) and content encoding undone, the body split
into server-sent events exactly as the SDK's decoder splits it — in one
``asyncio.Protocol`` per connection: each read is parsed once in the
protocol's callback and the events it completes are handed to the consumer
with a single wake-up. Through the SDK, httpx, httpcore, anyio and h11 each
read cost ≈ 0.1 ms of CPU, more than the rest of a call's work.

The sockets behave as :mod:`.sockets` makes the SDK's behave: ``TCP_NODELAY``
(asyncio sets it on every TCP transport) and, on Linux, ``TCP_QUICKACK``
re-armed after every write and read. Pool settings are httpx's defaults: at
most 100 connections, 20 kept idle, for at most 5 s.

Only what a chat completion needs is handled here; the caller falls back to
the SDK for the rest (a redirect, see :class:`Redirected`). Failures are the
caller's to translate (:class:`ConnectFailed`, :class:`StreamBroken`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import select
import ssl
import time
import zlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from . import sockets

KEEPALIVE_EXPIRY = 5.0
MAX_CONNECTIONS = 100
MAX_IDLE_CONNECTIONS = 20
# Events queued before reading pauses (the consumer is slower than the server).
MAX_QUEUED_EVENTS = 1024
# Largest response head accepted (h11's default limit).
MAX_HEAD_BYTES = 64 * 1024

_HEAD_END = re.compile(rb"\n\r?\n")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]+)[ \t]*(?:;[^\r\n]*)?\r?\n")


class Redirected(Exception):
    """The server answered 3xx: the caller lets the SDK, which follows redirects, retry."""


class ConnectFailed(Exception):
    """No connection, or the request could not be sent: nothing was received."""


class StreamBroken(Exception):
    """The connection failed or broke the protocol while the response was read.

    ``reading_error_body``: while the body of a non-2xx answer was read.
    """

    reading_error_body = False


class StatusError(Exception):
    """A non-2xx answer, with its complete (decoded) body."""

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.headers = headers
        self.body = body


def _decoders(content_encoding: str) -> list[Any]:
    """Decoders for a Content-Encoding value, in the order to apply them
    (httpx's: unknown codings pass through)."""
    out: list[Any] = []
    for coding in reversed([c.strip().lower() for c in content_encoding.split(",")]):
        if coding in ("gzip", "x-gzip"):
            out.append(zlib.decompressobj(zlib.MAX_WBITS | 16))
        elif coding == "deflate":
            out.append(_Deflate())
    return out


class _Deflate:
    """httpx's deflate decoder: zlib-wrapped, or raw deflate if that fails at once."""

    def __init__(self) -> None:
        self._first = True
        self._obj = zlib.decompressobj()

    def decompress(self, data: bytes) -> bytes:
        if self._first:
            self._first = False
            try:
                return self._obj.decompress(data)
            except zlib.error:
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._obj.decompress(data)

    def flush(self) -> bytes:
        return self._obj.flush()


class SSEParser:
    """The openai SDK's SSE decoding (``_SSELineDecoder`` + ``SSEDecoder``):
    lines end at CR, LF or CRLF (also across reads), fields as the spec says,
    the last event id kept across events, an unterminated last event dropped."""

    def __init__(self, emit: Callable[[str | None, str], None]) -> None:
        self._emit = emit
        self._pending = b""
        self._skip_lf = False
        self._event: str | None = None
        self._data: list[str] = []
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> None:
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[0] == 10:
                chunk = chunk[1:]
        data = self._pending + chunk if self._pending else chunk
        if not data:
            return
        if b"\r" in data:
            self._skip_lf = data[-1] == 13
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = data.split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._line(line.decode("utf-8"))

    def finish(self) -> None:
        if self._pending:
            line, self._pending = self._pending, b""
            self._line(line.decode("utf-8"))

    def _line(self, line: str) -> None:
        if not line:
            if not self._event and not self._data and not self._last_id and self._retry is None:
                return
            # ServerSentEvent turns an empty event name into None.
            self._emit(self._event or None, "\n".join(self._data))
            self._event = None
            self._data = []
            self._retry = None
            return
        if line[0] == ":":
            return
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry":
            with contextlib.suppress(ValueError):
                self._retry = int(value)


# Response body framing.
_HEAD, _LENGTH, _CHUNK_SIZE_LINE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE, _DONE = range(8)


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection and the response being read on it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._sock: Any = None
        self.closed = False
        self.idle_since = 0.0
        self._loop = asyncio.get_running_loop()
        self._reset()

    def _reset(self) -> None:
        self._active = False
        self._buf = b""
        self._state = _HEAD
        self._remaining = 0
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.keep_alive = False
        self._decoders: list[Any] = []
        self._body = bytearray()
        self.events: deque[tuple[str | None, str]] = deque()
        self._sse: SSEParser | None = None
        self._discard = False
        self.head_done = False
        self.done = False
        self.error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False

    # -- asyncio.Protocol --------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._sock = transport.get_extra_info("socket")

    def data_received(self, data: bytes) -> None:
        sockets.quickack(self._sock)
        if not self._active or self.done:
            # Nothing was asked: the connection is out of step.
            self.close()
            return
        self._guarded(self._parse, data)

    def eof_received(self) -> bool:
        self.closed = True
        self._ended(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._ended(exc)

    def _ended(self, exc: Exception | None) -> None:
        if not self._active or self.done or self.error is not None:
            return
        if self._state == _UNTIL_CLOSE and exc is None:
            self._guarded(lambda _: self._finish_body(), b"")
        elif not self.head_done:
            reason = str(exc) if exc else ""
            self._fail(StreamBroken(reason or "Server disconnected without sending a response."))
        else:
            reason = str(exc) if exc else ""
            self._fail(
                StreamBroken(
                    reason or "peer closed connection without sending complete message body"
                )
            )

    def _guarded(self, step: Callable[[bytes], None], data: bytes) -> None:
        try:
            step(data)
        except zlib.error as exc:
            broken = StreamBroken(f"invalid compressed body: {exc}")
            broken.__cause__ = exc
            self._fail(broken)
            return
        except (StreamBroken, UnicodeDecodeError) as exc:
            # A line that is not UTF-8 fails the stream as it fails the SDK's.
            self._fail(exc)
            return
        self._wake()

    # -- request / response --------------------------------------------------

    def send(self, head: bytes, body: bytes) -> None:
        assert self.transport is not None
        self._reset()
        self._active = True
        self.transport.writelines((head, body))
        sockets.quickack(self._sock)

    def _fail(self, exc: BaseException) -> None:
        self.error = exc
        self.close()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if not self._paused and len(self.events) > MAX_QUEUED_EVENTS and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    async def wait(self) -> None:
        """Until something more was read (or the response ended or failed)."""
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _parse(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        self._buf = b""
        pos = 0
        end = len(buf)
        while pos < end or self._state in (_DONE,):
            state = self._state
            if state == _HEAD:
                match = _HEAD_END.search(buf, pos)
                if match is None:
                    if end - pos > MAX_HEAD_BYTES:
                        raise StreamBroken("response head too large")
                    self._buf = buf[pos:]
                    return
                self._head(buf[pos : match.start()])
                pos = match.end()
            elif state == _LENGTH:
                take = min(self._remaining, end - pos)
                self._content(buf[pos : pos + take])
                pos += take
                self._remaining -= take
                if not self._remaining:
                    self._finish_body()
            elif state == _CHUNK_SIZE_LINE:
                match = _CHUNK_SIZE.match(buf, pos)
                if match is None:
                    if b"\n" in buf[pos : pos + 1024] or end - pos > 1024:
                        raise StreamBroken("malformed chunk size")
                    self._buf = buf[pos:]
                    return
                pos = match.end()
                self._remaining = int(match.group(1), 16)
                self._state = _CHUNK_DATA if self._remaining else _TRAILERS
            elif state == _CHUNK_DATA:
                take = min(self._remaining, end - pos)
                self._content(buf[pos : pos + take])
                pos += take
                self._remaining -= take
                if not self._remaining:
                    self._state = _CHUNK_END
            elif state == _CHUNK_END:
                if buf.startswith(b"\r\n", pos):
                    pos += 2
                elif buf.startswith(b"\n", pos):
                    pos += 1
                elif end - pos < 2 and buf[pos:end] == b"\r":
                    self._buf = buf[pos:]
                    return
                else:
                    raise StreamBroken("malformed chunk end")
                self._state = _CHUNK_SIZE_LINE
            elif state == _TRAILERS:
                newline = buf.find(b"\n", pos)
                if newline < 0:
                    self._buf = buf[pos:]
                    return
                line = buf[pos:newline].rstrip(b"\r")
                pos = newline + 1
                if not line:
                    self._finish_body()
            elif state == _UNTIL_CLOSE:
                self._content(buf[pos:])
                pos = end
            else:  # _DONE: bytes after the response
                if pos < end:
                    self.keep_alive = False
                    self.closed = True
                return

    def _head(self, raw: bytes) -> None:
        lines = raw.decode("latin-1").split("\n")
        status_line = lines[0].rstrip("\r")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise StreamBroken(f"malformed status line {status_line[:100]!r}")
        status = int(parts[1])
        if 100 <= status < 200 and status != 101:
            return  # informational: the real head follows
        headers: list[tuple[str, str]] = []
        for raw_line in lines[1:]:
            name, sep, value = raw_line.rstrip("\r").partition(":")
            if not sep or not name or name != name.strip():
                raise StreamBroken("malformed header line")
            headers.append((name, value.strip(" \t")))
        self.status = status
        self.headers = headers
        self.head_done = True
        lower = {name.lower(): value for name, value in headers}
        connection = lower.get("connection", "").lower()
        self.keep_alive = parts[0] == "HTTP/1.1" and "close" not in connection
        self._decoders = _decoders(lower.get("content-encoding", ""))
        if 200 <= status < 300:
            self._sse = SSEParser(self._event)
        transfer = lower.get("transfer-encoding", "").lower()
        if status == 101 or status in (204, 304):
            self._finish_body()
        elif transfer:
            if transfer.rsplit(",", 1)[-1].strip() != "chunked":
                raise StreamBroken(f"unsupported transfer-encoding {transfer!r}")
            self._state = _CHUNK_SIZE_LINE
        elif "content-length" in lower:
            try:
                self._remaining = int(lower["content-length"].split(",")[0])
            except ValueError as exc:
                raise StreamBroken("malformed content-length") from exc
            if self._remaining:
                self._state = _LENGTH
            else:
                self._finish_body()
        else:
            self.keep_alive = False
            self._state = _UNTIL_CLOSE

    def _event(self, event: str | None, data: str) -> None:
        self.events.append((event, data))

    def _content(self, data: bytes) -> None:
        if self._discard:
            return
        for decoder in self._decoders:
            data = decoder.decompress(data)
        if self._sse is not None:
            self._sse.feed(data)
        else:
            self._body += data

    def _finish_body(self) -> None:
        if self._decoders and not self._discard:
            tail = b""
            for decoder in self._decoders:
                tail = decoder.decompress(tail) + decoder.flush() if tail else decoder.flush()
            if tail:
                if self._sse is not None:
                    self._sse.feed(tail)
                else:
                    self._body += tail
        if self._sse is not None and not self._discard:
            self._sse.finish()
        self._state = _DONE
        self.done = True

    def discard_rest(self) -> None:
        """Reads the rest of the body without decoding it."""
        self._discard = True
        self.events.clear()

    @property
    def body(self) -> bytes:
        return bytes(self._body)

    def release(self) -> None:
        self._active = False
        self.idle_since = time.monotonic()

    def readable(self) -> bool:
        """Whether an idle connection has something to read: the server closed
        it (or broke the protocol) and the loop has not noticed yet. httpcore
        checks the same before it reuses a connection."""
        if self._sock is None:
            return False
        try:
            poll = select.poll()
            poll.register(self._sock.fileno(), select.POLLIN)
            return bool(poll.poll(0))
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Endpoint:
    """One URL that streamed POSTs go to, and its pool of connections."""

    def __init__(
        self,
        *,
        scheme: str,
        host: str,
        port: int | None,
        head: bytes,
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        """``head``: the request line and every header but Content-Length, each
        line ending in CRLF."""
        if scheme not in ("http", "https"):
            raise ValueError(f"unsupported URL scheme {scheme!r}")
        self.host = host
        self.port = port or (443 if scheme == "https" else 80)
        self._ssl = ssl_context if scheme == "https" else None
        if self._ssl is not None:
            self._ssl.set_alpn_protocols(["http/1.1"])
        self._head = head
        self._idle: list[_Connection] = []
        self._slots: asyncio.Semaphore | None = None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(
                _Connection,
                self.host,
                self.port,
                ssl=self._ssl,
                server_hostname=self.host if self._ssl is not None else None,
                happy_eyeballs_delay=0.25,
            )
        except (OSError, ssl.SSLError) as exc:
            raise ConnectFailed(str(exc) or type(exc).__name__) from exc
        return conn

    def _idle_connection(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if (
                not conn.closed
                and now - conn.idle_since <= KEEPALIVE_EXPIRY
                and not conn.readable()
            ):
                return conn
            conn.close()
        return None

    def _release(self, conn: _Connection) -> None:
        if conn.closed or not conn.keep_alive or len(self._idle) >= MAX_IDLE_CONNECTIONS:
            conn.close()
            return
        conn.release()
        self._idle.append(conn)

    def post(self, body: bytes) -> Exchange:
        """One POST of ``body``: ``async with endpoint.post(body) as response``
        sends it and waits for a 2xx answer's head (raises :class:`StatusError`,
        :class:`Redirected`, :class:`ConnectFailed` or :class:`StreamBroken`);
        leaving the block keeps the connection if the answer was read to its end."""
        return Exchange(self, body)


class Exchange:
    """One request and its answer on a connection of an :class:`Endpoint`."""

    def __init__(self, endpoint: Endpoint, body: bytes) -> None:
        self._endpoint = endpoint
        self._body = body
        self._conn: _Connection | None = None
        self._slot = False

    async def __aenter__(self) -> Exchange:
        endpoint = self._endpoint
        if endpoint._slots is None:
            endpoint._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        await endpoint._slots.acquire()
        self._slot = True
        try:
            conn = self._conn = endpoint._idle_connection() or await endpoint._connect()
            head = endpoint._head + b"Content-Length: %d\r\n\r\n" % len(self._body)
            try:
                conn.send(head, self._body)
            except (OSError, RuntimeError) as exc:
                raise ConnectFailed(str(exc) or type(exc).__name__) from exc
            while not conn.head_done:
                if conn.error is not None:
                    raise conn.error
                await conn.wait()
            if 300 <= conn.status < 400:
                raise Redirected(conn.status)
            if not 200 <= conn.status < 300:
                while not conn.done:
                    if conn.error is not None:
                        if isinstance(conn.error, StreamBroken):
                            conn.error.reading_error_body = True
                        raise conn.error
                    await conn.wait()
                raise StatusError(conn.status, conn.headers, conn.body)
        except BaseException:
            self._close()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._close()

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            if conn.done and conn.error is None and not conn.events:
                self._endpoint._release(conn)
            else:
                conn.close()
        if self._slot:
            self._slot = False
            assert self._endpoint._slots is not None
            self._endpoint._slots.release()

    async def events(self) -> AsyncIterator[tuple[str | None, str]]:
        """The answer's server-sent events (event name, data) as they arrive."""
        conn = self._conn
        assert conn is not None
        events = conn.events
        while True:
            while events:
                yield events.popleft()
            if conn.error is not None:
                raise conn.error
            if conn.done:
                return
            await conn.wait()

    async def drain(self, limit: float) -> None:
        """Reads the rest of the answer without decoding it further, for at
        most ``limit`` seconds, so that the connection can be kept (what the
        SDK does after ``[DONE]``); nothing if it cannot be kept anyway."""
        conn = self._conn
        assert conn is not None
        if not conn.keep_alive:
            return
        conn.discard_rest()
        if conn.done or conn.error is not None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limit):
                while not conn.done and conn.error is None:
                    await conn.wait()
