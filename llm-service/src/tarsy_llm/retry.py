"""Transient-failure retries around one provider call: streamed (``Generate``)
or unary (``Embed``).

Rate limits (HTTP 429) are retried with exponential backoff, honouring the
provider's suggested delay; empty responses are retried after a fixed delay.
Both are invisible to the orchestrator unless the retries run out, which is
reported as ``max_retries`` with ``retryable=true``. Nothing is retried once
output has been streamed: a failure then is a ``partial_stream_error``.
Unary calls are retried on rate limits alone, the same number of times with
the same delays.

Cancellation needs no special code: the gRPC call's task is cancelled, which
raises ``CancelledError`` at whatever await is pending (backoff sleep or HTTP
read), and ``aclosing`` closes the provider stream and its HTTP response.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, TypeVar

from . import chunks
from .errors import ErrorCode, Failure, FailureKind, LLMServiceError, classify
from .proto import llm_service_pb2 as pb

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[Any]]
Attempt = Callable[[], AsyncIterator[pb.GenerateResponse]]
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How transient failures are retried inside the service."""

    rate_limit_retries: int = 3
    backoff_initial: float = 1.0
    backoff_max: float = 30.0
    # Upper bound on a provider-suggested Retry-After we are willing to wait.
    retry_after_max: float = 60.0
    empty_retries: int = 3
    empty_delay: float = 3.0

    def backoff(self, retry_index: int) -> float:
        """Delay before rate-limit retry number ``retry_index`` (0-based)."""
        return min(self.backoff_max, self.backoff_initial * (2**retry_index))


async def _wait_out_rate_limit(
    failure: Failure, retried: int, policy: RetryPolicy, sleep: Sleep, fields: dict[str, Any]
) -> LLMServiceError | None:
    """Sleeps before rate-limit retry number ``retried`` (0-based) and returns
    None, or returns the ``max_retries`` error to raise when the retries have
    run out."""
    if retried >= policy.rate_limit_retries:
        return LLMServiceError(
            ErrorCode.MAX_RETRIES,
            f"rate limited after {retried} retries: {failure.message}",
            retryable=True,
        )
    delay = (
        min(failure.retry_after, policy.retry_after_max)
        if failure.retry_after is not None
        else policy.backoff(retried)
    )
    log.warning(
        "rate limited, retrying",
        extra={
            **fields,
            "retry": retried + 1,
            "delay_s": round(delay, 3),
            "status": failure.status,
        },
    )
    await sleep(delay)
    return None


async def stream_with_retries(
    attempt: Attempt,
    *,
    policy: RetryPolicy,
    sleep: Sleep = asyncio.sleep,
    log_fields: dict[str, Any] | None = None,
) -> AsyncIterator[pb.GenerateResponse]:
    """Streams ``attempt()``'s chunks, retrying it on rate limits and empty responses.

    Content chunks are forwarded as they arrive, never buffered; usage
    chunks are held until the attempt has finished, so a discarded empty attempt
    never reports usage.
    """
    fields = dict(log_fields or {})
    rate_limited = 0
    empty = 0
    while True:
        produced_content = False
        deferred: list[pb.GenerateResponse] = []
        try:
            async with aclosing(attempt()) as stream:
                async for chunk in stream:
                    if chunks.kind(chunk) in chunks.CONTENT_KINDS:
                        produced_content = True
                        yield chunk
                    else:
                        deferred.append(chunk)
        except LLMServiceError:
            raise
        except Exception as exc:
            failure = classify(exc)
            if produced_content:
                raise LLMServiceError(
                    ErrorCode.PARTIAL_STREAM_ERROR,
                    f"stream failed after partial output: {failure.to_error().message}",
                    retryable=True,
                ) from exc
            if failure.kind is FailureKind.RATE_LIMIT:
                error = await _wait_out_rate_limit(failure, rate_limited, policy, sleep, fields)
                if error is not None:
                    raise error from exc
                rate_limited += 1
                continue
            raise failure.to_error() from exc
        if not produced_content:
            if empty < policy.empty_retries:
                empty += 1
                log.warning(
                    "empty response, retrying",
                    extra={**fields, "retry": empty, "delay_s": policy.empty_delay},
                )
                await sleep(policy.empty_delay)
                continue
            raise LLMServiceError(
                ErrorCode.MAX_RETRIES,
                f"provider returned an empty response {empty + 1} times",
                retryable=True,
            )
        for chunk in deferred:
            yield chunk
        return


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    sleep: Sleep = asyncio.sleep,
    log_fields: dict[str, Any] | None = None,
) -> T:
    """``await attempt()``, retried on rate limits as :func:`stream_with_retries`
    retries them; any other failure is classified and raised at once."""
    fields = dict(log_fields or {})
    rate_limited = 0
    while True:
        try:
            return await attempt()
        except LLMServiceError:
            raise
        except Exception as exc:
            failure = classify(exc)
            if failure.kind is not FailureKind.RATE_LIMIT:
                raise failure.to_error() from exc
            error = await _wait_out_rate_limit(failure, rate_limited, policy, sleep, fields)
            if error is not None:
                raise error from exc
            rate_limited += 1
