"""The response cache shared by processes through Redis (docs/decisions/0050): ``snodo.RedisCache``.

    cache = snodo.RedisCache("redis://127.0.0.1:6379/0", prefix="myapp:cache:")
    client = snodo.connect(snodo.Http(url), cache=cache)

The same rules as the in-process :class:`snodo.cache.ResponseCache` (what is stored and under
which key is :mod:`snodo.protocol.caching`'s; entry count and byte budget, least recently used
first; TTLs as Redis ``PX`` expiries), with the entries in Redis for every worker: a result one
worker stored is a hit in the others, and an invalidation deletes the entries in Redis, so every
worker's next call misses (no pub/sub, no thread). Each write and invalidation is one Lua script,
and the generation rule holds across workers: a per-namespace counter in Redis, read before a
request is sent and checked by the store script, so a response in flight when any worker
invalidated does not write back.

Redis down or slow: every operation waits at most ``timeout`` (the socket timeout); a failure
opens a breaker for ``retry_after`` seconds during which Redis is not asked at all (calls are
misses and go to the server), with one log line per outage. Invalidations that could not be
written are kept (bounded) and written before Redis is used again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Hashable
from typing import Any, Final

import orjson

from snodo.protocol.caching import MAX_ENTRIES, MAX_ENTRY_BYTES, Invalidation

__all__ = ["DEFAULT_PREFIX", "RedisCache", "crosses_processes"]

log = logging.getLogger("snodo.redis_cache")

DEFAULT_PREFIX: Final = "snodo:cache:"
#: The default bound on one Redis operation (connect, send, answer), seconds.
DEFAULT_TIMEOUT: Final = 0.3
#: How long Redis is left alone after a failure before it is tried again, seconds.
DEFAULT_RETRY_AFTER: Final = 5.0
#: At most this many namespaces' invalidations wait for Redis; beyond, everything is dropped
#: when it is back (a clear of the prefix).
MAX_PENDING: Final = 64

# One entry's bookkeeping: ``m`` (hash: id -> [size, index keys...]), ``l`` (LRU zset: id ->
# use tick from ``t``), ``x`` (zset: id -> expiry in Redis ms), ``b`` (total bytes), ``e:<id>``
# (the value, with PX), ``i:<ns>:<method>`` and ``u:<ns>:<uri digest>`` (sets of ids),
# ``g:<ns>`` and ``g`` (generations: per namespace, and the clear counter).
_DROP = """
local p = ARGV[1]
local function drop(eid)
  local meta = redis.call('HGET', p .. 'm', eid)
  if meta then
    local m = cjson.decode(meta)
    redis.call('DECRBY', p .. 'b', m[1])
    for i = 2, #m do redis.call('SREM', m[i], eid) end
    redis.call('HDEL', p .. 'm', eid)
  end
  redis.call('DEL', p .. 'e:' .. eid)
  redis.call('ZREM', p .. 'l', eid)
  redis.call('ZREM', p .. 'x', eid)
end
"""

#: ARGV: prefix, id. The value (or nil); a hit becomes the most recently used.
_GET = """
local p = ARGV[1]
local v = redis.call('GET', p .. 'e:' .. ARGV[2])
if v then redis.call('ZADD', p .. 'l', redis.call('INCR', p .. 't'), ARGV[2]) end
return v
"""

#: ARGV: prefix, namespace. The generation a put must match.
_GENERATION = """
local p = ARGV[1]
return tonumber(redis.call('GET', p .. 'g:' .. ARGV[2]) or '0')
  + tonumber(redis.call('GET', p .. 'g') or '0')
"""

#: ARGV: prefix, id, data, ttl ms, generation, namespace, max entries, max bytes, index keys...
#: 1 if stored; 0 when an invalidation came after the generation was read.
_PUT = (
    _DROP
    + """
local id = ARGV[2]
local generation = tonumber(redis.call('GET', p .. 'g:' .. ARGV[6]) or '0')
  + tonumber(redis.call('GET', p .. 'g') or '0')
