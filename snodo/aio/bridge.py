"""From the transports' threads to the event loop: a batching mailbox and per-call inboxes.

A transport's reading side (the stdio hub, a worker thread) hands what arrives to the loop with
:meth:`LoopMailbox.post`; posts made while the loop has not drained the previous ones ride on one
wake-up (``call_soon_threadsafe`` writes to the loop's self-pipe, a system call each). A
:class:`CallInbox` is one request's inbox (``snodo.transports.base.Inbox``) on the loop.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from snodo.log import get_logger

__all__ = ["MAX_QUEUED_PROGRESS", "CallInbox", "Deadlines", "LoopMailbox"]

_log = get_logger("snodo.aio")

#: Progress reports one async call holds before it drops more (a slow progress coroutine).
MAX_QUEUED_PROGRESS = 1024


class LoopMailbox:
    """Runs callbacks posted from any thread on ``loop``, many per wake-up (at once when
    posted from the loop's own thread: the loop reads a stdio server itself)."""

    __slots__ = ("_armed", "_items", "_loop", "_thread")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Made on the loop's thread."""
        self._loop = loop
        self._thread = threading.get_ident()
        self._items: deque[tuple[Callable[[Any], None], Any]] = deque()
        self._armed = False

    def post(self, callback: Callable[[Any], None], value: Any) -> None:
        """Run ``callback(value)`` on the loop soon; never blocks."""
        if threading.get_ident() == self._thread:
            callback(value)
            return
        self._items.append((callback, value))
        if not self._armed:
            # The drain clears the flag before it takes items: a post that finds it set is
            # taken by a drain still to run.
            self._armed = True
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop is closed: nothing waits any more
                self._items.clear()

    def _drain(self) -> None:
        self._armed = False
        items = self._items
        while items:
            callback, value = items.popleft()
            callback(value)


class Deadlines:
    """One loop timer for every call of a client that waits with a deadline: armed at the
    earliest, so no call makes (and cancels) a timer of its own."""

    __slots__ = ("_at", "_handle", "_loop", "_waits")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waits: dict[CallInbox, float] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._at = math.inf

    def add(self, inbox: CallInbox, timeout: float) -> None:
        """Wake ``inbox`` ``timeout`` seconds from now unless it is removed first."""
        when = self._loop.time() + timeout
        self._waits[inbox] = when
        if when < self._at:
            if self._handle is not None:
                self._handle.cancel()
            self._at = when
            self._handle = self._loop.call_at(when, self._fire)

    def remove(self, inbox: CallInbox) -> None:
        self._waits.pop(inbox, None)  # the timer stays: it re-arms for what is left

    def _fire(self) -> None:
        self._handle, self._at = None, math.inf
        now = self._loop.time()
        earliest = math.inf
        expired = []
        for inbox, when in self._waits.items():
            if when <= now:
                expired.append(inbox)
            elif when < earliest:
                earliest = when
        for inbox in expired:
            del self._waits[inbox]
            inbox.expire()
        if earliest < math.inf:
            self._at = earliest
            self._handle = self._loop.call_at(earliest, self._fire)


class CallInbox:
    """One request's inbox: items put from any thread, awaited on the loop in order."""

    __slots__ = ("_deadlines", "_dropped", "_items", "_mailbox", "_progress", "_waiter")

    def __init__(self, mailbox: LoopMailbox, deadlines: Deadlines | None = None) -> None:
        self._mailbox = mailbox
        self._deadlines = deadlines
        self._items: deque[tuple[str, Any]] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._progress = 0
        self._dropped = 0

    def put(self, item: tuple[str, Any]) -> None:
        """From the transport's side (``Inbox``)."""
        self._mailbox.post(self._arrive, item)

    def _arrive(self, item: tuple[str, Any]) -> None:
        if item[0] == "progress":
            if self._progress >= MAX_QUEUED_PROGRESS:
                self._dropped += 1
                if self._dropped == 1:
                    _log.warning(
                        "dropping progress reports for a slow caller", queued=self._progress
                    )
                return
            self._progress += 1
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def expire(self) -> None:
        """The wait's deadline passed (``Deadlines``): ``get`` returns None."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self, timeout: float | None) -> tuple[str, Any] | None:
        """The next item; None when ``timeout`` passes first."""
        if not self._items:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            deadlines = self._deadlines
            handle = None
            if timeout is not None:
                if deadlines is not None:
                    deadlines.add(self, timeout)
                else:
                    handle = loop.call_later(timeout, _expire, waiter)
            try:
                await waiter
            finally:
                self._waiter = None
                if handle is not None:
                    handle.cancel()
                elif timeout is not None and deadlines is not None:
                    deadlines.remove(self)
            if not self._items:
                return None
        item = self._items.popleft()
        if item[0] == "progress":
            self._progress -= 1
        return item


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
