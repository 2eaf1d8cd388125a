"""snodo.supervision timers: send_after, call_later, Timer.cancel, one bounded service.

Rules under test come from the brief of the timer service (deadline order, cancel,
dropped sends to dead actors, a bounded number of pending timers, contained errors,
one service thread that stops cleanly) and Erlang's ``erlang:send_after`` (a timer to
a process is cancelled when that process ends).
"""

from __future__ import annotations

import queue
import random
import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import pykka
import pytest
from pykka import ActorRef

from snodo.supervision import (
    MAX_PENDING_TIMERS,
    Actor,
    PooledActor,
    Timer,
    TimerService,
    TooManyTimers,
    call,
    call_later,
    default_timers,
    green_mode,
    join,
    kill,
    send_after,
    service_threads,
    stop,
)
from snodo.supervision.core import proc_of

WAIT = 5.0


class Inbox(PooledActor):
    """Puts every message it gets on a queue."""

    def __init__(self, out: queue.Queue[Any]) -> None:
        super().__init__()
        self.out = out

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, tuple) and message[0] == "block":
            message[1].set()
            message[2].wait(WAIT)
            return None
        self.out.put(message)
        return None


class ThreadInbox(Actor):
    def __init__(self, out: queue.Queue[Any]) -> None:
        super().__init__()
        self.out = out

    def on_receive(self, message: Any) -> Any:
        self.out.put(message)


def active(timer: Timer) -> bool:
    """``timer.active``, read afresh (a function, so a type checker does not narrow it)."""
    return timer.active


@pytest.fixture
def service() -> Iterator[TimerService]:
    """A private timer service, shut down (and checked) after the test."""
    svc = TimerService(name="test-timers")
    yield svc
    assert svc.shutdown(WAIT)
    assert svc.thread() is None


@pytest.fixture
def out() -> queue.Queue[Any]:
    return queue.Queue(maxsize=10_000)


def test_call_later_fires_in_deadline_order(service: TimerService, out: queue.Queue[Any]) -> None:
    """Timers fire by deadline, not by the order they were made."""
    delays = [0.01 * i for i in range(1, 11)]
    random.Random(7).shuffle(delays)
    for delay in delays:
        service.call_later(delay, partial(out.put, delay))
    fired = [out.get(timeout=WAIT) for _ in delays]
    assert fired == sorted(delays)
    assert service.pending() == 0


def test_many_timers_with_close_deadlines_keep_order_and_equal_delays_keep_creation_order(
    service: TimerService, out: queue.Queue[Any]
) -> None:
    n = 2000
    rng = random.Random(3)
    timers = [service.call_later(rng.random() * 0.05, partial(out.put, i)) for i in range(n)]
    fired = [out.get(timeout=WAIT) for _ in range(n)]
    assert fired == sorted(range(n), key=lambda i: (timers[i].deadline, i))
    same = [service.call_later(0.0, partial(out.put, ("same", i))) for i in range(50)]
    assert [out.get(timeout=WAIT) for _ in same] == [("same", i) for i in range(50)]


def test_cancel_withdraws_a_timer_once(service: TimerService, out: queue.Queue[Any]) -> None:
    early = service.call_later(0.02, lambda: out.put("cancelled one fired"))
    late = service.call_later(0.05, lambda: out.put("late"))
    assert active(early)
    assert early.cancel() is True
    assert early.cancel() is False
    assert not active(early)
    assert out.get(timeout=WAIT) == "late"  # the earlier deadline has passed by now
    assert out.empty()
    assert late.cancel() is False  # it has fired
    assert not active(late)
    assert service.pending() == 0


def test_send_after_tells_pooled_and_thread_actors(out: queue.Queue[Any]) -> None:
    pooled, threaded = Inbox.start(out), ThreadInbox.start(out)
    t1 = send_after(pooled, "to pooled", 0.01)
    t2 = send_after(threaded, "to thread", 0.02)
    assert out.get(timeout=WAIT) == "to pooled"
    assert out.get(timeout=WAIT) == "to thread"
    assert not active(t1) and not active(t2)
    assert default_timers().thread() in service_threads()
    assert stop(pooled, timeout=WAIT) and stop(threaded, timeout=WAIT)


def test_send_after_to_a_dead_actor_is_dropped(
    service: TimerService, out: queue.Queue[Any]
) -> None:
    """As erlang:send_after: a timer to an actor ends with it; nothing fails at the deadline."""
    dead = Inbox.start(out)
    assert stop(dead, timeout=WAIT)
    at_once = service.send_after(dead, "never", 0.0)
    assert not active(at_once)  # cancelled at once: the actor had ended

    doomed = Inbox.start(out)
    pending = service.send_after(doomed, "never either", 0.05)
    assert active(pending) and service.pending() == 1
    kill(doomed)
    assert join(doomed, WAIT)
    assert not active(pending)  # cancelled by the actor's end
    assert service.pending() == 0
    assert not proc_of(doomed).callbacks

    plain = pykka.ThreadingActor.start()  # not a snodo actor: dropped at the deadline
    plain.stop()
    service.send_after(plain, "dropped", 0.0)
    service.call_later(0.01, lambda: out.put("still serving"))
    assert out.get(timeout=WAIT) == "still serving"
    assert out.empty()


def test_a_fired_send_after_leaves_no_exit_callback_behind(
    service: TimerService, out: queue.Queue[Any]
) -> None:
    target = Inbox.start(out)
    timer = service.send_after(target, "hi", 0.0)
    assert out.get(timeout=WAIT) == "hi"
    call(target, lambda actor: None, WAIT)
    assert not active(timer)
    assert not proc_of(target).callbacks
    cancelled = service.send_after(target, "no", 10.0)
    assert cancelled.cancel()
    assert not proc_of(target).callbacks
    assert stop(target, timeout=WAIT)


