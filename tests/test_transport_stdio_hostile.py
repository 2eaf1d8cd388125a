"""The stdio client against hostile raw servers (tests/servers/hostile_*.py, no snodo inside):
faults a daemon will meet (issue 12).

Rules: "no connection may block another, in either mode" and "replies to a server that does
not read are bounded and dropped with a count" (docs/decisions/0027); repeated warnings are
rate-limited per connection with the suppressed count; a response with both "result" and
"error" fails its call at once with -32000; ``close()`` fails every pending call with -32000 at
once. Every call has a deadline and every test checks how long its failures took.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path

import pytest

import snodo
from tests.support import stdio_support as support
from tests.support.stdio_support import LATEST, elapsed, wait_until

#: The latency bound of a call on a healthy connection while another one misbehaves.
CALL_BOUND = 0.5

#: Autouse fixtures: process-wide parts started first; no child or fd left behind.
stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks


def text_of(result: dict[str, object]) -> str:
    content = result["content"]
    assert isinstance(content, list)
    return str(content[0]["text"])


def records(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    """The rendered stdio transport records at ``level``."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "snodo.transports.stdio" and r.levelno == level
    ]


def counts(texts: list[str], key: str) -> list[int]:
    return [int(m.group(1)) for t in texts for m in [re.search(rf"\b{key}=(\d+)", t)] if m]


# -- item 2: a server that does not read its stdin stalls no one ----------------------------


@pytest.mark.parametrize("method", ["ping", "no/such/method"])
def test_a_server_flooding_requests_without_reading_does_not_stall_another_connection(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, method: str
) -> None:
    """No connection may block another: while one server sends 5,000 requests (pings, or a
    method the client does not know) and never reads the replies, every call on a healthy
    connection keeps its latency; the replies beyond the bound are dropped and the count is
    logged; the flooding connection's own call fails within its timeout."""
    done = tmp_path / "flooded"
    flood = support.script(
        "hostile_flood.py", "--count", "5000", "--method", method, "--done", str(done)
    )
    caplog.set_level(logging.INFO, logger="snodo.transports.stdio")
    with snodo.connect(
        support.snodo_server(), cwd=str(support.ROOT), protocol=LATEST, timeout=10.0
    ) as healthy:
        assert text_of(healthy.call_tool("echo", {"text": "warm"})) == "warm"
        latencies: list[float] = []
        with snodo.connect(flood, protocol=LATEST, timeout=10.0) as hostile:
            after = 0
            deadline = time.monotonic() + 30.0
            # Calls while the flood is read, and 50 more once the server wrote all of it.
            while after < 50:
                assert time.monotonic() < deadline, "the flood did not end within 30 s"
                if done.exists():
                    after += 1
                started = time.monotonic()
                answer = healthy.call_tool("echo", {"text": f"c{len(latencies)}"})
                latencies.append(elapsed(started))
                assert text_of(answer) == f"c{len(latencies) - 1}"
            started = time.monotonic()
            with pytest.raises(snodo.McpError) as caught:
                hostile.call_tool("echo", {"text": "anyone?"}, timeout=1.0)
            assert caught.value.code in (-32000, -32001)
            assert elapsed(started) < 3.0
        assert max(latencies) < CALL_BOUND, sorted(latencies)[-5:]
        assert text_of(healthy.call_tool("echo", {"text": "after"})) == "after"
    warnings = records(caplog)
    assert any("dropping replies to a server that does not read its stdin" in t for t in warnings)
    dropped = counts([t for t in warnings if "dropped replies" in t], "dropped")
    assert dropped and sum(dropped) > 0, warnings
    assert len(warnings) <= 10, warnings  # the flood is not a flood of records either


def test_replies_that_found_the_pipe_full_are_written_once_the_server_reads(
    tmp_path: Path,
) -> None:
    """A reply that finds the server's stdin pipe full is queued (within the bound), not lost:
    700 pings (about 95 KiB of replies, more than a pipe holds) sent before the server reads
    anything are all answered, in order, once it reads."""
    done = tmp_path / "flooded"
    target = support.script(
        "hostile_flood.py", "--count", "700", "--done", str(done), "--read-after"
    )
    with snodo.connect(target, protocol=LATEST, timeout=10.0):
        lines = wait_until(
            lambda: "answered 700" in support.read_lines(done) and support.read_lines(done), 20.0
        )
    assert "out of order" not in lines


