"""Supervised connections: restart policies over real servers that crash, restart and vanish.

Real stdio servers killed with SIGKILL, a real ``python -m snodo.server --http`` process stopped
and started again on the same port (session era: it forgets its sessions; stateless era: it is
simply gone for a while), 16 threads calling throughout. Every call either succeeds or fails
-32000/-32001 within its timeout; a connection killed more often than its restart intensity
allows is down for good and says why; subscriptions resume with a ``Gap``; owners close every
kind of connection.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
from snodo.server import Runtime
from snodo.supervision import Actor, registry, service_threads, stop
from snodo.testing import ServedRuntime, serve_http
from tests.support.stdio_support import (
    SERVERS,
    children,
    group_members,
    open_fds,
    stdio_no_leaks,
    stdio_warm_up,
)

__all__ = ["stdio_no_leaks", "stdio_warm_up"]

SESSION = "2025-11-25"
STATELESS = "2026-07-28"
RUNTIME = "restart_runtime:runtime"
FAST = {"initial": 0.01, "factor": 2.0, "cap": 0.1}
CALL_TIMEOUT = 5.0
WAIT = 20.0


def stdio_target() -> snodo.Stdio:
    return snodo.Stdio(sys.executable, ["-m", "snodo.server", RUNTIME])


def stdio_env() -> dict[str, str | None]:
    return {"PYTHONPATH": str(SERVERS)}


def states_until(states: queue.Queue[snodo.StateChange], wanted: str) -> list[snodo.StateChange]:
    """The state changes up to the first ``wanted`` one (bounded by WAIT)."""
    seen = []
    deadline = time.monotonic() + WAIT
    while True:
        change = states.get(timeout=max(0.01, deadline - time.monotonic()))
        seen.append(change)
        if change.state == wanted:
            return seen


def server_pid(client: snodo.Client) -> int:
    answer: Any = client.call_tool("pid", {}, timeout=CALL_TIMEOUT)
    return int(answer["content"][0]["text"])


class Hammer:
    """16 threads calling ``echo`` until stopped; every outcome is recorded with its time."""

    def __init__(self, client: snodo.Client, threads: int = 16) -> None:
        self.client = client
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.failures: list[tuple[int, float]] = []
        self.unexpected: list[BaseException] = []
        self.threads = [threading.Thread(target=self.run, args=(n,)) for n in range(threads)]
        for thread in self.threads:
            thread.start()

    def run(self, n: int) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            started = time.monotonic()
            try:
                answer: Any = self.client.call_tool(
                    "echo", {"text": f"{n}-{i}"}, timeout=CALL_TIMEOUT
                )
                assert answer["content"][0]["text"] == f"{n}-{i}"
                with self.lock:
                    self.ok += 1
            except snodo.McpError as error:
                took = time.monotonic() - started
                with self.lock:
                    self.failures.append((error.code, took))
                if self.client.closed:
                    return
            except BaseException as exc:
                with self.lock:
                    self.unexpected.append(exc)
                return

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(CALL_TIMEOUT + WAIT)
            assert not thread.is_alive(), "a calling thread hung"
        assert not self.unexpected, self.unexpected
        for code, took in self.failures:
            assert code in (-32000, -32001), code
            assert took <= CALL_TIMEOUT + 1.0, took


def wait_ok_after(hammer: Hammer, count: int) -> None:
    """Wait (bounded) until the hammer has had ``count`` more successes."""
    with hammer.lock:
        target = hammer.ok + count
    deadline = time.monotonic() + WAIT
    while True:
        with hammer.lock:
            if hammer.ok >= target:
                return
        assert time.monotonic() < deadline, "calls did not succeed again"
        hammer.stop.wait(0.01)


# -- stdio -----------------------------------------------------------------------------------


def test_a_transient_stdio_connection_restarts_after_each_sigkill_under_16_callers() -> None:
    states: queue.Queue[snodo.StateChange] = queue.Queue()
    client = snodo.connect(
        stdio_target(),
        env=stdio_env(),
        protocol=SESSION,
        restart="transient",
        backoff=FAST,
        on_state=states,
        timeout=CALL_TIMEOUT,
    )
    try:
        assert [c.state for c in states_until(states, "ready")] == ["connecting", "ready"]
        hammer = Hammer(client)
        pids = [server_pid(client)]
        for kill in range(3):
            wait_ok_after(hammer, 50)
            os.kill(pids[-1], signal.SIGKILL)
            seen = states_until(states, "ready")
            assert [c.state for c in seen] == ["restarting", "ready"]
            assert seen[0].error is not None and seen[0].error.cause[0] == "exit_status"
            assert seen[-1].restarts == kill + 1
            pids.append(server_pid(client))
            wait_ok_after(hammer, 50)
        hammer.finish()
        assert len(set(pids)) == 4
        assert client.state == "ready"
        assert not client.closed
    finally:
        client.close()
    assert client.state == "closed"


def test_killed_more_often_than_the_intensity_allows_it_is_down_for_good() -> None:
    states: queue.Queue[snodo.StateChange] = queue.Queue()
    client = snodo.connect(
        stdio_target(),
        env=stdio_env(),
        protocol=SESSION,
        restart="transient",
        backoff=FAST,
        max_restarts=2,
        restart_window=60.0,
        on_state=states,
        timeout=CALL_TIMEOUT,
    )
    try:
        states_until(states, "ready")
        hammer = Hammer(client)
        for _ in range(2):
            wait_ok_after(hammer, 30)
            os.kill(server_pid(client), signal.SIGKILL)
            states_until(states, "ready")
        wait_ok_after(hammer, 30)
        os.kill(server_pid(client), signal.SIGKILL)
        seen = states_until(states, "closed")
        assert seen[-1].reason == "too many restarts (2)"
        hammer.finish()
        assert client.closed
        assert client.state == "closed"
        assert "closed" in repr(client)
        with pytest.raises(snodo.McpError) as down:
            client.call_tool("echo", {"text": "x"})
        assert down.value.code == -32000
        assert "down for good" in down.value.message
        assert down.value.cause[0] == "max_restarts"
        assert down.value.cause[1] == 2
        assert down.value.data == {"outcome": "not_sent"}
    finally:
        client.close()


def test_under_temporary_a_dead_server_closes_the_client_and_calls_say_why() -> None:
    client = snodo.connect(stdio_target(), env=stdio_env(), protocol=SESSION)
    states: list[str] = []
    try:
        os.kill(server_pid(client), signal.SIGKILL)
        deadline = time.monotonic() + WAIT
        while not client.closed:
            assert time.monotonic() < deadline, "client.closed stayed False"
            states.append(client.state)
            threading.Event().wait(0.01)
        assert client.state == "closed"
        with pytest.raises(snodo.McpError) as gone:
            client.call_tool("echo", {"text": "x"})
        assert gone.value.code == -32000
        assert gone.value.cause == ("exit_status", -signal.SIGKILL)
        assert gone.value.data == {"outcome": "not_sent"}
    finally:
        client.close()


def test_a_permanent_connection_restarts_after_a_clean_exit_and_transient_does_not() -> None:
    for policy, restarts in (("permanent", True), ("transient", False)):
        states: queue.Queue[snodo.StateChange] = queue.Queue()
        client = snodo.connect(
            stdio_target(),
            env=stdio_env(),
            protocol=SESSION,
            restart=policy,
            backoff=FAST,
            on_state=states,
            timeout=CALL_TIMEOUT,
        )
        try:
            states_until(states, "ready")
            with pytest.raises(snodo.McpError):
                client.call_tool("exit", {})
            seen = states_until(states, "ready" if restarts else "closed")
            if restarts:
                assert [c.state for c in seen] == ["restarting", "ready"]
                answer: Any = client.call_tool("echo", {"text": "back"})
                assert answer["content"][0]["text"] == "back"
            else:
                assert seen[-1].reason == "the server exited"
                assert client.closed
        finally:
            client.close()


# -- HTTP ------------------------------------------------------------------------------------


@pytest.fixture
def http_server() -> Iterator[ServedRuntime]:
    """``python -m snodo.server --http`` on 127.0.0.1 (the kit's; it restarts on its port)."""
    with serve_http(RUNTIME, cwd=str(SERVERS)) as server:
        yield server


@pytest.mark.parametrize("version", [SESSION, STATELESS])
def test_an_http_server_that_restarts_is_reached_again(
    http_server: ServedRuntime, version: str
) -> None:
    """Session era: the restarted server forgets the session (404), the client starts a new
    one and sends the refused request once more. Stateless era: calls fail -32000 while the
    server is gone and succeed once it is back."""
    states: queue.Queue[snodo.StateChange] = queue.Queue()
    client = snodo.connect(
        http_server.target,
        protocol=version,
        restart="transient",
        backoff={"initial": 0.05, "factor": 2.0, "cap": 0.2},
        max_restarts=1000,
        on_state=states,
        timeout=CALL_TIMEOUT,
    )
    try:
        states_until(states, "ready")
        first_session = client.session.session_id if client.session is not None else None
        hammer = Hammer(client)
        for _ in range(3):
            wait_ok_after(hammer, 30)
            http_server.restart()
            wait_ok_after(hammer, 30)
        hammer.finish()
        if version == SESSION:
            assert client.session is not None
            assert client.session.session_id != first_session
        assert client.state == "ready"
    finally:
        client.close()


def test_a_session_expired_under_temporary_is_the_servers_error(
    http_server: ServedRuntime,
) -> None:
    client = snodo.connect(http_server.target, protocol=SESSION, timeout=CALL_TIMEOUT)
    try:
        http_server.restart()
        with pytest.raises(snodo.McpError) as expired:
            client.call_tool("echo", {"text": "x"})
        assert expired.value.cause is not None and expired.value.cause[:2] == ("http_status", 404)
        assert client.state == "ready"
    finally:
        client.close()


# -- subscriptions ---------------------------------------------------------------------------

FILTER = {"resourceSubscriptions": ["mem://restart"]}


def next_kind(sub: snodo.Subscription) -> Any:
    return sub.next(timeout=WAIT)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_subscription_survives_a_restart_with_a_gap_first(transport: str, tmp_path: Path) -> None:
    server = serve_http(RUNTIME, cwd=str(SERVERS)) if transport == "http" else None
    if server is not None:
        target: Any = server.target
        extra: dict[str, Any] = {}
    else:
        target = stdio_target()
        extra = {"env": stdio_env()}
    states: queue.Queue[snodo.StateChange] = queue.Queue()
    client = snodo.connect(
        target,
        protocol=STATELESS,
        restart="transient",
        backoff={"initial": 0.05, "factor": 2.0, "cap": 0.2},
        max_restarts=100,
        on_state=states,
        timeout=CALL_TIMEOUT,
        **extra,
    )
    try:
        states_until(states, "ready")
        sub = client.listen(FILTER)
        client.call_tool("touch", {"uri": "mem://restart"})
        before = next_kind(sub)
        assert isinstance(before, snodo.Notification)
        if server is not None:
            server.restart()
        else:
            os.kill(server_pid(client), signal.SIGKILL)
        gap = next_kind(sub)
        assert isinstance(gap, snodo.Gap), gap
        assert gap.reason is not None and gap.reason.code == -32000
        client.call_tool("touch", {"uri": "mem://restart"})
        after = next_kind(sub)
        assert isinstance(after, snodo.Notification), after
        assert after.params["uri"] == "mem://restart"
        sub.close()
    finally:
        client.close()
        if server is not None:
            server.close()


def test_under_temporary_a_subscription_ends_with_closed() -> None:
    client = snodo.connect(stdio_target(), env=stdio_env(), protocol=STATELESS)
    try:
        sub = client.listen(FILTER)
        os.kill(server_pid(client), signal.SIGKILL)
        event = next_kind(sub)
        assert isinstance(event, snodo.Closed)
        assert event.reason is not None and event.reason.code == -32000
    finally:
        client.close()


# -- owners ----------------------------------------------------------------------------------


def runtime() -> Runtime:
    import importlib.util

    spec = importlib.util.spec_from_file_location("restart_runtime", SERVERS / "restart_runtime.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: Runtime = module.runtime
    return found


def open_in_thread(open_client: Any) -> snodo.Client:
    """Open a client in a worker thread that then ends (its default owner)."""
    box: list[snodo.Client] = []
    worker = threading.Thread(target=lambda: box.append(open_client()), name="worker-3")
    worker.start()
    worker.join(WAIT)
    assert box, "the worker did not open a client"
    return box[0]


def wait_closed(client: snodo.Client) -> None:
    deadline = time.monotonic() + WAIT
    while not client.closed:
        assert time.monotonic() < deadline, "the owner's end did not close the client"
        threading.Event().wait(0.01)


@pytest.mark.parametrize("kind", ["direct", "http", "custom"])
def test_the_owner_thread_ending_closes_every_kind_of_connection(
    kind: str, http_server: ServedRuntime
) -> None:
    from tests.support.pipe_transport import PipeTransport

    if kind == "direct":
        served = runtime()
        client = open_in_thread(lambda: snodo.direct(served))
    elif kind == "http":
        client = open_in_thread(lambda: snodo.connect(http_server.target))
    else:
        served = runtime()
        client = open_in_thread(lambda: snodo.connect((PipeTransport, served), protocol=STATELESS))
    try:
        wait_closed(client)
        with pytest.raises(snodo.McpError) as closed:
            client.call_tool("echo", {"text": "x"})
        assert "worker-3" in closed.value.message  # a thread, or its greenlet under gevent
        assert "ended; pass owner= to choose another" in closed.value.message
    finally:
        client.close()


class Holder(Actor):
    """An actor that owns connections and does nothing else."""

    def on_receive(self, message: Any) -> Any:
        return None


@pytest.mark.parametrize("kind", ["direct", "http", "custom"])
def test_an_explicit_owner_actor_ending_closes_every_kind_of_connection(
    kind: str, http_server: ServedRuntime
) -> None:
    """owner= an actor: the client is opened (and used) by the test thread, which lives on;
    stopping the actor closes the connection."""
    from tests.support.pipe_transport import PipeTransport

    ref = Holder.start()
    try:
        if kind == "direct":
            client = snodo.direct(runtime(), owner=ref)
        elif kind == "http":
            client = snodo.connect(http_server.target, owner=ref)
        else:
            client = snodo.connect((PipeTransport, runtime()), protocol=STATELESS, owner=ref)
        answer: Any = client.call_tool("echo", {"text": "held"})
        assert answer["content"][0]["text"] == "held"
        assert not client.closed
        assert stop(ref, timeout=WAIT)
        wait_closed(client)
        with pytest.raises(snodo.McpError) as closed:
            client.call_tool("echo", {"text": "x"})
        assert "owner actor" in closed.value.message
        assert closed.value.cause[0] == "owner_ended"
        client.close()
    finally:
        stop(ref, timeout=5.0)


# -- nothing left behind ---------------------------------------------------------------------


# 100 server starts: about 0.3 s each on a quiet machine, several times that beside other suites.
@pytest.mark.timeout(300)
def test_a_hundred_restart_cycles_leave_nothing_beyond_the_live_connection() -> None:
    """Every server starts a grandchild; after 100 kills and restarts the process holds the
    same threads, fds, children and actors as with one connection, and no process of an old
    server's group (the grandchildren included) is left."""
    states: queue.Queue[snodo.StateChange] = queue.Queue()
    client = snodo.connect(
        stdio_target(),
        env={**stdio_env(), "RESTART_GRANDCHILD": "1"},
        protocol=STATELESS,
        restart="transient",
        backoff={"initial": 0.0, "factor": 1.0, "cap": 0.0},
        max_restarts=1000,
        on_state=states,
        timeout=CALL_TIMEOUT,
    )
    try:
        states_until(states, "ready")
        groups = [server_pid(client)]
        before = footprint()
        for _ in range(100):
            os.kill(groups[-1], signal.SIGKILL)
            states_until(states, "ready")
            groups.append(server_pid(client))
        deadline = time.monotonic() + WAIT
        while True:
            now = footprint()
            left = [pgid for pgid in groups[:-1] if group_members(pgid)]
            if now == before and not left:
                break
            assert time.monotonic() < deadline, (now, before, left)
            threading.Event().wait(0.02)
        assert group_members(groups[-1]), "the live server's grandchild should be running"
    finally:
        client.close()


def footprint() -> tuple[int, int, int, int]:
    """fds, children, threads (not the process-wide service threads) and actors."""
    service = service_threads()
    threads = [t for t in threading.enumerate() if t not in service]
    return (len(open_fds()), len(children()), len(threads), len(registry.all()))


def test_a_call_in_flight_when_the_server_dies_says_its_outcome_is_unknown() -> None:
    states: queue.Queue[snodo.StateChange] = queue.Queue()
    client = snodo.connect(
        stdio_target(),
        env=stdio_env(),
        protocol=SESSION,
        restart="transient",
        backoff=FAST,
        on_state=states,
        timeout=CALL_TIMEOUT,
    )
    try:
        states_until(states, "ready")
        pid = server_pid(client)
        outcome: list[snodo.McpError] = []
        arrived = threading.Event()

        def slow_call() -> None:
            try:
                client.call_tool("slow", {"seconds": 30}, progress=lambda params: arrived.set())
            except snodo.McpError as error:
                outcome.append(error)

        caller = threading.Thread(target=slow_call)
        caller.start()
        assert arrived.wait(WAIT), "the server never reported the call"
        os.kill(pid, signal.SIGKILL)
        caller.join(WAIT)
        assert not caller.is_alive()
        assert outcome and outcome[0].code == -32000
        assert outcome[0].data == {"outcome": "unknown"}
        states_until(states, "ready")
        answer: Any = client.call_tool("echo", {"text": "after"})
        assert answer["content"][0]["text"] == "after"
    finally:
        client.close()


def test_a_failed_ping_restarts_a_session_era_connection() -> None:
    """ping_interval: a server that stops answering (SIGSTOP) fails its ping; under
    "transient" that is a broken connection, so it is replaced by a new server."""
    states: queue.Queue[snodo.StateChange] = queue.Queue()
    client = snodo.connect(
        stdio_target(),
        env=stdio_env(),
        protocol=SESSION,
        restart="transient",
        backoff=FAST,
        ping_interval=0.2,
        on_state=states,
        timeout=CALL_TIMEOUT,
    )
    try:
        states_until(states, "ready")
        stopped = server_pid(client)
        os.kill(stopped, signal.SIGSTOP)
        seen = states_until(states, "ready")
        assert seen[0].state == "restarting"
        assert seen[0].error is not None and seen[0].error.cause[0] == "ping"
        assert server_pid(client) != stopped
    finally:
        client.close()


@pytest.mark.parametrize("version", [SESSION, STATELESS])
def test_an_http_server_gone_for_good_is_down_after_the_intensity_with_16_callers(
    http_server: ServedRuntime, version: str
) -> None:
    states: queue.Queue[snodo.StateChange] = queue.Queue()
    client = snodo.connect(
        http_server.target,
        protocol=version,
        restart="transient",
        backoff=FAST,
        max_restarts=3,
        on_state=states,
        timeout=CALL_TIMEOUT,
    )
    try:
        states_until(states, "ready")
        hammer = Hammer(client)
        wait_ok_after(hammer, 30)
        http_server.kill()
        seen = states_until(states, "closed")
        assert seen[-1].reason == "too many restarts (3)"
        hammer.finish()
        assert client.closed
        with pytest.raises(snodo.McpError) as down:
            client.call_tool("echo", {"text": "x"})
        assert down.value.cause[0] == "max_restarts"
        assert down.value.data == {"outcome": "not_sent"}
    finally:
        client.close()
