"""OAuth state in Redis, shared by every worker of a deployment (docs/decisions/0049).

:class:`RedisStore` is a :class:`snodo.oauth.Store` (tokens, registrations or pending
authorizations) and a :class:`snodo.oauth.SharedRefresh` (one refresh at a time across
processes: ``SET NX PX`` leases released by their owner only, a pub/sub wake for the waiters).
Values are sealed with AES-GCM under the application's key unless ``plaintext=True``; key names
are digests (no token, state or URL in a key). ``redis`` and ``cryptography`` load here only.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Final, Literal

import orjson

from snodo.log import get_logger
from snodo.oauth.errors import auth_error
from snodo.protocol.errors import McpError

__all__ = ["DEFAULT_TIMEOUT", "PENDING_TTL", "Kind", "RedisStore", "redis_oauth_stores"]

_log = get_logger("snodo.oauth")

Kind = Literal["tokens", "registrations", "pending"]

#: Seconds a Redis command may take (connect, answer) before the store gives up on it.
DEFAULT_TIMEOUT: Final = 1.0
#: Seconds a pending authorization (``state``, PKCE verifier) is kept.
PENDING_TTL: Final = 900.0

_SEALED: Final = b"snodo-sealed-1:"
_RELEASE: Final = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], '1')
  return 1
end
return 0
"""


def _key_id(key: bytes) -> bytes:
    return hashlib.sha256(b"snodo-key-id:" + key).hexdigest()[:12].encode("ascii")


