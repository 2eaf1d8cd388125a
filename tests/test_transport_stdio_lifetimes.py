"""Lifetimes of stdio connections: what close() ends, what a crash ends, and owners.

Rules: "Transport behavior • Stdio" (close/1 closes the server's stdin; the connection closes
when the process that opened it exits; handler processes are killed when the connection closes)
and architecture §3 (the owner of a client is the thread, greenlet or actor that opened it, or
``owner=``; linked lifetimes; nothing waits forever). After every test no child process, zombie,
file descriptor (checked here), thread or actor (conftest) of the test remains.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

import snodo
from snodo.supervision import Actor, call, green_mode, stop
from tests.support import stdio_support as support
from tests.support.stdio_support import LATEST, elapsed, wait_until

CLOSE_BOUND = 10.0

#: Autouse fixtures: process-wide parts started first; no child or fd left behind.
stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks


def grandchild_server(tmp_path: Path, *options: str) -> tuple[Any, Path]:
    pidfile = tmp_path / "grandchild.pid"
    return support.script("broken_grandchild.py", "--pidfile", str(pidfile), *options), pidfile


def assert_closed(client: Any) -> None:
    with pytest.raises(snodo.McpError) as caught:
        client.call_tool("echo", {"text": "after"})
    assert caught.value.code == -32000
    assert caught.value.kind == "transport"


# -- close() ---------------------------------------------------------------------------------


@pytest.mark.parametrize("grandchild", ["plain", "ignores-sigterm"])
def test_close_ends_the_server_and_its_grandchildren(tmp_path: Path, grandchild: str) -> None:
    """close() closes the server's stdin; when it returns, no process of the connection's
    process group remains: the server exits on EOF, and the grandchild it left behind (even one
    that ignores SIGTERM) is ended too."""
    options = ["--stubborn-grandchild"] if grandchild == "ignores-sigterm" else []
    target, pidfile = grandchild_server(tmp_path, *options)
    client = snodo.connect(target, protocol="2025-11-25")
    pid = client.transport.pid
    (child,) = wait_until(lambda: support.starts(pidfile))
    assert support.running(child)
    assert set(support.group_members(pid)) >= {pid, child}
    started = time.monotonic()
    client.close()
    assert elapsed(started) < CLOSE_BOUND
    assert not support.exists(pid), "the server was not reaped"
    assert not support.running(child)
    assert support.group_members(pid) == []
    assert_closed(client)


def test_close_escalates_against_a_server_that_ignores_eof_and_sigterm(tmp_path: Path) -> None:
    """close() is bounded: a server that ignores stdin EOF and SIGTERM is killed, and close()
    returns within the bound with the process gone and reaped."""
    ready = tmp_path / "ready"
    target = support.script("broken_stubborn.py", "--ready", str(ready))
    client = snodo.connect(target, protocol=LATEST)
    pid = client.transport.pid
    wait_until(ready.exists)
    assert client.call_tool("echo", {"text": "alive"})["content"][0]["text"] == "alive"
    started = time.monotonic()
    client.close()
    took = elapsed(started)
    assert took < CLOSE_BOUND, f"close() took {took:.1f}s"
    assert not support.exists(pid)
    assert support.group_members(pid) == []
    assert_closed(client)


def test_close_fails_the_calls_in_flight_at_once(tmp_path: Path) -> None:
    """close() while requests are pending in other threads: each fails -32000 at once."""
    target = support.script("scripted_server.py")
    client = snodo.connect(target, protocol=LATEST, timeout=30.0)
    errors: list[BaseException] = []
    ready = threading.Barrier(5, timeout=10.0)

    def waiting() -> None:
        ready.wait()
        try:
            client.call_tool("never", {})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=waiting) for _ in range(4)]
    for t in threads:
        t.start()
    ready.wait()
    # The calls are written before close() starts or fail on the closed connection; either way
    # every one of them must end with -32000.
    started = time.monotonic()
    client.close()
    for t in threads:
        t.join(5.0)
    assert elapsed(started) < CLOSE_BOUND
    assert not any(t.is_alive() for t in threads)
    assert len(errors) == 4
    assert all(isinstance(e, snodo.McpError) and e.code == -32000 for e in errors), errors


def test_concurrent_close_calls_all_return_once_the_connection_is_closed(tmp_path: Path) -> None:
    """close() is idempotent and returns only once the connection is closed, also for callers
    that race the first one: when any close() returns, the server process is gone."""
    ready = tmp_path / "ready"
    client = snodo.connect(
        support.script("broken_stubborn.py", "--ready", str(ready)), protocol=LATEST
    )
    pid = client.transport.pid
    wait_until(ready.exists)
    seen: list[bool] = []
    go = threading.Barrier(4, timeout=10.0)

    def closer() -> None:
        go.wait()
        client.close()
        seen.append(support.exists(pid))

    threads = [threading.Thread(target=closer) for _ in range(4)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(CLOSE_BOUND + 5.0)
    assert elapsed(started) < CLOSE_BOUND + 1.0
    assert seen == [False] * 4, "a close() returned while the server still existed"


def test_many_connections_open_and_close_without_leaks(tmp_path: Path) -> None:
    """Connections opened and closed concurrently leave no process, zombie, fd, thread or actor:
    each thread opens its own client, uses it and closes it."""
    failures: list[BaseException] = []
    pids: list[int] = []

    def cycle(n: int) -> None:
        try:
            protocol = LATEST if n % 2 else "2025-06-18"
            with snodo.connect(support.script("scripted_server.py"), protocol=protocol) as c:
                pids.append(c.transport.pid)
                assert c.call_tool("echo", {"text": str(n)})["content"][0]["text"] == str(n)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=cycle, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30.0)
    assert not failures, failures
    assert len(set(pids)) == 6
    assert not any(support.exists(pid) for pid in pids)


# -- crashes ---------------------------------------------------------------------------------


def test_after_a_server_crash_close_leaves_nothing(tmp_path: Path) -> None:
    """After the server crashes, pending calls fail -32000; close() then returns at once and no
    process of the group (the orphaned grandchild included), fd, thread or actor remains."""
    target, pidfile = grandchild_server(tmp_path)
    client = snodo.connect(target, protocol=LATEST)
    pid = client.transport.pid
    (child,) = wait_until(lambda: support.starts(pidfile))
    with pytest.raises(snodo.McpError) as caught:
        client.call_tool("crash", {"code": 9})
    assert caught.value.code == -32000
    assert caught.value.cause == ("exit_status", 9)
    started = time.monotonic()
    client.close()
    assert elapsed(started) < CLOSE_BOUND
    assert not support.exists(pid)
    assert not support.running(child)
    assert support.group_members(pid) == []


@pytest.mark.parametrize("stdio", ["own", "inherited"])
def test_a_crashed_server_releases_its_connection_without_close(tmp_path: Path, stdio: str) -> None:
    """A server exit ends the connection by itself: without any close() call the process is
    reaped, its orphaned grandchild ended, and the fds, threads and actors released; also when
    the grandchild holds the server's stdout open, so that no EOF comes."""
    options = ["--grandchild-inherits-stdio"] if stdio == "inherited" else []
    target, pidfile = grandchild_server(tmp_path, *options)
    client = snodo.connect(target, protocol="2025-06-18")
    pid = client.transport.pid
    (child,) = wait_until(lambda: support.starts(pidfile))
    with pytest.raises(snodo.McpError) as caught:
        client.call_tool("crash", {"code": 4})
    assert caught.value.code == -32000
    wait_until(lambda: not support.exists(pid), CLOSE_BOUND)
    wait_until(lambda: not support.running(child) and not support.group_members(pid), CLOSE_BOUND)
    assert_closed(client)


