"""snodo.aio against real servers: the shared call checks on both clients over every transport
and version, cancellation, a thousand calls in flight on one stdio connection with their
thread count, coroutine input handlers and progress, subscriptions read with ``async for``,
restarts, the cache, and uvloop. Servers: the project's Runtime in process (direct, HTTP on
127.0.0.1) and as a child process (stdio); the custom transport is tests/support/pipe_transport.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
import snodo.aio
from snodo import Closed, Dropped, Notification
from snodo.server.http_server import serve_http
from snodo.supervision import green_mode
from tests.servers.subs_runtime import build as subs_build
from tests.support import client_runtime
from tests.support.client_calls import calls_checks, errors_checks
from tests.support.pipe_transport import PipeTransport
from tests.support.stdio_support import (
    ALL,
    LATEST,
    PYTHON,
    ROOT,
    no_leaks,
    read_messages,
    snodo_server,
    wait_until,
    warm_up,
)

pytestmark = pytest.mark.skipif(
    green_mode(), reason="asyncio and gevent are two schedulers: snodo.aio is for asyncio programs"
)

CLIENT_RUNTIME = "tests.support.client_runtime:build"
AIO_RUNTIME = "tests.servers.aio_runtime:build"
SUBS_RUNTIME = "tests.servers.subs_runtime:runtime"
SESSION_ERA = "2025-11-25"

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a test dependency
    uvloop = None

LOOPS = [
    "asyncio",
    pytest.param("uvloop", marks=pytest.mark.skipif(uvloop is None, reason="no uvloop")),
]


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    warm_up()
    if uvloop is not None:
        uvloop.run(asyncio.sleep(0))  # its first loop opens a pipe the process keeps


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """No child process or fd outlives a test (the shared HTTP pool's idle sockets aside)."""
    with no_leaks(pooled=True):
        yield


def run(main: Awaitable[Any], loop: str = "asyncio") -> Any:
    """Run ``main`` on a fresh event loop of the kind named."""
    if loop == "uvloop":
        assert uvloop is not None
        return uvloop.run(main)
    return asyncio.run(main)


def stdio(runtime: str = CLIENT_RUNTIME, *extra: str, log: Path | None = None) -> snodo.Stdio:
    if log is not None:
        return snodo_server(runtime, log=log)
    return snodo.Stdio(PYTHON, ["-m", "snodo.server", *extra, runtime])


async def opened(kind: str, transport: str, version: str, url: str | None) -> Any:
    """A client of ``kind`` ("sync" or "async") over ``transport`` to the call-check runtime."""
    if transport == "direct":
        runtime = client_runtime.build()
        if kind == "sync":
            return snodo.direct(runtime, protocol=version)
        return await snodo.aio.direct(runtime, protocol=version)
    target: Any
    options: dict[str, Any] = {"protocol": version}
    if transport == "stdio":
        target = stdio()
        options["cwd"] = str(ROOT)
    elif transport == "http":
        assert url is not None
        target = snodo.Http(url)
    else:
        target = (PipeTransport, client_runtime.build())
    if kind == "sync":
        return snodo.connect(target, **options)
    return await snodo.aio.connect(target, **options)


async def closed(client: Any) -> None:
    if isinstance(client, snodo.aio.AsyncClient):
        await client.aclose()
    else:
        client.close()


# -- one suite, two clients -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("transport", ["direct", "stdio", "http", "custom"])
@pytest.mark.parametrize("version", ALL)
def test_the_shared_call_checks_pass_on_both_clients(
    kind: str, transport: str, version: str
) -> None:
    server = serve_http(client_runtime.build()) if transport == "http" else None

    async def main() -> None:
        client = await opened(kind, transport, version, server.url if server else None)
        try:
            assert client.version == version
            await calls_checks(client)
            await errors_checks(client)
        finally:
            await closed(client)
        assert client.closed

    try:
        run(main())
    finally:
        if server is not None:
            server.close()


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("version", [LATEST, SESSION_ERA])
def test_calls_after_close_fail_with_32000_and_close_is_idempotent(loop: str, version: str) -> None:
    async def main() -> None:
        client = await snodo.aio.connect(stdio(), cwd=str(ROOT), protocol=version)
        async with client:
            assert client.state == "ready"
        await asyncio.gather(client.aclose(), client.aclose())
        assert client.state == "closed"
        with pytest.raises(snodo.McpError) as caught:
            await client.call_tool("echo", {"text": "late"})
        assert caught.value.code == -32000

    run(main(), loop)


# -- cancellation and timeouts --------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("version", [LATEST, SESSION_ERA])
def test_cancelling_a_call_task_cancels_the_request_and_others_go_on(
    tmp_path: Path, loop: str, version: str
) -> None:
    """stdio: the server reads notifications/cancelled for the request's id; the task raises
    CancelledError; a call running beside it and one made after both complete."""
    log = tmp_path / "stdin.jsonl"

    async def main() -> None:
        async with await snodo.aio.connect(
            stdio(log=log), cwd=str(ROOT), protocol=version
        ) as client:
            started = asyncio.Event()
            forever = asyncio.ensure_future(
                client.call_tool("forever", {}, progress=lambda p: started.set())
            )
            beside = asyncio.ensure_future(client.call_tool("echo", {"text": "beside"}))
            await asyncio.wait_for(started.wait(), 10)
            forever.cancel()
            with pytest.raises(asyncio.CancelledError):
                await forever
            assert (await beside)["content"][0]["text"] == "beside"
            after = await client.call_tool("echo", {"text": "after"})
            assert after["content"][0]["text"] == "after"

    run(main(), loop)
    messages = read_messages(log)
    (call,) = [m for m in messages if m.get("params", {}).get("name") == "forever"]
    cancels = [m for m in messages if m.get("method") == "notifications/cancelled"]
    assert [m["params"]["requestId"] for m in cancels] == [call["id"]]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_timeout_is_32001_as_on_the_sync_client_and_the_connection_goes_on(
    transport: str,
) -> None:
    server = serve_http(client_runtime.build()) if transport == "http" else None

    async def main() -> None:
        client = await opened("async", transport, LATEST, server.url if server else None)
        sync = await opened("sync", transport, LATEST, server.url if server else None)
        try:
            with pytest.raises(snodo.McpError) as slow:
                await client.call_tool("forever", {}, timeout=0.3)
            with pytest.raises(snodo.McpError) as reference:
                sync.call_tool("forever", {}, timeout=0.3)
            assert (slow.value.code, slow.value.message) == (
                reference.value.code,
                reference.value.message,
            )
            assert slow.value.code == -32001
            assert (await client.call_tool("echo", {"text": "x"}))["content"][0]["text"] == "x"
        finally:
            await closed(client)
            sync.close()

    try:
        run(main())
    finally:
        if server is not None:
            server.close()


# -- no thread per call ---------------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_a_thousand_calls_in_flight_on_one_stdio_connection_use_a_few_threads(loop: str) -> None:
    """Every call is held by the server until all 1,000 are in at once; meanwhile the client
    process runs no more threads than a handful (the I/O hub, the owner watch, the pool)."""
    target = stdio(AIO_RUNTIME, "--max-concurrency", "1100")
    peak_threads = 0

    async def main() -> list[Any]:
        nonlocal peak_threads
        async with await snodo.aio.connect(target, cwd=str(ROOT), protocol=LATEST) as client:
            before = threading.active_count()
            calls = [
                asyncio.ensure_future(client.call_tool("gate", {"n": 1000, "i": i}, timeout=30))
                for i in range(1000)
            ]
            pending = set(calls)
            while pending:
                peak_threads = max(peak_threads, threading.active_count() - before)
                _, pending = await asyncio.wait(pending, timeout=0.05)
            return [c.result() for c in calls]

    results = run(main(), loop)
    answers = [r["structuredContent"] for r in results]
    assert [a["i"] for a in answers] == list(range(1000))
    assert {a["peak"] for a in answers} == {1000}  # all 1,000 were in flight at once
    assert peak_threads <= 2, f"{peak_threads} threads above the count before the calls"


# -- coroutine handlers and progress ------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http", "direct"])
@pytest.mark.parametrize("version", [LATEST, SESSION_ERA])
def test_coroutine_input_handlers_answer_a_multi_round_trip_call(
    transport: str, version: str
) -> None:
    """2026-07-28: the rounds run on the loop; session era: the server's requests arrive on a
    transport thread (stdio, direct) or on the loop (HTTP) and the coroutines run on the loop."""
    server = serve_http(client_runtime.build()) if transport == "http" else None
    loop_threads: set[int] = set()

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        loop_threads.add(threading.get_ident())
        await asyncio.sleep(0)
        return {"action": "accept", "content": {"q": params["message"]}}

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "s"}, "model": "m"}

    async def main() -> None:
        handlers = {"form": elicit, "sampling": sample}
        options: dict[str, Any] = {"protocol": version, "input_handlers": handlers}
        if transport == "direct":
            client = await snodo.aio.direct(client_runtime.build(), **options)
        elif transport == "stdio":
            client = await snodo.aio.connect(stdio(), cwd=str(ROOT), **options)
        else:
            assert server is not None
            client = await snodo.aio.connect(snodo.Http(server.url), **options)
        async with client:
            loop_thread = threading.get_ident()
            two = await client.call_tool("two_rounds", {})
            assert two["structuredContent"]["first"] == "accept"
            assert two["structuredContent"]["second"] == "accept"
            several = await client.call_tool("several", {"with_sampling": True})
            answers = several["structuredContent"]["answers"]
            assert answers["2"]["content"] == {"q": "q2"}
            assert answers["s"]["content"]["text"] == "s"
            assert loop_threads == {loop_thread}

    try:
        run(main())
    finally:
        if server is not None:
            server.close()