if generation ~= tonumber(ARGV[5]) then return 0 end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
for _, eid in ipairs(redis.call('ZRANGEBYSCORE', p .. 'x', '-inf', now_ms, 'LIMIT', 0, 64)) do
  drop(eid)
end
drop(id)
local size = string.len(ARGV[3])
redis.call('SET', p .. 'e:' .. id, ARGV[3], 'PX', ARGV[4])
local meta = {size}
for i = 9, #ARGV do
  meta[#meta + 1] = ARGV[i]
  redis.call('SADD', ARGV[i], id)
end
redis.call('HSET', p .. 'm', id, cjson.encode(meta))
redis.call('INCRBY', p .. 'b', size)
redis.call('ZADD', p .. 'l', redis.call('INCR', p .. 't'), id)
redis.call('ZADD', p .. 'x', now_ms + tonumber(ARGV[4]), id)
local max_entries, max_bytes = tonumber(ARGV[7]), tonumber(ARGV[8])
while redis.call('ZCARD', p .. 'l') > max_entries
    or tonumber(redis.call('GET', p .. 'b') or '0') > max_bytes do
  local oldest = redis.call('ZRANGE', p .. 'l', 0, 0)[1]
  if not oldest then
    redis.call('SET', p .. 'b', 0)
    break
  end
  drop(oldest)
end
return 1
"""
)

#: ARGV: prefix, namespace, index keys... Bumps the namespace's generation; the number removed.
_INVALIDATE = (
    _DROP
    + """
redis.call('INCR', p .. 'g:' .. ARGV[2])
local removed = 0
for i = 3, #ARGV do
  for _, eid in ipairs(redis.call('SMEMBERS', ARGV[i])) do
    removed = removed + redis.call('EXISTS', p .. 'e:' .. eid)
    drop(eid)
  end
  redis.call('DEL', ARGV[i])
end
return removed
"""
)

_process_token = ""


def _new_process_token() -> None:
    global _process_token
    _process_token = f"{os.getpid()}-{uuid.uuid4().hex}"


_new_process_token()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_process_token)


def crosses_processes(namespace: Hashable) -> bool:
    """Whether a namespace names the same endpoint in every process: HTTP's (a digest of URL,
    headers and limits) and a custom transport's ``cache_namespace``; a Runtime, a stdio server
    process or a connection's own namespace is this process's only."""
    if isinstance(namespace, tuple) and len(namespace) == 2 and isinstance(namespace[0], str):
        kind = namespace[0]
        return kind == "http" or kind.startswith("custom:")
    return False


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _encode(value: Any) -> bytes:
    """Canonical JSON of a key or namespace (bytes as text); TypeError when it is not JSON."""
    return orjson.dumps(value, default=_bytes_text, option=orjson.OPT_SORT_KEYS)


def _bytes_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(type(value).__name__)


class RedisCache:
    """A response store in Redis, shared by every process that uses the same Redis and prefix.

    ``redis`` is a URL or a ``redis.Redis`` client; either way the cache makes a connection pool
    of its own with ``timeout`` as its socket timeouts and no retries (closed by :meth:`close`).
    ``max_entries`` and ``max_bytes`` bound the whole shared store (least recently used first).
    """

    def __init__(
        self,
        redis: Any,
        *,
        prefix: str = DEFAULT_PREFIX,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_ENTRY_BYTES,
        timeout: float = DEFAULT_TIMEOUT,
        retry_after: float = DEFAULT_RETRY_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        import redis as redis_module  # the extra (snodo[redis]), loaded only here
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        if not isinstance(prefix, str) or not prefix:
            raise TypeError("prefix must be a non-empty string")
        for name, value in (("max_entries", max_entries), ("max_bytes", max_bytes)):
            if type(value) is not int or value <= 0:
                raise TypeError(f"{name} must be a positive integer")
        for name, number in (("timeout", timeout), ("retry_after", retry_after)):
            if isinstance(number, bool) or not isinstance(number, int | float) or number <= 0:
                raise TypeError(f"{name} must be a positive number of seconds")
        self.prefix = prefix
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.timeout = float(timeout)
        self.retry_after = float(retry_after)
        self.clock = clock
        no_retry = Retry(NoBackoff(), 0)
        bounded = {
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
            "retry": no_retry,
        }
        if isinstance(redis, str):
            pool = redis_module.ConnectionPool.from_url(redis, **bounded)
        elif isinstance(redis, redis_module.Redis):
            given = redis.connection_pool
            pool = redis_module.ConnectionPool(
                connection_class=given.connection_class, **{**given.connection_kwargs, **bounded}
            )
        else:
            raise TypeError("redis must be a URL or a redis.Redis client")
        self._redis = redis_module.Redis(connection_pool=pool, retry=no_retry)
        self._errors: tuple[type[BaseException], ...] = (redis_module.RedisError, OSError)
        self._get = self._redis.register_script(_GET)
        self._generation = self._redis.register_script(_GENERATION)
        self._put = self._redis.register_script(_PUT)
        self._invalidate = self._redis.register_script(_INVALIDATE)
        self._lock = threading.Lock()
        #: While Redis failed: the clock time before which it is not asked again.
        self._open_until: float | None = None
        #: Invalidations not yet written (namespace -> index keys); None in it: clear all.
        self._pending: dict[str, set[str]] = {}
        self._pending_all = False
        self.failures = 0
        self._closed = False

    # -- the ResponseStore seam -------------------------------------------------------------

    def scoped(self, namespace: Hashable) -> Hashable:
        """The namespace as a digest: the same in every process when :func:`crosses_processes`,
        else tagged with this process (so two workers' Runtimes never share entries)."""
        try:
            encoded = _encode(namespace)
        except TypeError:
            encoded = repr(namespace).encode()  # not JSON: this process's, by its repr
            return _digest(b"local\0" + _process_token.encode() + b"\0" + encoded)
        if crosses_processes(namespace):
            return _digest(b"shared\0" + encoded)
        return _digest(b"local\0" + _process_token.encode() + b"\0" + encoded)

    def now(self) -> float:
        """The clock ``expires`` is given on (converted to a Redis PX lifetime by ``put``)."""
        return self.clock()

    def get(self, key: Hashable) -> bytes | None:
        """The stored result's JSON bytes, or None (also when Redis cannot answer)."""
        if not self._usable():
            return None
        try:
            value = self._get(args=[self.prefix, self._entry_id(key)])
        except self._errors as error:
            self._failed("get", error)
            return None
        return value if isinstance(value, bytes) else None

    def generation_of(self, namespace: Hashable) -> int:
        """The namespace's generation in Redis; -1 (nothing will be stored) when unknown."""
        if not self._usable():
            return -1
        try:
            return int(self._generation(args=[self.prefix, str(namespace)]))
        except self._errors as error:
            self._failed("generation", error)
            return -1

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
        """Store ``data`` for what is left until ``expires``; False if it was not stored (too
        large, expired, invalidated since ``generation`` was read, or Redis unavailable)."""
        ttl_ms = int((expires - self.clock()) * 1000)
        if generation < 0 or len(data) > self.max_bytes or ttl_ms <= 0 or not self._usable():
            return False
        indexes = [self._method_index(namespace, method)]
        if uri is not None:
            indexes.append(self._uri_index(namespace, uri))
        args: list[Any] = [self.prefix, self._entry_id(key), data, ttl_ms, generation]
        args += [str(namespace), self.max_entries, self.max_bytes, *indexes]
        try:
            return bool(self._put(args=args))
        except self._errors as error:
            self._failed("put", error)
            return False

    def invalidate(self, namespace: Hashable, change: Invalidation) -> int:
        """Remove ``namespace``'s entries that ``change`` names, for every worker; the number
        removed (0 when Redis is unavailable: the invalidation is written once it is back)."""
        indexes = {self._method_index(namespace, method) for method in change.methods}
        if change.uri is not None:
            indexes.add(self._uri_index(namespace, change.uri))
        if self._usable():
            try:
                return int(self._invalidate(args=[self.prefix, str(namespace), *sorted(indexes)]))
            except self._errors as error:
                self._failed("invalidate", error)
        with self._lock:
            if not self._pending_all:
                kept = self._pending.setdefault(str(namespace), set())
                kept.update(indexes)
                if len(self._pending) > MAX_PENDING:
                    self._pending.clear()
                    self._pending_all = True
        return 0

    # -- beyond the seam ----------------------------------------------------------------------

    def clear(self) -> None:
        """Remove every entry under the prefix (and invalidate responses in flight)."""
        self._clear()

    def ping(self) -> bool:
        """Whether Redis answers now (bounded by ``timeout``)."""
        try:
            return bool(self._redis.ping())
        except self._errors:
            return False

    def close(self) -> None:
        """Close the cache's connections (the entries stay in Redis for the other workers)."""
        self._closed = True
        self._redis.close()
        self._redis.connection_pool.disconnect()

    def __enter__(self) -> RedisCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._open_until is None else "skipped"
        return f"<RedisCache prefix={self.prefix!r} {state}>"

    # -- internals ----------------------------------------------------------------------------

    def _entry_id(self, key: Hashable) -> str:
        return _digest(_encode(key))

    def _method_index(self, namespace: Hashable, method: str) -> str:
        return f"{self.prefix}i:{namespace}:{method}"

    def _uri_index(self, namespace: Hashable, uri: str) -> str:
        return f"{self.prefix}u:{namespace}:{_digest(uri.encode())}"

    def _usable(self) -> bool:
        """Whether Redis may be asked now: not closed, the breaker shut (or its time up), and the
        invalidations it missed written first."""
        if self._closed:
            return False
        until = self._open_until
        if until is not None:
            if self.clock() < until:
                return False
            try:
                self._redis.ping()
            except self._errors as error:
                self._failed("ping", error)
                return False
            with self._lock:
                self._open_until = None
            log.info("redis cache %r reachable again", self.prefix)
        if self._pending or self._pending_all:
            return self._flush()
        return True

    def _flush(self) -> bool:
        with self._lock:
            pending, self._pending = self._pending, {}
            everything, self._pending_all = self._pending_all, False
        try:
            if everything:
                self._clear(raising=True)
            else:
                for namespace, indexes in pending.items():
                    self._invalidate(args=[self.prefix, namespace, *sorted(indexes)])
        except self._errors as error:
            with self._lock:
                self._pending_all = self._pending_all or everything
                if not self._pending_all:
                    for namespace, indexes in pending.items():
                        self._pending.setdefault(namespace, set()).update(indexes)
            self._failed("invalidate", error)
            return False
        return True

    def _clear(self, *, raising: bool = False) -> None:
        prefix = self.prefix
        keep = {f"{prefix}g".encode()}
        try:
            doomed: list[bytes] = []
            for name in self._redis.scan_iter(match=_glob_escape(prefix) + "*", count=500):
                if name not in keep and not name.startswith(f"{prefix}g:".encode()):
                    doomed.append(name)
                if len(doomed) >= 500:
                    self._redis.unlink(*doomed)
                    doomed.clear()
            if doomed:
                self._redis.unlink(*doomed)
            self._redis.incr(f"{prefix}g")
        except self._errors as error:
            if raising:
                raise
            self._failed("clear", error)
            with self._lock:
                self._pending.clear()
                self._pending_all = True

    def _failed(self, operation: str, error: BaseException) -> None:
        """Redis did not answer: leave it alone for ``retry_after`` (one log line per outage)."""
        with self._lock:
            self.failures += 1
            first = self._open_until is None
            self._open_until = self.clock() + self.retry_after
        if first:
            log.warning(
                "redis cache %r unavailable (%s on %s: %s); calls go to the server, "
                "retrying in %.1f s",
                self.prefix,
                type(error).__name__,
                operation,
                error,
                self.retry_after,
            )
        else:
            log.debug("redis cache %r still unavailable (%s)", self.prefix, type(error).__name__)


def _glob_escape(text: str) -> str:
    """``text`` as a literal in a Redis MATCH pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
