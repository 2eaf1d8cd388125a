"""Owners and owner watches: threads, greenlets and actors that end.

Rules: architecture §3 (the owner of a client or subscription is the thread, greenlet or
actor that opened it; when the owner ends, what it owns closes).
"""

from __future__ import annotations

import gc
import queue
import sys
import threading
from typing import Any

import pytest

from snodo.supervision import (
    KILLED,
    NORMAL,
    SHUTDOWN,
    Actor,
    Crash,
    Owner,
    Reason,
    call,
    current_owner,
    green_mode,
    owner_of,
    stop,
    watch,
)

WAIT = 5.0


def recorder() -> tuple[queue.Queue[Reason], Any]:
    fired: queue.Queue[Reason] = queue.Queue(maxsize=10)
    return fired, fired.put


def test_green_mode_follows_gevent_patching() -> None:
    monkey = sys.modules.get("gevent.monkey")
    expected = monkey is not None and monkey.is_module_patched("threading")
    assert green_mode() is expected


def test_watch_fires_when_the_owning_thread_exits_and_not_before() -> None:
    fired, callback = recorder()
    registered, release = threading.Event(), threading.Event()
    owners: list[Owner] = []

    def body() -> None:
        owner = current_owner()
        owners.append(owner)
        watch(owner, callback)
        registered.set()
        release.wait(WAIT)

    t = threading.Thread(target=body)
    t.start()
    assert registered.wait(WAIT)
    gc.collect()  # the sentinel must survive a collection while its thread lives
    assert fired.empty()
    assert owners[0].is_alive()
    assert owners[0].kind == ("greenlet" if green_mode() else "thread")
    release.set()
    assert fired.get(timeout=WAIT) == NORMAL
    t.join(WAIT)
    assert not owners[0].is_alive()
    assert fired.empty()  # once


def test_cancelled_watch_never_fires_and_watching_an_ended_owner_fires_at_once() -> None:
    fired, callback = recorder()
    cancelled, cancelled_cb = recorder()
    owners: list[Owner] = []

    def body() -> None:
        owner = current_owner()
        owners.append(owner)
        w = watch(owner, cancelled_cb)
        watch(owner, callback)
        assert w.cancel() is True
        assert w.cancel() is False

    t = threading.Thread(target=body)
    t.start()
    assert fired.get(timeout=WAIT) == NORMAL
    t.join(WAIT)
    assert cancelled.empty()
    late, late_cb = recorder()
    w = watch(owners[0], late_cb)
    assert late.get(timeout=WAIT) == NORMAL
    assert not w.active


def test_current_thread_owner_is_stable_and_alive() -> None:
    """The test's own thread: same owner twice, and a watch on it stays quiet."""
    a, b = current_owner(), current_owner()
    assert a == b and hash(a) == hash(b)
    fired, callback = recorder()
    w = watch(a, callback)
    gc.collect()
    assert fired.empty() and w.active
    assert w.cancel()


@pytest.mark.parametrize("ending", ["stop", "crash"])
def test_watch_fires_when_the_owning_actor_stops_or_crashes(ending: str) -> None:
    class Opener(Actor):
        def on_receive(self, message: Any) -> Any:
            if isinstance(message, BaseException):
                raise message
            return current_owner()

    ref = Opener.start()
    owner = call(ref, "who owns me?", WAIT)
    assert owner.kind == "actor" and owner.target is ref
    assert owner == owner_of(ref)
    fired, callback = recorder()
    watch(owner, callback)
    call(ref, "still alive", WAIT)
    assert fired.empty()
    expected: Reason
    if ending == "stop":
        expected = SHUTDOWN
        assert stop(ref, timeout=WAIT)
    else:
        error = ValueError("owner crashed")
        expected = Crash(error)
        ref.tell(error)
    assert fired.get(timeout=WAIT) == expected
    assert not owner.is_alive()
    late, late_cb = recorder()
    watch(owner, late_cb)  # an ended actor: at once
    assert late.get(timeout=WAIT) == expected


@pytest.mark.skipif(not green_mode(), reason="gevent mode only")
@pytest.mark.parametrize("ending", ["return", "raise", "kill"])
def test_watch_fires_when_the_owning_greenlet_ends(ending: str) -> None:
    import gevent

    fired, callback = recorder()
    registered, release = gevent.event.Event(), gevent.event.Event()
    error = ValueError("greenlet failed")

    def body() -> None:
        owner = current_owner()
        assert owner.kind == "greenlet" and owner.target is gevent.getcurrent()
        watch(owner, callback)
        registered.set()
        release.wait(WAIT)
        if ending == "raise":
            raise error

    glet = gevent.spawn(body)
    assert registered.wait(WAIT)
    assert fired.empty()
    if ending == "kill":
        glet.kill(block=True, timeout=WAIT)
    else:
        release.set()
    expected = {"return": NORMAL, "raise": Crash(error), "kill": KILLED}[ending]
    assert fired.get(timeout=WAIT) == expected


@pytest.mark.skipif(green_mode(), reason="in gevent mode threads are greenlets")
def test_owner_of_names_the_current_thread_only() -> None:
    assert owner_of(threading.current_thread()) == current_owner()
    other = threading.Thread(target=lambda: None)
    with pytest.raises(ValueError, match="only the current thread"):
        owner_of(other)
    with pytest.raises(TypeError):
        owner_of(42)
