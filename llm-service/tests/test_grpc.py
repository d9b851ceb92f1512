"""The real async gRPC server, called through a real gRPC channel."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator

import grpc
import pytest
from conftest import (
    API_KEY,
    ENV,
    KEY_ENV,
    log_records,
    make_request,
    msg,
    texts,
    tool_def,
)
from fakes import json_reply, openai_chunk, openai_done, openai_usage, sse_reply
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tarsy_llm.proto import llm_service_pb2 as pb
from tarsy_llm.proto import llm_service_pb2_grpc as pb_grpc
from tarsy_llm.providers.base import LLMProvider
from tarsy_llm.providers.google_native import GoogleNativeProvider
from tarsy_llm.providers.langchain_provider import LangChainProvider
from tarsy_llm.providers.registry import ProviderRegistry, default_registry
from tarsy_llm.server import SERVICE_NAME, LLMServer


class Service:
    def __init__(self, server: LLMServer, channel: grpc.aio.Channel) -> None:
        self.server = server
        self.channel = channel
        self.stub = pb_grpc.LLMServiceStub(channel)

    async def generate(self, request: pb.GenerateRequest, **kwargs) -> list[pb.GenerateResponse]:
        return [chunk async for chunk in self.stub.Generate(request, **kwargs)]


async def start(registry: ProviderRegistry) -> Service:
    server = LLMServer("127.0.0.1:0", registry)
    await server.start()
    channel = grpc.aio.insecure_channel(server.address)
    return Service(server, channel)


@pytest.fixture
async def service(monkeypatch) -> AsyncIterator[Service]:
    """The production registry, with the test key in the process environment."""
    monkeypatch.setenv(KEY_ENV, API_KEY)
    svc = await start(default_registry())
    yield svc
    await svc.channel.close()
    await svc.server.stop(0)


def content_kinds(chunks: list[pb.GenerateResponse]) -> list[str]:
    return [c.WhichOneof("content") or "final" for c in chunks]


async def test_full_tool_calling_conversation_against_openai_compatible_server(
    service, fake
) -> None:
    tools = [
        tool_def(),
        tool_def("prometheus.query", {"type": "object", "properties": {"q": {"type": "string"}}}),
    ]
    # Turn 1: the model thinks aloud and calls two tools, arguments in fragments.
    fake.add(
        sse_reply(
            [
                openai_chunk(role="assistant", content=""),
                openai_chunk(content="I will check "),
                openai_chunk(content="pods and metrics."),
                openai_chunk(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "call_pods",
                            "type": "function",
                            "function": {"name": "kubernetes-server__pods_list", "arguments": ""},
                        }
                    ]
                ),
                openai_chunk(
                    tool_calls=[{"index": 0, "function": {"arguments": '{"namespace": "prod"}'}}]
                ),
                openai_chunk(
                    tool_calls=[
                        {
                            "index": 1,
                            "id": "call_prom",
                            "type": "function",
                            "function": {"name": "prometheus__query", "arguments": '{"q": "up"}'},
                        }
                    ]
                ),
                openai_chunk(finish="tool_calls"),
                openai_chunk(usage=openai_usage(500, 40)),
                openai_done(),
            ]
        ),
        # Turn 2: the final answer.
        sse_reply(
            [
                openai_chunk(content="Root cause: "),
                openai_chunk(content="OOMKilled."),
                openai_chunk(finish="stop"),
                openai_chunk(usage=openai_usage(700, 10, cached=512)),
                openai_done(),
            ]
        ),
    )
    history = [msg("system", "You are TARSy."), msg("user", "Pod x restarts. Why?")]
    request = make_request("openai", f"{fake.url}/v1", model="qwen3", messages=history, tools=tools)
    first = await service.generate(request)
    assert content_kinds(first) == ["text", "text", "tool_call", "tool_call", "usage", "final"]
    assert [c.is_final for c in first] == [False] * 5 + [True]
    calls = [c.tool_call for c in first if c.WhichOneof("content") == "tool_call"]
    assert [(c.call_id, c.name) for c in calls] == [
        ("call_pods", "kubernetes-server.pods_list"),
        ("call_prom", "prometheus.query"),
    ]
    assert [json.loads(c.arguments) for c in calls] == [{"namespace": "prod"}, {"q": "up"}]

    # The orchestrator executes the tools and sends the whole conversation back.
    history += [
        msg(
            "assistant",
            texts(first),
            tool_calls=[
                pb.ToolCall(id=c.call_id, name=c.name, arguments=c.arguments) for c in calls
            ],
        ),
        msg(
            "tool",
            "pod x: OOMKilled",
            tool_call_id="call_pods",
            tool_name="kubernetes-server.pods_list",
        ),
        msg("tool", "up=1", tool_call_id="call_prom", tool_name="prometheus.query"),
    ]
    request = make_request("openai", f"{fake.url}/v1", model="qwen3", messages=history, tools=tools)
    second = await service.generate(request)
    assert content_kinds(second) == ["text", "text", "usage", "final"]
    assert texts(second) == "Root cause: OOMKilled."
    assert (second[2].usage.input_tokens, second[2].usage.cached_input_tokens) == (700, 512)

    sent = fake.post_requests("/v1/chat/completions")[1].json
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert [tc["function"]["name"] for tc in sent["messages"][2]["tool_calls"]] == [
        "kubernetes-server__pods_list",
        "prometheus__query",
    ]
    assert sent["messages"][3] == {
        "role": "tool",
        "content": "pod x: OOMKilled",
        "tool_call_id": "call_pods",
    }
    assert sent["messages"][4]["tool_call_id"] == "call_prom"


async def test_health_service(service) -> None:
    health = health_pb2_grpc.HealthStub(service.channel)
    for name in ("", SERVICE_NAME):
        reply = await health.Check(health_pb2.HealthCheckRequest(service=name))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    await service.server.health.enter_graceful_shutdown()
    reply = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
    assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING


async def test_errors_arrive_as_final_error_chunks(service, fake) -> None:
    unknown = make_request("openai", fake.url, backend="bedrock-native")
    chunks = await service.generate(unknown)
    assert len(chunks) == 1 and chunks[0].is_final
    assert chunks[0].error.code == "invalid_backend" and not chunks[0].error.retryable
    assert "bedrock-native" in chunks[0].error.message

    no_key = make_request(
        "google", fake.url, backend="google-native", api_key_env="TARSY_TEST_UNSET_KEY"
    )
    chunks = await service.generate(no_key)
    assert chunks[-1].error.code == "credentials" and chunks[-1].is_final

    fake.add(json_reply(500, {"error": {"message": "boom"}}))
    chunks = await service.generate(make_request("openai", f"{fake.url}/v1"))
    assert content_kinds(chunks) == ["error"]
    assert (chunks[0].error.code, chunks[0].error.retryable) == ("provider_error", True)


class _Broken(LLMProvider):
    async def generate(self, request):
        yield pb.GenerateResponse(text=pb.TextDelta(content="partial"))
        raise KeyError("secret request detail")


async def test_unexpected_exception_is_internal_and_not_leaked(log_output) -> None:
    registry = ProviderRegistry()
    registry.register("langchain", _Broken())
    svc = await start(registry)
    try:
        chunks = await svc.generate(make_request("openai", "http://unused"))
    finally:
        await svc.channel.close()
        await svc.server.stop(0)
    assert content_kinds(chunks) == ["text", "error"]
    assert chunks[-1].error.code == "internal" and chunks[-1].is_final
    assert "secret request detail" not in chunks[-1].error.message
    assert "secret request detail" not in log_output.getvalue()


class TrackedSleep:
    """Real sleeping, recording when a sleep starts and when it is cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, delay: float) -> None:
        self.started.set()
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def test_cancellation_interrupts_retry_backoff(fake) -> None:
    sleep = TrackedSleep()
    registry = ProviderRegistry()
    registry.register("langchain", LangChainProvider(environ=ENV, sleep=sleep))
    svc = await start(registry)
    fake.add(json_reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "30"}))
    try:
        grpc_call = svc.stub.Generate(make_request("openai", f"{fake.url}/v1"))
        reader = asyncio.ensure_future(grpc_call.read())
        await asyncio.wait_for(sleep.started.wait(), timeout=10)
        started = time.monotonic()
        grpc_call.cancel()
        await asyncio.wait_for(sleep.cancelled.wait(), timeout=5)
        assert time.monotonic() - started < 2
        with pytest.raises(asyncio.CancelledError):
            await reader
        await asyncio.sleep(0.3)
        assert len(fake.post_requests()) == 1  # no retry after the cancellation
    finally:
        await svc.channel.close()
        await svc.server.stop(0)


