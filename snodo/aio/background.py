"""One shared asyncio event loop in a daemon thread, for sync code that drives AsyncClients.

The actor proxy (``snodo.actors.client_proxy``) runs every connection's coroutines here, so a
process holding many proxied connections has one loop thread, not one per connection. The
loop is reference-counted like the stdio I/O hub: :func:`acquire` starts the "snodo-aio"
thread on first use, :func:`release` stops and joins it (within a bound) when the last user is
gone, so no thread outlives the last client.

It is always the default asyncio loop: uvloop is for applications that own their loop (run
``snodo.aio`` on it directly); a private background loop gains nothing from it, and one kind of
loop keeps shutdown and gevent behaviour the same everywhere.
"""

from __future__ import annotations

import asyncio
import threading

from snodo.log import get_logger

__all__ = ["JOIN_WAIT", "START_WAIT", "BackgroundLoop", "acquire", "release", "shared"]

_log = get_logger("snodo.aio.background")

#: Longest ``acquire`` waits for a new loop thread to run.
START_WAIT = 5.0
#: Longest ``release`` waits for the loop thread to end (its leftover tasks get a share of it).
JOIN_WAIT = 5.0
#: Longest the ending loop lets cancelled leftover tasks unwind.
_DRAIN_WAIT = 1.0


class BackgroundLoop:
    """A reference-counted event loop running in its own daemon thread."""

    def __init__(self, name: str = "snodo-aio") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._users = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def users(self) -> int:
        """How many ``acquire`` calls have not been released yet."""
        return self._users

    @property
    def thread(self) -> threading.Thread | None:
        """The loop thread, while there is one."""
        return self._thread

    def acquire(self) -> asyncio.AbstractEventLoop:
        """The running loop, started on first use; pair every call with :meth:`release`."""
        with self._lock:
            self._users += 1
            if self._loop is not None:
                return self._loop
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            thread = threading.Thread(target=_run, args=(loop, ready), name=self._name, daemon=True)
            try:
                thread.start()
            except BaseException:
                self._users -= 1
                loop.close()
                raise
            self._loop, self._thread = loop, thread
        if not ready.wait(START_WAIT):
            _log.warning("the background loop did not start in time", name=self._name)
        return loop

    def release(self, timeout: float = JOIN_WAIT) -> None:
        """Drop one use; the last one stops the loop and waits (``timeout``) for its thread."""
        with self._lock:
            if self._users <= 0:
                return
            self._users -= 1
            if self._users:
                return
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is threading.current_thread():
            return  # released from a callback on the loop: it ends once that returns
        thread.join(timeout)
        if thread.is_alive():
            _log.warning("the background loop thread did not end in time", name=self._name)


def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    """The loop thread: run until stopped, then cancel what is left (bounded) and close."""
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    try:
        loop.run_forever()
        # Work submitted after the last release ran nowhere: let it start, then cancel it, so
        # every concurrent future made with run_coroutine_threadsafe ends (cancelled).
        loop.run_until_complete(_cancel_leftovers())
        loop.run_until_complete(loop.shutdown_asyncgens())
    except Exception:
        _log.exception("the background loop ended badly")
    finally:
        asyncio.set_event_loop(None)
        loop.close()


async def _cancel_leftovers() -> None:
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=_DRAIN_WAIT)


_background = BackgroundLoop()


def shared() -> BackgroundLoop:
    """The process-wide background loop."""
    return _background


def acquire() -> asyncio.AbstractEventLoop:
    """The process-wide background loop, started on first use (see :class:`BackgroundLoop`)."""
    return _background.acquire()


def release(timeout: float = JOIN_WAIT) -> None:
    """Drop one use of the process-wide loop; the last one stops its thread."""
    _background.release(timeout)
