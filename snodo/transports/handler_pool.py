"""A bounded pool for the handlers of requests a server sends the client over stdio: each runs
in a task of its own (a thread, or a greenlet under gevent), at most ``limit`` at once, and
those still running when the connection closes are interrupted (seed "Transport behavior •
Stdio": ``max_server_requests``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from snodo.interruptible import Task, TaskCancelled

__all__ = ["HandlerPool"]


class HandlerPool:
    """At most ``limit`` server-request handlers at once, each a task of its own; interrupted
    when the connection closes."""

    __slots__ = ("_closed", "_limit", "_lock", "_running")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._running: set[Task] = set()
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[[], None]) -> bool:
        """Run ``fn`` in a task of its own; False (nothing runs) at the bound or once shut."""
        with self._lock:
            if self._closed or len(self._running) >= self._limit:
                return False
            box: list[Task] = []
            started = threading.Event()

            def run() -> None:
                started.wait(5.0)
                try:
                    fn()
                except TaskCancelled:
                    pass
                finally:
                    with self._lock:
                        self._running.discard(box[0])

            task = Task(run, "snodo-server-request")
            box.append(task)
            self._running.add(task)
        started.set()
        return True

    def is_running_here(self) -> bool:
        """True when called from one of the pool's own tasks."""
        with self._lock:
            return any(task.is_current() for task in self._running)

    def shutdown(self, timeout: float = 2.0) -> None:
        """Refuse new work, interrupt the running tasks and wait (bounded) for them."""
        with self._lock:
            self._closed = True
            running = list(self._running)
        for task in running:
            task.interrupt()
        deadline = time.monotonic() + timeout
        for task in running:
            task.join(max(0.0, deadline - time.monotonic()))
