"""The stdio client against servers that misbehave on purpose (tests/servers/broken_*.py and the
scripted server's unfriendly tools).

Rules: "Transport behavior • Stdio" (correlation by ID, timeouts and failing progress functions
send notifications/cancelled, a server exit fails pending and later requests with -32000, server
requests answered through the handlers with at most max_server_requests at once), "Calls"
(-32000 / -32001), "Progress" (reset_timeout_on_progress, max_total_timeout) and the
session-era bullets about server requests. Nothing here may hang: every call has a timeout
and every test checks how long the failure took.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import snodo
import snodo.aio
from tests.support import stdio_support as support
from tests.support.stdio_support import (
    ALL,
    LATEST,
    elapsed,
    wait_until,
)

MiB = 1024 * 1024
BOTH_ERAS = [LATEST, "2025-11-25"]

#: Autouse fixtures: process-wide parts started first; no child or fd left behind.
stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks


def scripted(tmp_path: Path, name: str = "scripted_server.py", *options: str) -> tuple[Any, Path]:
    log = tmp_path / "wire.jsonl"
    return support.script(name, "--log", str(log), *options), log


def text_of(result: Any) -> str:
    return str(result["content"][0]["text"])


def tool_call_ids(log: Path) -> list[Any]:
    return [m["id"] for m in support.read_messages(log) if m.get("method") == "tools/call"]


def background(call: Any) -> Future[Any]:
    """``call()`` on a thread of its own; its result or error comes from the future."""
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(call)
    finally:
        pool.shutdown(wait=False)


def cancelled_for(log: Path, request_id: Any) -> dict[str, Any]:
    """Wait for the notifications/cancelled the client sent for ``request_id``."""
    message = support.wait_for_message(
        log,
        lambda m: (
            m.get("method") == "notifications/cancelled"
            and m["params"].get("requestId") == request_id
        ),
    )
    return message


# -- Lines that are not responses ------------------------------------------------------------


@pytest.mark.parametrize("protocol", [None, "2025-11-25"])
def test_lines_that_are_not_json_rpc_responses_are_skipped(
    tmp_path: Path, protocol: str | None
) -> None:
    """Correlation by ID: non-JSON lines, invalid UTF-8, JSON that is not JSON-RPC, bad envelopes
    (shaped as responses to other ids, or as a request with the pending id), responses to
    unknown ids and look-alike ids (the id as a string, a float, negated) are all skipped;
    every call (the probe and initialize included) gets its own response."""
    target, log = scripted(tmp_path, "broken_noise.py")
    with snodo.connect(target, protocol=protocol, timeout=10.0, probe_timeout=5.0) as client:
        assert client.version == (LATEST if protocol is None else protocol)
        for i in range(5):
            assert text_of(client.call_tool("echo", {"text": f"n{i}"})) == f"n{i}"
        assert "echo" in {t["name"] for t in client.list_tools()}
    support.check_wire(log, client.version)


@pytest.mark.parametrize("version", BOTH_ERAS)
def test_a_late_response_to_an_abandoned_request_is_dropped(tmp_path: Path, version: str) -> None:
    """Responses to ids with no pending request (here: one that timed out) are dropped, and the
    next request still gets its own response."""
    target, log = scripted(tmp_path)
    with snodo.connect(target, protocol=version) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("never", {}, timeout=0.2)
        assert caught.value.code == -32001
        (abandoned,) = tool_call_ids(log)
        answer = client.call_tool("respond_for", {"id": abandoned})
        assert text_of(answer) == f"answered for {abandoned}"
        assert text_of(client.call_tool("echo", {"text": "still fine"})) == "still fine"


@pytest.mark.parametrize("order", ["id_first", "id_last"])
def test_an_oversized_answer_fails_its_call_at_once(tmp_path: Path, order: str) -> None:
    """max_response_bytes (issue 18 item 3): a response line over the limit fails its call at
    once with -32000 and cause ("max_response_bytes", limit), as over HTTP, whether its id comes
    first (the Python SDK) or last (the TypeScript SDK); a call in flight meanwhile is still
    answered, and later calls on the connection are too."""
    target, log = scripted(tmp_path, "broken_oversized.py")
    with snodo.connect(target, protocol=LATEST, max_response_bytes=4096) as client:
        assert len(text_of(client.call_tool("big", {"bytes": 3000, "order": order}))) > 2900
        waiting = background(lambda: client.call_tool("never", {}, timeout=30.0))
        (other,) = support.wait_until(lambda: tool_call_ids(log)[1:])
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("big", {"bytes": MiB, "order": order}, timeout=20.0)
        assert elapsed(started) < 5.0
        assert caught.value.code == -32000
        assert caught.value.cause == ("max_response_bytes", 4096)
        assert "max_response_bytes (4096)" in caught.value.message
        answer = client.call_tool("respond_for", {"id": other})
        assert text_of(answer) == f"answered for {other}"
        assert text_of(waiting.result(10.0)) == "a late answer"
        for i in range(3):
            assert text_of(client.call_tool("echo", {"text": f"after {i}"})) == f"after {i}"
        assert len(text_of(client.call_tool("big", {"bytes": 3000}))) > 2900


def test_an_oversized_line_whose_id_cannot_be_read_times_out_saying_so(tmp_path: Path) -> None:
    """An oversized line with its id in neither kept edge answers no call that can be named:
    it is dropped, the calls waiting then are not failed (one is answered later), and the one
    that times out says that such a line was dropped while it waited (docs/decisions/0038)."""
    target, log = scripted(tmp_path, "broken_oversized.py")
    with snodo.connect(target, protocol=LATEST, max_response_bytes=4096) as client:
        waiting = background(lambda: client.call_tool("never", {}, timeout=30.0))
        (other,) = support.wait_until(lambda: tool_call_ids(log))
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("big", {"bytes": MiB, "order": "hidden"}, timeout=1.0)
        assert elapsed(started) < 5.0
        assert caught.value.code == -32001
        assert caught.value.data == {"timeoutMs": 1000}
        assert caught.value.message.startswith("Request timed out")
        assert "over max_response_bytes (4096)" in caught.value.message
        assert "could not be read" in caught.value.message
        answer = client.call_tool("respond_for", {"id": other})
        assert text_of(answer) == f"answered for {other}"
        assert text_of(waiting.result(10.0)) == "a late answer"
        with pytest.raises(snodo.McpError) as plain:
            client.call_tool("never", {}, timeout=0.2)  # not waiting then: a plain timeout
        assert plain.value.message == "Request timed out"
        assert text_of(client.call_tool("echo", {"text": "after"})) == "after"


def test_an_oversized_answer_fails_its_call_on_the_async_client(tmp_path: Path) -> None:
    """snodo.aio over stdio (submitted requests): the same -32000 at once."""
    target, _ = scripted(tmp_path, "broken_oversized.py")

    async def main() -> None:
        client = await snodo.aio.connect(target, protocol=LATEST, max_response_bytes=4096)
        try:
            started = time.monotonic()
            with pytest.raises(snodo.McpError) as caught:
                await client.call_tool("big", {"bytes": MiB}, timeout=20.0)
            assert elapsed(started) < 5.0
            assert (caught.value.code, caught.value.cause) == (-32000, ("max_response_bytes", 4096))
            assert text_of(await client.call_tool("echo", {"text": "next"})) == "next"
        finally:
            await client.aclose()

    asyncio.run(main())


def test_a_large_response_within_the_limit_arrives_whole(tmp_path: Path) -> None:
    """max_response_bytes (16 MiB by default) refuses only what is over it: a 10 MiB response
    line arrives whole, and the connection goes on."""
    target, _ = scripted(tmp_path, "broken_oversized.py")
    with snodo.connect(target, protocol=LATEST) as client:
        started = time.monotonic()
        result = client.call_tool("big", {"bytes": 10 * MiB}, timeout=20.0)
        assert elapsed(started) < 10.0
        body = text_of(result)
        assert len(body) > 10 * MiB - 100 and set(body) == {"x"}
        assert text_of(client.call_tool("echo", {"text": "next"})) == "next"


def test_an_oversized_line_is_not_buffered(tmp_path: Path) -> None:
    """An oversized line is refused without buffering it: a 64 MiB line against a 4 KiB limit
    raises the client's peak memory by far less than the line's size."""
    target, _ = scripted(tmp_path, "broken_oversized.py")
    with snodo.connect(target, protocol=LATEST, max_response_bytes=4096) as client:
        client.call_tool("echo", {"text": "warm"})
        support.reset_peak_rss()
        before = support.rss_bytes()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("big", {"bytes": 64 * MiB}, timeout=30.0)
        assert caught.value.cause == ("max_response_bytes", 4096)
        # The server writes the whole line before it reads the next request, so this answer
        # arrives only after the client has read past the 64 MiB line.
        assert text_of(client.call_tool("echo", {"text": "after"}, timeout=30.0)) == "after"
        growth = support.peak_rss() - before
    assert growth < 24 * MiB, f"peak RSS grew by {growth / MiB:.1f} MiB reading a 64 MiB line"


@pytest.mark.parametrize("protocol", [None, "2025-11-25"])
def test_messages_split_into_small_writes_with_crlf_ends_are_reassembled(
    tmp_path: Path, protocol: str | None
) -> None:
    """Newline-delimited JSON-RPC: a server that writes every message a few bytes at a time,
    with CRLF line ends, is read correctly (the probe, initialize, progress and results)."""
    target, log = scripted(tmp_path, "broken_chunky.py")
    with snodo.connect(target, protocol=protocol, timeout=10.0) as client:
        assert client.version == (LATEST if protocol is None else protocol)
        reports: list[Any] = []
        result = client.call_tool("progress", {"n": 3}, progress=reports.append)
        assert result["structuredContent"]["counted"] == 3
        assert [r["progress"] for r in reports] == [1, 2, 3]
        assert text_of(client.call_tool("echo", {"text": "é ü ✓"})) == "é ü ✓"
    support.check_wire(log, client.version)


# -- The server exits ------------------------------------------------------------------------


@pytest.mark.parametrize("version", BOTH_ERAS)
def test_a_server_exit_fails_pending_and_later_requests_at_once(
    tmp_path: Path, version: str
) -> None:
    """When the server exits, pending and later requests fail with -32000 at once (not at their
    timeout); the cause carries the exit status."""
    target, _ = scripted(tmp_path, "broken_exit.py")
    client = snodo.connect(target, protocol=version, timeout=30.0)
    try:
        other: list[BaseException] = []

        def waiting_call() -> None:
            try:
                client.call_tool("never", {})
            except BaseException as exc:
                other.append(exc)

        waiter = threading.Thread(target=waiting_call)
        waiter.start()
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("die", {"code": 3})
        assert elapsed(started) < 5.0
        assert caught.value.code == -32000
        assert caught.value.kind == "transport"
        assert caught.value.cause == ("exit_status", 3)
        waiter.join(5.0)
        assert not waiter.is_alive()
        assert isinstance(other[0], snodo.McpError) and other[0].code == -32000
        assert other[0].cause == ("exit_status", 3)
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as later:
            client.list_tools()
        assert elapsed(started) < 1.0
        assert later.value.code == -32000
        assert later.value.cause == ("exit_status", 3)
    finally:
        client.close()


@pytest.mark.parametrize("notes", [0, 200])
def test_a_response_written_just_before_the_exit_is_delivered(tmp_path: Path, notes: int) -> None:
    """A server that writes its response (after some notifications) and exits at once: the
    pending request gets that response, not -32000, however the exit and the last lines race;
    only later requests fail -32000."""
    for _ in range(8):
        client = snodo.connect(support.script("scripted_server.py"), protocol=LATEST)
        try:
            result = client.call_tool("answer_and_exit", {"notes": notes, "code": 0})
            assert text_of(result) == "last words"
            with pytest.raises(snodo.McpError) as caught:
                client.list_tools()
            assert caught.value.code == -32000
        finally:
            client.close()


@pytest.mark.parametrize("protocol", [None, "2025-11-25"])
def test_a_server_that_exits_before_answering_fails_connect(
    tmp_path: Path, protocol: str | None
) -> None:
    """A server that exits at once: connect returns -32000 (kind transport) with the exit status,
    after the probe's fallback started it a second time when both eras were allowed."""
    starts = tmp_path / "starts"
    target, _ = scripted(
        tmp_path, "broken_exit.py", "--starts", str(starts), "--exit-at-start", "5"
    )
    started = time.monotonic()
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(target, protocol=protocol, timeout=30.0, probe_timeout=30.0)
    assert elapsed(started) < 10.0
    assert caught.value.code == -32000
    assert caught.value.kind == "transport"
    assert caught.value.cause == ("exit_status", 5)
    assert len(support.starts(starts)) == (2 if protocol is None else 1)


