"""The async gRPC server and the ``tarsy-llm-service`` entry point.

Listen address: ``--listen HOST:PORT``, else ``TARSY_LLM_LISTEN``, else
127.0.0.1:50051 (port 0 picks a free port; the bound address is logged). The
standard gRPC health service reports SERVING for "" and "llm.v1.LLMService" once
the server listens with its preloaded providers ready.

SIGTERM/SIGINT drains: the listener closes, clients get GOAWAY (new calls fail with
UNAVAILABLE, so a client retries them on another replica) and health turns
NOT_SERVING; running ``Generate`` calls get up to the grace period to finish, then
the process exits 0. A second SIGTERM/SIGINT, or the end of the grace period, ends
the calls still running (their clients see UNAVAILABLE).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from asyncio import FIRST_COMPLETED
from collections.abc import Mapping, Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from . import __version__
from .logs import setup_logging
from .proto import llm_service_pb2_grpc as pb_grpc
from .providers.base import ALL
from .providers.registry import PreloadError, ProviderRegistry, default_registry, parse_preload
from .servicer import LLMServicer

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:50051"
ENV_LISTEN = "TARSY_LLM_LISTEN"
ENV_LOG_LEVEL = "TARSY_LLM_LOG_LEVEL"
ENV_SHUTDOWN_GRACE = "TARSY_LLM_SHUTDOWN_GRACE_SECONDS"
ENV_MAX_MESSAGE_BYTES = "TARSY_LLM_MAX_MESSAGE_BYTES"
ENV_PRELOAD = "TARSY_LLM_PRELOAD"
SERVICE_NAME = "llm.v1.LLMService"
DEFAULT_SHUTDOWN_GRACE = 25.0
# Requests carry the whole conversation, tool results included: far above
# gRPC's 4 MiB default.
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class ConfigError(ValueError):
    """Invalid command-line or environment configuration."""


def resolve_listen(cli_value: str | None, environ: Mapping[str, str]) -> str:
    """The listen address: command line, then environment, then the default."""
    value = (cli_value or environ.get(ENV_LISTEN, "") or DEFAULT_LISTEN).strip()
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"listen address must be HOST:PORT, got {value!r}")
    return value


def _env_float(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc


class HealthServicer(health.aio.HealthServicer):
    """The standard health service, whose Watch streams end once the server drains.

    grpc's graceful stop waits for every call, and a Watch never ends by itself.
    """

    def __init__(self) -> None:
        super().__init__()
        self._draining = asyncio.Event()

    async def enter_graceful_shutdown(self) -> None:
        await super().enter_graceful_shutdown()
        self._draining.set()

    async def Watch(self, request: health_pb2.HealthCheckRequest, context) -> None:
        writer = _WatchWriter(context)
        watching = asyncio.ensure_future(super().Watch(request, writer))
        draining = asyncio.ensure_future(self._draining.wait())
        try:
            await asyncio.wait([watching, draining], return_when=FIRST_COMPLETED)
        finally:
            draining.cancel()
            watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching  # raises if it failed by itself
        if self._draining.is_set():
            await writer.finish(health_pb2.HealthCheckResponse.NOT_SERVING)


class _WatchWriter:
    """The context the base Watch writes to: a write goes on when the watch is
    cancelled (grpc allows one write at a time, the last one must be awaited)."""

    def __init__(self, context) -> None:
        self._context = context
        self._write: asyncio.Future | None = None
        self._status: int | None = None

    def __getattr__(self, name: str):
        return getattr(self._context, name)

    async def write(self, response: health_pb2.HealthCheckResponse) -> None:
        self._status = response.status
        self._write = asyncio.ensure_future(self._context.write(response))
        await asyncio.shield(self._write)

    async def finish(self, status: int) -> None:
        """Sends ``status`` unless it was the last status sent."""
        if self._write is not None:
            await self._write
        if self._status != status:
            await self._context.write(health_pb2.HealthCheckResponse(status=status))


class LLMServer:
    """The gRPC server with the LLM and health services."""

    def __init__(
        self,
        listen: str,
        registry: ProviderRegistry,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.listen = listen
        self.registry = registry
        self.health = HealthServicer()
        self._server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_send_message_length", max_message_bytes),
            ]
        )
        self._servicer = LLMServicer(registry)
        pb_grpc.add_LLMServiceServicer_to_server(self._servicer, self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        self.port = 0

    @property
    def address(self) -> str:
        """The bound HOST:PORT (valid after :meth:`start`)."""
        host = self.listen.rpartition(":")[0]
        return f"{host}:{self.port}"

    async def start(self) -> None:
        """Binds, starts serving and reports SERVING."""
        # The health servicer starts with "" SERVING: not before the server can serve.
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        try:
            self.port = self._server.add_insecure_port(self.listen)
        except RuntimeError as exc:
            raise ConfigError(f"cannot listen on {self.listen}: {exc}") from exc
        if self.port == 0:
            raise ConfigError(f"cannot listen on {self.listen}")
        await self._server.start()
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "listening",
            extra={
                "address": self.address,
                "backends": self.registry.backends(),
                "version": __version__,
            },
        )

    @property
    def running_calls(self) -> int:
        """``Generate`` and ``Embed`` calls in progress."""
        return self._servicer.running

    async def stop(self, grace: float, force: asyncio.Event | None = None) -> None:
        """Drains: reports NOT_SERVING, refuses new calls, lets running ``Generate``
        calls finish for up to ``grace`` s (until ``force`` is set), then ends the rest."""
        if grace <= 0:
            await self.health.enter_graceful_shutdown()
            await self._server.stop(None)
            return
        # grpc closes the listener and sends GOAWAY on open connections: clients
        # make their next call on a new connection (another replica), calls in
        # progress go on. The stop task does that in its first step, which the
        # sleep lets run before NOT_SERVING goes out: a client that sees it has had
        # the GOAWAY (grpc cancels a call that arrives once it began to stop).
        stopping = asyncio.ensure_future(self._server.stop(grace))
        await asyncio.sleep(0)
        await self.health.enter_graceful_shutdown()
        if force is None:
            force = asyncio.Event()
        forced = asyncio.ensure_future(force.wait())
        try:
            # grpc itself ends what still runs when the grace is over; only a
            # second signal ends it sooner. A second stop() beside the one in
            # progress is made only then: two shutdowns of the grpc core at
            # once can crash the process.
            await asyncio.wait([stopping, forced], return_when=FIRST_COMPLETED)
        finally:
            forced.cancel()
        if not stopping.done():
            log.warning(
                "ending running calls",
                extra={"calls": self.running_calls, "reason": "signal"},
            )
            await self._server.stop(None)  # cancels them now
        await stopping

    async def wait_for_termination(self) -> None:
        """Returns when the server has stopped."""
        await self._server.wait_for_termination()


async def run(
    listen: str,
    *,
    grace: float,
    max_message_bytes: int,
    registry: ProviderRegistry | None = None,
    stop_event: asyncio.Event | None = None,
    preload: frozenset[str] = ALL,
) -> None:
    """Serves until SIGTERM/SIGINT (or ``stop_event``), then drains (see :meth:`LLMServer.stop`).

    The libraries of the ``preload`` provider types are imported before the
    server listens and reports SERVING: a call to any of them is fast from the
    first one on (the others load on their first call).
    """
    # Handlers first: a signal that arrives while providers load must still
    # lead to an orderly exit.
    stop = stop_event or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    registry = registry or default_registry()
    registry.prewarm(os.environ, preload)
    server = LLMServer(listen, registry, max_message_bytes=max_message_bytes)
    await server.start()
    await stop.wait()
    # From now on a second signal ends the calls still running.
    force = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, force.set)
    log.info("shutting down", extra={"grace_s": grace, "calls": server.running_calls})
    await server.stop(grace, force)
    await registry.aclose()
    log.info("stopped")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tarsy-llm-service`` console script."""
    parser = argparse.ArgumentParser(
        prog="tarsy-llm-service",
        description="TARSy LLM service: gRPC proxy to LLM providers (llm.v1.LLMService).",
    )
    parser.add_argument(
        "--listen",
        help=f"HOST:PORT to listen on (env {ENV_LISTEN}; default {DEFAULT_LISTEN})",
    )
    parser.add_argument("--log-level", help=f"log level (env {ENV_LOG_LEVEL}; default INFO)")
    parser.add_argument(
        "--shutdown-grace",
        type=float,
        help=f"seconds running calls get to finish after SIGTERM (env {ENV_SHUTDOWN_GRACE}; "
        f"default {DEFAULT_SHUTDOWN_GRACE:g})",
    )
    parser.add_argument(
        "--preload",
        help=f"provider types whose libraries load before the service reports ready: all, "
        f"none, or a comma-separated list of openai, anthropic, xai, google, vertexai "
        f"(env {ENV_PRELOAD}; default all)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = parser.parse_args(argv)
    setup_logging(args.log_level or os.environ.get(ENV_LOG_LEVEL, "INFO"))
    try:
        listen = resolve_listen(args.listen, os.environ)
        grace = (
            args.shutdown_grace
            if args.shutdown_grace is not None
            else _env_float(os.environ, ENV_SHUTDOWN_GRACE, DEFAULT_SHUTDOWN_GRACE)
        )
        max_bytes = int(_env_float(os.environ, ENV_MAX_MESSAGE_BYTES, DEFAULT_MAX_MESSAGE_BYTES))
        try:
            preload = parse_preload(
                args.preload if args.preload is not None else os.environ.get(ENV_PRELOAD, "")
            )
        except PreloadError as exc:
            raise ConfigError(str(exc)) from exc
        asyncio.run(run(listen, grace=grace, max_message_bytes=max_bytes, preload=preload))
    except ConfigError as exc:
        log.error("invalid configuration", extra={"error": str(exc)})
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