class RedisStore:
    """One kind of OAuth state (``tokens``, ``registrations`` or ``pending``) in Redis.

    ``redis_client`` is a ``redis://`` URL (the store then connects with ``timeout`` and no
    retries) or a ``redis.Redis`` that has a ``socket_timeout``. ``prefix`` separates
    deployments. ``encryption_key`` (16, 24 or 32 bytes) seals every value with AES-GCM;
    ``decryption_keys`` are older keys still read (rotation). Without a key the store refuses to
    start unless ``plaintext=True``. When Redis does not answer, reads fall back for
    ``retry_interval`` seconds to the last value this process saw; writes and leases fail with
    ``McpError(kind="authorization")`` naming Redis.
    """

    def __init__(
        self,
        redis_client: Any,
        *,
        prefix: str,
        kind: Kind = "tokens",
        encryption_key: bytes | None = None,
        decryption_keys: Sequence[bytes] = (),
        plaintext: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        ttl: float | None = None,
        retry_interval: float = 1.0,
    ) -> None:
        if not prefix or any(c.isspace() for c in prefix):
            raise ValueError("prefix must be a non-empty name without spaces")
        if kind not in ("tokens", "registrations", "pending"):
            raise ValueError("kind must be 'tokens', 'registrations' or 'pending'")
        if encryption_key is None and not plaintext:
            raise ValueError(
                "RedisStore keeps tokens and client secrets: give encryption_key= (32 random "
                "bytes) or pass plaintext=True to keep them in clear"
            )
        if encryption_key is not None and plaintext:
            raise ValueError("give encryption_key= or plaintext=True, not both")
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._ciphers: dict[bytes, Any] = {}
        for key in (encryption_key, *decryption_keys):
            if key is None:
                continue
            if not isinstance(key, bytes) or len(key) not in (16, 24, 32):
                raise ValueError("encryption keys must be 16, 24 or 32 bytes")
            self._ciphers.setdefault(_key_id(key), AESGCM(key))
        self._sealing = None if encryption_key is None else _key_id(encryption_key)
        self._redis = _client(redis_client, timeout)
        self._release = self._redis.register_script(_RELEASE)
        self.prefix = prefix
        self.kind: Kind = kind
        self.timeout = timeout
        self.ttl = PENDING_TTL if ttl is None and kind == "pending" else ttl
        self.retry_interval = retry_interval
        self._known: dict[str, dict[str, Any]] = {}  # last value seen per key (reads when down)
        self._lock = threading.Lock()
        self._retry_at = 0.0

    @property
    def client(self) -> Any:
        """The ``redis.Redis`` this store talks through."""
        return self._redis

    # -- names -------------------------------------------------------------------------------

    def redis_key(self, key: str) -> str:
        """The Redis key of ``key``: a digest, so no token, state or URL is in a key name."""
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]
        return f"{self.prefix}:oauth:{self.kind}:{digest}"

    def _lock_key(self, key: str) -> str:
        return self.redis_key(key) + ":refresh-lock"

    def _channel(self, key: str) -> str:
        return self.redis_key(key) + ":refreshed"

    # -- Store ---------------------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        """The value, read from Redis; while Redis is down, the last value this process saw."""
        name = self.redis_key(key)
        try:
            raw = self._run(lambda: self._redis.get(name))
        except McpError:
            with self._lock:
                known = self._known.get(key)
            if known is None:
                raise
            return dict(known)
        value = None if raw is None else self._open(name, raw)
        with self._lock:
            if value is None:
                self._known.pop(key, None)
            else:
                self._known[key] = dict(value)
        return value

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` (sealed), with a TTL where it expires: pending authorizations, and
        tokens that carry no refresh token (until their ``expires_at``)."""
        with self._lock:
            self._known[key] = dict(value)
        name = self.redis_key(key)
        data = self._seal(name, value)
        ttl = self._ttl_of(value)
        self._run(lambda: self._redis.set(name, data, px=None if ttl is None else ttl))

    def delete(self, key: str) -> None:
        with self._lock:
            self._known.pop(key, None)
        name = self.redis_key(key)
        self._run(lambda: self._redis.delete(name))

    # -- SharedRefresh -------------------------------------------------------------------------

    def acquire(self, key: str, ttl: float) -> str | None:
        """``SET NX PX``: a lease on refreshing ``key`` for ``ttl`` seconds, or ``None``."""
        lease = secrets.token_hex(16)
        name = self._lock_key(key)
        taken = self._run(lambda: self._redis.set(name, lease, nx=True, px=max(1, int(ttl * 1000))))
        return lease if taken else None

    def release(self, key: str, lease: str) -> None:
        """Compare-and-delete (Lua) and wake the waiters; a failure only logs (it expires)."""
        try:
            self._check_up()
            self._release(keys=[self._lock_key(key), self._channel(key)], args=[lease])
        except Exception as error:
            self._note_down()
            _log.warning("could not release the refresh lease in Redis", error=type(error).__name__)

    def wait_released(self, key: str, timeout: float) -> None:
        """Until the lease ends: woken by the holder's release (pub/sub), or when its TTL says
        it has expired (a holder that died), or after ``timeout``."""
        deadline = time.monotonic() + timeout
        lock = self._lock_key(key)
        pubsub = self._run(lambda: self._redis.pubsub(ignore_subscribe_messages=True))
        try:
            self._run(lambda: pubsub.subscribe(self._channel(key)))
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                remaining = self._run(lambda: self._redis.pttl(lock))
                if remaining < 0:  # -2: no lease any more
                    return
                wait = min(left, remaining / 1000.0 + 0.005, self.timeout)
                if self._run(partial(pubsub.get_message, timeout=wait)) is not None:
                    return
        finally:
            try:
                pubsub.close()
            except Exception:  # closing a connection to a dead server
                _log.debug("closing the Redis pub/sub connection failed")

    # -- internals -----------------------------------------------------------------------------

    def _ttl_of(self, value: Mapping[str, Any]) -> int | None:
        """Milliseconds to keep ``value``, ``None`` for no expiry."""
        if self.ttl is not None:
            return max(1, int(self.ttl * 1000))
        expires = value.get("expires_at")
        if (
            self.kind == "tokens"
            and not value.get("refresh_token")
            and isinstance(expires, (int, float))
            and not isinstance(expires, bool)
        ):
            return max(1, int((expires - time.time()) * 1000))
        return None

    def _seal(self, name: str, value: Mapping[str, Any]) -> bytes:
        data = orjson.dumps(dict(value))
        if self._sealing is None:
            return data
        nonce = os.urandom(12)
        sealed: bytes = self._ciphers[self._sealing].encrypt(nonce, data, name.encode("utf-8"))
        return _SEALED + self._sealing + b":" + nonce + sealed

    def _open(self, name: str, raw: bytes) -> dict[str, Any]:
        if raw.startswith(_SEALED):
            kid, _, rest = raw[len(_SEALED) :].partition(b":")
            cipher = self._ciphers.get(kid)
            if cipher is None:
                raise self._error("a stored value is sealed with a key this store was not given")
            try:
                data = cipher.decrypt(rest[:12], rest[12:], name.encode("utf-8"))
            except Exception:
                raise self._error("a stored value does not open with its key") from None
        elif self._sealing is None:
            data = raw
        else:
            raise self._error("a stored value is not sealed (the store requires sealed values)")
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise self._error("a stored value is not a JSON object") from None
        if not isinstance(value, dict):
            raise self._error("a stored value is not a JSON object")
        return value

    def _run(self, command: Any) -> Any:
        """Run one Redis command; Redis failures become a clear authorization error."""
        import redis

        self._check_up()
        try:
            return command()
        except redis.RedisError as error:
            self._note_down()
            if isinstance(error, redis.TimeoutError):
                reason = f"Redis did not answer within {self.timeout:g} s"
            else:
                reason = f"Redis is unreachable ({type(error).__name__})"
            raise self._error(reason) from None

    def _check_up(self) -> None:
        if time.monotonic() < self._retry_at:
            raise self._error(
                f"Redis did not answer recently; trying again within {self.retry_interval:g} s"
            )

    def _note_down(self) -> None:
        self._retry_at = time.monotonic() + self.retry_interval

    def _error(self, reason: str) -> McpError:
        return auth_error(f"{self.kind} store (Redis)", reason)

    def __repr__(self) -> str:  # never the values
        return f"RedisStore(prefix={self.prefix!r}, kind={self.kind!r})"


def _client(redis_client: Any, timeout: float) -> Any:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    if isinstance(redis_client, str):
        return redis.Redis.from_url(
            redis_client,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )
    pool = getattr(redis_client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", {})
    if kwargs.get("socket_timeout") is None:
        raise ValueError(
            "the redis client needs a socket_timeout (a Redis that does not answer must not "
            "hang calls); or pass a redis:// URL"
        )
    return redis_client


def redis_oauth_stores(redis_client: Any, *, prefix: str, **options: Any) -> dict[str, RedisStore]:
    """The three stores for ``OAuthClient(url, **redis_oauth_stores(...))``: ``token_store``,
    ``registration_store`` and ``pending_store``, on one client (``options`` as RedisStore's)."""
    tokens = RedisStore(redis_client, prefix=prefix, kind="tokens", **options)
    client = tokens.client  # the stores of one deployment share one connection pool
    return {
        "token_store": tokens,
        "registration_store": RedisStore(client, prefix=prefix, kind="registrations", **options),
        "pending_store": RedisStore(client, prefix=prefix, kind="pending", **options),
    }