def test_a_stateless_pin_to_a_server_that_exits_fails_the_first_call(tmp_path: Path) -> None:
    """A stateless pin sends nothing at connect, so connect succeeds; the first call after the
    server has exited fails -32000 with the exit status as its cause (not the broken pipe the
    write may meet first). Repeated, since the call races the client noticing the exit."""
    target, _ = scripted(tmp_path, "broken_exit.py", "--exit-at-start", "5")
    for _ in range(5):
        with snodo.connect(target, protocol=LATEST) as client:
            pid = client.transport.pid
            wait_until(lambda pid=pid: not support.running(pid))
            with pytest.raises(snodo.McpError) as caught:
                client.list_tools()
        assert caught.value.code == -32000
        assert caught.value.cause == ("exit_status", 5)


@pytest.mark.parametrize(
    "protocol", [None, LATEST, "2025-11-25"], ids=["negotiate", "stateless", "initialize"]
)
def test_a_command_that_does_not_exist_fails_connect(protocol: str | None) -> None:
    """An unreachable server: a command that does not exist is -32000 at connect, whatever the
    protocol plan (a stateless pin too: the process cannot start)."""
    started = time.monotonic()
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Stdio("/nonexistent/snodo-no-such-server", []), protocol=protocol)
    assert elapsed(started) < 5.0
    assert caught.value.code == -32000
    assert caught.value.kind == "transport"
    with pytest.raises(snodo.McpError) as on_path:
        snodo.connect(snodo.Stdio("snodo-no-such-server-on-path", ["x"]), protocol=protocol)
    assert on_path.value.code == -32000