def test_a_server_killed_from_outside_fails_calls_and_releases_everything(
    tmp_path: Path,
) -> None:
    """A server killed by a signal (not by us) is a server exit: the pending call fails -32000
    at once; the connection is released."""
    import os
    import signal

    client = snodo.connect(support.script("scripted_server.py"), protocol=LATEST, timeout=30.0)
    pid = client.transport.pid
    failures: list[BaseException] = []

    def waiting() -> None:
        try:
            client.call_tool("never", {})
        except BaseException as exc:
            failures.append(exc)

    caller = threading.Thread(target=waiting)
    caller.start()
    try:
        started = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        caller.join(5.0)
        assert not caller.is_alive()
        assert elapsed(started) < 5.0
        assert isinstance(failures[0], snodo.McpError) and failures[0].code == -32000
        assert failures[0].cause[0] == "exit_status"
    finally:
        client.close()
    assert not support.exists(pid)


# -- owners ----------------------------------------------------------------------------------


def test_the_connection_closes_when_the_thread_that_opened_it_exits(tmp_path: Path) -> None:
    """The connection closes when the thread (a greenlet under gevent) that opened it exits:
    the server process and its group go, and later calls fail -32000."""
    target, pidfile = grandchild_server(tmp_path)
    opened: dict[str, Any] = {}

    def opener() -> None:
        client = snodo.connect(target, protocol=LATEST)
        opened["client"] = client
        opened["pid"] = client.transport.pid
        assert client.call_tool("echo", {"text": "mine"})["content"][0]["text"] == "mine"

    t = threading.Thread(target=opener)
    t.start()
    t.join(10.0)
    assert not t.is_alive()
    (child,) = wait_until(lambda: support.starts(pidfile))
    pid = opened["pid"]
    wait_until(lambda: not support.exists(pid), CLOSE_BOUND)
    wait_until(lambda: not support.running(child) and not support.group_members(pid), CLOSE_BOUND)
    assert_closed(opened["client"])