@pytest.mark.parametrize("transport", ["stdio", "http", "direct"])
def test_progress_reaches_coroutine_and_plain_callbacks_before_the_result(transport: str) -> None:
    server = serve_http(client_runtime.build()) if transport == "http" else None

    async def main() -> None:
        client = await opened("async", transport, LATEST, server.url if server else None)
        try:
            seen: list[Any] = []

            async def note(params: dict[str, Any]) -> None:
                await asyncio.sleep(0)
                seen.append(("async", params["progress"]))

            result = await client.call_tool("count", {"n": 3}, progress=note)
            assert result["structuredContent"] == {"counted": 3}
            assert seen == [("async", 1), ("async", 2), ("async", 3)]
            plain: list[Any] = []
            await client.call_tool("count", {"n": 2}, progress=plain.append)
            assert [p["progress"] for p in plain] == [1, 2]
        finally:
            await closed(client)

    try:
        run(main())
    finally:
        if server is not None:
            server.close()


# -- subscriptions ----------------------------------------------------------------------------

URIS = [f"mem://{n}" for n in range(10)]


@pytest.mark.parametrize(
    ("overflow", "kept"),
    [("drop_oldest", ["mem://7", "mem://8", "mem://9"]), ("drop_newest", URIS[:3])],
)
@pytest.mark.parametrize("transport", ["stdio", "direct"])
def test_async_iteration_of_a_subscription_with_both_overflow_policies(
    transport: str, overflow: str, kept: list[str]
) -> None:
    """A consumer that has not asked yet gets the drop count first, then what the buffer kept;
    the stream ends with Closed when the subscription closes."""

    async def main() -> None:
        if transport == "stdio":
            client = await snodo.aio.connect(
                snodo_server(SUBS_RUNTIME), cwd=str(ROOT), protocol=LATEST
            )
        else:
            client = await snodo.aio.direct(subs_build(), protocol=LATEST)
        async with client:
            sub = await client.listen(
                {"resourceSubscriptions": URIS}, max_buffer=3, overflow=overflow
            )
            assert sub.accepted
            await client.call_tool("burst", {"count": 10})
            stats = sub.subscription.ref
            from snodo.supervision import call

            await asyncio.to_thread(
                wait_until, lambda: call(stats, lambda a: a.stats(), 5.0)["dropped"] == 7
            )
            events = []
            async for event in sub:
                events.append(event)
                if len(events) == 4:
                    break
            got = [e.params["uri"] if isinstance(e, Notification) else e for e in events]
            assert got == [Dropped(7), *kept]
            await client.call_tool("burst", {"count": 1, "first": 5})
            nxt = await sub.next(timeout=10)
            assert isinstance(nxt, Notification) and nxt.params["uri"] == "mem://5"
            await sub.aclose()
            assert isinstance(await sub.next(), Closed)
            rest = [e async for e in sub]
            assert rest == []

    run(main())


