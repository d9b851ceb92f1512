"""Structured (JSON lines) logging with secret redaction.

Log records carry metadata only (ids, provider, model, counts, durations, error
codes). Message bodies are never passed to the logger, and every rendered line
and every error message sent to the orchestrator goes through :func:`redact`, so
an API key echoed back by a provider error never leaves the process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import threading
import time
from typing import Any

_REDACTED = "[REDACTED]"
_MIN_SECRET_LEN = 6

# Key shapes of the supported providers, for keys this process never read itself
# (e.g. a provider echoing a different, rejected key).
_KEY_PATTERNS = re.compile(
    r"(sk-[A-Za-z0-9_\-*]{8,}|AIza[0-9A-Za-z_\-]{20,}|xai-[A-Za-z0-9_\-]{10,}|ya29\.[0-9A-Za-z_\-.]+)"
)

_secrets: set[str] = set()
_secrets_lock = threading.Lock()

# json.dumps(entry, default=str, ensure_ascii=False), without a new encoder per line.
_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False)

# Attributes every LogRecord has; anything else was passed through `extra=`.
_STANDARD_ATTRS = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__.keys() | {"message", "asctime"}
)


def register_secret(value: str) -> None:
    """Remembers a secret value (an API key read from the environment) for redaction."""
    if value and len(value) >= _MIN_SECRET_LEN:
        with _secrets_lock:
            _secrets.add(value)


def redact(text: str) -> str:
    """Replaces every known secret and anything shaped like a provider key."""
    if not text:
        return text
    with _secrets_lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, _REDACTED)
    return _KEY_PATTERNS.sub(_REDACTED, text)


class JsonFormatter(logging.Formatter):
    """Renders a record as one JSON object per line, redacted."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            # The exception type and message only: tracebacks can hold local
            # variables' reprs in some formatters, and we keep lines short.
            entry["error_type"] = type(exc).__name__
            entry["error"] = str(exc)[:1000]
        return redact(_ENCODER.encode(entry))


class DeferredHandler(logging.Handler):
    """Hands records to ``inner`` at the event loop's next turn when a loop
    runs in this thread, in order, all pending ones at once.

    Formatting a line and writing it (a pipe write that wakes the reader, tens
    of µs) then happen while the call waits on the network, not between a
    gRPC request and the provider request or between a response's last chunk
    and its end. Each record's time is still when it was logged. Without a
    running loop, and on :meth:`flush`, records are written at once.
    """

    def __init__(self, inner: logging.Handler) -> None:
        super().__init__()
        self.inner = inner
        self._pending: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            self.inner.handle(record)
            return
        if not self._pending:
            loop.call_soon(self.flush)
        self._pending.append(record)

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            pending, self._pending = self._pending, []
            for record in pending:
                self.inner.handle(record)
            self.inner.flush()

    def close(self) -> None:
        self.flush()
        self.inner.close()
        super().close()


def setup_logging(level: str = "INFO", stream: Any = None) -> None:
    """Installs the JSON formatter on the root logger (idempotent)."""
    lines = logging.StreamHandler(stream or sys.stderr)
    lines.setFormatter(JsonFormatter())
    handler = DeferredHandler(lines)
    root = logging.getLogger()
    for existing in list(root.handlers):
        if getattr(existing, "_tarsy_handler", False):
            root.removeHandler(existing)
    handler._tarsy_handler = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Thread and process names are not rendered: records need not look them up.
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # HTTP client libraries log full request URLs and headers at INFO/DEBUG;
    # keep them quiet so nothing request-specific reaches the log.
    for noisy in (
        "httpx",
        "httpx2",
        "httpcore",
        "httpcore2",
        "google_genai",
        "openai",
        "anthropic",
        "urllib3",
        "grpc",
        "asyncio",
    ):
        logging.getLogger(noisy).setLevel(logging.WARNING)
