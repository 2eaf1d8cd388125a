"""Pluggable stores for tokens, client registrations and pending authorizations.

A store maps a string key to a JSON-like dict. Tokens are keyed by (issuer, client id,
resource), registrations by issuer, pending authorizations by ``state`` (digest §5, §11).
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, runtime_checkable

__all__ = ["MemoryStore", "SharedRefresh", "Store", "token_key"]


@runtime_checkable
class Store(Protocol):
    """Where the client keeps what it must remember; implementations must be thread-safe."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, value: dict[str, Any]) -> None: ...

    def delete(self, key: str) -> None: ...


@runtime_checkable
class SharedRefresh(Protocol):
    """A token store shared by many processes that also lets one of them refresh a token at a
    time (``snodo.oauth.RedisStore``); ``OAuthClient`` uses it when its token store has it."""

    def acquire(self, key: str, ttl: float) -> str | None:
        """A lease on refreshing ``key`` for ``ttl`` seconds, or ``None`` when another holds it."""
        ...

    def release(self, key: str, lease: str) -> None:
        """End ``lease`` if it is still the holder's (never another process's)."""
        ...

    def wait_released(self, key: str, timeout: float) -> None:
        """Return when the lease on ``key`` ends (released or expired), or after ``timeout``."""
        ...


class MemoryStore:
    """A process-local store (the default): nothing survives the process."""

    def __init__(self) -> None:
        self._items: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            value = self._items.get(key)
            return None if value is None else dict(value)

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._items[key] = dict(value)

    def delete(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)

    def __repr__(self) -> str:  # never the values: they hold tokens and secrets
        with self._lock:
            return f"MemoryStore({len(self._items)} items)"


def token_key(issuer: str, client_id: str, resource: str) -> str:
    """The token store key for one authorization server, client and resource."""
    return f"{issuer} {client_id} {resource}"