# -- restarts and the cache -------------------------------------------------------------------


def test_a_call_waits_for_a_restart_on_the_loop_and_is_answered(tmp_path: Path) -> None:
    """restart="transient": the stdio server is killed; the next call waits (on the loop, no
    thread) for the new server and is answered by it."""

    async def main() -> None:
        client = await snodo.aio.connect(
            stdio(), cwd=str(ROOT), protocol=LATEST, restart="transient", backoff={"initial": 0.05}
        )
        async with client:
            pid = client.client.transport.pid  # type: ignore[attr-defined]
            os.kill(pid, signal.SIGKILL)
            await asyncio.to_thread(
                wait_until, lambda: client.state != "ready" or client.client.transport.pid != pid
            )  # type: ignore[attr-defined]
            answer = await client.call_tool("echo", {"text": "again"}, timeout=20)
            assert answer["content"][0]["text"] == "again"
            assert client.client.transport.pid != pid  # type: ignore[attr-defined]
            assert client.state == "ready"

    run(main())


def test_the_cache_serves_async_calls_too() -> None:
    async def main() -> None:
        from tests.test_client_cache import Counted

        counted = Counted(scope="public")
        async with await snodo.aio.direct(counted.runtime, protocol=LATEST, cache=True) as client:
            first = await client.read_resource("count://a")
            second = await client.read_resource("count://a")
            assert first == second
            fresh = await client.read_resource("count://a", bypass_cache=True)
            assert fresh != first

    run(main())