def test_a_missing_working_directory_fails_connect(tmp_path: Path) -> None:
    """A cwd that does not exist makes the server unreachable: -32000 at connect."""
    target, _ = scripted(tmp_path)
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(target, cwd=str(tmp_path / "missing"), protocol=LATEST)
    assert caught.value.code == -32000


def test_a_server_that_closes_its_stdout_is_unusable_at_once(tmp_path: Path) -> None:
    """-32000 for an unusable connection: a server that closes its stdout (and keeps running)
    can never answer, so requests fail -32000 at once rather than at their timeout."""
    ready = tmp_path / "ready"
    client = snodo.connect(support.script("broken_mute.py", "--ready", str(ready)), protocol=LATEST)
    try:
        wait_until(ready.exists)
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("echo", {"text": "anyone?"}, timeout=6.0)
        assert elapsed(started) < 3.0, f"failed only after {elapsed(started):.1f}s"
        assert caught.value.code == -32000
    finally:
        client.close()


def test_a_server_that_closes_its_stdin_is_epipe_and_connection_closed(tmp_path: Path) -> None:
    """A server that closes its stdin and keeps running: the next write fails (EPIPE), which is
    -32000 at once; close() still ends the process."""
    ready = tmp_path / "ready"
    target = support.script("broken_epipe.py", "--ready", str(ready))
    client = snodo.connect(target, protocol=LATEST, timeout=30.0)
    pid = client.transport.pid
    try:
        wait_until(ready.exists)
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.list_tools()
        assert elapsed(started) < 5.0
        assert caught.value.code == -32000
        assert caught.value.kind == "transport"
        assert support.running(pid)
        with pytest.raises(snodo.McpError) as again:
            client.call_tool("echo", {"text": "x"})
        assert again.value.code == -32000
    finally:
        started = time.monotonic()
        client.close()
    assert elapsed(started) < 10.0
    wait_until(lambda: support.gone(pid))