async def test_cancellation_aborts_the_in_flight_provider_call(service, fake) -> None:
    fake.add(sse_reply([openai_chunk(content="thinking about it")], hang=True))
    grpc_call = service.stub.Generate(make_request("openai", f"{fake.url}/v1"))
    first = await asyncio.wait_for(grpc_call.read(), timeout=10)
    assert first.text.content == "thinking about it"
    grpc_call.cancel()
    # The provider HTTP connection is closed: the fake sees the client go away.
    assert await asyncio.to_thread(fake.disconnected.wait, 5)


async def test_deadline_cancels_the_provider_call(service, fake) -> None:
    fake.add(sse_reply([openai_chunk(content="slow")], hang=True))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await service.generate(make_request("openai", f"{fake.url}/v1"), timeout=1.0)
    assert info.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert await asyncio.to_thread(fake.disconnected.wait, 5)


async def test_logs_carry_metadata_but_no_keys_or_bodies(service, fake, log_output) -> None:
    body_marker = "PRIVATE-ALERT-PAYLOAD-1234"
    answer_marker = "MODEL-ANSWER-5678"
    fake.add(
        sse_reply(
            [
                openai_chunk(content=answer_marker),
                openai_chunk(finish="stop"),
                openai_chunk(usage=openai_usage(11, 3, cached=8)),
                openai_done(),
            ]
        ),
        json_reply(401, {"error": {"message": f"Incorrect API key provided: {API_KEY}"}}),
    )
    request = make_request(
        "openai", f"{fake.url}/v1", messages=[msg("user", body_marker)], tools=[tool_def()]
    )
    await service.generate(request)
    failed = await service.generate(request)
    assert failed[-1].error.code == "credentials"
    assert API_KEY not in failed[-1].error.message

    output = log_output.getvalue()
    assert API_KEY not in output and body_marker not in output and answer_marker not in output
    finished = [r for r in log_records(log_output) if r["msg"] == "generate finished"]
    assert [r["outcome"] for r in finished] == ["ok", "credentials"]
    assert finished[0]["session_id"] == "session-1" and finished[0]["model"] == "test-model"
    assert finished[0]["input_tokens"] == 11 and finished[0]["chunks"]["text"] == 1
    assert finished[0]["cached_input_tokens"] == 8
    assert all(isinstance(r["duration_ms"], float) for r in finished)


