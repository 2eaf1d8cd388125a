"""The response cache shared through Redis (issue 24, docs/decisions/0050): ``snodo.RedisCache``
against a real ``redis-server`` on 127.0.0.1, real Runtimes over HTTP, and worker PROCESSES that
each have their own client (this file run as ``python -m tests.test_cache_redis`` is the worker).
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
from snodo.server import CacheHint, Context, Runtime
from snodo.server.http_server import HttpServer, serve_http
from tests.support.redis_server import RedisServer, redis_server
from tests.support.stdio_support import wait_until

LATEST = "2026-07-28"
MINUTE = 60_000
ROOT = Path(__file__).resolve().parent.parent
#: One worker command's bound (a connect starts an interpreter's worth of imports).
WORKER_DEADLINE = 20.0
#: The Redis bound the tests give the cache, and what a call may take on top of it here.
REDIS_TIMEOUT = 0.3
SLACK = 1.0


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture
def prefix() -> str:
    """A prefix of this test's own: tests share one Redis, never entries."""
    return f"snodo-test:{uuid.uuid4().hex[:12]}:"


class Counted:
    """A Runtime over HTTP whose ``count://{name}`` reads say how often the server made them."""

    def __init__(self, *, scope: str = "public", ttl_ms: int = MINUTE, size: int = 0) -> None:
        hint = CacheHint(ttl_ms, scope)  # type: ignore[arg-type]
        self.reads: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.hold: threading.Event | None = None
        self.entered = threading.Event()
        self.runtime = Runtime(
            "redis-cache-test",
            "1.0",
            versions=[LATEST],
            cache_hints={"tools": hint, "resources": hint},
        )
        self.runtime.add_tool("echo", lambda args, ctx: "echo", description="echo")

        @self.runtime.resource_template("count://{name}", name="count")
        def count(uri: str, variables: dict[str, str], ctx: Context) -> str:
            name = variables["name"]
            if name == "slow" and self.hold is not None:
                self.entered.set()
                assert self.hold.wait(10)
            with self.lock:
                self.reads[name] += 1
                n = self.reads[name]
            return f"{name} #{n}" + "x" * size


@pytest.fixture
def served() -> Iterator[tuple[Counted, HttpServer]]:
    counted = Counted()
    server = serve_http(counted.runtime)
    try:
        yield counted, server
    finally:
        server.close()


def text(result: Any) -> str:
    return str(result["contents"][0]["text"])


# -- the worker process --------------------------------------------------------------------------


