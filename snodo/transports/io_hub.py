"""One shared I/O thread for every stdio connection in the process.

An idle Python thread costs ~16 KiB of RSS; a daemon holding hundreds of stdio servers cannot
afford a reader thread (or two, with stderr) per connection. The hub waits on every registered
descriptor with one selector (gevent's cooperative selector when the application is patched) and
hands the bytes to the connection's callbacks, which run on the hub and must not block. The thread
starts with the first registration and ends when the last descriptor is removed.
"""

from __future__ import annotations

import errno
import os
import select
import selectors
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from snodo.log import get_logger

__all__ = [
    "READ_SIZE",
    "IoHub",
    "Poller",
    "hub",
]

_log = get_logger("snodo.transports.io_hub")

#: Bytes read per readiness event: what a pipe holds. A larger buffer gains nothing and, past
#: glibc's mmap threshold (128 KiB), costs an mmap, mremap and munmap on every read (0052).
READ_SIZE = 64 * 1024


#: epoll flags of a re-armable readiness watch (``watch_oneshot``).
_ONESHOT = getattr(select, "EPOLLIN", 0) | getattr(select, "EPOLLONESHOT", 0)


class Poller(Protocol):
    """What ``IoHub.poller`` returns: ``select.poll``'s wait, in milliseconds."""

    def poll(self, timeout: float | None = ..., /) -> list[tuple[int, int]]: ...


@dataclass(slots=True)
class _Watch:
    on_data: Callable[[bytes], None] | None  # None: readiness only (a pidfd), fires once
    on_eof: Callable[[], None]
    oneshot: bool = False  # readiness, disarmed after each firing until rearm()
    write: bool = False  # room for writing (``watch_writable``), fires once


