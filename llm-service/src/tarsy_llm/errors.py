"""Error codes and the classification of provider failures.

Every failure reaches the orchestrator as an ``ErrorInfo`` chunk with one of the
codes below and a ``retryable`` flag: transient failures that this service
already retried, or that a fallback provider may not have, are retryable;
credential and request errors are not. The orchestrator counts retryable
failures against the provider's circuit breaker and moves to its fallback
(``operator/engine/src/fallback.rs``).
"""

from __future__ import annotations

import email.utils
import enum
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

from .logs import redact


class ErrorCode(enum.StrEnum):
    """``ErrorInfo.code`` values (the proto documents the same list)."""

    CREDENTIALS = "credentials"
    INVALID_REQUEST = "invalid_request"
    MAX_RETRIES = "max_retries"
    PARTIAL_STREAM_ERROR = "partial_stream_error"
    PROVIDER_ERROR = "provider_error"
    INVALID_BACKEND = "invalid_backend"
    INTERNAL = "internal"
    CONTEXT_OVERFLOW = "context_overflow"


class LLMServiceError(Exception):
    """A failure to report to the orchestrator as an ``ErrorInfo`` chunk."""

    def __init__(self, code: ErrorCode, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.code = code
        self.message = redact(message)
        self.retryable = retryable

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class FailureKind(enum.Enum):
    """What went wrong in a provider call, independent of the SDK that raised it."""

    RATE_LIMIT = "rate_limit"
    AUTH = "auth"
    INVALID = "invalid"
    CONTEXT_OVERFLOW = "context_overflow"
    SERVER = "server"
    NETWORK = "network"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Failure:
    """A classified provider exception."""

    kind: FailureKind
    status: int | None
    message: str
    retry_after: float | None = None

    def to_error(self) -> LLMServiceError:
        """The error to report when this failure is not (or no longer) retried here."""
        prefix = f"provider returned HTTP {self.status}: " if self.status else ""
        text = prefix + self.message
        match self.kind:
            case FailureKind.AUTH:
                return LLMServiceError(ErrorCode.CREDENTIALS, text, retryable=False)
            case FailureKind.INVALID:
                return LLMServiceError(ErrorCode.INVALID_REQUEST, text, retryable=False)
            case FailureKind.CONTEXT_OVERFLOW:
                # Not retryable as-is: the orchestrator must shrink the context first.
                return LLMServiceError(ErrorCode.CONTEXT_OVERFLOW, text, retryable=False)
            case FailureKind.RATE_LIMIT | FailureKind.SERVER | FailureKind.NETWORK:
                return LLMServiceError(ErrorCode.PROVIDER_ERROR, text, retryable=True)
            case _:
                return LLMServiceError(ErrorCode.PROVIDER_ERROR, text, retryable=False)


_OVERFLOW_RE = re.compile(
    r"context[ _]length|context[ _]window|maximum context|prompt is too long|too many tokens"
    r"|input token count.*exceeds|exceeds the maximum number of tokens|context_length_exceeded"
    r"|maximum number of tokens allowed|reduce the length of the messages",
    re.IGNORECASE,
)
# Gemini reports a bad key as 400 INVALID_ARGUMENT, not 401.
_BAD_KEY_RE = re.compile(r"API key not valid|API_KEY_INVALID|invalid api[ _-]?key", re.IGNORECASE)
_NETWORK_NAME_RE = re.compile(
    r"Connect|Timeout|RemoteProtocol|ReadError|WriteError|NetworkError|ServerDisconnected"
    r"|ClientOSError|ProtocolError|IncompleteRead|ClientPayloadError|TransferEncoding",
)
_DURATION_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)s\s*$")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and its causes/contexts, outermost first, without cycles."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _http_status(exc: BaseException) -> tuple[int | None, BaseException | None]:
    for err in _chain(exc):
        for attr in ("status_code", "code", "status"):
            value = getattr(err, attr, None)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
                return value, err
        response = getattr(err, "response", None)
        for attr in ("status_code", "status"):
            value = getattr(response, attr, None)
            if isinstance(value, int) and 100 <= value < 600:
                return value, err
    return None, None


def _header(err: BaseException, name: str) -> str | None:
    response = getattr(err, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        value = headers.get(name)
    except (AttributeError, TypeError):
        return None
    return str(value) if value is not None else None


def _retry_after(err: BaseException | None) -> float | None:
    """Provider-suggested delay: Retry-After / retry-after-ms headers or google.rpc.RetryInfo."""
    if err is None:
        return None
    millis = _header(err, "retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = _header(err, "retry-after")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value) if value else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    details = getattr(err, "details", None)
    error = details.get("error") if isinstance(details, dict) else None
    for item in (error or {}).get("details", []) if isinstance(error, dict) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("RetryInfo"):
            match = _DURATION_RE.match(str(item.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _message(exc: BaseException, source: BaseException | None) -> str:
    err = source or exc
    text = getattr(err, "message", None)
    if not isinstance(text, str) or not text:
        text = str(err) or type(err).__name__
    return redact(text)[:2000]


def classify(exc: BaseException) -> Failure:
    """Classifies an exception raised by any provider SDK (google-genai, openai, anthropic)."""
    status, source = _http_status(exc)
    message = _message(exc, source)
    if status is not None:
        if status == 429:
            return Failure(FailureKind.RATE_LIMIT, status, message, _retry_after(source))
        if status in (401, 403) or (status == 400 and _BAD_KEY_RE.search(message)):
            return Failure(FailureKind.AUTH, status, message)
        if status in (400, 413, 422) and _OVERFLOW_RE.search(message):
            return Failure(FailureKind.CONTEXT_OVERFLOW, status, message)
        if status in (408, 409) or status >= 500:
            return Failure(FailureKind.SERVER, status, message)
        if 400 <= status < 500:
            return Failure(FailureKind.INVALID, status, message)
    for err in _chain(exc):
        if isinstance(err, TimeoutError | ConnectionError) or _NETWORK_NAME_RE.search(
            type(err).__name__
        ):
            return Failure(FailureKind.NETWORK, None, message)
    if _OVERFLOW_RE.search(message):
        return Failure(FailureKind.CONTEXT_OVERFLOW, None, message)
    return Failure(FailureKind.UNKNOWN, None, message)
