"""Short-lived tasks that can be interrupted: a thread, or a greenlet under gevent.

Handlers of server-to-client requests run as tasks so that closing a connection can stop them.
A greenlet is killed with an ``Exception`` subclass (never ``GreenletExit``, which Pykka treats as
fatal). A thread cannot be killed; it gets an asynchronous exception, delivered when it next runs
Python code (a thread blocked inside a C call is interrupted when that call returns).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable
from typing import Any

from snodo.supervision import green_mode

__all__ = ["Task", "TaskCancelled"]


class TaskCancelled(Exception):
    """Raised inside a task whose owner (a closing connection) stopped it."""


class _Absorbed(BaseException):
    """Takes the place of a pending ``TaskCancelled``, and is raised and caught at once."""


def _absorb_async_exception() -> None:
    """Drop the calling thread's pending asynchronous exception, if any, by replacing it with
    one raised here. Not ``PyThreadState_SetAsyncExc(id, NULL)``: on CPython 3.11 that leaves
    the interpreter's eval breaker set for good, and then any trace or profile function
    (coverage, pdb, cProfile) loops forever on the next call (docs/decisions/0054)."""
    try:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(threading.get_ident()), ctypes.py_object(_Absorbed)
        )
        for _ in range(1_000_000):  # raised by then: at the next call or backward jump
            pass
    except _Absorbed:
        return


class Task:
    """A running function with ``interrupt``, ``join`` and ``is_alive``.

    ``on_end()`` runs in the task once ``fn`` has ended, however it ended; no interrupt lands
    after ``fn``: a later one is refused and a pending one cleared, so the task's bookkeeping
    in ``on_end`` cannot be cut short.
    """

    def __init__(
        self, fn: Callable[[], None], name: str, on_end: Callable[[], None] | None = None
    ) -> None:
        self._glet: Any = None
        self._thread: threading.Thread | None = None
        self._ending = threading.Lock()
        self._ended = False
        self._sent = False  # an asynchronous exception was sent to the thread
        if green_mode():
            import gevent

            self._glet = gevent.spawn(self._body, fn, on_end)
            self._glet.name = name
        else:
            self._thread = threading.Thread(
                target=self._body, args=(fn, on_end), name=name, daemon=True
            )
            self._thread.start()

    def _body(self, fn: Callable[[], None], on_end: Callable[[], None] | None) -> None:
        try:
            fn()
        except TaskCancelled:
            pass  # interrupted: the task ends
        finally:
            self._settle()
            if on_end is not None:
                on_end()

    def _settle(self) -> None:
        """Refuse later interrupts and absorb one sent but not yet raised."""
        while True:
            try:
                with self._ending:
                    self._ended = True
                    sent = self._sent
                if sent:
                    _absorb_async_exception()
                return
            except TaskCancelled:
                continue  # raised before it could be absorbed

    def is_alive(self) -> bool:
        if self._glet is not None:
            return not self._glet.dead
        assert self._thread is not None
        return self._thread.is_alive()

    def is_current(self) -> bool:
        """True when called from inside this task."""
        if self._glet is not None:
            import gevent

            return gevent.getcurrent() is self._glet
        return self._thread is threading.current_thread()

    def interrupt(self) -> None:
        """Raise ``TaskCancelled`` inside the task (best effort for threads)."""
        with self._ending:
            if self._ended:
                return
            if self._glet is not None:
                self._glet.kill(TaskCancelled, block=False)
                return
            assert self._thread is not None
            ident = self._thread.ident
            if ident is None or not self._thread.is_alive() or "PyPy" in sys.version:
                return
            self._sent = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(ident), ctypes.py_object(TaskCancelled)
            )

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the end; True when it has ended."""
        if self._glet is not None:
            self._glet.join(timeout)
            return bool(self._glet.dead)
        assert self._thread is not None
        self._thread.join(timeout)
        return not self._thread.is_alive()
