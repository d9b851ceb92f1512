"""HTTP client sockets that never wait on delayed ACKs.

A provider's server that leaves Nagle's algorithm on holds each small write of
a streamed answer until the previous one is acknowledged, and a client on a
kept-alive connection acknowledges late (Linux delays ACKs by up to 40 ms once
a connection looks interactive): every answer would stall. The sockets made
here set ``TCP_NODELAY`` (our own small writes leave at once) and, on Linux,
re-arm ``TCP_QUICKACK`` after every send and receive, so what the server
sends is acknowledged as soon as it is read.

They are the sockets of the openai SDK's aiohttp transport (``openai[aiohttp]``):
aiohttp's connector makes them with :func:`quickack_socket`, and asyncio's
socket transports (TLS ones included) send and receive through their methods.
Only the direct connections of the service use them: behind an HTTP proxy
(``HTTPS_PROXY`` and friends) the SDKs' default clients are used, as before.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import ssl
from typing import Any

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


class QuickAckSocket(socket.socket):
    """A socket that re-arms TCP_QUICKACK after every send and receive (the
    methods asyncio's socket transports call)."""

    __slots__ = ()

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data = super().recv(bufsize, flags)
        quickack(self)
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        count = super().recv_into(buffer, nbytes, flags)
        quickack(self)
        return count

    def send(self, data: Any, flags: int = 0) -> int:
        count = super().send(data, flags)
        # Sending makes the kernel treat the connection as interactive and
        # delay ACKs; the answer to what we just sent must not wait on them.
        quickack(self)
        return count


def quickack_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """aiohttp's socket factory (an ``AddrInfoType`` in, an unconnected socket
    out): a :class:`QuickAckSocket` with TCP_NODELAY."""
    family, type_, proto = addr_info[:3]
    sock = QuickAckSocket(family=family, type=type_, proto=proto)
    if family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """httpx's default TLS settings (its trust store, ``SSL_CERT_FILE`` and
    ``SSL_CERT_DIR`` honoured), made once for every client: loading the CA
    bundle takes ≈ 25 ms, which a client's first call would otherwise pay."""
    return httpx2.create_ssl_context()


def async_transport() -> httpx2.AsyncBaseTransport | None:
    """The openai SDK's aiohttp transport, with the SDK's connection limits,
    the shared TLS context and connections made of :func:`quickack_socket`.

    None when a proxy is configured (the SDK's default client then routes
    through it) or when the SDK's aiohttp support cannot be loaded.
    """
    if proxy_configured():
        return None
    try:
        import aiohttp  # noqa: PLC0415 - loaded with the SDK
        from openai._base_client import DEFAULT_CONNECTION_LIMITS  # noqa: PLC0415
        from openai._vendor.httpx_aiohttp import AiohttpTransport  # noqa: PLC0415
    except ImportError:
        log.warning("the openai SDK's aiohttp transport is unavailable; default sockets are used")
        return None
    limits = DEFAULT_CONNECTION_LIMITS
    ssl_context = default_ssl_context()

    def session() -> aiohttp.ClientSession:
        # What the transport makes by default, plus the socket factory; made
        # on its first request, inside the event loop.
        connector = aiohttp.TCPConnector(
            limit=limits.max_connections or 0,
            keepalive_timeout=limits.keepalive_expiry,
            ssl=ssl_context,
            socket_factory=quickack_socket,
        )
        return aiohttp.ClientSession(connector=connector)

    return AiohttpTransport(verify=ssl_context, limits=limits, client=session)
