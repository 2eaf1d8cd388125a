"""Leader reading under gevent (docs/decisions/0053): the one-shot watch and the poller on
gevent's loop, and a waiting greenlet that holds up no other. Runs in the gevent lane."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import snodo
from snodo.supervision import green_mode
from tests.support.stdio_support import LATEST, ROOT

pytestmark = pytest.mark.skipif(not green_mode(), reason="gevent's loop: the gevent lane")

RESTART = "tests.servers.restart_runtime:runtime"


def restart_server() -> snodo.Stdio:
    return snodo.Stdio(sys.executable, ["-m", "snodo.server", RESTART])


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    yield read_end, write_end
    os.close(read_end)
    os.close(write_end)


def test_a_greenlet_waiting_on_one_server_holds_up_no_call_on_another() -> None:
    """One greenlet waits 3 s for a slow tool; another makes 50 calls on a second server
    meanwhile. A reading greenlet that blocked the process in ``poll`` would hold each of those
    calls up to 200 ms (10 s in all)."""
    import gevent

    with (
        snodo.connect(
            restart_server(), protocol=LATEST, timeout=30.0, cwd=str(ROOT)
        ) as slow_client,
        snodo.connect(
            restart_server(), protocol=LATEST, timeout=30.0, cwd=str(ROOT)
        ) as quick_client,
    ):
        quick_client.call_tool("echo", {"text": "warm"})
        arrived = threading.Event()
        waiting = gevent.spawn(
            slow_client.call_tool,
            "slow",
            {"seconds": 3.0},
            progress=lambda params: arrived.set(),
        )
        assert arrived.wait(20.0), "the slow call never reached its server"
        started = time.monotonic()
        for i in range(50):
            answer: Any = quick_client.call_tool("echo", {"text": f"call {i}"})
            assert answer["content"][0]["text"] == f"call {i}"
        took = time.monotonic() - started
        assert not waiting.ready(), f"the 50 calls took {took:.2f} s, past the slow call"
        answer = waiting.get(timeout=20.0)
        assert answer["content"][0]["text"] == "slept"


def test_the_oneshot_watch_fires_once_until_armed_again(pipe: tuple[int, int]) -> None:
    import gevent

    from snodo.transports.green_io import GreenOneshot

    read_end, write_end = pipe
    fired: list[int] = []
    ran = threading.Event()

    def on_ready() -> None:
        fired.append(1)
        ran.set()

    watch = GreenOneshot(read_end, on_ready, lambda callback: callback())
    try:
        os.write(write_end, b"x")
        assert ran.wait(5.0)
        gevent.idle()  # every ready watcher has run: a re-armed watch would fire again
        assert fired == [1]  # still readable, but not re-armed
        watch.disarm()
        ran.clear()
        watch.arm()
        assert ran.wait(5.0)
        assert fired == [1, 1]
        watch.disarm()
        gevent.idle()
        assert fired == [1, 1]
    finally:
        watch.close(1.0)


def test_closing_the_oneshot_watch_waits_for_its_running_callback(
    pipe: tuple[int, int],
) -> None:
    """After close() the descriptor may be closed and its number reused: no callback for it
    may still be running."""
    import gevent

    from snodo.transports.green_io import GreenOneshot

    read_end, write_end = pipe
    entered, release = threading.Event(), threading.Event()
    read: list[bytes] = []

    def on_ready() -> None:
        entered.set()
        release.wait(5.0)
        read.append(os.read(read_end, 16))

    watch = GreenOneshot(read_end, on_ready, lambda callback: callback())
    os.write(write_end, b"data")
    assert entered.wait(5.0)
    closing = gevent.spawn(watch.close, 5.0)
    gevent.idle()
    assert not closing.ready()
    release.set()
    closing.join(5.0)
    assert closing.ready() and read == [b"data"]
    watch.arm()  # closed: never fires again
    os.write(write_end, b"more")
    gevent.idle()
    assert read == [b"data"]


def test_the_poller_answers_poll_0_from_the_kernel_and_waits_on_the_loop(
    pipe: tuple[int, int],
) -> None:
    import gevent

    from snodo.transports.green_io import GreenPoller

    read_end, write_end = pipe
    poller = GreenPoller([read_end])
    assert poller.poll(0) == []
    started = time.monotonic()
    assert poller.poll(50.0) == []  # the timeout, in milliseconds
    assert time.monotonic() - started >= 0.045
    writer = gevent.spawn(os.write, write_end, b"x")  # runs while the poller waits
    events = poller.poll(5000.0)
    writer.join(1.0)
    assert [fd for fd, _ in events] == [read_end]
    assert poller.poll(0) != []  # still unread: the kernel says so at once
    ready = poller.poll(5000.0)  # and a wait on it returns at the loop's next turn
    assert [fd for fd, _ in ready] == [read_end]
