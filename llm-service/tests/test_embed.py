"""``Embed``: Gemini ``batchEmbedContents`` and OpenAI ``/embeddings`` against the fake
provider endpoint, the errors and retries, and the RPC end to end."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from conftest import API_KEY, ENV, KEY_ENV, log_records
from fakes import json_reply

from tarsy_llm.errors import ErrorCode, LLMServiceError
from tarsy_llm.proto import llm_service_pb2 as pb
from tarsy_llm.proto import llm_service_pb2_grpc as pb_grpc
from tarsy_llm.providers.base import LLMProvider
from tarsy_llm.providers.embeddings import MAX_BATCH, backend_for
from tarsy_llm.providers.google_native import GoogleNativeProvider
from tarsy_llm.providers.langchain_provider import LangChainProvider
from tarsy_llm.providers.registry import ProviderRegistry, default_registry
from tarsy_llm.server import LLMServer

GEMINI_MODEL = "gemini-embedding-001"
OPENAI_MODEL = "text-embedding-3-small"
# Texts the logs must never show.
SECRET_TEXT = "pod checkout-7f9 crashlooping in namespace payments-zz"


def google_cfg(fake, **kwargs) -> pb.LLMConfig:
    fields = {"provider": "google", "model": GEMINI_MODEL, "api_key_env": KEY_ENV}
    return pb.LLMConfig(**(fields | {"base_url": fake.url} | kwargs))


def openai_cfg(fake, **kwargs) -> pb.LLMConfig:
    fields = {"provider": "openai", "model": OPENAI_MODEL, "api_key_env": KEY_ENV}
    return pb.LLMConfig(**(fields | {"base_url": f"{fake.url}/v1"} | kwargs))


def gemini_vectors(*vectors: list[float]) -> object:
    return json_reply(200, {"embeddings": [{"values": v} for v in vectors]})


def openai_vectors(*vectors: list[float], order: list[int] | None = None) -> object:
    indices = order if order is not None else list(range(len(vectors)))
    data = [{"object": "embedding", "index": i, "embedding": vectors[i]} for i in indices]
    return json_reply(
        200,
        {
            "object": "list",
            "data": data,
            "model": OPENAI_MODEL,
            "usage": {"prompt_tokens": 3, "total_tokens": 3},
        },
    )


def gemini_error(status: int, message: str, state: str = "INVALID_ARGUMENT") -> object:
    return json_reply(status, {"error": {"code": status, "message": message, "status": state}})


def openai_error(status: int, message: str, headers: dict | None = None) -> object:
    return json_reply(
        status, {"error": {"message": message, "type": "error", "code": None}}, headers
    )


def native(sleeps=None, environ=ENV) -> GoogleNativeProvider:
    return GoogleNativeProvider(environ=environ, **({"sleep": sleeps} if sleeps else {}))


def lc(sleeps=None, environ=ENV) -> LangChainProvider:
    return LangChainProvider(environ=environ, **({"sleep": sleeps} if sleeps else {}))


# -- providers ------------------------------------------------------------------


async def test_gemini_batch_embed_contents(fake) -> None:
    fake.add(gemini_vectors([0.5, -1, 2], [0, 0.25, 1]))
    vectors = await native().embed(google_cfg(fake), ["disk full", "OOMKilled"])
    assert vectors == [[0.5, -1.0, 2.0], [0.0, 0.25, 1.0]]
    (sent,) = fake.post_requests()
    assert sent.path == f"/v1beta/models/{GEMINI_MODEL}:batchEmbedContents"
    assert sent.headers["x-goog-api-key"] == API_KEY
    # One request per text, each with one text part, in order.
    assert sent.json == {
        "requests": [
            {"content": {"parts": [{"text": "disk full"}]}, "model": f"models/{GEMINI_MODEL}"},
            {"content": {"parts": [{"text": "OOMKilled"}]}, "model": f"models/{GEMINI_MODEL}"},
        ]
    }


async def test_openai_embeddings_in_the_order_of_the_texts(fake) -> None:
    # A compatible server may list the vectors out of order; the index decides.
    fake.add(openai_vectors([1.0, 0.0], [0.0, 1.0], order=[1, 0]))
    vectors = await lc().embed(openai_cfg(fake), ["first", "second"])
    assert vectors == [[1.0, 0.0], [0.0, 1.0]]
    (sent,) = fake.post_requests()
    assert sent.path == "/v1/embeddings"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.json == {
        "model": OPENAI_MODEL,
        "input": ["first", "second"],
        "encoding_format": "float",
    }


async def test_openai_compatible_server_without_a_key(fake) -> None:
    fake.add(openai_vectors([1.0, 2.0]))
    cfg = openai_cfg(fake, api_key_env="", model="nomic-embed-text")
    assert await lc(environ={}).embed(cfg, ["x"]) == [[1.0, 2.0]]
    assert fake.post_requests()[0].json["model"] == "nomic-embed-text"


@pytest.mark.parametrize("kind", ["google", "openai"])
async def test_more_texts_than_a_batch_take_several_requests(fake, kind) -> None:
    texts = [f"text {i}" for i in range(MAX_BATCH + 20)]
    if kind == "google":
        fake.add(gemini_vectors(*[[float(i), 1.0] for i in range(MAX_BATCH)]))
        fake.add(gemini_vectors(*[[float(i), 1.0] for i in range(MAX_BATCH, len(texts))]))
        vectors = await native().embed(google_cfg(fake), texts)
        sizes = [len(r.json["requests"]) for r in fake.post_requests()]
    else:
        fake.add(openai_vectors(*[[float(i), 1.0] for i in range(MAX_BATCH)]))
        fake.add(openai_vectors(*[[float(i), 1.0] for i in range(MAX_BATCH, len(texts))]))
        vectors = await lc().embed(openai_cfg(fake), texts)
        sizes = [len(r.json["input"]) for r in fake.post_requests()]
    assert sizes == [MAX_BATCH, 20]
    assert [v[0] for v in vectors] == [float(i) for i in range(len(texts))]


async def test_rate_limits_are_retried_like_generate(fake, sleeps) -> None:
    fake.add(
        gemini_error(429, "quota", "RESOURCE_EXHAUSTED"),
        gemini_error(429, "quota", "RESOURCE_EXHAUSTED"),
        gemini_vectors([1.0]),
    )
    assert await native(sleeps).embed(google_cfg(fake), ["x"]) == [[1.0]]
    assert sleeps.delays == [1.0, 2.0]
    # The provider's Retry-After wins over the backoff.
    fake.add(openai_error(429, "slow down", {"retry-after": "7"}), openai_vectors([2.0]))
    assert await lc(sleeps).embed(openai_cfg(fake), ["x"]) == [[2.0]]
    assert sleeps.delays == [1.0, 2.0, 7.0]


async def test_rate_limits_run_out_as_max_retries(fake, sleeps) -> None:
    fake.add(*[openai_error(429, "slow down") for _ in range(4)])
    with pytest.raises(LLMServiceError) as info:
        await lc(sleeps).embed(openai_cfg(fake), ["x"])
    assert info.value.code is ErrorCode.MAX_RETRIES and info.value.retryable
    assert sleeps.delays == [1.0, 2.0, 4.0]
    assert len(fake.post_requests()) == 4


@pytest.mark.parametrize(
    ("reply", "code", "retryable"),
    [
        (openai_error(401, "Incorrect API key provided"), ErrorCode.CREDENTIALS, False),
        (openai_error(400, "model not found"), ErrorCode.INVALID_REQUEST, False),
        (openai_error(503, "overloaded"), ErrorCode.PROVIDER_ERROR, True),
    ],
)
async def test_openai_http_errors_are_classified_like_generate(
    fake, sleeps, reply, code, retryable
) -> None:
    fake.add(reply)
    with pytest.raises(LLMServiceError) as info:
        await lc(sleeps).embed(openai_cfg(fake), ["x"])
    assert (info.value.code, info.value.retryable) == (code, retryable)
    # Not retried here: only rate limits are.
    assert len(fake.post_requests()) == 1 and sleeps.delays == []


async def test_gemini_http_errors_are_classified_like_generate(fake, sleeps) -> None:
    fake.add(gemini_error(400, "API key not valid. Please pass a valid API key."))
    with pytest.raises(LLMServiceError) as info:
        await native(sleeps).embed(google_cfg(fake), ["x"])
    assert info.value.code is ErrorCode.CREDENTIALS
    fake.add(gemini_error(500, "internal", "INTERNAL"))
    with pytest.raises(LLMServiceError) as info:
        await native(sleeps).embed(google_cfg(fake), ["x"])
    assert info.value.code is ErrorCode.PROVIDER_ERROR and info.value.retryable


@pytest.mark.parametrize(
    ("answer", "what"),
    [
        ({"embeddings": [{"values": [1.0]}]}, "1 embeddings for 2 texts"),
        ({"embeddings": [{"values": [1.0]}, {"values": [1.0, 2.0]}]}, "different lengths"),
        ({"embeddings": [{"values": [1.0]}, {"values": []}]}, "empty or malformed"),
        ({}, "0 embeddings for 2 texts"),
    ],
)
async def test_unusable_gemini_answers_are_provider_errors(fake, answer, what) -> None:
    fake.add(json_reply(200, answer))
    with pytest.raises(LLMServiceError) as info:
        await native().embed(google_cfg(fake), ["a", "b"])
    assert info.value.code is ErrorCode.PROVIDER_ERROR and not info.value.retryable
    assert what in info.value.message


@pytest.mark.parametrize(
    ("answer", "what"),
    [
        ({"data": [{"index": 0, "embedding": [1.0]}]}, "1 embeddings for 2 texts"),
        ({"object": "list"}, "without data"),
        (
            {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": "AAAA"}]},
            "malformed",
        ),
        (
            {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": ["x"]}]},
            "non-numeric",
        ),
    ],
)
async def test_unusable_openai_answers_are_provider_errors(fake, answer, what) -> None:
    fake.add(json_reply(200, answer))
    with pytest.raises(LLMServiceError) as info:
        await lc().embed(openai_cfg(fake), ["a", "b"])
    assert info.value.code is ErrorCode.PROVIDER_ERROR and not info.value.retryable
    assert what in info.value.message


async def test_batches_of_different_lengths_are_rejected(fake) -> None:
    texts = ["t"] * (MAX_BATCH + 1)
    fake.add(openai_vectors(*[[1.0, 2.0]] * MAX_BATCH), openai_vectors([1.0]))
    with pytest.raises(LLMServiceError, match="different lengths"):
        await lc().embed(openai_cfg(fake), texts)


async def test_missing_key_and_model_fail_before_any_request(fake) -> None:
    for provider, cfg in (
        (native(environ={}), google_cfg(fake)),
        (lc(environ={}), openai_cfg(fake)),
    ):
        with pytest.raises(LLMServiceError) as info:
            await provider.embed(cfg, ["x"])
        assert info.value.code is ErrorCode.CREDENTIALS and not info.value.retryable
        assert KEY_ENV in info.value.message
    with pytest.raises(LLMServiceError) as info:
        await lc(environ={}).embed(openai_cfg(fake, api_key_env="", base_url=""), ["x"])
    assert info.value.code is ErrorCode.CREDENTIALS
    with pytest.raises(LLMServiceError, match="model") as info:
        await native().embed(google_cfg(fake, model=""), ["x"])
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert fake.requests == []


def test_backends_by_provider_type() -> None:
    assert backend_for(pb.LLMConfig(provider="openai")) == "langchain"
    assert backend_for(pb.LLMConfig(provider="Google")) == "google-native"
    assert backend_for(pb.LLMConfig(provider="gemini")) == "google-native"
    for provider, what in (("anthropic", "not 'anthropic'"), ("", "provider is empty")):
        with pytest.raises(LLMServiceError) as info:
            backend_for(pb.LLMConfig(provider=provider))
        assert info.value.code is ErrorCode.INVALID_REQUEST
        assert "Embed serves provider types google and openai" in info.value.message
        assert what in info.value.message


async def test_a_backend_without_embeddings_rejects_the_provider(fake) -> None:
    with pytest.raises(LLMServiceError) as info:
        await native().embed(pb.LLMConfig(provider="openai", model="m"), ["x"])
    assert info.value.code is ErrorCode.INVALID_REQUEST
    with pytest.raises(LLMServiceError) as info:
        await lc().embed(pb.LLMConfig(provider="google", model="m"), ["x"])
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert fake.requests == []


# -- over gRPC ------------------------------------------------------------------


class Service:
    def __init__(self, server: LLMServer, channel: grpc.aio.Channel) -> None:
        self.server = server
        self.channel = channel
        self.stub = pb_grpc.LLMServiceStub(channel)

    async def embed(self, texts: list[str], cfg: pb.LLMConfig, **kwargs) -> list[list[float]]:
        answer = await self.stub.Embed(pb.EmbedRequest(texts=texts, llm_config=cfg), **kwargs)
        return [list(e.values) for e in answer.embeddings]

    async def failure(self, texts: list[str], cfg: pb.LLMConfig) -> grpc.aio.AioRpcError:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await self.embed(texts, cfg)
        return info.value


@pytest.fixture
async def service(monkeypatch) -> AsyncIterator[Service]:
    """The production registry, with the test key in the process environment."""
    monkeypatch.setenv(KEY_ENV, API_KEY)
    registry = default_registry()
    server = LLMServer("127.0.0.1:0", registry)
    await server.start()
    channel = grpc.aio.insecure_channel(server.address)
    yield Service(server, channel)
    await channel.close()
    await server.stop(0)
    await registry.aclose()


async def test_embed_over_grpc_both_provider_types(service, fake) -> None:
    fake.add(gemini_vectors([0.25, 0.5], [1.0, -1.0]))
    assert await service.embed(["a", "b"], google_cfg(fake)) == [[0.25, 0.5], [1.0, -1.0]]
    fake.add(openai_vectors([0.125, 2.0]))
    assert await service.embed(["c"], openai_cfg(fake)) == [[0.125, 2.0]]
    assert [r.path for r in fake.post_requests()] == [
        f"/v1beta/models/{GEMINI_MODEL}:batchEmbedContents",
        "/v1/embeddings",
    ]


async def test_no_texts_no_vectors_and_no_provider_call(service, fake) -> None:
    assert await service.embed([], openai_cfg(fake, api_key_env="UNSET_KEY_ENV")) == []
    assert fake.requests == []


async def test_unsupported_provider_type_is_invalid_argument(service, fake) -> None:
    error = await service.failure(["x"], pb.LLMConfig(provider="anthropic", model="claude"))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        "invalid_request: Embed serves provider types google and openai, not 'anthropic'"
    )
    error = await service.failure([], pb.LLMConfig(model="m"))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert fake.requests == []


async def test_errors_over_grpc_carry_a_status_and_the_code(service, fake) -> None:
    error = await service.failure(["x"], google_cfg(fake, api_key_env="UNSET_KEY_ENV"))
    assert error.code() is grpc.StatusCode.UNAUTHENTICATED
    assert error.details().startswith("credentials: environment variable UNSET_KEY_ENV")
    fake.add(openai_error(401, f"Incorrect API key provided: {API_KEY}"))
    error = await service.failure(["x"], openai_cfg(fake))
    assert error.code() is grpc.StatusCode.UNAUTHENTICATED
    assert API_KEY not in error.details()
    fake.add(openai_error(503, "overloaded"))
    error = await service.failure(["x"], openai_cfg(fake))
    assert error.code() is grpc.StatusCode.UNAVAILABLE
    assert error.details().startswith("provider_error: provider returned HTTP 503")
    fake.add(openai_error(400, "unknown model"))
    error = await service.failure(["x"], openai_cfg(fake))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    fake.add(json_reply(200, {"data": []}))
    error = await service.failure(["x"], openai_cfg(fake))
    assert error.code() is grpc.StatusCode.UNKNOWN
    assert "0 embeddings for 1 texts" in error.details()
    # Rate limits that outlast the retries (Retry-After 0: no waiting here).
    fake.add(*[openai_error(429, "slow down", {"retry-after": "0"}) for _ in range(4)])
    error = await service.failure(["x"], openai_cfg(fake))
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.details().startswith("max_retries: rate limited after 3 retries")


async def test_embed_logs_counts_but_never_texts_or_keys(service, fake, log_output) -> None:
    fake.add(openai_vectors([1.0, 2.0, 3.0]))
    await service.embed([SECRET_TEXT], openai_cfg(fake))
    fake.add(openai_error(400, f"bad input: {SECRET_TEXT} with key {API_KEY}"))
    error = await service.failure([SECRET_TEXT], openai_cfg(fake))
    assert API_KEY not in error.details()
    output = log_output.getvalue()
    assert SECRET_TEXT not in output and API_KEY not in output
    finished = [r for r in log_records(log_output) if r["msg"] == "embed finished"]
    assert [(r["outcome"], r["texts"], r["backend"]) for r in finished] == [
        ("ok", 1, "langchain"),
        ("invalid_request", 1, "langchain"),
    ]
    assert finished[0]["dimensions"] == 3
    assert service.server.running_calls == 0


async def test_an_unexpected_failure_is_internal_and_not_leaked(log_output) -> None:
    class Broken(LLMProvider):
        def generate(self, request):
            raise NotImplementedError

        async def embed(self, cfg, texts):
            raise RuntimeError(f"secret detail {texts[0]}")

    registry = ProviderRegistry()
    registry.register("langchain", Broken())
    server = LLMServer("127.0.0.1:0", registry)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            service = Service(server, channel)
            cfg = pb.LLMConfig(provider="openai", model="m")
            error = await service.failure([SECRET_TEXT], cfg)
    finally:
        await server.stop(0)
    assert error.code() is grpc.StatusCode.INTERNAL
    assert error.details() == "internal: internal error in the LLM service (RuntimeError)"
    assert "secret detail" not in log_output.getvalue()
    assert SECRET_TEXT not in log_output.getvalue()
