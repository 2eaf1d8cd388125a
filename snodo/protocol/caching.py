"""Response caching decisions (the reference's "Response caching"; spec digest (j)): pure functions.

Which calls may use the cache, whether a result may be stored and for how long, what a cache key
is made of, and which entries a subscription notification invalidates. The store itself (LRU,
sizes, the generation counter) is :mod:`snodo.cache`; the client wires the two together.

Keys never hold a raw token or header value: endpoints and credentials enter them as SHA-256
digests (:func:`digest`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import orjson

from snodo.protocol.dialects.v2026_07_28 import CACHEABLE
from snodo.protocol.subscriptions import RESOURCE_UPDATED

#: The requests whose complete results may be cached (those that carry cache hints on 2026-07-28).
CACHEABLE_METHODS: Final = CACHEABLE

#: One result larger than this (encoded JSON bytes) is never stored; also the store's budget.
MAX_ENTRY_BYTES: Final = 16 * 1024 * 1024
#: The store holds at most this many results.
MAX_ENTRIES: Final = 256

#: List-changed notifications and the list methods whose cached pages they remove.
LIST_CHANGED: Final[dict[str, frozenset[str]]] = {
    "notifications/tools/list_changed": frozenset({"tools/list"}),
    "notifications/prompts/list_changed": frozenset({"prompts/list"}),
    "notifications/resources/list_changed": frozenset(
        {"resources/list", "resources/templates/list"}
    ),
}

#: Header names that carry credentials: left out of the public namespace, kept (hashed) in the
#: private credential.
CREDENTIAL_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "cookie"})

Scope = Literal["public", "private"]


@dataclass(frozen=True, slots=True)
class Storable:
    """A result the cache may keep: its ``cacheScope`` and its lifetime in seconds."""

    scope: Scope
    ttl: float


@dataclass(frozen=True, slots=True)
class Invalidation:
    """What one notification removes: cached results of ``methods``, or reads of ``uri``."""

    methods: frozenset[str] = frozenset()
    uri: str | None = None


def may_use_cache(method: str, *, bypass: bool, per_call_options: bool) -> bool:
    """Whether a call may be served from the cache (and its result stored): a cacheable
    method, not bypassed, and no per-call option but ``timeout=`` (any other one changes what is
    sent or how the answer is read, so such a call is always sent)."""
    return not bypass and not per_call_options and method in CACHEABLE_METHODS


def storable(result: Any) -> Storable | None:
    """The scope and TTL of a complete result, or None when it must not be stored.

    Stored only with a positive integer ``ttlMs`` and a ``cacheScope`` of "public" or
    "private"; 0, absent, negative or non-integer TTLs mean stale at once.
    """
    if not isinstance(result, Mapping):
        return None
    if result.get("resultType", "complete") != "complete":
        return None
    ttl = result.get("ttlMs")
    if type(ttl) is not int or ttl <= 0:
        return None
    scope = result.get("cacheScope")
    if scope == "public":
        return Storable("public", ttl / 1000.0)
    if scope == "private":
        return Storable("private", ttl / 1000.0)
    return None


def params_key(params: Mapping[str, Any] | None) -> Hashable:
    """The part of a cache key the request's params decide (``cursor``, ``uri``, ...).

    The common shapes are kept as they are (cheap); anything else as its canonical JSON.
    """
    if not params:
        return None
    if len(params) == 1:
        ((name, value),) = params.items()
        if type(value) is str and name in ("cursor", "uri"):
            return (name, value)
    return orjson.dumps(params, option=orjson.OPT_SORT_KEYS)


def read_uri(method: str, params: Mapping[str, Any] | None) -> str | None:
    """The URI of a ``resources/read`` call (what a resource update invalidates)."""
    if method != "resources/read" or not params:
        return None
    uri = params.get("uri")
    return uri if isinstance(uri, str) else None


def digest(*parts: Any) -> str:
    """A SHA-256 hex digest of JSON-encodable ``parts`` (canonical: keys sorted)."""
    data = orjson.dumps(parts, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(data).hexdigest()


def client_base(
    namespace: Hashable,
    version: str,
    client_info: Mapping[str, Any] | None,
    client_capabilities: Mapping[str, Any],
) -> tuple[Hashable, str, str]:
    """The prefix every key of one client shares: endpoint, protocol and client metadata."""
    return (namespace, version, digest(client_info, client_capabilities))


def public_key(base: Hashable, method: str, params: Hashable) -> tuple[Hashable, ...]:
    """The key of a public result: shared by every client with the same ``base``."""
    return ("public", base, method, params)


def private_key(
    base: Hashable, method: str, params: Hashable, credential: str
) -> tuple[Hashable, ...]:
    """The key of a private result: partitioned by the (hashed) credential and session."""
    return ("private", base, method, params, credential)


def split_headers(headers: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """HTTP headers split into (non-credential, credential) by name, names lowercased."""
    plain: dict[str, str] = {}
    secret: dict[str, str] = {}
    for name, value in headers.items():
        lowered = name.lower()
        (secret if lowered in CREDENTIAL_HEADERS else plain)[lowered] = value
    return plain, secret


def http_namespace(
    url: str, headers: Mapping[str, str], max_response_bytes: int, tls: Any
) -> tuple[str, str]:
    """An HTTP endpoint's public namespace: URL, non-credential headers and limits, hashed."""
    plain, _ = split_headers(headers)
    return ("http", digest(url, plain, max_response_bytes, tls))


def http_credential(
    headers: Mapping[str, str], token: str | None, client_cert: Any, session_id: str | None
) -> str:
    """The private partition of an HTTP client: its credentials and session id, hashed."""
    _, secret = split_headers(headers)
    return digest("http", secret, token, client_cert, session_id)


def invalidation(method: str, params: Mapping[str, Any] | None) -> Invalidation | None:
    """What a subscription notification removes from the cache (None: nothing)."""
    methods = LIST_CHANGED.get(method)
    if methods is not None:
        return Invalidation(methods=methods)
    if method == RESOURCE_UPDATED:
        uri = params.get("uri") if isinstance(params, Mapping) else None
        if isinstance(uri, str):
            return Invalidation(uri=uri)
    return None


__all__ = [
    "CACHEABLE_METHODS",
    "CREDENTIAL_HEADERS",
    "LIST_CHANGED",
    "MAX_ENTRIES",
    "MAX_ENTRY_BYTES",
    "RESOURCE_UPDATED",
    "Invalidation",
    "Storable",
    "client_base",
    "digest",
    "http_credential",
    "http_namespace",
    "invalidation",
    "may_use_cache",
    "params_key",
    "private_key",
    "public_key",
    "read_uri",
    "split_headers",
    "storable",
]
