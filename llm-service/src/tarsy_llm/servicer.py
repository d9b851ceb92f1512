"""The ``llm.v1.LLMService`` servicer: one ``Generate`` call → one provider stream;
one ``Embed`` call → the vectors of its texts (one provider request per 100)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import grpc

from . import chunks
from .errors import ErrorCode, LLMServiceError
from .proto import llm_service_pb2 as pb
from .proto import llm_service_pb2_grpc as pb_grpc
from .providers import embeddings
from .providers.registry import DEFAULT_BACKEND, ProviderRegistry

log = logging.getLogger(__name__)

# How an ``Embed`` failure is answered (a unary call has no ErrorInfo chunk):
# the status code by error code; the message is "code: message".
_EMBED_STATUS = {
    ErrorCode.CREDENTIALS: grpc.StatusCode.UNAUTHENTICATED,
    ErrorCode.INVALID_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.INVALID_BACKEND: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.CONTEXT_OVERFLOW: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.MAX_RETRIES: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorCode.INTERNAL: grpc.StatusCode.INTERNAL,
}


def embed_status(error: LLMServiceError) -> grpc.StatusCode:
    """The gRPC status of a failed ``Embed``: retryable provider errors (5xx,
    network) are UNAVAILABLE, the other provider errors UNKNOWN."""
    status = _EMBED_STATUS.get(error.code)
    if status is not None:
        return status
    return grpc.StatusCode.UNAVAILABLE if error.retryable else grpc.StatusCode.UNKNOWN


class LLMServicer(pb_grpc.LLMServiceServicer):
    """Routes each request to the provider its backend names and streams the result.

    Every call ends with exactly one chunk that has ``is_final`` set: an empty
    chunk after the usage chunk on success, or the ``ErrorInfo`` chunk on failure.
    """

    def __init__(self, registry: ProviderRegistry) -> None:
        self._registry = registry
        self._running = 0

    @property
    def running(self) -> int:
        """``Generate`` and ``Embed`` calls in progress."""
        return self._running

    async def Embed(
        self, request: pb.EmbedRequest, context: grpc.aio.ServicerContext
    ) -> pb.EmbedResponse:
        """The vectors of ``request.texts``; failures end the call with a status
        (:func:`embed_status`). Logs counts and codes, never texts or vectors."""
        cfg = request.llm_config
        fields: dict[str, Any] = {
            "provider": cfg.provider,
            "model": cfg.model,
            "texts": len(request.texts),
        }
        log.info("embed started", extra=fields)
        started = time.monotonic()
        outcome = "cancelled"
        failure: LLMServiceError | None = None
        self._running += 1
        try:
            backend = embeddings.backend_for(cfg)
            fields["backend"] = backend
            vectors: list[list[float]] = []
            if request.texts:
                provider = self._registry.get(backend)
                vectors = await provider.embed(cfg, list(request.texts))
            outcome = "ok"
            if vectors:
                fields["dimensions"] = len(vectors[0])
            return pb.EmbedResponse(embeddings=[pb.Embedding(values=vector) for vector in vectors])
        except LLMServiceError as exc:
            failure = exc
            outcome = str(exc.code)
            # Code and flag only: a provider's error text may quote the input
            # (the caller gets it in the status message).
            log.warning(
                "embed failed",
                extra={**fields, "code": outcome, "retryable": exc.retryable},
            )
        except Exception as exc:
            outcome = str(ErrorCode.INTERNAL)
            # Type only, as for Generate.
            log.error(
                "embed failed unexpectedly",
                extra={**fields, "code": outcome, "error_type": type(exc).__name__},
            )
            failure = LLMServiceError(
                ErrorCode.INTERNAL,
                f"internal error in the LLM service ({type(exc).__name__})",
                retryable=False,
            )
        finally:
            self._running -= 1
            log.info(
                "embed finished",
                extra={
                    **fields,
                    "outcome": outcome,
                    "duration_ms": round((time.monotonic() - started) * 1000, 1),
                },
            )
        # Only a failure gets here (success returned above); the status goes
        # out after the log lines.
        if failure is not None:
            await context.abort(embed_status(failure), str(failure))

    async def Generate(
        self, request: pb.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.GenerateResponse]:
        cfg = request.llm_config
        fields: dict[str, Any] = {
            "session_id": request.session_id,
            "execution_id": request.execution_id,
            "backend": cfg.backend or DEFAULT_BACKEND,
            "provider": cfg.provider,
            "model": cfg.model,
        }
        log.info(
            "generate started",
            extra={**fields, "messages": len(request.messages), "tools": len(request.tools)},
        )
        started = time.monotonic()
        counts: dict[str, int] = {}
        # Stays "cancelled" unless the call ends another way: a cancelled call
        # may stop at any await or yield.
        outcome = "cancelled"
        self._running += 1
        try:
            provider = self._registry.get(cfg.backend)
            async with aclosing(provider.generate(request)) as stream:
                async for chunk in stream:
                    kind = chunks.kind(chunk) or "empty"
                    counts[kind] = counts.get(kind, 0) + 1
                    if kind == "usage":
                        fields.update(
                            input_tokens=chunk.usage.input_tokens,
                            output_tokens=chunk.usage.output_tokens,
                            thinking_tokens=chunk.usage.thinking_tokens,
                            cached_input_tokens=chunk.usage.cached_input_tokens,
                        )
                    yield chunk
            outcome = "ok"
            yield chunks.final()
        except LLMServiceError as exc:
            outcome = str(exc.code)
            log.warning(
                "generate failed",
                extra={
                    **fields,
                    "code": str(exc.code),
                    "retryable": exc.retryable,
                    "error": exc.message[:500],
                },
            )
            yield chunks.error(exc)
        except Exception as exc:
            outcome = str(ErrorCode.INTERNAL)
            # Type only: the exception text of an unexpected failure may quote
            # request data.
            log.error(
                "generate failed unexpectedly",
                extra={**fields, "code": outcome, "error_type": type(exc).__name__},
            )
            yield chunks.error(
                LLMServiceError(
                    ErrorCode.INTERNAL,
                    f"internal error in the LLM service ({type(exc).__name__})",
                    retryable=False,
                )
            )
        finally:
            self._running -= 1
            log.info(
                "generate finished",
                extra={
                    **fields,
                    "outcome": outcome,
                    "chunks": counts,
                    "duration_ms": round((time.monotonic() - started) * 1000, 1),
                },
            )
