"""Retries (rate limits, empty responses) and error codes, end to end through the SDKs."""

from __future__ import annotations

import socket

import pytest
from conftest import API_KEY, ENV, collect, kinds, make_request, texts
from fakes import (
    gemini_chunk,
    json_reply,
    openai_chunk,
    openai_done,
    openai_usage,
    sse_reply,
)

from tarsy_llm.errors import ErrorCode, LLMServiceError
from tarsy_llm.providers.google_native import GoogleNativeProvider
from tarsy_llm.providers.langchain_provider import LangChainProvider


def openai_ok(text: str = "recovered") -> object:
    return sse_reply(
        [
            openai_chunk(content=text),
            openai_chunk(finish="stop"),
            openai_chunk(usage=openai_usage(10, 2)),
            openai_done(),
        ]
    )


def openai_empty() -> object:
    # A stream that ends without a word: only the finish marker and usage.
    return sse_reply(
        [
            openai_chunk(role="assistant", content=""),
            openai_chunk(finish="stop"),
            openai_chunk(usage=openai_usage(99, 0)),
            openai_done(),
        ]
    )


def openai_error(status: int, message: str, headers: dict | None = None) -> object:
    return json_reply(
        status, {"error": {"message": message, "type": "error", "code": None}}, headers
    )


def gemini_error(status: int, message: str, details: list | None = None) -> object:
    error = {"code": status, "message": message, "status": "RESOURCE_EXHAUSTED"}
    if details:
        error["details"] = details
    return json_reply(status, {"error": error})


def lc(sleeps) -> LangChainProvider:
    return LangChainProvider(environ=ENV, sleep=sleeps)


def native(sleeps) -> GoogleNativeProvider:
    return GoogleNativeProvider(environ=ENV, sleep=sleeps)


def openai_request(fake, **kwargs):
    return make_request("openai", f"{fake.url}/v1", **kwargs)


def gemini_request(fake, **kwargs):
    return make_request(
        "google", fake.url, backend="google-native", model="gemini-2.5-flash", **kwargs
    )


async def test_rate_limit_is_retried_with_exponential_backoff(fake, sleeps) -> None:
    fake.add(
        openai_error(429, "slow down"),
        openai_error(429, "slow down"),
        openai_error(429, "slow down"),
        openai_ok(),
    )
    chunks = await collect(lc(sleeps).generate(openai_request(fake)))
    assert texts(chunks) == "recovered"
    assert sleeps.delays == [1.0, 2.0, 4.0]
    assert len(fake.post_requests()) == 4


async def test_rate_limit_honours_retry_after_and_retry_info(fake, sleeps) -> None:
    retry_info = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]
    fake.add(
        json_reply(
            429, {"error": {"code": 429, "message": "quota", "status": "X"}}, {"Retry-After": "5"}
        ),
        gemini_error(429, "quota", retry_info),
        json_reply(429, {"error": {"code": 429, "message": "quota"}}, {"Retry-After": "3600"}),
        sse_reply([gemini_chunk([{"text": "ok"}], finish="STOP")]),
    )
    chunks = await collect(native(sleeps).generate(gemini_request(fake)))
    assert texts(chunks) == "ok"
    # Header, google.rpc.RetryInfo, and an hour-long suggestion capped at 60 s.
    assert sleeps.delays == [5.0, 7.0, 60.0]


async def test_rate_limit_exhaustion_is_max_retries_retryable(fake, sleeps) -> None:
    for _ in range(4):
        fake.add(openai_error(429, "slow down"))
    with pytest.raises(LLMServiceError) as info:
        await collect(lc(sleeps).generate(openai_request(fake)))
    assert info.value.code is ErrorCode.MAX_RETRIES and info.value.retryable is True
    assert len(fake.post_requests()) == 4 and len(sleeps.delays) == 3


async def test_empty_responses_are_retried_after_three_seconds(fake, sleeps) -> None:
    fake.add(openai_empty(), openai_empty(), openai_ok("finally"))
    chunks = await collect(lc(sleeps).generate(openai_request(fake)))
    assert sleeps.delays == [3.0, 3.0]
    assert kinds(chunks) == ["text", "usage"]
    # Usage of the discarded empty attempts is not reported.
    assert chunks[1].usage.input_tokens == 10


