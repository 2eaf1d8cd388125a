"""Client.stats(): the counters of a connection, against real servers (direct, stdio, HTTP on
127.0.0.1), on the sync client and on snodo.aio, across a restart."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

import snodo
import snodo.aio
from snodo.server.http_server import serve_http
from snodo.supervision import green_mode
from tests.servers.subs_runtime import build as subs_build
from tests.support import client_runtime
from tests.support.stdio_support import LATEST, ROOT, no_leaks, snodo_server, wait_until, warm_up

CLIENT_RUNTIME = "tests.support.client_runtime:build"
AIO_RUNTIME = "tests.servers.aio_runtime:build"


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    warm_up()


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    with no_leaks(pooled=True):
        yield


def stdio(runtime: str = CLIENT_RUNTIME, *extra: str) -> snodo.Stdio:
    return snodo.Stdio(snodo_server(runtime).command, ["-m", "snodo.server", *extra, runtime])


def exercise(client: snodo.Client) -> None:
    """Three answered calls, one refused with -32099 and one tool error (a result)."""
    client.list_tools()
    client.call_tool("echo", {"text": "a"})
    client.call_tool("echo", {"text": "b"})
    with pytest.raises(snodo.McpError):
        client.call_tool("refuse", {})
    client.call_tool("broken", {})


@pytest.mark.parametrize("version", [LATEST, "2025-11-25"])
def test_direct_counts_calls_by_outcome_and_has_no_bytes(version: str) -> None:
    with snodo.direct(client_runtime.build(), protocol=version) as client:
        before = client.stats()
        exercise(client)
        stats = client.stats()
    sent = stats["calls_sent"] - before["calls_sent"]
    assert sent == 5
    assert stats["calls_completed"] - before["calls_completed"] == 4
    assert stats["calls_failed"] == {-32099: 1}
    assert stats["calls_in_flight"] == 0
    assert stats["calls_timed_out"] == 0
    assert (stats["bytes_in"], stats["bytes_out"]) == (None, None)
    assert stats["restarts"] == 0


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_bytes_in_and_out_grow_with_each_call_and_timeouts_are_counted(transport: str) -> None:
    server = serve_http(client_runtime.build()) if transport == "http" else None
    target: Any = snodo.Http(server.url) if server is not None else stdio()
    where = {} if server is not None else {"cwd": str(ROOT)}
    try:
        with snodo.connect(target, protocol=LATEST, **where) as client:
            first = client.stats()
            client.call_tool("echo", {"text": "x" * 1000})
            second = client.stats()
            assert second["bytes_out"] - first["bytes_out"] > 1000  # the request carried it
            assert second["bytes_in"] - first["bytes_in"] > 1000  # and so did its answer
            with pytest.raises(snodo.McpError) as slow:
                client.call_tool("forever", {}, timeout=0.3)
            assert slow.value.code == -32001
            third = client.stats()
            assert third["calls_timed_out"] == 1
            assert third["calls_failed"] == {-32001: 1}
            assert third["calls_in_flight"] == 0
    finally:
        if server is not None:
            server.close()


def test_a_cached_answer_is_not_a_call_sent() -> None:
    from tests.test_client_cache import Counted

    counted = Counted(scope="public")
    with snodo.direct(counted.runtime, protocol=LATEST, cache=True) as client:
        client.read_resource("count://a")
        sent = client.stats()["calls_sent"]
        client.read_resource("count://a")  # from the cache
        assert client.stats()["calls_sent"] == sent


@pytest.mark.skipif(green_mode(), reason="snodo.aio is for asyncio programs")
def test_calls_in_flight_and_abandoned_on_the_async_client() -> None:
    """50 calls held by the server are in flight together; a cancelled one is abandoned."""

    async def main() -> None:
        target = stdio(AIO_RUNTIME, "--max-concurrency", "100")
        async with await snodo.aio.connect(target, cwd=str(ROOT), protocol=LATEST) as client:
            base = client.stats()["calls_sent"]
            held = [
                asyncio.ensure_future(client.call_tool("gate", {"n": 51, "i": i}, timeout=30))
                for i in range(50)
            ]
            while client.stats()["calls_sent"] - base < 50:
                await asyncio.sleep(0)
            assert client.stats()["calls_in_flight"] == 50
            started = asyncio.Event()
            cancelled = asyncio.ensure_future(
                client.call_tool("forever", {}, progress=lambda p: started.set())
            )
            await asyncio.wait_for(started.wait(), 10)
            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            await client.call_tool("gate", {"n": 51, "i": "last"}, timeout=30)
            await asyncio.gather(*held)
            stats = client.stats()
            assert stats["calls_abandoned"] == 1
            assert stats["calls_in_flight"] == 0
            assert stats["calls_completed"] == stats["calls_sent"] - 1

    asyncio.run(main())


def test_subscription_events_delivered_and_dropped() -> None:
    uris = [f"mem://{n}" for n in range(10)]
    with snodo.direct(subs_build(), protocol=LATEST) as client:
        sub = client.listen({"resourceSubscriptions": uris}, max_buffer=3, overflow="drop_oldest")
        client.call_tool("burst", {"count": 10})
        from snodo.supervision import call

        wait_until(lambda: call(sub.ref, lambda a: a.stats(), 5.0)["dropped"] == 7)
        events = [sub.next(timeout=10) for _ in range(4)]
        assert isinstance(events[0], snodo.Dropped)
        stats = client.stats()
        sub.close()
    assert (stats["events_delivered"], stats["events_dropped"]) == (3, 7)


def test_restarts_are_counted_and_the_counters_survive_them() -> None:
    with snodo.connect(
        stdio(), cwd=str(ROOT), protocol=LATEST, restart="transient", backoff={"initial": 0.05}
    ) as client:
        client.call_tool("echo", {"text": "before"})
        pid = client.transport.pid  # type: ignore[attr-defined]
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: client.state == "ready" and client.transport.pid != pid)  # type: ignore[attr-defined]
        client.call_tool("echo", {"text": "after"}, timeout=20)
        stats = client.stats()
    assert stats["restarts"] == 1
    assert stats["calls_completed"] == 2  # one on each server: the count went on
