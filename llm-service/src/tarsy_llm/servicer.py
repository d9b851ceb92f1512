"""The ``llm.v1.LLMService`` servicer: one ``Generate`` call → one provider stream."""

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
from .providers.registry import DEFAULT_BACKEND, ProviderRegistry

log = logging.getLogger(__name__)


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
        """``Generate`` calls in progress."""
        return self._running

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
