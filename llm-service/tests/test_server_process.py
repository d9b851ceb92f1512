"""The ``tarsy-llm-service`` console script as a real process: listen, health, SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from conftest import API_KEY, KEY_ENV, make_request, texts
from fakes import openai_chunk, openai_done, sse_reply
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tarsy_llm.proto import llm_service_pb2_grpc as pb_grpc
from tarsy_llm.server import DEFAULT_LISTEN, ConfigError, resolve_listen

SCRIPT = Path(sys.executable).parent / "tarsy-llm-service"


def test_listen_address_precedence() -> None:
    assert resolve_listen(None, {}) == DEFAULT_LISTEN == "127.0.0.1:50051"
    assert resolve_listen(None, {"TARSY_LLM_LISTEN": "0.0.0.0:7000"}) == "0.0.0.0:7000"
    assert resolve_listen("[::1]:7001", {"TARSY_LLM_LISTEN": "0.0.0.0:7000"}) == "[::1]:7001"
    for bad in ("7000", "host:", ":80", "host:port", "h:70000"):
        with pytest.raises(ConfigError):
            resolve_listen(bad, {})


class Process:
    """A running service process whose JSON log lines are collected."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [str(SCRIPT), *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[dict] = queue.Queue()
        self.all: list[dict] = []
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = {"msg": "non-json", "line": line}
            self.all.append(record)
            self.lines.put(record)

    def all_lines(self, timeout: float = 10) -> list[dict]:
        """Every line of a process that has exited (its stderr read to the end)."""
        self._pump_thread.join(timeout)
        return self.all

    def wait_for(self, message: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                record = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            if record.get("msg") == message:
                return record
        raise AssertionError(f"no {message!r} log line; got {self.all}")


@pytest.fixture
def spawn() -> Iterator:
    started: list[Process] = []

    def _spawn(args: list[str], **extra_env: str) -> Process:
        env = {**os.environ, KEY_ENV: API_KEY, **extra_env}
        env.pop("TARSY_LLM_LISTEN", None)
        env.update(extra_env)
        process = Process(args, env)
        started.append(process)
        return process

    yield _spawn
    for process in started:
        if process.proc.poll() is None:
            process.proc.kill()
            process.proc.wait(timeout=10)


def test_listen_from_environment_health_and_sigterm(spawn) -> None:
    process = spawn([], TARSY_LLM_LISTEN="127.0.0.1:0")
    address = process.wait_for("listening")["address"]
    assert address.startswith("127.0.0.1:") and not address.endswith(":0")
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reply = health.Check(health_pb2.HealthCheckRequest(service="llm.v1.LLMService"), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    process.proc.send_signal(signal.SIGTERM)
    assert process.proc.wait(timeout=20) == 0
    assert any(r.get("msg") == "stopped" for r in process.all)


def test_command_line_overrides_environment_and_bad_address_fails(spawn) -> None:
    process = spawn(["--listen", "127.0.0.1:0"], TARSY_LLM_LISTEN="not-an-address")
    assert process.wait_for("listening")["address"].startswith("127.0.0.1:")
    process.proc.send_signal(signal.SIGINT)
    assert process.proc.wait(timeout=20) == 0

    broken = spawn([], TARSY_LLM_LISTEN="not-an-address")
    assert broken.proc.wait(timeout=20) == 2
    assert broken.wait_for("invalid configuration")["error"].startswith("listen address")


async def test_sigterm_lets_the_running_call_finish(spawn, fake) -> None:
    gate = threading.Event()
    fake.add(
        sse_reply(
            [
                openai_chunk(content="first "),
                openai_chunk(content="second"),
                openai_chunk(finish="stop"),
                openai_done(),
            ],
            gate=gate,
            gate_at=1,
        )
    )
    process = spawn(["--listen", "127.0.0.1:0", "--shutdown-grace", "10"])
    address = process.wait_for("listening")["address"]
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.LLMServiceStub(channel)
        grpc_call = stub.Generate(make_request("openai", f"{fake.url}/v1"))
        first = await asyncio.wait_for(grpc_call.read(), timeout=20)
        assert first.text.content == "first "
        process.proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait_for, "shutting down")
        gate.set()  # the provider finishes only after shutdown has begun
        rest = []
        while (chunk := await grpc_call.read()) is not grpc.aio.EOF:
            rest.append(chunk)
    assert texts(rest) == "second" and rest[-1].is_final
    assert await asyncio.to_thread(process.proc.wait, 20) == 0
    # The provider's client was closed on the way out: nothing reported
    # unclosed, every line JSON.
    lines = await asyncio.to_thread(process.all_lines)
    assert lines[-1]["msg"] == "stopped"
    assert [r for r in lines if r["msg"] == "non-json" or "nclosed" in r["msg"]] == []


# -- drain on SIGTERM -----------------------------------------------------------
# These processes get a long grace period (60 s): one that exits within the
# tests' timeouts did not wait it out.

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def serve(spawn, grace: float = 60) -> tuple[Process, str]:
    """A service process (only openai preloaded, to start faster) and its address."""
    process = spawn(
        ["--listen", "127.0.0.1:0", "--preload", "openai", "--shutdown-grace", str(grace)]
    )
    return process, process.wait_for("listening")["address"]


async def read_rest(grpc_call: grpc.aio.UnaryStreamCall) -> list:
    rest = []
    while (chunk := await asyncio.wait_for(grpc_call.read(), timeout=20)) is not grpc.aio.EOF:
        rest.append(chunk)
    return rest


async def exit_code(process: Process) -> int:
    return await asyncio.to_thread(process.proc.wait, 20)


async def test_ready_when_listening_and_idle_exit_is_immediate(spawn) -> None:
    process, address = serve(spawn)
    async with grpc.aio.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for name in ("", "llm.v1.LLMService"):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
            assert reply.status == SERVING, name
    process.proc.send_signal(signal.SIGTERM)
    assert await exit_code(process) == 0


async def test_sigterm_drains_not_serving_refuses_new_calls_finishes_running_ones(
    spawn, fake
) -> None:
    gate = threading.Event()
    fake.add(
        sse_reply(
            [
                openai_chunk(content="one "),
                openai_chunk(content="two "),
                openai_chunk(content="three"),
                openai_chunk(finish="stop"),
                openai_done(),
            ],
            gate=gate,
            gate_at=1,
            delay_between=0.1,  # a slow provider: the stream outlives the checks below
        )
    )
    process, address = serve(spawn)
    async with grpc.aio.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        # A watcher (such as a client-side health check) sees the change at once.
        watch = health.Watch(health_pb2.HealthCheckRequest(service="llm.v1.LLMService"))
        assert (await asyncio.wait_for(watch.read(), timeout=10)).status == SERVING
        running = pb_grpc.LLMServiceStub(channel).Generate(make_request("openai", f"{fake.url}/v1"))
        assert (await asyncio.wait_for(running.read(), timeout=20)).text.content == "one "

        process.proc.send_signal(signal.SIGTERM)
        assert (await asyncio.wait_for(watch.read(), timeout=10)).status == NOT_SERVING
        # New calls, on the open channel and on a new one, fail with UNAVAILABLE
        # (a client can retry those on another replica); so does a readiness probe.
        async with grpc.aio.insecure_channel(address) as fresh:
            for ch in (channel, fresh):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await (
                        pb_grpc.LLMServiceStub(ch)
                        .Generate(make_request("openai", f"{fake.url}/v1"), timeout=10)
                        .read()
                    )
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            with pytest.raises(grpc.aio.AioRpcError) as probe:
                await health_pb2_grpc.HealthStub(fresh).Check(
                    health_pb2.HealthCheckRequest(service="llm.v1.LLMService"), timeout=10
                )
            assert probe.value.code() == grpc.StatusCode.UNAVAILABLE

        gate.set()  # the provider goes on only now, while the service drains
        rest = await read_rest(running)
        assert texts(rest) == "two three" and rest[-1].is_final
        # The open Watch stream does not hold the exit once the call is done.
        assert await exit_code(process) == 0
    assert len(fake.post_requests()) == 1  # the refused calls never reached a provider
    lines = await asyncio.to_thread(process.all_lines)
    assert next(r for r in lines if r["msg"] == "shutting down")["calls"] == 1
    assert [r for r in lines if r["msg"] == "ending running calls"] == []
    assert lines[-1]["msg"] == "stopped"


@pytest.mark.parametrize("ending", ["grace", "signal"])
async def test_a_stream_that_never_ends_is_ended_by_the_grace_period_or_a_second_signal(
    spawn, fake, ending: str
) -> None:
    fake.add(sse_reply([openai_chunk(content="thinking...")], hang=True))
    process, address = serve(spawn, grace=1 if ending == "grace" else 60)
    async with grpc.aio.insecure_channel(address) as channel:
        running = pb_grpc.LLMServiceStub(channel).Generate(make_request("openai", f"{fake.url}/v1"))
        assert (await asyncio.wait_for(running.read(), timeout=20)).text.content == "thinking..."
        process.proc.send_signal(signal.SIGTERM)
        if ending == "signal":
            await asyncio.to_thread(process.wait_for, "shutting down")
            process.proc.send_signal(signal.SIGTERM)
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await read_rest(running)
        assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
        assert await exit_code(process) == 0
    lines = await asyncio.to_thread(process.all_lines)
    if ending == "signal":
        cut = next(r for r in lines if r["msg"] == "ending running calls")
        assert (cut["calls"], cut["reason"]) == (1, "signal")
    assert lines[-1]["msg"] == "stopped"
    assert [r for r in lines if r["msg"] == "non-json" or "nclosed" in r["msg"]] == []