# -- lightness ------------------------------------------------------------------------------


def test_import_snodo_loads_neither_asyncio_nor_snodo_aio() -> None:
    code = "import sys, snodo; print('asyncio' in sys.modules, 'snodo.aio' in sys.modules)"
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_a_connect_that_fails_raises_the_sync_error_and_leaves_no_thread() -> None:
    async def main() -> None:
        missing = snodo.Stdio(str(ROOT / "no-such-server"))
        with pytest.raises(snodo.McpError) as caught:
            await snodo.aio.connect(missing, protocol=LATEST, timeout=2)
        with pytest.raises(snodo.McpError) as reference:
            snodo.connect(missing, protocol=LATEST, timeout=2)
        assert (caught.value.code, caught.value.message) == (
            reference.value.code,
            reference.value.message,
        )

    run(main())


# -- the loop reading stdio itself ------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_a_server_killed_under_calls_in_flight_fails_them_with_its_exit(loop: str) -> None:
    """The loop holds stdio's reading role while calls are out; the server is killed (its
    stdout stays open: a grandchild inherited it): the exit is seen anyway and every call
    fails with -32000 naming the status, as on the sync client."""
    from tests.support.stdio_support import script

    target = script("broken_grandchild.py", "--grandchild-inherits-stdio")

    async def main() -> list[BaseException]:
        async with await snodo.aio.connect(target, protocol=LATEST) as client:
            calls = [
                asyncio.ensure_future(client.request("tools/list", {"cursor": "x"}, timeout=30))
                for _ in range(10)
            ]
            await asyncio.sleep(0)
            pid = client.client.transport.pid  # type: ignore[attr-defined]
            os.kill(pid, signal.SIGKILL)
            done = await asyncio.wait_for(
                asyncio.gather(*calls, return_exceptions=True), timeout=10
            )
            return list(done)

    results = run(main(), loop)
    assert all(isinstance(r, snodo.McpError) and r.code == -32000 for r in results), results
    assert any("killed by signal 9 (SIGKILL)" in str(r) for r in results), results


def test_sync_and_async_calls_share_one_stdio_connection() -> None:
    """While the loop reads the server's output, a thread's sync call on the same client is
    answered too (it waits as a follower, the loop delivers its response)."""

    async def main() -> None:
        target = stdio(AIO_RUNTIME, "--max-concurrency", "200")
        async with await snodo.aio.connect(target, cwd=str(ROOT), protocol=LATEST) as client:
            gated = [
                asyncio.ensure_future(client.call_tool("gate", {"n": 101, "i": i}, timeout=30))
                for i in range(100)
            ]
            sync_answer = await asyncio.to_thread(
                client.client.call_tool, "gate", {"n": 101, "i": "sync"}, timeout=30
            )
            answers = await asyncio.gather(*gated)
            assert sync_answer["structuredContent"] == {"peak": 101, "i": "sync"}
            assert [a["structuredContent"]["i"] for a in answers] == list(range(100))
            alone = await asyncio.to_thread(client.client.call_tool, "echo", {"text": "solo"})
            assert alone["content"][0]["text"] == "solo"

    run(main())
