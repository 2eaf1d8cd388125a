"""The threads that do the blocking work of async clients, a bounded few for the whole process.

Connecting, closing and opening a subscription block (a process starts, a session is deleted,
an acknowledgement is awaited), and so does every call on a transport that offers only the
blocking ``request`` (direct, custom transports): they run here, never on the event loop. At
most :data:`MAX_WORKERS` threads, started on demand; they end when no async client holds the
pool (and after :data:`IDLE_EXIT` idle for work run without one), so a program that closed its
clients holds none.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from snodo.protocol import errors

__all__ = ["IDLE_EXIT", "MAX_QUEUED", "MAX_WORKERS", "WorkerPool", "workers"]

#: Threads at most (a blocking call in flight on each; more calls wait their turn).
MAX_WORKERS = 32
#: Jobs waiting for a thread at most; beyond, a job is refused with -32000.
MAX_QUEUED = 10_000
#: A thread idle this long ends when no client holds the pool (a job run without a holder).
IDLE_EXIT = 1.0

_STOP = None


class WorkerPool:
    """Runs blocking jobs on a bounded set of threads while someone holds the pool."""

    def __init__(self, size: int = MAX_WORKERS) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._jobs: queue.Queue[tuple[Callable[[], Any], Future[Any]] | None] = queue.Queue(
            MAX_QUEUED
        )
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting for a job
        self._waiting = 0  # jobs queued, not yet taken
        self._stopping = 0  # stop marks queued, not yet taken
        self._holders = 0

    def hold(self) -> None:
        """One more user (an async client): the threads live while anyone holds the pool."""
        with self._lock:
            self._holders += 1

    def release(self) -> None:
        """One user fewer; the last one lets every thread end (after the jobs queued)."""
        with self._lock:
            self._holders -= 1
            if self._holders > 0:
                return
            ending = len(self._threads) - self._stopping
            self._stopping += ending
        for _ in range(ending):
            self._jobs.put(_STOP)

    def run(self, job: Callable[[], Any]) -> Future[Any]:
        """Run ``job`` on a pool thread; its result (or exception) in the returned future."""
        future: Future[Any] = Future()
        with self._lock:
            live = len(self._threads) - self._stopping
            free = self._idle - self._stopping
            self._waiting += 1
            start = self._waiting > free and live < self._size
            if start:
                thread = threading.Thread(target=self._work, name="snodo-aio-worker", daemon=True)
                self._threads.append(thread)
        try:
            self._jobs.put_nowait((job, future))
        except queue.Full:
            with self._lock:
                self._waiting -= 1
            raise errors.connection_error(
                f"{MAX_QUEUED} blocking jobs wait already", cause=("busy",)
            ) from None
        finally:
            if start:
                thread.start()
        return future

    def _work(self) -> None:
        jobs, lock, me = self._jobs, self._lock, threading.current_thread()
        while True:
            with lock:
                self._idle += 1
            try:
                item = jobs.get(timeout=IDLE_EXIT)
            except queue.Empty:
                with lock:
                    self._idle -= 1
                    # Unheld and idle: end, unless a job queued now counts on this thread.
                    if self._holders == 0 and self._waiting <= self._idle - self._stopping:
                        self._threads.remove(me)
                        return
                continue
            with lock:
                self._idle -= 1
                if item is _STOP:
                    self._stopping -= 1
                    self._threads.remove(me)
                    return
                self._waiting -= 1
            job, future = item
            if future.set_running_or_notify_cancel():
                try:
                    result = job()
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del item, job, future


_pool = WorkerPool()


def workers() -> WorkerPool:
    """The process's pool."""
    return _pool