def test_a_client_shared_with_other_threads_closes_when_its_opener_exits(tmp_path: Path) -> None:
    """Ownership is who opened it, not who uses it: the test thread keeps using a client another
    thread opened until that thread exits."""
    opened: dict[str, Any] = {}
    go = threading.Event()

    def opener() -> None:
        opened["client"] = snodo.connect(support.script("scripted_server.py"), protocol=LATEST)
        go.wait(10.0)

    t = threading.Thread(target=opener)
    t.start()
    try:
        client = wait_until(lambda: opened.get("client"))
        assert client.call_tool("echo", {"text": "borrowed"})["content"][0]["text"] == "borrowed"
        pid = client.transport.pid
    finally:
        go.set()
        t.join(10.0)
    wait_until(lambda: not support.exists(pid), CLOSE_BOUND)
    assert_closed(client)


class Opener(Actor):
    """An actor that opens a client when asked, and crashes when told to."""

    def on_receive(self, message: Any) -> Any:
        if message == "crash":
            raise RuntimeError("the owner crashed")
        if isinstance(message, tuple) and message[0] == "open":
            self.client = snodo.connect(message[1], protocol=message[2])
            return self.client
        return None


@pytest.mark.parametrize("ending", ["stop", "crash"])
def test_the_connection_closes_when_the_actor_that_opened_it_ends(
    tmp_path: Path, ending: str
) -> None:
    """A snodo actor that opened a client stops or crashes: its connection closes (the server
    process and its group go; calls fail -32000)."""
    target, pidfile = grandchild_server(tmp_path)
    ref = Opener.start()
    try:
        client = call(ref, ("open", target, "2025-11-25"), 10.0)
        assert client.call_tool("echo", {"text": "actor"})["content"][0]["text"] == "actor"
        pid = client.transport.pid
        (child,) = wait_until(lambda: support.starts(pidfile))
        if ending == "stop":
            assert stop(ref, timeout=10.0)
        else:
            ref.tell("crash")
        wait_until(lambda: not support.exists(pid), CLOSE_BOUND)
        wait_until(
            lambda: not support.running(child) and not support.group_members(pid), CLOSE_BOUND
        )
        assert_closed(client)
    finally:
        stop(ref, timeout=5.0)


def test_an_explicit_owner_decides_the_lifetime(tmp_path: Path) -> None:
    """owner= names the owner explicitly: a client opened in the test thread with an actor as its
    owner closes when that actor stops, while the test thread lives on."""

    class Holder(Actor):
        def on_receive(self, message: Any) -> Any:
            return None

    ref = Holder.start()
    try:
        client = snodo.connect(support.script("scripted_server.py"), protocol=LATEST, owner=ref)
        pid = client.transport.pid
        assert client.call_tool("echo", {"text": "held"})["content"][0]["text"] == "held"
        assert stop(ref, timeout=10.0)
        wait_until(lambda: not support.exists(pid), CLOSE_BOUND)
        assert_closed(client)
    finally:
        stop(ref, timeout=5.0)


def test_an_explicit_thread_owner_must_be_the_current_thread(tmp_path: Path) -> None:
    """owner= a thread: the current thread is accepted (the connection closes when it exits);
    another live thread is refused with ValueError before any server starts."""
    if green_mode():
        pytest.skip("under gevent a thread owner is the OS thread; greenlets own connections")
    starts = tmp_path / "starts"
    target = support.script("scripted_server.py", "--starts", str(starts))
    opened: dict[str, Any] = {}
    me = threading.current_thread()

    def worker() -> None:
        try:
            snodo.connect(target, protocol=LATEST, owner=me)
        except ValueError as exc:
            opened["refused"] = exc
        opened["client"] = snodo.connect(
            target, protocol="2025-11-25", owner=threading.current_thread()
        )

    t = threading.Thread(target=worker)
    t.start()
    t.join(10.0)
    assert isinstance(opened["refused"], ValueError)
    assert len(support.starts(starts)) == 1  # initialize was answered by the second one only
    client = opened["client"]
    pid = client.transport.pid
    wait_until(lambda: not support.exists(pid), CLOSE_BOUND)
    assert_closed(client)