class Worker:
    """A worker process (this module's ``main``) with its own client, driven by JSON lines."""

    def __init__(self, url: str, redis_url: str, prefix: str, **options: Any) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("SNODO_GEVENT", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.test_cache_redis"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.ask("connect", url=url, redis=redis_url, prefix=prefix, options=options)

    def ask(self, op: str, **args: Any) -> Any:
        """Send one command and wait (bounded) for its answer."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"op": op, **args}).encode() + b"\n")
        self.process.stdin.flush()
        readable, _, _ = select.select([self.process.stdout], [], [], WORKER_DEADLINE)
        assert readable, f"worker gave no answer to {op} within {WORKER_DEADLINE} s"
        line = self.process.stdout.readline()
        assert line, f"worker ended during {op} (exit {self.process.poll()})"
        answer = json.loads(line)
        assert "error" not in answer, answer["error"]
        return answer["value"]

    def close(self) -> None:
        try:
            self.ask("quit")
        finally:
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
            self.process.stdout.close()


@pytest.fixture
def workers(
    served: tuple[Counted, HttpServer], redis: RedisServer, prefix: str
) -> Iterator[list[Worker]]:
    _, server = served
    started: list[Worker] = []
    try:
        for _ in range(2):
            started.append(Worker(server.url, redis.url, prefix))
        yield started
    finally:
        for worker in started:
            worker.close()


def main() -> None:
    """The worker: one client with a RedisCache; commands on stdin, answers on stdout."""
    client: snodo.Client | None = None
    cache: snodo.RedisCache | None = None
    sub: snodo.Subscription | None = None
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        try:
            value: Any = None
            if op == "connect":
                cache = snodo.RedisCache(command["redis"], prefix=command["prefix"])
                target = snodo.Http(command["url"])
                client = snodo.connect(target, protocol=LATEST, cache=cache, **command["options"])
            elif op == "read":
                assert client is not None
                value = text(client.read_resource(command["uri"]))
            elif op == "tools":
                assert client is not None
                value = sorted(tool["name"] for tool in client.list_tools())
            elif op == "listen":
                assert client is not None
                sub = client.listen(command["filter"])
            elif op == "event":
                assert sub is not None
                sub.demand(1)
                event = sub.next(timeout=10)
                value = [getattr(event, "method", repr(event)), getattr(event, "params", None)]
            elif op == "quit":
                if sub is not None:
                    sub.close()
                if client is not None:
                    client.close()
                if cache is not None:
                    cache.close()
            answer = {"value": value}
        except Exception as error:  # reported to the test, which fails on it
            answer = {"error": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
        if op == "quit":
            return


# -- sharing between worker processes ------------------------------------------------------------


def test_a_public_result_fetched_by_one_worker_is_a_hit_in_another(
    served: tuple[Counted, HttpServer], workers: list[Worker]
) -> None:
    """A public result one worker process stored is served to another from Redis: the server
    sees one request."""
    counted, _ = served
    first, second = workers
    assert first.ask("read", uri="count://shared") == "shared #1"
    assert second.ask("read", uri="count://shared") == "shared #1"
    assert second.ask("read", uri="count://shared") == "shared #1"
    assert counted.reads["shared"] == 1
    assert first.ask("tools") == second.ask("tools") == ["echo"]


def test_a_list_changed_event_in_one_worker_invalidates_the_entry_in_all(
    served: tuple[Counted, HttpServer], workers: list[Worker]
) -> None:
    """A tools/list_changed (and a resources/updated) event one worker receives removes the
    entries from Redis: the other worker's next call goes to the server."""
    counted, _ = served
    listener, other = workers
    listener.ask(
        "listen", filter={"toolsListChanged": True, "resourceSubscriptions": ["count://a"]}
    )
    assert listener.ask("tools") == ["echo"]
    assert other.ask("tools") == ["echo"]  # a hit: stored by the listener
    assert other.ask("read", uri="count://a") == "a #1"
    assert listener.ask("read", uri="count://a") == "a #1"  # a hit the other way round

    counted.runtime.add_tool("added", lambda args, ctx: "added", description="added")
    assert listener.ask("event")[0] == "notifications/tools/list_changed"
    assert other.ask("tools") == ["added", "echo"]  # sent: the cached page was removed

    counted.runtime.resource_updated("count://a")
    method, params = listener.ask("event")
    assert (method, params["uri"]) == ("notifications/resources/updated", "count://a")
    assert other.ask("read", uri="count://a") == "a #2"
    assert listener.ask("read", uri="count://a") == "a #2"
    assert counted.reads["a"] == 2


# -- keys, values and partitions -----------------------------------------------------------------


class Tokens:
    """A token provider whose current token the test sets."""

    def __init__(self, current: str) -> None:
        self.current = current

    def token(self, url: str) -> str | None:
        return self.current

    def refresh(self, challenge: Any, *, url: str, status: int, token: str | None) -> str | None:
        return self.current


def everything_in(redis: RedisServer, prefix: str) -> bytes:
    """Every key under ``prefix`` and every value, member and field they hold."""
    import redis as redis_module

    found: list[bytes] = []
    with redis_module.Redis.from_url(redis.url) as r:
        for name in r.scan_iter(match=prefix + "*"):
            found.append(name)
            kind = r.type(name)
            if kind == b"string":
                found.append(r.get(name) or b"")
            elif kind == b"hash":
                for field, value in r.hgetall(name).items():
                    found += [field, value]
            elif kind == b"set":
                found += list(r.smembers(name))
            elif kind == b"zset":
                found += [member for member, _ in r.zrange(name, 0, -1, withscores=True)]
    return b"\n".join(found)


def test_no_raw_token_or_authorization_header_is_anywhere_in_redis(
    redis: RedisServer, prefix: str
) -> None:
    """Private results are kept per credentials (hashed); no token, authorization header, URL
    or credential-bearing header value is found in any key or value in Redis."""
    private = Counted(scope="private")
    server = serve_http(private.runtime)
    caches = [snodo.RedisCache(redis.url, prefix=prefix) for _ in range(2)]
    try:
        target = snodo.Http(server.url)

        def read(cache: snodo.RedisCache, **options: Any) -> str:
            with snodo.connect(target, protocol=LATEST, cache=cache, **options) as client:
                return text(client.read_resource("count://a"))

        alpha = {"Authorization": "Bearer alpha-secret", "Cookie": "session=cookie-secret"}
        assert read(caches[0], headers=alpha) == "a #1"
        assert read(caches[1], headers=alpha) == "a #1"  # another worker, same credentials
        assert read(caches[1], headers={"Authorization": "Bearer beta-secret"}) == "a #2"
        tokens = Tokens("gamma-secret")
        assert read(caches[0], token_provider=tokens) == "a #3"
        assert read(caches[1], token_provider=tokens) == "a #3"
        tokens.current = "delta-secret"
        assert read(caches[1], token_provider=tokens) == "a #4"

        stored = everything_in(redis, prefix)
        assert stored.count(b"a #") == 4  # four private partitions hold entries
        lowered = stored.lower()
        for secret in (b"alpha-secret", b"beta-secret", b"gamma-secret", b"delta-secret"):
            assert secret not in lowered
        for header in (b"bearer", b"authorization", b"cookie", server.url.encode()):
            assert header not in lowered
    finally:
        for cache in caches:
            cache.close()
        server.close()


def test_a_runtime_in_one_process_never_shares_entries_with_another_process(
    redis: RedisServer, prefix: str
) -> None:
    """Direct and stdio namespaces are this process's only (their numbers repeat in other
    processes): a RedisCache tags them with the process, HTTP ones are shared."""
    from snodo.redis_cache import crosses_processes

    with snodo.RedisCache(redis.url, prefix=prefix) as cache:
        assert crosses_processes(("http", "ab12"))
        assert crosses_processes(("custom:my.Transport", "endpoint"))
        assert not crosses_processes(("direct", 1))
        assert not crosses_processes(("stdio", "stdio-1-4242"))
        assert not crosses_processes(("own:my.Transport", 3))
        assert cache.scoped(("http", "ab12")) == _scoped_in_child(redis, prefix, ("http", "ab12"))
        assert cache.scoped(("direct", 1)) != _scoped_in_child(redis, prefix, ("direct", 1))
        counted = Counted()
        with snodo.direct(counted.runtime, cache=cache) as client:
            assert text(client.read_resource("count://d")) == "d #1"
            assert text(client.read_resource("count://d")) == "d #1"
        assert counted.reads["d"] == 1


def _scoped_in_child(redis: RedisServer, prefix: str, namespace: Any) -> str:
    code = (
        "import json, sys, snodo; c = snodo.RedisCache(sys.argv[1], prefix=sys.argv[2]); "
        "print(c.scoped(tuple(json.loads(sys.argv[3])))); c.close()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, redis.url, prefix, json.dumps(namespace)],
        capture_output=True,
        text=True,
        timeout=WORKER_DEADLINE,
        check=True,
    )
    return done.stdout.strip()


# -- the rules of the in-process cache, in Redis ---------------------------------------------------


def entry_names(redis: RedisServer, prefix: str) -> list[bytes]:
    import redis as redis_module

    with redis_module.Redis.from_url(redis.url) as r:
        return list(r.scan_iter(match=prefix + "e:*"))


def test_size_limits_hold_across_the_shared_store(redis: RedisServer, prefix: str) -> None:
    """At most ``max_entries`` results, least recently used first, whichever worker stored them;
    a result over ``max_bytes`` is never stored; the byte budget evicts too."""
    counted = Counted(size=100)
    server = serve_http(counted.runtime)
    caches = [snodo.RedisCache(redis.url, prefix=prefix, max_entries=3) for _ in range(2)]
    try:
        clients = [
            snodo.connect(snodo.Http(server.url), protocol=LATEST, cache=cache) for cache in caches
        ]
        try:
            for i, name in enumerate("abcd"):
                clients[i % 2].read_resource(f"count://{name}")
            assert len(entry_names(redis, prefix)) == 3
            assert text(clients[1].read_resource("count://b")).startswith("b #1")  # kept
            assert text(clients[0].read_resource("count://a")).startswith("a #2")  # evicted
            assert len(entry_names(redis, prefix)) == 3
        finally:
            for client in clients:
                client.close()

        small = f"{prefix}small:"
        with (
            snodo.RedisCache(redis.url, prefix=small, max_bytes=300) as cache,
            snodo.connect(snodo.Http(server.url), protocol=LATEST, cache=cache) as client,
        ):
            big = Counted(size=400)
            with snodo.direct(big.runtime, cache=cache) as direct:
                direct.read_resource("count://big")
                assert text(direct.read_resource("count://big")).startswith("big #2")
            client.read_resource("count://e")  # ~170 bytes: stored
            client.read_resource("count://f")  # together over 300: e is evicted
            assert len(entry_names(redis, small)) == 1
            assert text(client.read_resource("count://f")).startswith("f #1")
    finally:
        for cache in caches:
            cache.close()
        server.close()


def test_entries_expire_ttl_after_they_arrived_as_redis_expiries(
    redis: RedisServer, prefix: str
) -> None:
    """An entry lives ``ttlMs`` (a Redis PX expiry), then the next call is sent."""
    import redis as redis_module

    counted = Counted(ttl_ms=400)
    with (
        snodo.RedisCache(redis.url, prefix=prefix) as cache,
        snodo.direct(counted.runtime, cache=cache) as client,
        redis_module.Redis.from_url(redis.url) as r,
    ):
        assert text(client.read_resource("count://t")) == "t #1"
        (name,) = entry_names(redis, prefix)
        assert 0 < r.pttl(name) <= 400
        assert text(client.read_resource("count://t")) == "t #1"
        wait_until(lambda: not r.exists(name), timeout=5)
        assert text(client.read_resource("count://t")) == "t #2"


def test_a_response_in_flight_when_another_worker_invalidates_is_not_written_back(
    redis: RedisServer, prefix: str
) -> None:
    """The generation rule across workers: a read sent before another worker's invalidation,
    answered after it, is not stored (the counter lives in Redis, checked by the store script)."""
    counted = Counted()
    counted.hold = threading.Event()
    server = serve_http(counted.runtime)
    caches = [snodo.RedisCache(redis.url, prefix=prefix) for _ in range(2)]
    results: list[str] = []
    try:
        target = snodo.Http(server.url)
        with (
            snodo.connect(target, protocol=LATEST, cache=caches[0]) as reader,
            snodo.connect(target, protocol=LATEST, cache=caches[1]) as invalidator,
        ):
            thread = threading.Thread(
                target=lambda: results.append(text(reader.read_resource("count://slow")))
            )
            thread.start()
            assert counted.entered.wait(10)
            invalidator._observe_notification(
                "notifications/resources/updated", {"uri": "count://slow"}
            )
            counted.hold.set()
            thread.join(10)
            assert not thread.is_alive()
            assert results == ["slow #1"]
            assert text(invalidator.read_resource("count://slow")) == "slow #2"  # #1 not stored
            assert text(reader.read_resource("count://slow")) == "slow #2"
    finally:
        counted.hold.set()
        for cache in caches:
            cache.close()
        server.close()


# -- Redis down or slow --------------------------------------------------------------------------


def timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    value = call()
    return value, time.monotonic() - started


def test_redis_killed_mid_run_calls_go_on_within_a_bound_then_the_cache_comes_back(
    redis: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis killed: every call still answers (sent to the server), the first within the socket
    timeout, the next ones without asking Redis (the breaker); one clear log line without
    secrets; Redis back: the cache is used again after ``retry_after``."""
    counted = Counted()
    retry_after = 0.5
    with (
        snodo.RedisCache(
            redis.url, prefix=prefix, timeout=REDIS_TIMEOUT, retry_after=retry_after
        ) as cache,
        snodo.direct(counted.runtime, cache=cache) as client,
    ):
        assert text(client.read_resource("count://k")) == "k #1"
        assert text(client.read_resource("count://k")) == "k #1"
        caplog.set_level(logging.INFO, logger="snodo.redis_cache")
        redis.kill()
        try:
            value, took = timed(lambda: text(client.read_resource("count://k")))
            assert value == "k #2" and took < REDIS_TIMEOUT + SLACK
            for n in range(3, 6):
                value, took = timed(lambda: text(client.read_resource("count://k")))
                assert value == f"k #{n}" and took < 0.2  # Redis is not asked
            warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert len(warnings) == 1
            message = warnings[0].getMessage()
            assert "unavailable" in message and "calls go to the server" in message
            assert cache.failures >= 1
        finally:
            redis.start()  # same port, empty
        wait_until(lambda: cache.now() >= cache._open_until if cache._open_until else True)
        assert text(client.read_resource("count://k")) == "k #6"  # stored again
        assert text(client.read_resource("count://k")) == "k #6"
        assert any("reachable again" in r.getMessage() for r in caplog.records)


def test_redis_paused_mid_run_calls_go_on_and_missed_invalidations_are_written_later(
    redis: RedisServer, prefix: str
) -> None:
    """Redis hung (SIGSTOP): calls answer within the timeout bound; an invalidation that could
    not be written is kept and written before Redis is used again, so no stale hit follows."""
    counted = Counted()
    retry_after = 0.5
    with (
        snodo.RedisCache(
            redis.url, prefix=prefix, timeout=REDIS_TIMEOUT, retry_after=retry_after
        ) as cache,
        snodo.direct(counted.runtime, cache=cache) as client,
    ):
        assert text(client.read_resource("count://p")) == "p #1"
        assert text(client.read_resource("count://p")) == "p #1"
        redis.pause()
        try:
            value, took = timed(lambda: text(client.read_resource("count://p")))
            assert value == "p #2" and took < REDIS_TIMEOUT + SLACK
            _, took = timed(
                lambda: client._observe_notification(
                    "notifications/resources/updated", {"uri": "count://p"}
                )
            )
            assert took < REDIS_TIMEOUT + SLACK
        finally:
            redis.resume()
        until = cache._open_until
        assert until is not None
        wait_until(lambda: cache.now() >= until, timeout=5)
        # the stale "p #1" is still in Redis until the kept invalidation is written: it must be
        assert text(client.read_resource("count://p")) == "p #3"
        assert text(client.read_resource("count://p")) == "p #3"


def test_a_redis_that_is_not_there_at_all_costs_one_bounded_wait(prefix: str) -> None:
    """No Redis at the address: connecting fails at once or within the timeout, and the calls
    go on uncached."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    counted = Counted()
    with (
        snodo.RedisCache(
            f"redis://127.0.0.1:{port}/0", prefix=prefix, timeout=REDIS_TIMEOUT
        ) as cache,
        snodo.direct(counted.runtime, cache=cache) as client,
    ):
        for n in (1, 2, 3):
            value, took = timed(lambda: text(client.read_resource("count://n")))
            assert value == f"n #{n}" and took < REDIS_TIMEOUT + SLACK
        assert not cache.ping()


def test_cache_refuses_what_it_cannot_use() -> None:
    """``cache=`` takes True, False or a store; RedisCache checks its options."""
    with pytest.raises(TypeError, match="cache must be True or False"):
        snodo.direct(Counted().runtime, cache="redis://127.0.0.1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="redis must be a URL"):
        snodo.RedisCache(42)
    with pytest.raises(TypeError, match="max_entries"):
        snodo.RedisCache("redis://127.0.0.1:1/0", max_entries=0)
    with pytest.raises(TypeError, match="timeout"):
        snodo.RedisCache("redis://127.0.0.1:1/0", timeout=0)


if __name__ == "__main__":
    main()
