"""Faults a daemon meets on the HTTP wire (issue 12, items 1, 4 and 6), through the full client.

Rules (docs/decisions/0028): a request that may have reached the server is never sent again; a
request written whole that gets no response fails with -32000 naming the unknown outcome. Idle
keep-alive sockets do not outlive the clients of their endpoint: after 2,000 clients opened,
called once and closed, the process holds the file descriptors it held before. A response head
that never ends fails fast and costs little CPU (linear reading, bounded in bytes and lines).
Every server is real: raw sockets on 127.0.0.1.
"""

from __future__ import annotations

import select
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import snodo
from snodo.transports import http_wire
from tests.support.http_fault_server import LATEST, Exchange, FaultServer, Request, fault_server
from tests.support.stdio_support import PYTHON, SERVERS, no_leaks

VERSIONS = [LATEST, "2025-11-25"]


def connect(url: str, version: str = LATEST, **options: Any) -> snodo.Client:
    return snodo.connect(snodo.Http(url), protocol=version, timeout=10.0, **options)


# -- item 1: a request is never sent twice ---------------------------------------------------------


def read_and_close(request: Request, exchange: Exchange) -> None:
    """The server read the request whole (it is recorded) and closes without answering."""
    exchange.close()


def unanswered_call(version: str) -> tuple[snodo.McpError, FaultServer]:
    """tools/call on a reused keep-alive connection that the server reads and closes."""
    with fault_server() as server:
        server.once("tools/call", read_and_close)
        with connect(server.url, version) as client:
            assert client.list_tools()  # answered: its connection goes back to the pool
            with pytest.raises(snodo.McpError) as caught:
                client.call_tool("echo", {"text": "once"})
            # the next call is answered normally, on a new connection
            again = client.call_tool("echo", {"text": "again"})
            assert isinstance(again, dict) and again["content"][0]["text"] == "again"
    return caught.value, server


@pytest.mark.parametrize("version", VERSIONS)
def test_a_post_read_on_a_reused_connection_and_not_answered_runs_once(version: str) -> None:
    """The tool runs exactly once: the server saw one such tools/call, on a connection that had
    already carried an answered request, and the call failed with -32000 naming the unknown
    outcome (the client never sends a request that may have been delivered again)."""
    error, server = unanswered_call(version)
    calls = server.received("tools/call")
    assert [call.message["params"]["arguments"]["text"] for call in calls] == ["once", "again"]
    first = calls[0]
    earlier = [r for r in server.received() if r.index < first.index]
    assert any(r.connection == first.connection for r in earlier), "not a reused connection"
    assert error.code == -32000 and error.kind == "transport"
    assert error.data == {"outcome": "unknown"}  # snodo.protocol.errors.outcome_unknown_error
    assert "unknown" in error.message.lower() or "unknown" in repr(error.cause).lower()


# -- item 4: idle sockets do not outlive their clients ---------------------------------------------

CLIENTS = 2000
WORKERS = 16
RELEASED_WITHIN = 2.0
assert RELEASED_WITHIN < http_wire.IDLE_TIMEOUT


def test_two_thousand_clients_opened_called_and_closed_leave_no_socket_behind() -> None:
    """2,000 clients of one server (16 at a time, so the pool holds many idle sockets at
    once), each opened, called once and closed: afterwards the process has exactly the file
    descriptors it had before (no idle socket kept for an endpoint nobody holds, none in
    CLOSE_WAIT). Before issue 12 the pool kept up to 32 of them for ever."""
    with fault_server() as server:
        with connect(server.url) as warm:  # process-wide parts made on first use
            warm.call_tool("echo", {"text": "warm"})
        failures: list[BaseException] = []
        done = [0]
        lock = threading.Lock()

        def work(count: int) -> None:
            try:
                for _ in range(count):
                    with connect(server.url) as client:
                        got = client.call_tool("echo", {"text": "x"})
                        assert isinstance(got, dict) and got["content"][0]["text"] == "x"
                    with lock:
                        done[0] += 1
            except BaseException as exc:
                failures.append(exc)

        # within less than the idle timeout: the last close released them, not their expiry
        with no_leaks(deadline=RELEASED_WITHIN):
            workers = [
                threading.Thread(target=work, args=(CLIENTS // WORKERS,)) for _ in range(WORKERS)
            ]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join(60.0)
            assert not any(worker.is_alive() for worker in workers)
            assert not failures, failures[:3]
            assert done[0] == CLIENTS
        assert len({r.connection for r in server.received()}) > 1  # several sockets were pooled


# -- item 6: a head that never ends ----------------------------------------------------------------


@pytest.fixture
def hostile() -> Iterator[Callable[[str], str]]:
    procs: list[subprocess.Popen[str]] = []

    def start(mode: str) -> str:
        proc = subprocess.Popen(
            [PYTHON, str(SERVERS / "hostile_http_head.py"), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 10.0)
        assert ready, "the hostile server did not start within 10 s"
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        return f"http://127.0.0.1:{int(line.split()[1])}/mcp"

    yield start
    for proc in procs:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        try:
            proc.wait(5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5.0)
        proc.stdout.close()


@pytest.mark.parametrize(
    ("mode", "bound"),
    [
        ("fields", "more than 100 header fields"),
        ("line", "header line is longer than 65536 bytes"),
        ("long", "head is longer than 1048576 bytes"),
    ],
)
def test_a_head_that_never_ends_fails_fast_and_cheaply(
    hostile: Callable[[str], str], mode: str, bound: str
) -> None:
    """A server drips an endless head 64 bytes at a time (endless small fields, one endless
    line, or endless 11 KB lines: a 1 MiB+ head): the call fails within a second with -32000
    whose cause names the bound, having cost the client under 0.25 s of CPU. Reading it as
    before (the whole buffer copied and rescanned at every read, up to max_response_bytes,
    16 MiB) cost seconds of CPU (docs/decisions/0028)."""
    url = hostile(mode)
    with no_leaks(), connect(url) as client:
        started, cpu = time.monotonic(), time.process_time()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("echo", {"text": "x"})
        cpu, took = time.process_time() - cpu, time.monotonic() - started
    error = caught.value
    assert error.code == -32000 and error.kind == "transport"
    assert bound in repr(error.cause), error.cause
    assert cpu < 0.25, f"{cpu:.3f} s of CPU"
    assert took < 5.0