async def test_native_backend_over_grpc(service, fake) -> None:
    from fakes import gemini_chunk

    gate = threading.Event()
    fake.add(
        sse_reply(
            [
                gemini_chunk([{"text": "hmm", "thought": True}]),
                gemini_chunk([{"text": "answer"}], finish="STOP"),
            ],
            gate=gate,
        )
    )
    request = make_request(
        "google",
        fake.url,
        backend="google-native",
        model="gemini-2.5-pro",
        messages=[msg("user", "q")],
    )
    grpc_call = service.stub.Generate(request)
    first = await asyncio.wait_for(grpc_call.read(), timeout=10)
    assert first.thinking.content == "hmm"  # streamed while the provider still holds back
    gate.set()
    rest = []
    while (chunk := await grpc_call.read()) is not grpc.aio.EOF:
        rest.append(chunk)
    assert content_kinds(rest) == ["text", "final"]


def test_default_registry_routes_both_backends() -> None:
    registry = default_registry()
    assert registry.backends() == ["google-native", "langchain"]
    assert isinstance(registry.get("google-native"), GoogleNativeProvider)
    assert isinstance(registry.get(""), LangChainProvider)


async def test_log_lines_are_written_at_the_loops_next_turn_in_order(log_output) -> None:
    import logging

    from tarsy_llm.logs import DeferredHandler

    log = logging.getLogger("tarsy_llm.test")
    log.info("first", extra={"n": 1})
    log.warning("second", extra={"n": 2})
    # Logged from the loop: not yet written, so the call that logged goes on.
    assert log_output.getvalue() == ""
    await asyncio.sleep(0)
    records = log_records(log_output)
    assert [(r["msg"], r["n"]) for r in records] == [("first", 1), ("second", 2)]
    # Pending lines are written on flush (shutdown) and at once without a loop.
    log.info("third")
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, DeferredHandler)]
    assert len(handlers) == 1
    handlers[0].flush()
    assert log_records(log_output)[-1]["msg"] == "third"
    await asyncio.to_thread(log.info, "from a thread")
    assert log_records(log_output)[-1]["msg"] == "from a thread"


async def test_a_deferred_record_keeps_the_time_it_was_logged() -> None:
    import logging

    from tarsy_llm.logs import DeferredHandler

    written: list[tuple[logging.LogRecord, float]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            written.append((record, time.time()))

    log = logging.getLogger("tarsy_llm.test.deferred")
    log.propagate = False
    log.addHandler(DeferredHandler(Collect()))
    try:
        log.warning("late")
        time.sleep(0.05)  # the loop is busy: the line waits
        assert written == []
        await asyncio.sleep(0)
    finally:
        log.handlers.clear()
        log.propagate = True
    ((record, at),) = written
    assert at - record.created >= 0.04
