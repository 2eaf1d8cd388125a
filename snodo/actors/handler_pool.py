"""``HandlerPool``: one pooled actor per connection that runs the handlers of server requests.

A server-to-client request (sampling, elicitation, roots) is answered by the client's input
handler, which may take long: each runs in a task of its own (a thread, or a greenlet under
gevent), at most ``limit`` at once (the seed's ``max_server_requests``); one more is refused at
once (the transport answers it -32603). The actor is a child of the connections supervisor;
closing the connection stops it, and the tasks still running are interrupted
(``snodo.interruptible``).

The actor decides (the bound, what runs; one message type, :class:`RunHandler`); the tasks it
started are listed in a :class:`HandlerTasks` it shares with the transport, which reads it to know whether it is called
from inside a handler and joins them (bounded) when it closes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from snodo.interruptible import Task, TaskCancelled
from snodo.log import get_logger
from snodo.supervision.pooled import PooledActor

__all__ = ["HandlerPool", "HandlerTasks", "RunHandler"]

_log = get_logger("snodo.handlers")


@dataclass(frozen=True, slots=True)
class RunHandler:
    """Run ``work`` in a task of its own; call ``refuse()`` instead at the bound (both quick to
    call: ``refuse`` must not block)."""

    work: Callable[[], None]
    refuse: Callable[[], None]


class HandlerTasks:
    """The handler tasks running now: written by the pool actor, read by the transport."""

    __slots__ = ("_lock", "_tasks")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: set[Task] = set()

    def add(self, task: Task) -> None:
        with self._lock:
            self._tasks.add(task)

    def discard(self, task: Task) -> None:
        with self._lock:
            self._tasks.discard(task)

    def __len__(self) -> int:
        return len(self._tasks)

    def snapshot(self) -> list[Task]:
        with self._lock:
            return list(self._tasks)

    def is_running_here(self) -> bool:
        """True when called from one of the handler tasks."""
        with self._lock:
            return any(task.is_current() for task in self._tasks)

    def interrupt_and_join(self, timeout: float) -> None:
        """Interrupt every running task and wait (at most ``timeout`` in all) for them."""
        with self._lock:
            running = list(self._tasks)
        for task in running:
            task.interrupt()
        deadline = time.monotonic() + timeout
        for task in running:
            task.join(max(0.0, deadline - time.monotonic()))


class HandlerPool(PooledActor):
    """At most ``limit`` server-request handlers at once (see the module docstring)."""

    def __init__(self, limit: int, tasks: HandlerTasks) -> None:
        super().__init__()
        self._limit = limit
        self._tasks = tasks
        self._closed = False

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, RunHandler):
            self._run(message)
        return None

    def on_stop(self) -> None:
        self._closed = True
        # Interrupt only: joining would hold a pool worker; the transport joins (bounded).
        for task in self._tasks.snapshot():
            task.interrupt()

    def _run(self, message: RunHandler) -> None:
        if self._closed or len(self._tasks) >= self._limit:
            message.refuse()
            return
        box: list[Task] = []
        started = threading.Event()

        def run() -> None:
            started.wait(5.0)
            try:
                message.work()
            except TaskCancelled:
                pass
            except Exception:
                _log.exception("a server-request handler task failed")

        task = Task(run, "snodo-server-request", on_end=lambda: self._tasks.discard(box[0]))
        box.append(task)
        self._tasks.add(task)
        started.set()
