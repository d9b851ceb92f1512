"""In-memory Gemini thought signatures, per AgentExecution.

Gemini attaches an opaque ``thought_signature`` to parts of its answer and
expects it back on the same parts in the next request of the conversation. The
orchestrator does not carry it (the proto has no field for it), so the service
remembers it, keyed by ``execution_id`` and by the part it belongs to:

* ``call:<call_id>`` for a function call part (the id this service issued);
* ``text:<sha256 of the assistant text>`` for a text or thought part.

Entries expire an hour after their last use; ``clear_cache`` drops them at once.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_TTL_SECONDS = 3600.0


def call_key(call_id: str) -> str:
    """Key of the signature of a function-call part."""
    return f"call:{call_id}"


def text_key(text: str) -> str:
    """Key of the signature of a text part (by the full assistant text)."""
    return "text:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class _Entry:
    signatures: dict[str, bytes] = field(default_factory=dict)
    touched: float = 0.0


class ThoughtSignatureCache:
    """execution_id → {part key → signature}, with a TTL since last use."""

    def __init__(
        self,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl_seconds
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def _sweep(self, now: float) -> None:
        expired = [key for key, entry in self._entries.items() if now - entry.touched > self._ttl]
        for key in expired:
            del self._entries[key]

    def get(self, execution_id: str, key: str) -> bytes | None:
        """The signature stored for ``key``, refreshing the execution's TTL."""
        if not execution_id:
            return None
        now = self._clock()
        with self._lock:
            self._sweep(now)
            entry = self._entries.get(execution_id)
            if entry is None:
                return None
            entry.touched = now
            return entry.signatures.get(key)

    def put(self, execution_id: str, signatures: dict[str, bytes]) -> None:
        """Stores signatures of one answer (nothing is stored without an execution id)."""
        if not execution_id or not signatures:
            return
        now = self._clock()
        with self._lock:
            self._sweep(now)
            entry = self._entries.setdefault(execution_id, _Entry())
            entry.signatures.update(signatures)
            entry.touched = now

    def clear(self, execution_id: str) -> None:
        """Drops everything stored for one execution."""
        with self._lock:
            self._entries.pop(execution_id, None)

    def __len__(self) -> int:
        with self._lock:
            self._sweep(self._clock())
            return len(self._entries)
