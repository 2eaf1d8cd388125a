"""Timers: tell an actor a message, or run a quick function, after a delay.

One process-wide ``TimerService`` (``default_timers()``), used by the module functions
``send_after`` and ``call_later``: one daemon thread (a greenlet under gevent
monkey-patching) waiting on a heap of deadlines, started on first use and ended after
``idle_timeout`` seconds with nothing pending. It is a *service thread*
(``service_threads()``): shared infrastructure that the tests' leak check ignores.

* ``send_after(ref, message, delay) -> Timer``: tells ``ref`` the message after ``delay``
  seconds unless cancelled. As with Erlang's ``erlang:send_after`` to a pid, a timer for
  a snodo actor is cancelled when that actor ends (at once if it already has), so the
  timer no longer holds the ref and the message. A message whose actor is not running
  at the deadline is dropped; so is one whose bounded inbox is full (the timer thread
  never waits for room; a warning is logged).
* ``call_later(delay, fn) -> Timer``: runs ``fn()`` on the timer thread. It must be
  quick (tell an actor, set an event): every other timer waits behind it. Whatever it
  raises, ``BaseException`` included, is logged and contained.
* ``Timer.cancel() -> bool``: True if this call stopped a timer that had neither fired
  nor been cancelled.

Timers fire in deadline order; timers with equal deadlines fire in the order they were
made. Deadlines use ``time.monotonic``. A timer fires no earlier than its deadline, and
late by however long the timer thread was busy (or, under gevent, did not get the CPU).

Bounded: at most ``max_pending`` timers (default ``MAX_PENDING_TIMERS``, 1,000,000) may
be pending in one service; one more raises ``TooManyTimers``. Cancelled timers leave the
heap lazily, and the heap is compacted once more than half of it is cancelled, so it
holds at most about twice the pending timers.
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections.abc import Callable
from itertools import count
from typing import Any

import pykka
from pykka import ActorRef
from pykka._envelope import Envelope  # noqa: PLC2701  # Pykka's message carrier (actor.py)

from snodo.log import get_logger
from snodo.supervision.core import add_exit_callback, is_snodo_actor, service_thread
from snodo.supervision.inbox import BaseInbox
from snodo.supervision.reasons import InboxFull, SupervisionError

__all__ = [
    "MAX_PENDING_TIMERS",
    "Timer",
    "TimerService",
    "TooManyTimers",
    "call_later",
    "default_timers",
    "send_after",
]

MAX_PENDING_TIMERS = 1_000_000
"""Default bound on the timers pending in one ``TimerService``."""

_COMPACT_MIN = 64  # do not compact heaps smaller than this
_MAX_WAIT = 3600.0  # longest single wait (a far deadline is waited for in steps)

_PENDING, _FIRED, _CANCELLED = "pending", "fired", "cancelled"

_logger = get_logger("snodo.supervision")


class TooManyTimers(SupervisionError):
    """The timer service already holds its maximum number of pending timers."""


class Timer:
    """One pending ``send_after`` or ``call_later``; ``cancel()`` withdraws it.

    Its ``TimerService`` moves ``state`` from ``"pending"`` to ``"fired"`` or ``"cancelled"``
    (under the service's lock), then calls ``fire()`` or ``release()``; ``unhook`` removes
    the callback on the target actor's end (a ``send_after`` to a snodo actor).
    """

    __slots__ = ("_fn", "_message", "_ref", "_seq", "_service", "deadline", "state", "unhook")

    def __init__(
        self,
        service: TimerService,
        deadline: float,
        seq: int,
        fn: Callable[[], object] | None,
        ref: ActorRef[Any] | None,
        message: Any,
    ) -> None:
        self._service = service
        self.deadline = deadline
        """When it fires, in ``time.monotonic()`` seconds."""
        self._seq = seq
        self._fn = fn
        self._ref = ref
        self._message = message
        self.state = _PENDING
        self.unhook: Callable[[], bool] | None = None

    def __lt__(self, other: Timer) -> bool:
        return (self.deadline, self._seq) < (other.deadline, other._seq)

    def __repr__(self) -> str:
        what = f"send {self._message!r} to {self._ref}" if self._fn is None else repr(self._fn)
        return f"<Timer {self.state} at {self.deadline:.3f}: {what}>"

    @property
    def active(self) -> bool:
        """True while the timer has neither fired nor been cancelled."""
        return self.state == _PENDING

    def cancel(self) -> bool:
        """Withdraw the timer; True if it was pending (it will not fire), else False."""
        return self._service.cancel(self)

    def release(self) -> None:
        """Once it is no longer pending: forget the actor hook and the payload."""
        if self.state == _PENDING:
            return
        unhook, self.unhook = self.unhook, None
        if unhook is not None:
            unhook()
        self._fn = self._ref = self._message = None

    def fire(self) -> None:
        """Once its service marked it fired: run the function or tell the actor (once)."""
        fn, ref, message = self._fn, self._ref, self._message
        self.release()
        if self.state != _FIRED:
            return
        if fn is not None:
            try:
                fn()
            except BaseException:
                _logger.exception("timer function failed", fn=repr(fn))
            return
        if ref is None:
            return
        try:
            inbox = ref.actor_inbox
            if isinstance(inbox, BaseInbox):
                inbox.put(Envelope(message), timeout=0)  # never wait for room
            else:
                ref.tell(message)
        except pykka.ActorDeadError:
            _logger.debug("timer message dropped: actor not running", urn=ref.actor_urn)
        except InboxFull:
            _logger.warning("timer message dropped: inbox full", urn=ref.actor_urn)
        except BaseException:
            _logger.exception("timer message could not be sent", urn=ref.actor_urn)


class TimerService:
    """A heap of deadlines served by one lazily started daemon thread (see module docstring)."""

    def __init__(
        self,
        max_pending: int = MAX_PENDING_TIMERS,
        idle_timeout: float = 60.0,
        name: str = "snodo-timers",
    ) -> None:
        if max_pending < 1 or not idle_timeout > 0:
            msg = "max_pending must be >= 1 and idle_timeout > 0"
            raise ValueError(msg)
        self.max_pending = max_pending
        self.idle_timeout = idle_timeout
        self.name = name
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._heap: list[Timer] = []
        self._pending = 0  # timers in the heap that are still pending
        self._seq = count()
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"TimerService({self.name!r}, pending={self._pending})"

    # -- the API --------------------------------------------------------------------------

    def send_after(self, ref: ActorRef[Any], message: Any, delay: float) -> Timer:
        """Tell ``ref`` ``message`` after ``delay`` seconds unless cancelled (see module)."""
        timer = self._add(delay, None, ref, message)
        if is_snodo_actor(ref):  # a snodo actor: its end cancels the timer
            unhook = add_exit_callback(ref, lambda _reason: self.cancel(timer))
            with self._lock:
                keep = timer.state == _PENDING
                if keep:
                    timer.unhook = unhook
            if not keep:  # it fired or was cancelled meanwhile (the actor had ended, say)
                unhook()
        return timer

    def call_later(self, delay: float, fn: Callable[[], object]) -> Timer:
        """Run ``fn()`` on the timer thread after ``delay`` seconds unless cancelled."""
        return self._add(delay, fn, None, None)

    def pending(self) -> int:
        """How many timers are pending (neither fired nor cancelled)."""
        return self._pending

    def cancel(self, timer: Timer) -> bool:
        """Withdraw ``timer`` (``timer.cancel()``); True if it was pending, else False."""
        with self._lock:
            if timer.state != _PENDING:
                return False
            timer.state = _CANCELLED
            self._pending -= 1
            heap = self._heap
            if len(heap) > _COMPACT_MIN and len(heap) > 2 * self._pending:
                self._heap = [t for t in heap if t.state == _PENDING]
                heapq.heapify(self._heap)
        timer.release()
        return True

    def thread(self) -> threading.Thread | None:
        """The timer thread, if one is running."""
        return self._thread

    def shutdown(self, timeout: float = 5.0) -> bool:
        """Cancel every pending timer and end the thread; True if it ended within ``timeout``.

        A later ``send_after``/``call_later`` starts a new thread.
        """
        with self._lock:
            thread, self._thread = self._thread, None
            dropped = [t for t in self._heap if t.state == _PENDING]
            for timer in dropped:
                timer.state = _CANCELLED
            self._heap.clear()
            self._pending = 0
            self._cond.notify_all()
        for timer in dropped:
            timer.release()
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        return not thread.is_alive()

    # -- inside ---------------------------------------------------------------------------

    def _add(
        self, delay: float, fn: Callable[[], object] | None, ref: ActorRef[Any] | None, message: Any
    ) -> Timer:
        if not (isinstance(delay, (int, float)) and math.isfinite(delay) and delay >= 0):
            msg = f"delay must be a finite number of seconds >= 0, not {delay!r}"
            raise ValueError(msg)
        start: threading.Thread | None = None
        with self._lock:
            if self._pending >= self.max_pending:
                msg = f"{self.name}: {self.max_pending} timers are already pending"
                raise TooManyTimers(msg)
            timer = Timer(self, time.monotonic() + delay, next(self._seq), fn, ref, message)
            heapq.heappush(self._heap, timer)
            self._pending += 1
            if self._thread is None:
                start = self._thread = service_thread(self._run, self.name)
            elif self._heap[0] is timer:
                self._cond.notify()  # a new earliest deadline
        if start is not None:
            try:
                self._start(start)
            except BaseException:
                self.cancel(timer)
                raise
        return timer

    def _start(self, thread: threading.Thread) -> None:
        """Start the timer thread; if it cannot start, it is not the timer thread (and raise)."""
        try:
            thread.start()
        except BaseException:
            with self._lock:
                if self._thread is thread:
                    self._thread = None
            raise

    def _next(self, me: threading.Thread) -> Timer | None:
        """Wait for the next due timer (marked fired); None when this thread must end."""
        with self._lock:
            idle_until: float | None = None
            while self._thread is me:
                heap = self._heap
                while heap and heap[0].state != _PENDING:
                    heapq.heappop(heap)
                now = time.monotonic()
                if heap:
                    idle_until = None
                    wait = heap[0].deadline - now
                    if wait <= 0:
                        timer = heapq.heappop(heap)
                        timer.state = _FIRED
                        self._pending -= 1
                        return timer
                else:
                    if idle_until is None:
                        idle_until = now + self.idle_timeout
                    wait = idle_until - now
                    if wait <= 0:
                        self._thread = None
                        return None
                self._cond.wait(min(wait, _MAX_WAIT))
            return None

    def _run(self) -> None:
        me = threading.current_thread()
        try:
            while True:
                timer = self._next(me)
                if timer is None:
                    return
                timer.fire()
        finally:
            self._replace(me)

    def _replace(self, me: threading.Thread) -> None:
        """The thread ``me`` is ending: if it still was the timer thread, start another."""
        start: threading.Thread | None = None
        with self._lock:
            if self._thread is me:  # ended by an exception thrown into it (gevent's kill)
                self._thread = None
                if self._pending:
                    start = self._thread = service_thread(self._run, self.name)
        if start is not None:
            _logger.error("timer thread ended unexpectedly; starting another", service=self.name)
            try:
                self._start(start)
            except BaseException:
                _logger.exception("could not restart the timer thread", service=self.name)


_default_lock = threading.Lock()
_default: TimerService | None = None


def default_timers() -> TimerService:
    """The process-wide timer service (made on first use)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = TimerService()
    return _default


def send_after(ref: ActorRef[Any], message: Any, delay: float) -> Timer:
    """Tell ``ref`` ``message`` after ``delay`` seconds, unless cancelled (default service)."""
    return default_timers().send_after(ref, message, delay)


def call_later(delay: float, fn: Callable[[], object]) -> Timer:
    """Run the quick ``fn()`` on the timer thread after ``delay`` seconds (default service)."""
    return default_timers().call_later(delay, fn)