def test_a_request_timeout_covers_a_write_the_server_never_reads(tmp_path: Path) -> None:
    """Each request's timeout covers the whole request: against a server that never reads its
    stdin, a request too big for the pipe fails within its timeout (-32001, or -32000 once the
    half-written stream is unusable) instead of blocking in the write, and a second caller is
    not held behind that write past its own timeout."""
    ready = tmp_path / "ready"
    client = snodo.connect(support.script("broken_deaf.py", "--ready", str(ready)), protocol=LATEST)
    wait_until(ready.exists)
    outcomes: dict[str, tuple[Any, float]] = {}

    def attempt(name: str, text: str, timeout: float) -> None:
        started = time.monotonic()
        try:
            outcomes[name] = (client.call_tool("echo", {"text": text}, timeout=timeout), 0.0)
        except BaseException as exc:
            outcomes[name] = (exc, elapsed(started))

    big = threading.Thread(target=attempt, args=("big", "x" * MiB, 0.5))
    small = threading.Thread(target=attempt, args=("small", "y", 0.3))
    try:
        big.start()
        small.start()
        deadline = time.monotonic() + 4.0
        big.join(4.0)
        small.join(max(0.0, deadline - time.monotonic()))
        assert not big.is_alive(), "a 0.5 s request is still blocked writing after 4 s"
        assert not small.is_alive(), "a 0.3 s request is still waiting after 4 s"
        for name, limit in (("big", 0.5), ("small", 0.3)):
            error, took = outcomes[name]
            assert isinstance(error, snodo.McpError), (name, error)
            assert error.code in (-32001, -32000), (name, error)
            assert took < limit + 1.5, (name, took)
    finally:
        client.close()
        big.join(10.0)
        small.join(10.0)