# -- item 9: repeated warnings are rate-limited ---------------------------------------------


def test_garbage_lines_are_rate_limited_with_the_suppressed_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """700 lines that are not JSON-RPC give a handful of WARNING records, one of them with the
    number suppressed (at close at the latest), and calls keep working."""
    target = support.script("hostile_lines.py", "--garbage", "700")
    caplog.set_level(logging.WARNING, logger="snodo.transports.stdio")
    with snodo.connect(target, protocol=LATEST, timeout=10.0) as client:
        for i in range(3):
            assert text_of(client.call_tool("echo", {"text": f"g{i}"})) == f"g{i}"
    warnings = records(caplog)
    skipped = [t for t in warnings if "not JSON-RPC" in t]
    assert 1 <= len(skipped) <= 6, skipped
    assert len(warnings) <= 8, warnings
    suppressed = counts(warnings, "suppressed")
    assert sum(suppressed) + len(skipped) == 700, warnings


# -- item 10: a response with both "result" and "error" --------------------------------------


def test_a_response_with_both_result_and_error_fails_its_call_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """JSON-RPC: a response carries "result" or "error", never both. Such an answer to a pending
    call fails that call at once with -32000 naming the reason (not at its timeout); a call in
    flight at the same time and the next call on the connection are answered."""
    target = support.script("hostile_lines.py")
    caplog.set_level(logging.WARNING, logger="snodo.transports.stdio")
    with snodo.connect(target, protocol=LATEST, timeout=10.0) as client:
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("both", {}, timeout=10.0)
        assert elapsed(started) < 2.0
        assert caught.value.code == -32000
        assert caught.value.kind == "transport"
        assert "invalid response" in caught.value.message
        assert '"result" and "error"' in caught.value.message
        assert text_of(client.call_tool("echo", {"text": "next"})) == "next"
    assert any("failed a call on an invalid response" in t for t in records(caplog))


def test_a_broken_response_fails_only_its_own_call(tmp_path: Path) -> None:
    """Correlation by ID: the invalid answer fails only the call it names; another call pending
    at the same time is left to its own outcome (here its timeout, -32001)."""
    log = tmp_path / "wire.jsonl"
    target = support.script("hostile_lines.py", "--log", str(log))
    with snodo.connect(target, protocol=LATEST, timeout=10.0) as client:
        outcome: list[object] = []

        def other() -> None:
            try:
                outcome.append(client.call_tool("never", {}, timeout=3.0))
            except snodo.McpError as error:
                outcome.append(error)

        thread = threading.Thread(target=other)
        thread.start()
        try:
            support.wait_for_message(log, lambda m: m.get("method") == "tools/call", 5.0)
            with pytest.raises(snodo.McpError) as caught:
                client.call_tool("both", {}, timeout=10.0)
            assert caught.value.code == -32000
            assert not outcome  # the other call still waits for its own answer
        finally:
            thread.join(10.0)
        assert not thread.is_alive()
        (error,) = outcome
        assert isinstance(error, snodo.McpError) and error.code == -32001


# -- item 3: close() fails a pending call at once --------------------------------------------


def test_close_fails_a_stdio_call_in_flight_at_once(tmp_path: Path) -> None:
    """close() fails every pending call with -32000 at once: a call with no timeout to a server
    that never answers it returns within a second of close() from another thread."""
    log = tmp_path / "wire.jsonl"
    target = support.script("hostile_lines.py", "--log", str(log))
    client = snodo.connect(target, protocol=LATEST, timeout=10.0)
    outcome: list[object] = []
    waiting = threading.Event()

    def call() -> None:
        waiting.set()
        try:
            outcome.append(client.call_tool("never", {}, timeout=None))
        except snodo.McpError as error:
            outcome.append(error)
        outcome.append(time.monotonic())

    thread = threading.Thread(target=call)
    try:
        thread.start()
        assert waiting.wait(5.0)
        support.wait_for_message(log, lambda m: m.get("method") == "tools/call", 5.0)
        closed_at = time.monotonic()
        client.close()
        thread.join(5.0)
        assert not thread.is_alive()
    finally:
        client.close()
        thread.join(5.0)
    error, returned = outcome
    assert isinstance(error, snodo.McpError) and error.code == -32000
    assert isinstance(returned, float) and returned - closed_at < 1.0
