"""The pure cache decisions (snodo.protocol.caching) and the store (snodo.cache) on their own."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snodo.cache import ResponseCache, fresh_namespace, namespace_of
from snodo.protocol import caching
from snodo.protocol.caching import Invalidation, Storable


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"ttlMs": 1500, "cacheScope": "public"}, Storable("public", 1.5)),
        (
            {"ttlMs": 1, "cacheScope": "private", "resultType": "complete"},
            Storable("private", 0.001),
        ),
        ({"ttlMs": 1500, "cacheScope": "public", "resultType": "input_required"}, None),
        ({"ttlMs": 0, "cacheScope": "public"}, None),
        ({"ttlMs": -1, "cacheScope": "public"}, None),
        ({"ttlMs": 10.0, "cacheScope": "public"}, None),
        ({"ttlMs": True, "cacheScope": "public"}, None),
        ({"ttlMs": "10", "cacheScope": "public"}, None),
        ({"ttlMs": 10, "cacheScope": "PUBLIC"}, None),
        ({"ttlMs": 10}, None),
        ({}, None),
        ("not a result", None),
    ],
)
def test_storable_needs_a_positive_integer_ttl_and_a_known_scope(
    result: Any, expected: Storable | None
) -> None:
    assert caching.storable(result) == expected


def test_params_key_tells_apart_what_affects_the_result() -> None:
    assert caching.params_key(None) is None
    assert caching.params_key({}) is None
    assert caching.params_key({"cursor": "a"}) != caching.params_key({"cursor": "b"})
    assert caching.params_key({"uri": "a"}) != caching.params_key({"cursor": "a"})
    assert caching.params_key({"uri": "a", "x": 1}) == caching.params_key({"x": 1, "uri": "a"})
    assert caching.params_key({"uri": "a", "x": 1}) != caching.params_key({"uri": "a", "x": 2})


def test_invalidation_names_the_methods_or_the_uri() -> None:
    tools = caching.invalidation("notifications/tools/list_changed", {})
    assert tools == Invalidation(methods=frozenset({"tools/list"}))
    resources = caching.invalidation("notifications/resources/list_changed", None)
    assert resources is not None
    assert resources.methods == {"resources/list", "resources/templates/list"}
    prompts = caching.invalidation("notifications/prompts/list_changed", {})
    assert prompts is not None and prompts.methods == {"prompts/list"}
    assert caching.invalidation("notifications/resources/updated", {"uri": "a://b"}) == (
        Invalidation(uri="a://b")
    )
    assert caching.invalidation("notifications/resources/updated", {}) is None
    assert caching.invalidation("notifications/progress", {"progressToken": 1}) is None


def test_client_base_separates_protocol_and_client_metadata() -> None:
    base = caching.client_base(("direct", 1), "2026-07-28", {"name": "a"}, {})
    assert base == caching.client_base(("direct", 1), "2026-07-28", {"name": "a"}, {})
    assert base != caching.client_base(("direct", 2), "2026-07-28", {"name": "a"}, {})
    assert base != caching.client_base(("direct", 1), "2025-11-25", {"name": "a"}, {})
    assert base != caching.client_base(("direct", 1), "2026-07-28", {"name": "b"}, {})
    assert base != caching.client_base(("direct", 1), "2026-07-28", {"name": "a"}, {"roots": {}})
    assert {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    } == caching.CACHEABLE_METHODS


def test_http_keys_hash_credentials_and_leave_them_out_of_the_namespace() -> None:
    plain = {"X-Tenant": "north"}
    secret = {**plain, "Authorization": "Bearer s3cret", "Cookie": "sid=s3cret"}
    assert caching.http_namespace("https://h/mcp", plain, 10, None) == caching.http_namespace(
        "https://h/mcp", secret, 10, None
    )
    assert caching.http_namespace("https://h/mcp", plain, 10, None) != caching.http_namespace(
        "https://h/mcp", {"X-Tenant": "south"}, 10, None
    )
    one = caching.http_credential(secret, None, None, None)
    assert one != caching.http_credential(plain, None, None, None)
    assert one != caching.http_credential(secret, "token", None, None)
    assert one != caching.http_credential(secret, None, None, "session")
    assert "s3cret" not in one and len(one) == 64


def test_namespaces_of_objects_are_stable_and_fresh_ones_unique() -> None:
    class Thing:
        pass

    thing = Thing()
    assert namespace_of("direct", thing) == namespace_of("direct", thing)
    assert namespace_of("direct", thing) != namespace_of("direct", Thing())
    assert fresh_namespace("x") != fresh_namespace("x")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def put(cache: ResponseCache, key: str, size: int, **options: Any) -> bool:
    defaults: dict[str, Any] = {
        "expires": cache.clock() + 10,
        "generation": cache.generation,
        "namespace": "ns",
        "method": "resources/read",
        "uri": key,
    }
    return cache.put(key, b"x" * size, **{**defaults, **options})


def test_store_evicts_least_recently_used_by_count_and_bytes() -> None:
    cache = ResponseCache(max_entries=3, max_bytes=100, clock=Clock())
    for key in "abc":
        assert put(cache, key, 10)
    assert cache.get("a") is not None  # a is now the most recent
    put(cache, "d", 10)
    assert cache.get("b") is None and cache.get("a") is not None
    put(cache, "e", 90)  # over 100 bytes: the least recent go until it fits
    assert cache.total_bytes == 100 and len(cache) == 2
    assert cache.get("e") is not None and cache.get("a") is not None  # c, then d went
    assert not put(cache, "f", 101)  # larger than the whole budget: never stored
    assert cache.get("f") is None


def test_store_expiry_generation_and_invalidation() -> None:
    clock = Clock()
    cache = ResponseCache(clock=clock)
    put(cache, "a", 1, expires=5.0)
    clock.now = 4.999
    assert cache.get("a") == b"x"
    clock.now = 5.0
    assert cache.get("a") is None and len(cache) == 0
    old = cache.generation
    put(cache, "b", 1)
    put(cache, "c", 1, namespace="other", uri="b")
    assert cache.invalidate("ns", Invalidation(uri="b")) == 1
    assert cache.get("c") is not None  # another namespace
    assert not put(cache, "b", 1, generation=old)  # sent before the invalidation
    assert not put(cache, "z", 1, expires=clock.now)  # already expired


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 40)), max_size=60))
def test_store_bounds_always_hold(puts: list[tuple[str, int]]) -> None:
    cache = ResponseCache(max_entries=4, max_bytes=64, clock=Clock())
    for key, size in puts:
        stored = put(cache, key, size)
        assert len(cache) <= 4 and cache.total_bytes <= 64
        assert cache.total_bytes == sum(len(e.data) for e in cache._entries.values())
        if stored:
            assert cache.get(key) == b"x" * size


# -- which calls may use the cache ------------------------------------------------------------


@pytest.mark.parametrize("method", sorted(caching.CACHEABLE_METHODS))
def test_a_cacheable_call_with_no_per_call_option_uses_the_cache(method: str) -> None:
    assert caching.may_use_cache(method, bypass=False, per_call_options=False)


@pytest.mark.parametrize(
    ("method", "bypass", "per_call_options"),
    [
        ("tools/list", True, False),  # bypass_cache=True
        ("tools/list", False, True),  # progress=, meta=, ... change what is sent
        ("tools/call", False, False),  # never cacheable
        ("ping", False, False),
    ],
)
def test_a_bypassed_call_one_with_options_or_an_uncacheable_method_is_sent(
    method: str, bypass: bool, per_call_options: bool
) -> None:
    assert not caching.may_use_cache(method, bypass=bypass, per_call_options=per_call_options)
