"""HTTP client sockets that never wait on delayed ACKs.

A provider's server that leaves Nagle's algorithm on holds each small write of
a streamed answer until the previous one is acknowledged, and a client on a
kept-alive connection acknowledges late (Linux delays ACKs by up to 40 ms once
a connection looks interactive): every answer would stall. The sockets made
here set ``TCP_NODELAY`` (our own small writes leave at once) and, on Linux,
re-arm ``TCP_QUICKACK`` after every write and read, so what the server sends
is acknowledged as soon as it is read.

Only the direct connections of the service use these sockets: behind an HTTP
proxy (``HTTPS_PROXY`` and friends) the SDKs' default clients are used, as
before.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2

log = logging.getLogger(__name__)

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)
_PROXY_ENVS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")


def proxy_configured(environ: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """True when an HTTP proxy is configured in the environment."""
    env = os.environ if environ is None else environ
    return any(env.get(name) or env.get(name.lower()) for name in _PROXY_ENVS)


def quickack(sock: socket.socket | None) -> None:
    """Re-arms TCP_QUICKACK on a socket (Linux; elsewhere nothing)."""
    if sock is None or _QUICKACK is None:
        return
    # A closed or non-TCP socket has nothing to acknowledge.
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)


class _QuickAckStream(httpcore2.AsyncNetworkStream):
    """A network stream that acknowledges received data without delay."""

    def __init__(self, inner: httpcore2.AsyncNetworkStream) -> None:
        self._inner = inner
        self._sock: socket.socket | None = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = await self._inner.read(max_bytes, timeout)
        quickack(self._sock)
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)
        # Sending makes the kernel treat the connection as interactive and
        # delay ACKs; the answer to what we just sent must not wait on them.
        quickack(self._sock)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        inner = await self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _QuickAckStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class QuickAckBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's default asyncio backend with TCP_NODELAY and prompt ACKs."""

    def __init__(self) -> None:
        from httpcore2._backends.auto import AutoBackend  # noqa: PLC0415 - no public alias

        self._inner = AutoBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        options = [*(socket_options or []), (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        stream = await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=options
        )
        return _QuickAckStream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return await self._inner.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """httpx's default TLS settings (its trust store, ``SSL_CERT_FILE`` and
    ``SSL_CERT_DIR`` honoured), made once for every client: loading the CA
    bundle takes ≈ 25 ms, which a client's first call would otherwise pay."""
    return httpx2.create_ssl_context()


def async_transport() -> httpx2.AsyncBaseTransport | None:
    """An httpx transport whose connections use :class:`QuickAckBackend`.

    None when a proxy is configured (the default transport then routes through
    it) or when this httpx build keeps its pool elsewhere.
    """
    if proxy_configured():
        return None
    transport = httpx2.AsyncHTTPTransport(verify=default_ssl_context())
    pool = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore2.AsyncConnectionPool):
        log.warning("unexpected httpx transport layout; default sockets are used")
        return None
    # Same settings as the transport's own pool, only the backend differs.
    transport._pool = httpcore2.AsyncConnectionPool(
        ssl_context=pool._ssl_context,
        max_connections=pool._max_connections,
        max_keepalive_connections=pool._max_keepalive_connections,
        keepalive_expiry=pool._keepalive_expiry,
        http1=pool._http1,
        http2=pool._http2,
        retries=pool._retries,
        network_backend=QuickAckBackend(),
    )
    return transport
