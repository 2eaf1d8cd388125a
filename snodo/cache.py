"""The process-wide response cache: encoded results by key, LRU, bounded in count and bytes.

One :class:`ResponseCache` per process (:func:`shared_cache`), used by every client opened with
``cache=True``. What may be stored and under which key is decided in
:mod:`snodo.protocol.caching`; this module only keeps entries. Results are kept as their JSON
bytes: the size is known exactly, and every hit decodes a fresh copy, so a caller that changes
its result cannot change what the next caller gets.

Invalidation bumps a generation counter; a store tagged with an older generation is dropped, so a
response already in flight cannot write back what an invalidation removed. Thread-safe and
gevent-safe: one lock, held only for dictionary work (no I/O, no callbacks).
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Final, Protocol, runtime_checkable

from snodo.protocol.caching import MAX_ENTRIES, MAX_ENTRY_BYTES, Invalidation

__all__ = ["ResponseCache", "ResponseStore", "fresh_namespace", "namespace_of", "shared_cache"]


@runtime_checkable
class ResponseStore(Protocol):
    """What the client's cache layer (``snodo.cached_calls``) needs of a store: the in-process
    :class:`ResponseCache` and ``snodo.RedisCache`` (shared by processes) both are one
    (docs/decisions/0050). A store that cannot answer behaves as a miss; it never raises."""

    def scoped(self, namespace: Hashable) -> Hashable:
        """The namespace as this store keys it (a shared store tags process-local ones)."""

    def now(self) -> float:
        """The clock ``put``'s ``expires`` is measured on (seconds)."""

    def get(self, key: Hashable) -> bytes | None:
        """The stored result's JSON bytes if present and fresh, else None."""

    def generation_of(self, namespace: Hashable) -> int:
        """The invalidation generation to read before a request is sent (passed to ``put``)."""

    def put(
        self,
        key: Hashable,
        data: bytes,
        *,
        expires: float,
        generation: int,
        namespace: Hashable,
        method: str,
        uri: str | None = None,
    ) -> bool:
        """Store ``data`` unless an invalidation came after ``generation``; whether stored."""

    def invalidate(self, namespace: Hashable, change: Invalidation) -> int:
        """Remove ``namespace``'s entries that ``change`` names; the number removed."""


class _Entry:
    """One stored result and what invalidation matches it by."""

    __slots__ = ("data", "expires", "method", "namespace", "uri")

    def __init__(
        self, data: bytes, expires: float, namespace: Hashable, method: str, uri: str | None
    ) -> None:
        self.data = data
        self.expires = expires
        self.namespace = namespace
        self.method = method
        self.uri = uri


class ResponseCache:
    """At most ``max_entries`` results and ``max_bytes`` bytes; least recently used goes first."""

    def __init__(
        self,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_ENTRY_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.clock = clock
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        #: Bumped by every invalidation; read before a request is sent, checked by ``put``.
        self.generation = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def total_bytes(self) -> int:
        """The encoded size of every stored result."""
        return self._bytes

    def scoped(self, namespace: Hashable) -> Hashable:
        """Namespaces are kept as they are: this store is this process's only."""
        return namespace

    def now(self) -> float:
        """The expiry clock's time."""
        return self.clock()

    def generation_of(self, namespace: Hashable) -> int:
        """The one counter every invalidation bumps (whatever the namespace)."""
        return self.generation

    def get(self, key: Hashable) -> bytes | None:
        """The stored result's JSON bytes if present and fresh (and mark it recently used)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if self.clock() >= entry.expires:
                self._remove(key, entry)
                return None
            self._entries.move_to_end(key)
            return entry.data

    def put(
        self,
        key: Hashable,
        data: bytes,
        *,
        expires: float,
        generation: int,
        namespace: Hashable,
        method: str,
        uri: str | None = None,
    ) -> bool:
        """Store ``data`` until ``expires`` (clock time); False if it was not stored.

        Not stored: a result over ``max_bytes``, one already expired, or one whose request was
        sent before an invalidation (``generation`` older than the current one).
        """
        size = len(data)
        if size > self.max_bytes:
            return False
        with self._lock:
            if generation != self.generation or self.clock() >= expires:
                return False
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= len(old.data)
            self._entries[key] = _Entry(data, expires, namespace, method, uri)
            self._bytes += size
            entries = self._entries
            while len(entries) > self.max_entries or self._bytes > self.max_bytes:
                _, evicted = entries.popitem(last=False)
                self._bytes -= len(evicted.data)
            return True

    def invalidate(self, namespace: Hashable, change: Invalidation) -> int:
        """Remove ``namespace``'s entries that ``change`` names; the number removed."""
        with self._lock:
            self.generation += 1
            doomed = [
                key
                for key, entry in self._entries.items()
                if entry.namespace == namespace
                and (
                    entry.method in change.methods
                    or (change.uri is not None and entry.uri == change.uri)
                )
            ]
            for key in doomed:
                self._remove(key, self._entries[key])
            return len(doomed)

    def clear(self) -> None:
        """Remove every entry (and invalidate responses in flight)."""
        with self._lock:
            self.generation += 1
            self._entries.clear()
            self._bytes = 0

    def _remove(self, key: Hashable, entry: _Entry) -> None:
        del self._entries[key]
        self._bytes -= len(entry.data)


_SHARED: Final = ResponseCache()
_numbers = itertools.count(1)
_identities: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
_identities_lock = threading.Lock()


def fresh_namespace(kind: str) -> tuple[str, int]:
    """A namespace no other connection shares (a stdio server process, a custom transport)."""
    return (kind, next(_numbers))


def namespace_of(kind: str, thing: object) -> tuple[str, int]:
    """The namespace of a live object (a Runtime): equal for the same object, never reused."""
    with _identities_lock:
        number = _identities.get(thing)
        if number is None:
            number = _identities[thing] = next(_numbers)
    return (kind, number)


def shared_cache() -> ResponseCache:
    """The one cache every ``cache=True`` client of this process uses."""
    return _SHARED
