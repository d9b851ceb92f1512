"""What ``Embed`` shares between providers: which backend serves a provider
type, batching, the OpenAI ``/embeddings`` call, and the checks of an answer.

Provider ``google`` is embedded by the google-native backend (its google-genai
clients, ``batchEmbedContents``), provider ``openai`` by the langchain backend
(its openai SDK clients, ``/embeddings`` of the OpenAI API or of an
OpenAI-compatible ``base_url``): the clients a deployment already made for
``Generate`` serve its embeddings too. Neither texts nor vectors are logged.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..errors import ErrorCode, LLMServiceError
from ..proto import llm_service_pb2 as pb
from .google_common import GOOGLE_PROVIDERS

# Provider type (``llm_config.provider``, lower case) → the backend whose
# provider embeds for it. Names as in providers.registry (not imported: it
# imports this module's users).
EMBED_BACKENDS: dict[str, str] = {"openai": "langchain"} | dict.fromkeys(
    GOOGLE_PROVIDERS, "google-native"
)
EMBED_PROVIDER_TYPES = ("google", "openai")
# Texts per provider request: the Gemini API takes at most 100 per
# batchEmbedContents (OpenAI up to 2048 inputs; one size keeps it simple).
MAX_BATCH = 100
EMBEDDINGS_PATH = "/embeddings"

Vectors = list[list[float]]


def backend_for(cfg: pb.LLMConfig) -> str:
    """The backend that embeds for ``cfg.provider``, or an ``invalid_request``
    error naming the provider types ``Embed`` serves."""
    provider = cfg.provider.strip().lower()
    backend = EMBED_BACKENDS.get(provider)
    if backend is not None:
        return backend
    served = " and ".join(EMBED_PROVIDER_TYPES)
    what = f"not {cfg.provider!r}" if provider else "llm_config.provider is empty"
    raise LLMServiceError(
        ErrorCode.INVALID_REQUEST,
        f"Embed serves provider types {served}, {what}",
        retryable=False,
    )


def validate(cfg: pb.LLMConfig) -> None:
    """Rejects an embedding configuration no provider could serve."""
    if not cfg.model.strip():
        raise LLMServiceError(
            ErrorCode.INVALID_REQUEST,
            "llm_config.model (the embedding model) is empty",
            retryable=False,
        )


async def in_batches(
    texts: Sequence[str], embed_batch: Callable[[list[str]], Awaitable[Any]]
) -> Vectors:
    """Embeds ``texts`` in batches of at most :data:`MAX_BATCH`, one after the
    other, each answer checked (:func:`checked`); all vectors have one length."""
    vectors: Vectors = []
    for start in range(0, len(texts), MAX_BATCH):
        batch = list(texts[start : start + MAX_BATCH])
        vectors.extend(checked(await embed_batch(batch), len(batch)))
    if vectors and any(len(v) != len(vectors[0]) for v in vectors):
        raise _bad_answer("vectors of different lengths")
    return vectors


def checked(vectors: Any, count: int) -> Vectors:
    """``vectors`` as lists of floats when they are ``count`` non-empty lists of
    finite numbers of one length; otherwise a non-retryable ``provider_error``."""
    if not isinstance(vectors, list) or len(vectors) != count:
        got = len(vectors) if isinstance(vectors, list) else "no"
        raise _bad_answer(f"{got} embeddings for {count} texts")
    out: Vectors = []
    for vector in vectors:
        if not isinstance(vector, list | tuple) or not vector:
            raise _bad_answer("an empty or malformed embedding")
        if not all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            for x in vector
        ):
            raise _bad_answer("an embedding with non-numeric or non-finite values")
        out.append([float(x) for x in vector])
    if any(len(v) != len(out[0]) for v in out):
        raise _bad_answer("vectors of different lengths")
    return out


def _bad_answer(what: str) -> LLMServiceError:
    return LLMServiceError(ErrorCode.PROVIDER_ERROR, f"provider returned {what}", retryable=False)


async def openai_embed(client: Any, model: str, texts: list[str]) -> Any:
    """One ``POST /embeddings`` through the openai SDK client (float vectors);
    the vectors in the order of ``texts`` (unchecked)."""
    answer = await client.post(
        EMBEDDINGS_PATH,
        cast_to=object,
        body={"model": model, "input": texts, "encoding_format": "float"},
    )
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise _bad_answer("an embeddings answer without data")
    items = [item for item in data if isinstance(item, dict)]
    # Sorted by index when every item has one (OpenAI's order is already the
    # request's; some compatible servers only say so by the index).
    if all(isinstance(item.get("index"), int) for item in items):
        items.sort(key=lambda item: item["index"])
    return [item.get("embedding") for item in items]
