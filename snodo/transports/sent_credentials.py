"""What one HTTP connection has sent that must never come back in what it keeps of an answer.

The redaction itself is pure (``snodo.protocol.redaction``); this is the connection's state: its
own credential headers, pinned, and a bounded set of the most recent others.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from snodo.protocol import redaction
from snodo.protocol.redaction import MIN_SECRET

__all__ = ["SentCredentials"]


class SentCredentials:
    """The credentials one connection has sent, for redacting its answers: pinned ones (its own
    headers) and the ``limit`` most recent others (tokens, DPoP proofs, session ids), so a
    connection that refreshes its token or proves every request keeps a bounded set."""

    def __init__(self, pinned: Iterable[str] = (), limit: int = 16) -> None:
        self._pinned = tuple(value for value in dict.fromkeys(pinned) if len(value) >= MIN_SECRET)
        self._recent: dict[str, None] = {}  # oldest first
        self._last: str | None = None
        self._limit = limit
        self._lock = threading.Lock()

    def add(self, *values: str | None) -> None:
        """Remember ``values`` as the most recent (None and short ones are skipped)."""
        for value in values:
            if value is None or value == self._last or len(value) < MIN_SECRET:
                continue
            with self._lock:
                self._recent.pop(value, None)
                self._recent[value] = None
                self._last = value
                while len(self._recent) > self._limit:
                    del self._recent[next(iter(self._recent))]

    def add_headers(self, headers: Mapping[str, str]) -> None:
        """Remember the credentials among request headers."""
        self.add(*redaction.credentials(headers))

    def values(self) -> list[str]:
        """Every remembered credential."""
        with self._lock:
            return [*self._pinned, *self._recent]