# -- Timeouts and cancellation ---------------------------------------------------------------


@pytest.mark.parametrize("version", BOTH_ERAS)
def test_a_timeout_is_32001_and_sends_notifications_cancelled(tmp_path: Path, version: str) -> None:
    """A request without an answer within timeout: -32001 with timeoutMs, and the server receives
    notifications/cancelled {requestId, reason "Request timed out"}."""
    target, log = scripted(tmp_path)
    with snodo.connect(target, protocol=version, timeout=30.0) as client:
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("never", {}, timeout=0.3)
        took = elapsed(started)
        assert 0.3 <= took < 5.0
        assert caught.value.code == -32001
        assert caught.value.kind == "transport"
        assert caught.value.data == {"timeoutMs": 300}
        (request_id,) = tool_call_ids(log)
        note = cancelled_for(log, request_id)
        assert note["params"] == {"requestId": request_id, "reason": "Request timed out"}
        assert text_of(client.call_tool("echo", {"text": "next"})) == "next"
    support.check_wire(log, version)


def test_the_client_timeout_option_is_the_default_for_each_request(tmp_path: Path) -> None:
    """Each request can set timeout:; the default is the client's timeout option."""
    target, _ = scripted(tmp_path)
    with snodo.connect(target, protocol=LATEST, timeout=0.25) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("never", {})
    assert caught.value.code == -32001
    assert caught.value.data == {"timeoutMs": 250}


@pytest.mark.parametrize("version", BOTH_ERAS)
def test_a_progress_function_that_raises_cancels_and_propagates(
    tmp_path: Path, version: str
) -> None:
    """A progress function that raises sends notifications/cancelled (reason "The client stopped
    waiting") and its exception propagates to the caller."""
    target, log = scripted(tmp_path)

    class Stop(Exception):
        pass

    def fail(params: dict[str, Any]) -> None:
        raise Stop(params["progress"])

    with snodo.connect(target, protocol=version, timeout=30.0) as client:
        started = time.monotonic()
        with pytest.raises(Stop):
            client.call_tool("pulse", {"interval_ms": 20}, progress=fail)
        assert elapsed(started) < 5.0
        (request_id,) = tool_call_ids(log)
        note = cancelled_for(log, request_id)
        assert note["params"] == {"requestId": request_id, "reason": "The client stopped waiting"}
        assert text_of(client.call_tool("echo", {"text": "next"})) == "next"
    support.check_wire(log, version)


@pytest.mark.parametrize("where", ["connect", "call"])
def test_reset_timeout_on_progress_extends_the_deadline(tmp_path: Path, where: str) -> None:
    """reset_timeout_on_progress: each progress notification restarts the timeout, so a request
    that reports progress more often than its timeout outlasts it (set on connect or per call);
    without it, the same request times out."""
    target, _ = scripted(tmp_path)
    on_connect = where == "connect"
    reports: list[Any] = []
    with snodo.connect(target, protocol=LATEST, reset_timeout_on_progress=on_connect) as client:
        result = client.call_tool(
            "pulse",
            {"interval_ms": 60, "count": 12},
            timeout=0.4,
            progress=reports.append,
            reset_timeout_on_progress=None if on_connect else True,
        )
        assert result["structuredContent"] == {"pulses": 12}
        assert len(reports) == 12
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool(
                "pulse",
                {"interval_ms": 60, "count": 12},
                timeout=0.4,
                progress=reports.append,
                reset_timeout_on_progress=False,
            )
        assert caught.value.code == -32001
        assert caught.value.data == {"timeoutMs": 400}


def test_max_total_timeout_stops_a_request_that_keeps_reporting_progress(tmp_path: Path) -> None:
    """max_total_timeout bounds the whole request from when it was sent: -32001 "Maximum total
    timeout exceeded" with maxTotalTimeoutMs; the server is told to cancel."""
    target, log = scripted(tmp_path)
    with snodo.connect(
        target, protocol=LATEST, reset_timeout_on_progress=True, max_total_timeout=0.8
    ) as client:
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("pulse", {"interval_ms": 40}, timeout=0.3, progress=lambda p: None)
        took = elapsed(started)
        assert caught.value.code == -32001
        assert caught.value.message == "Maximum total timeout exceeded"
        assert caught.value.data == {"maxTotalTimeoutMs": 800}
        assert 0.8 <= took < 5.0
        (request_id,) = tool_call_ids(log)
        cancelled_for(log, request_id)


# -- Floods ----------------------------------------------------------------------------------