async def test_empty_response_exhaustion_is_max_retries_retryable(fake, sleeps) -> None:
    for _ in range(4):
        fake.add(sse_reply([gemini_chunk([], finish="SAFETY")]))
    with pytest.raises(LLMServiceError) as info:
        await collect(native(sleeps).generate(gemini_request(fake)))
    assert info.value.code is ErrorCode.MAX_RETRIES and info.value.retryable is True
    assert sleeps.delays == [3.0, 3.0, 3.0]
    assert len(fake.post_requests()) == 4


@pytest.mark.parametrize(
    ("status", "message", "code", "retryable"),
    [
        (401, "Incorrect API key provided", ErrorCode.CREDENTIALS, False),
        (403, "permission denied", ErrorCode.CREDENTIALS, False),
        (400, "Invalid 'messages[1].content'", ErrorCode.INVALID_REQUEST, False),
        (404, "The model does not exist", ErrorCode.INVALID_REQUEST, False),
        (
            400,
            "This model's maximum context length is 8192 tokens. However, you requested "
            "9000 tokens",
            ErrorCode.CONTEXT_OVERFLOW,
            False,
        ),
        (500, "The server had an error", ErrorCode.PROVIDER_ERROR, True),
        (503, "overloaded", ErrorCode.PROVIDER_ERROR, True),
    ],
)
async def test_http_errors_map_to_codes_without_retry(
    fake, sleeps, status, message, code, retryable
) -> None:
    fake.add(openai_error(status, message))
    with pytest.raises(LLMServiceError) as info:
        await collect(lc(sleeps).generate(openai_request(fake)))
    assert (info.value.code, info.value.retryable) == (code, retryable)
    assert str(status) in info.value.message
    assert len(fake.post_requests()) == 1 and sleeps.delays == []


async def test_gemini_auth_error_is_credentials(fake, sleeps) -> None:
    fake.add(
        json_reply(
            400,
            {
                "error": {
                    "code": 400,
                    "status": "INVALID_ARGUMENT",
                    "message": "Unknown name 'foo'.",
                }
            },
        ),
        json_reply(
            400,
            {
                "error": {
                    "code": 400,
                    "status": "INVALID_ARGUMENT",
                    "message": "API key not valid. Please pass a valid API key.",
                }
            },
        ),
        json_reply(
            403, {"error": {"code": 403, "status": "PERMISSION_DENIED", "message": "denied"}}
        ),
    )
    with pytest.raises(LLMServiceError) as info:
        await collect(native(sleeps).generate(gemini_request(fake)))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    for _ in range(2):
        with pytest.raises(LLMServiceError) as info:
            await collect(native(sleeps).generate(gemini_request(fake)))
        assert info.value.code is ErrorCode.CREDENTIALS and not info.value.retryable


async def test_echoed_api_key_is_redacted_from_the_error(fake, sleeps) -> None:
    fake.add(openai_error(401, f"Incorrect API key provided: {API_KEY}."))
    with pytest.raises(LLMServiceError) as info:
        await collect(lc(sleeps).generate(openai_request(fake)))
    assert API_KEY not in info.value.message and "[REDACTED]" in info.value.message


async def test_failure_after_partial_output_is_partial_stream_error(fake, sleeps) -> None:
    fake.add(sse_reply([openai_chunk(content="half an ans")], truncate=True))
    stream = lc(sleeps).generate(openai_request(fake))
    received = []
    with pytest.raises(LLMServiceError) as info:
        async for chunk in stream:
            received.append(chunk)
    assert texts(received) == "half an ans"
    assert info.value.code is ErrorCode.PARTIAL_STREAM_ERROR and info.value.retryable is True
    assert len(fake.post_requests()) == 1 and sleeps.delays == []


async def test_gemini_stream_cut_mid_way_is_partial_stream_error(fake, sleeps) -> None:
    fake.add(sse_reply([gemini_chunk([{"text": "partial"}])], truncate=True))
    with pytest.raises(LLMServiceError) as info:
        await collect(native(sleeps).generate(gemini_request(fake)))
    assert info.value.code is ErrorCode.PARTIAL_STREAM_ERROR and info.value.retryable


async def test_unreachable_provider_is_retryable_provider_error(sleeps) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port any more: connection refused.
    req = make_request("openai", f"http://127.0.0.1:{port}/v1")
    with pytest.raises(LLMServiceError) as info:
        await collect(lc(sleeps).generate(req))
    assert info.value.code is ErrorCode.PROVIDER_ERROR and info.value.retryable is True