def test_send_after_into_a_full_inbox_drops_without_blocking_the_timer_thread(
    service: TimerService, out: queue.Queue[Any]
) -> None:
    class Small(Inbox):
        inbox_size = 1
        inbox_put_timeout = 60.0  # a sender that waited for room would stall the test

    target = Small.start(out)
    running, release = threading.Event(), threading.Event()
    target.tell(("block", running, release))
    assert running.wait(WAIT)
    target.tell("fills the inbox")
    service.send_after(target, "dropped", 0.0)
    service.call_later(0.0, lambda: out.put("next timer"))
    assert out.get(timeout=WAIT) == "next timer"
    release.set()
    assert call(target, lambda actor: None, WAIT) is None
    assert out.get(timeout=WAIT) == "fills the inbox"
    assert out.empty()
    assert stop(target, timeout=WAIT)


@pytest.mark.parametrize("exc", [ValueError("bad timer"), SystemExit(3)], ids=repr)
def test_call_later_errors_are_logged_and_contained(
    exc: BaseException,
    service: TimerService,
    out: queue.Queue[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    def boom() -> None:
        raise exc

    service.call_later(0.0, boom)
    service.call_later(0.01, lambda: out.put("after"))
    assert out.get(timeout=WAIT) == "after"
    assert "timer function failed" in caplog.text
    assert repr(exc) in caplog.text or type(exc).__name__ in caplog.text


def test_pending_timers_are_bounded(out: queue.Queue[Any]) -> None:
    assert MAX_PENDING_TIMERS == 1_000_000
    svc = TimerService(max_pending=2, name="bounded-timers")
    first = svc.call_later(10.0, lambda: None)
    svc.call_later(10.0, lambda: None)
    with pytest.raises(TooManyTimers, match="2 timers are already pending"):
        svc.call_later(0.0, lambda: None)
    assert svc.pending() == 2
    assert first.cancel()
    svc.call_later(0.0, lambda: out.put("room again"))
    assert out.get(timeout=WAIT) == "room again"
    assert svc.shutdown(WAIT)


def test_cancelled_timers_do_not_pile_up_in_the_heap(service: TimerService) -> None:
    timers = [service.call_later(60.0, lambda: None) for _ in range(1000)]
    for timer in timers[:900]:
        assert timer.cancel()
    assert service.pending() == 100
    assert len(service._heap) <= 2 * service.pending() + 1


def test_a_far_deadline_does_not_disturb_the_service(
    service: TimerService, out: queue.Queue[Any]
) -> None:
    """A deadline beyond what one wait can take (TIMEOUT_MAX) is waited for in steps."""
    far = service.call_later(1e12, lambda: out.put("far"))
    service.call_later(0.0, lambda: out.put("near"))
    assert out.get(timeout=WAIT) == "near"
    assert active(far)
    assert far.cancel()


@pytest.mark.parametrize("delay", [-1.0, float("nan"), float("inf")])
def test_delays_must_be_finite_and_not_negative(service: TimerService, delay: float) -> None:
    with pytest.raises(ValueError, match="delay"):
        service.call_later(delay, lambda: None)
    assert service.pending() == 0


def test_shutdown_cancels_pending_timers_and_ends_the_thread(out: queue.Queue[Any]) -> None:
    svc = TimerService(name="shutdown-timers")
    timer = svc.call_later(60.0, lambda: out.put("never"))
    thread = svc.thread()
    assert thread is not None and thread.is_alive() and thread.daemon
    assert thread in service_threads()
    assert svc.shutdown(WAIT)
    assert not thread.is_alive()
    assert not active(timer)
    assert timer.cancel() is False
    svc.call_later(0.0, lambda: out.put("restarted"))  # usable again: a new thread
    assert out.get(timeout=WAIT) == "restarted"
    assert svc.shutdown(WAIT)
    assert out.empty()


def test_the_timer_thread_ends_when_idle(out: queue.Queue[Any]) -> None:
    svc = TimerService(idle_timeout=0.05, name="idle-timers")
    svc.call_later(0.0, lambda: out.put("fired"))
    thread = svc.thread()
    assert thread is not None
    assert out.get(timeout=WAIT) == "fired"
    thread.join(WAIT)
    assert not thread.is_alive()
    assert svc.thread() is None
    svc.call_later(0.0, lambda: out.put("again"))
    assert out.get(timeout=WAIT) == "again"
    assert svc.shutdown(WAIT)


def test_call_later_runs_on_the_timer_thread(service: TimerService, out: queue.Queue[Any]) -> None:
    def where() -> None:
        if green_mode():
            import gevent

            out.put(isinstance(gevent.getcurrent(), gevent.Greenlet))
        out.put(threading.current_thread())

    service.call_later(0.0, where)
    if green_mode():
        assert out.get(timeout=WAIT) is True  # a greenlet under gevent
    assert out.get(timeout=WAIT) is service.thread()


def test_module_functions_use_the_default_service(out: queue.Queue[Any]) -> None:
    svc = default_timers()
    assert svc is default_timers()
    timer = call_later(0.0, lambda: out.put("default"))
    assert out.get(timeout=WAIT) == "default"
    assert not active(timer)
    target: ActorRef[Any] = Inbox.start(out)
    assert send_after(target, "x", 30.0).cancel()
    assert stop(target, timeout=WAIT)