def test_a_notification_flood_does_not_stop_calls_or_grow_memory(tmp_path: Path) -> None:
    """100,000 notifications nobody asked for, while calls continue on the same connection:
    every call succeeds and memory stays bounded."""
    target, _ = scripted(tmp_path, "broken_flood.py")
    with snodo.connect(target, protocol=LATEST, timeout=30.0) as client:
        client.call_tool("echo", {"text": "warm"})
        support.reset_peak_rss()
        before = support.rss_bytes()
        flooded: list[Any] = []
        flood = threading.Thread(
            target=lambda: flooded.append(client.call_tool("flood", {"count": 100_000}))
        )
        flood.start()
        for i in range(50):
            assert text_of(client.call_tool("echo", {"text": f"during {i}"})) == f"during {i}"
        flood.join(30.0)
        assert not flood.is_alive()
        assert text_of(flooded[0]) == "flooded 100000"
        growth = support.peak_rss() - before
    assert growth < 50 * MiB, f"peak RSS grew by {growth / MiB:.1f} MiB"


def test_a_big_request_written_while_the_server_floods_stdout_does_not_deadlock(
    tmp_path: Path,
) -> None:
    """A caller that took the reader role before writing gives it up when its write has to wait:
    a server busy writing a flood (reading no stdin until it is done) and a request too big for
    the pipe would otherwise each wait for the other until the timeout."""
    target, _ = scripted(tmp_path, "broken_flood.py")
    with snodo.connect(target, protocol=LATEST, timeout=30.0) as client:
        with pytest.raises(snodo.McpError) as abandoned:
            client.call_tool("flood_inline", {"count": 300_000}, timeout=0.05)
        assert abandoned.value.code == -32001
        started = time.monotonic()
        big = "z" * (2 * MiB)
        assert text_of(client.call_tool("echo", {"text": big})) == big
        assert elapsed(started) < 20.0


def test_a_progress_flood_to_a_slow_caller_stays_bounded(tmp_path: Path) -> None:
    """100,000 progress reports for one request whose progress function is slow: the reports
    wait in a bounded queue (memory stays bounded), the request still returns, and the client's
    log is not flooded in turn (at most a few warnings, not one per report)."""
    done = tmp_path / "done"
    target, _ = scripted(tmp_path, "broken_flood.py", "--done", str(done))
    delivered = []

    def slow(params: dict[str, Any]) -> None:
        if not delivered:
            wait_until(done.exists, 30.0)  # hold the caller until the flood is written
        delivered.append(params["progress"])

    counter = CountingHandler()
    snodo_logger = logging.getLogger("snodo")
    snodo_logger.addHandler(counter)
    # Records are counted here, not kept by pytest's capture (which would hold 100,000 of them).
    propagate, snodo_logger.propagate = snodo_logger.propagate, False
    try:
        with snodo.connect(target, protocol=LATEST, timeout=60.0) as client:
            client.call_tool("echo", {"text": "warm"})
            support.reset_peak_rss()
            before = support.rss_bytes()
            result = client.call_tool("flood", {"count": 100_000}, progress=slow)
            growth = support.peak_rss() - before
            assert text_of(result) == "flooded 100000"
    finally:
        snodo_logger.removeHandler(counter)
        snodo_logger.propagate = propagate
    assert delivered and delivered == sorted(delivered)
    assert growth < 50 * MiB, f"peak RSS grew by {growth / MiB:.1f} MiB"
    assert counter.warnings < 100, f"{counter.warnings} warnings logged for one flood"


