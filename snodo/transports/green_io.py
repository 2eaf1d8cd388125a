"""Readiness on gevent's loop, for leader reading under monkey-patching (docs/decisions/0053).

Two pieces the I/O hub hands out when the application is patched, in place of an epoll
``EPOLLONESHOT`` registration and ``select.poll``: a one-shot readiness watch that can be
disarmed and re-armed without waking any greenlet, and a poller a reading greenlet waits on
without going through the hub greenlet. Both use libev watchers of the hub of the thread that
made them (under monkey-patching, the main thread: every "thread" is one of its greenlets), and
are used from that thread only. Imported only when gevent is in use.
"""

from __future__ import annotations

import select
from collections.abc import Callable, Sequence
from typing import Any

import gevent
from gevent.event import Event
from gevent.hub import Waiter, get_hub
from gevent.monkey import get_original

__all__ = ["GreenOneshot", "GreenPoller"]

_READ = 1  # libev's EV_READ
_os_poll: Callable[[], Any] = get_original("select", "poll")


class GreenOneshot:
    """Calls ``on_ready()`` in a greenlet of its own when ``fd`` is readable, then not again
    until ``arm()``; ``disarm()`` stops it firing (each is one libev call, no switch)."""

    def __init__(self, fd: int, on_ready: Callable[[], None], run: Callable[..., None]) -> None:
        self._watcher = get_hub().loop.io(fd, _READ)
        self._on_ready = on_ready
        self._run_callback = run  # the hub's, which logs what a callback raises
        self._runner: Any = None  # the greenlet running on_ready, if one is
        self._idle: Event | None = None  # made by close() when it waits for the runner
        self._closed = False
        self.arm()

    def arm(self) -> None:
        if not self._closed:
            self._watcher.start(self._fired)

    def disarm(self) -> None:
        self._watcher.stop()

    def close(self, timeout: float) -> None:
        """Stop for good; when this returns ``on_ready`` is not running (unless it is the
        caller) and will not run."""
        self._closed = True
        self._watcher.stop()
        self._watcher.close()
        runner = self._runner
        if runner is not None and runner is not gevent.getcurrent():
            self._idle = Event()
            self._idle.wait(timeout)

    def _fired(self) -> None:
        # On the gevent hub, which must not block: the callback takes locks, so it gets a
        # greenlet.
        self._watcher.stop()
        gevent.spawn_raw(self._run)

    def _run(self) -> None:
        if self._closed:
            return
        self._runner = gevent.getcurrent()
        try:
            self._run_callback(self._on_ready)
        finally:
            self._runner = None
            if self._idle is not None:
                self._idle.set()


class GreenPoller:
    """``select.poll`` for reading ``fds``, waiting on gevent's loop: ``poll(0)`` asks the
    kernel (no switch), a wait sleeps on watchers made once. The reading caller always polls
    with 0 first, so a wait does not ask the kernel again."""

    def __init__(self, fds: Sequence[int]) -> None:
        self._hub = get_hub()
        self._watchers = [(self._hub.loop.io(fd, _READ), fd) for fd in fds]
        self._kernel = _os_poll()
        for fd in fds:
            self._kernel.register(fd, select.POLLIN)

    def poll(self, timeout: float | None = None) -> list[tuple[int, int]]:
        """What is readable, waiting up to ``timeout`` milliseconds (None: no bound)."""
        if timeout == 0:
            events: list[tuple[int, int]] = self._kernel.poll(0)
            return events
        waiter = Waiter(self._hub)
        switch = waiter.switch
        for watcher, fd in self._watchers:
            watcher.start(switch, fd)
        timer = None
        if timeout is not None:
            timer = self._hub.loop.timer(max(timeout, 0.0) / 1000.0)
            timer.start(switch, None)
        try:
            ready = waiter.get()
        finally:
            for watcher, _ in self._watchers:
                watcher.stop()
            if timer is not None:
                timer.stop()
                timer.close()
        return [] if ready is None else [(ready, select.POLLIN)]