class IoHub:
    """Reads registered non-blocking descriptors and calls back on the hub thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[str, int, _Watch | None, threading.Event | None]] = []
        self._calls: list[Callable[[], None]] = []
        self._watches: dict[int, _Watch] = {}
        self._thread: threading.Thread | None = None
        self._selector: selectors.BaseSelector | None = None
        self._epoll: Any = None  # the selector's epoll object, when it is one
        self._wake_r, self._wake_w = -1, -1
        self._green: dict[int, Any] = {}  # fd -> its GreenOneshot (under gevent)

    @property
    def supports_oneshot(self) -> bool:
        """True when ``watch_oneshot`` is available: an unpatched epoll selector, or gevent's
        loop (``green``)."""
        return self.green or (
            bool(_ONESHOT)
            and selectors.DefaultSelector is getattr(selectors, "EpollSelector", None)
        )

    @property
    def green(self) -> bool:
        """True when gevent has patched ``selectors``: the hub is a greenlet, and the one-shot
        watches and pollers wait on gevent's loop."""
        return getattr(selectors.DefaultSelector, "__module__", "") == "gevent.selectors"

    def poller(self, fds: Sequence[int]) -> Poller:
        """A poller for reading ``fds`` that does not stall other callers: the kernel's
        ``poll`` on threads, one on gevent's loop under gevent."""
        if self.green:
            from snodo.transports.green_io import GreenPoller

            return GreenPoller(fds)
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        return poller

    def watch(self, fd: int, on_data: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        """Call ``on_data(chunk)`` for bytes read from ``fd`` and ``on_eof()`` once at its end."""
        with self._lock:
            self._pending.append(("add", fd, _Watch(on_data, on_eof), None))
            self._ensure_running()
            self._wake()

    def watch_ready(self, fd: int, on_ready: Callable[[], None]) -> None:
        """Call ``on_ready()`` once when ``fd`` becomes readable (a pidfd: the process exited)."""
        with self._lock:
            self._pending.append(("add", fd, _Watch(None, on_ready), None))
            self._ensure_running()
            self._wake()

    def watch_writable(self, fd: int, on_ready: Callable[[], None]) -> None:
        """Call ``on_ready()`` once when ``fd`` has room for writing (a stdin pipe a server
        stopped reading); the watch then ends. One watch per descriptor at a time."""
        with self._lock:
            self._pending.append(("add", fd, _Watch(None, on_ready, write=True), None))
            self._ensure_running()
            self._wake()

    def watch_oneshot(self, fd: int, on_ready: Callable[[], None]) -> None:
        """Call ``on_ready()`` when ``fd`` is readable, then not again until ``rearm(fd)``
        (the callback reads the descriptor itself). Needs ``supports_oneshot``."""
        if self.green:
            from snodo.transports.green_io import GreenOneshot

            self._green[fd] = GreenOneshot(fd, on_ready, self._call)
            return
        with self._lock:
            self._pending.append(("add", fd, _Watch(None, on_ready, oneshot=True), None))
            self._ensure_running()
            self._wake()

    def rearm(self, fd: int) -> None:
        """Let a ``watch_oneshot`` descriptor fire again; safe from any thread (one syscall;
        under gevent, from the greenlets of the thread that watched it)."""
        green = self._green.get(fd) if self._green else None
        if green is not None:
            green.arm()
            return
        self._modify(fd, _ONESHOT)

    def disarm(self, fd: int) -> None:
        """Stop a ``watch_oneshot`` descriptor firing until ``rearm(fd)`` (a hang-up may still
        fire it once)."""
        green = self._green.get(fd) if self._green else None
        if green is not None:
            green.disarm()
            return
        self._modify(fd, _ONESHOT & ~getattr(select, "EPOLLIN", 0))

    def _modify(self, fd: int, events: int) -> None:
        epoll = self._epoll
        if epoll is None:
            return
        try:
            epoll.modify(fd, events)
        except (OSError, ValueError):
            pass  # not registered yet (the hub arms it when it is) or already removed

    def unwatch(self, fd: int, timeout: float = 5.0) -> None:
        """Stop watching ``fd``; when this returns no callback for it is running or will run, so
        the caller may close the descriptor (whose number the OS may then reuse at once)."""
        green = self._green.pop(fd, None) if self._green else None
        if green is not None:
            green.close(timeout)
            return
        done = threading.Event()
        with self._lock:
            thread = self._thread
            if thread is None:
                return
            self._pending.append(("remove", fd, None, done))
            self._wake()
        if thread is threading.current_thread():
            return  # from a callback: applied before the hub reads again
        if not done.wait(timeout):
            _log.warning("the I/O hub did not confirm an unwatch", fd=fd)

    def call_soon(self, fn: Callable[[], None]) -> bool:
        """Run ``fn()`` on the hub once the callbacks of what it already read have run (so ``fn``
        may read a watched descriptor itself, with no chunk of it in flight). False when the hub
        is not running: nothing is watched, and the caller may read the descriptor itself."""
        with self._lock:
            if self._thread is None:
                return False
            self._calls.append(fn)
            self._wake()
            return True

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def _ensure_running(self) -> None:
        if self._thread is not None:
            return
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector = selectors.DefaultSelector()
        epoll = getattr(self._selector, "_selector", None)
        self._epoll = epoll if isinstance(self._selector, _epoll_selector()) else None
        self._thread = threading.Thread(
            target=self._run, args=(self._selector,), name="snodo-io-hub", daemon=True
        )
        self._thread.start()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass  # a wake-up is already pending

    def _apply_pending(
        self, selector: selectors.BaseSelector
    ) -> tuple[bool, list[Callable[[], None]]]:
        """Apply registrations and take the ``call_soon`` functions; False when nothing is left
        to watch (the thread then ends, once it has run the functions)."""
        with self._lock:
            pending, self._pending = self._pending, []
            calls, self._calls = self._calls, []
            for action, fd, entry, done in pending:
                if action == "add" and entry is not None:
                    self._watches[fd] = entry
                    try:
                        events = selectors.EVENT_WRITE if entry.write else selectors.EVENT_READ
                        selector.register(fd, events, entry)
                        if entry.oneshot:
                            self._epoll.modify(fd, _ONESHOT)
                    except (KeyError, ValueError, OSError, AttributeError):
                        self._watches.pop(fd, None)
                        _log.warning("cannot watch descriptor", fd=fd)
                elif action == "remove" and self._watches.pop(fd, None) is not None:
                    try:
                        selector.unregister(fd)
                    except (KeyError, ValueError, OSError):
                        pass
                if done is not None:
                    done.set()
            if self._watches:
                return True, calls
            # Nothing left: end the thread while holding the lock, so a racing watch() starts a
            # new one.
            self._thread = None
            self._selector = None
            self._epoll = None
            os.close(self._wake_r)
            os.close(self._wake_w)
            self._wake_r = self._wake_w = -1
            return False, calls

    def _run(self, selector: selectors.BaseSelector) -> None:
        wake_r = self._wake_r
        selector.register(wake_r, selectors.EVENT_READ, None)
        try:
            while True:
                running, calls = self._apply_pending(selector)
                for call in calls:
                    self._call(call)
                if not running:
                    break
                for key, _ in selector.select(timeout=5.0):
                    if key.data is None:
                        try:
                            while os.read(wake_r, 4096):
                                pass
                        except BlockingIOError:
                            pass
                        continue
                    self._read(selector, key.fd, key.data)
        finally:
            selector.close()

    def _read(self, selector: selectors.BaseSelector, fd: int, entry: _Watch) -> None:
        if self._watches.get(fd) is not entry:
            return  # removed since the select returned
        if entry.oneshot:
            self._call(entry.on_eof)
            return
        if entry.on_data is None:  # readiness (a pidfd, room in a pipe): fires once
            self._forget(selector, fd, entry)
            self._call(entry.on_eof)
            return
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError as exc:
            chunk = b""
            if exc.errno not in (errno.EBADF, errno.EIO, errno.EPIPE):
                _log.warning("read failed", fd=fd, error=str(exc))
        if chunk:
            self._call(entry.on_data, chunk)
            return
        self._forget(selector, fd, entry)
        self._call(entry.on_eof)

    def _forget(self, selector: selectors.BaseSelector, fd: int, entry: _Watch) -> None:
        with self._lock:
            if self._watches.get(fd) is entry:
                del self._watches[fd]
                try:
                    selector.unregister(fd)
                except (KeyError, ValueError, OSError):
                    pass

    @staticmethod
    def _call(callback: Callable[..., None], *args: bytes) -> None:
        try:
            callback(*args)
        except Exception:  # one connection's bug must not stop every other connection
            _log.exception("I/O callback failed")


def _epoll_selector() -> type:
    return getattr(selectors, "EpollSelector", type(None))


_hub = IoHub()


def hub() -> IoHub:
    """The process-wide hub."""
    return _hub