class CountingHandler(logging.Handler):
    """Counts WARNING-and-above records and keeps none."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.warnings = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.warnings += 1


def test_a_stderr_flood_never_blocks_the_server(tmp_path: Path) -> None:
    """Megabytes on the server's stderr (lines, and one long line) never block it: connect and
    calls succeed well within their timeouts."""
    target, _ = scripted(tmp_path, "broken_stderr.py", "--stderr-bytes", str(4 * MiB))
    started = time.monotonic()
    with snodo.connect(target, protocol="2025-11-25", timeout=20.0) as client:
        for _ in range(2):
            assert text_of(client.call_tool("spew", {"bytes": 2 * MiB})) == "spewed"
        assert text_of(client.call_tool("echo", {"text": "quiet"})) == "quiet"
    assert elapsed(started) < 20.0


# -- Requests from the server ----------------------------------------------------------------


def boom(params: dict[str, Any]) -> dict[str, Any]:
    raise ValueError("the handler broke")


def handler_error(params: dict[str, Any]) -> dict[str, Any]:
    raise snodo.HandlerError("no, thanks")


FORM = {
    "message": "Name?",
    "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}},
}
SAMPLING = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
    "maxTokens": 5,
}


@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize(
    ("handlers", "method", "params", "code"),
    [
        pytest.param({}, "elicitation/create", FORM, -32601, id="no-handler"),
        pytest.param({"sampling": boom}, "elicitation/create", FORM, -32601, id="other-kind"),
        pytest.param({"form": boom}, "elicitation/create", {"message": "x"}, -32602, id="no-keys"),
        pytest.param({"sampling": boom}, "sampling/createMessage", {}, -32602, id="no-sampling"),
        pytest.param({"form": boom}, "elicitation/create", FORM, -32603, id="raises"),
        pytest.param({"form": handler_error}, "elicitation/create", FORM, -32603, id="fails"),
        pytest.param(
            {"sampling": lambda p: {"role": "robot"}},
            "sampling/createMessage",
            SAMPLING,
            -32603,
            id="invalid-answer",
        ),
        pytest.param({"form": boom}, "tasks/unknown", {}, -32601, id="unknown-method"),
    ],
)
def test_server_requests_that_cannot_be_answered_get_errors(
    tmp_path: Path, version: str, handlers: Any, method: str, params: Any, code: int
) -> None:
    """A server request of a kind with no handler is answered -32601, one whose params lack the
    kind's keys -32602, and a handler that fails (or raises, on stdio) -32603; the client's own
    call is not disturbed."""
    target, log = scripted(tmp_path)
    with snodo.connect(target, protocol=version, input_handlers=handlers) as client:
        result = client.call_tool("ask", {"method": method, "params": params})
        answer = result["structuredContent"]["answer"]
        assert "error" in answer, answer
        assert answer["error"]["code"] == code
        assert text_of(client.call_tool("echo", {"text": "fine"})) == "fine"
    (reply,) = [m for m in support.check_wire(log, version) if "method" not in m]
    support.check_response(version, reply)


@pytest.mark.parametrize(("limit", "count"), [(4, 7), (None, 20)], ids=["limit-4", "default-16"])
def test_server_requests_over_the_limit_are_refused_without_running_a_handler(
    tmp_path: Path, limit: int | None, count: int
) -> None:
    """At most max_server_requests (16 by default) handlers run at once; a request over the limit
    is answered -32603 without running a handler; finished handlers give their slots back."""
    target, log = scripted(tmp_path)
    allowed = 16 if limit is None else limit
    release = threading.Event()
    running: list[int] = []
    lock = threading.Lock()

    def slow_form(params: dict[str, Any]) -> dict[str, Any]:
        with lock:
            running.append(1)
        deadline = time.monotonic() + 20.0
        while not release.wait(0.02):
            if time.monotonic() > deadline:
                break
        return {"action": "accept", "content": {"n": "x"}}

    def refusals() -> list[dict[str, Any]]:
        return [
            m for m in support.read_messages(log) if "error" in m and m["error"]["code"] == -32603
        ]

    options: dict[str, Any] = {} if limit is None else {"max_server_requests": limit}
    with snodo.connect(
        target, protocol="2025-11-25", input_handlers={"form": slow_form}, **options
    ) as client:
        outcome: list[Any] = []
        burst = {"count": count, "method": "elicitation/create", "params": FORM}
        caller = threading.Thread(
            target=lambda: outcome.append(client.call_tool("ask_many", burst))
        )
        caller.start()
        try:
            wait_until(lambda: len(refusals()) == count - allowed and len(running) == allowed)
        finally:
            release.set()
            caller.join(20.0)
        answers = outcome[0]["structuredContent"]["answers"]
        # The slots are given back: a second burst within the limit runs every handler.
        again = client.call_tool("ask_many", {**burst, "count": allowed})
        assert all("result" in a for a in again["structuredContent"]["answers"])
    assert len(running) == 2 * allowed
    assert sum("result" in a for a in answers) == allowed
    assert [a["error"]["code"] for a in answers if "error" in a] == [-32603] * (count - allowed)


def test_a_handler_may_close_its_own_connection(tmp_path: Path) -> None:
    """close() called from inside a server-request handler (which the close then stops) still
    closes the connection: the pending call fails -32000 and the server process ends."""
    target, _ = scripted(tmp_path)
    holder: dict[str, Any] = {}
    closed = threading.Event()

    def closing(params: dict[str, Any]) -> dict[str, Any]:
        try:
            holder["client"].close()
        finally:
            closed.set()
        return {"action": "cancel"}

    client = snodo.connect(target, protocol="2025-11-25", input_handlers={"form": closing})
    holder["client"] = client
    pid = client.transport.pid
    try:
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("ask", {"method": "elicitation/create", "params": FORM}, timeout=20.0)
        assert elapsed(started) < 5.0
        assert caught.value.code == -32000
        assert closed.wait(5.0)
        wait_until(lambda: not support.exists(pid), 5.0)
        assert_closed(client)
    finally:
        client.close()


def test_an_abandoned_handler_never_writes_into_a_later_connection(tmp_path: Path) -> None:
    """Handlers still running when the connection closes are killed, or at least silenced: a
    handler that outlives its connection (blocked where it cannot be interrupted) must not write
    its answer anywhere, in particular not into a connection opened after the close, which may
    have been given the same file descriptor numbers."""
    first, _ = scripted(tmp_path, "scripted_server.py")
    second_log = tmp_path / "second.jsonl"
    second = support.script("scripted_server.py", "--log", str(second_log))
    entered = threading.Event()
    finished = threading.Event()
    release = threading.Event()

    def blocked(params: dict[str, Any]) -> dict[str, Any]:
        entered.set()
        try:
            release.wait(5.0)  # one blocking call: a thread cannot be interrupted inside it
        finally:
            finished.set()
        return {"action": "accept", "content": {"n": "late"}}

    client = snodo.connect(first, protocol="2025-11-25", input_handlers={"form": blocked})
    failures: list[BaseException] = []

    def call() -> None:
        try:
            client.call_tool("ask", {"method": "elicitation/create", "params": FORM})
        except BaseException as exc:
            failures.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    other = None
    try:
        assert entered.wait(10.0)
        client.close()
        caller.join(5.0)
        assert isinstance(failures[0], snodo.McpError) and failures[0].code == -32000
        other = snodo.connect(second, protocol="2025-11-25")
        release.set()
        assert finished.wait(10.0)
        wait_until(
            lambda: not any(t.name == "snodo-server-request" for t in threading.enumerate()), 5.0
        )
        assert text_of(other.call_tool("echo", {"text": "mine"})) == "mine"
        stray = [m for m in support.read_messages(second_log) if "method" not in m]
        assert stray == [], f"the old connection's handler wrote into the new one: {stray}"
    finally:
        release.set()
        caller.join(5.0)
        client.close()
        if other is not None:
            other.close()


def test_a_progress_function_may_close_the_connection(tmp_path: Path) -> None:
    """close() from the caller's own progress function: the call fails -32000, the server
    process ends and nothing is left behind."""
    target, _ = scripted(tmp_path)
    client = snodo.connect(target, protocol="2025-06-18")
    pid = client.transport.pid
    try:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("pulse", {"interval_ms": 20}, progress=lambda p: client.close())
        assert caught.value.code == -32000
        assert not support.exists(pid)
    finally:
        client.close()


def assert_closed(client: Any) -> None:
    with pytest.raises(snodo.McpError) as caught:
        client.call_tool("echo", {"text": "after"})
    assert caught.value.code == -32000


def test_running_handlers_are_stopped_when_the_connection_closes(tmp_path: Path) -> None:
    """Handlers still running when the connection closes are killed: close() does not wait for
    them, the pending call fails -32000, and the handler is interrupted."""
    target, _ = scripted(tmp_path)
    started = threading.Event()
    release = threading.Event()
    ended: list[str] = []

    def stuck(params: dict[str, Any]) -> dict[str, Any]:
        started.set()
        deadline = time.monotonic() + 10.0
        try:
            while not release.wait(0.02):
                if time.monotonic() > deadline:
                    break
        except BaseException as exc:
            ended.append(type(exc).__name__)
            raise
        ended.append("released" if release.is_set() else "deadline")
        return {"action": "cancel"}

    client = snodo.connect(target, protocol="2025-11-25", input_handlers={"form": stuck})
    failures: list[BaseException] = []

    def call() -> None:
        try:
            client.call_tool("ask", {"method": "elicitation/create", "params": FORM})
        except BaseException as exc:
            failures.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    try:
        assert started.wait(10.0)
        begun = time.monotonic()
        client.close()
        assert elapsed(begun) < 5.0
        caller.join(5.0)
        assert not caller.is_alive()
        assert isinstance(failures[0], snodo.McpError) and failures[0].code == -32000
        wait_until(lambda: ended, 5.0)
        assert ended[0] not in ("released", "deadline"), ended
    finally:
        release.set()
        caller.join(5.0)
        client.close()
