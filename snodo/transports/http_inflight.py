"""The HTTP transport's requests in flight: what each is blocked on, so a deadline or close()
can cut it and its caller fails at once.

A :class:`Call` is one request (with the nested POSTs answering server requests); its
:class:`Attempt` is the socket of the response head being awaited; :class:`Calls` are the
requests of one transport; a :class:`Watchdog` shuts a response down at its deadline (the
shared timer service runs it: no thread per request).
"""

from __future__ import annotations

import socket
from typing import Any

from snodo.protocol import errors
from snodo.protocol.errors import McpError

__all__ = ["Attempt", "Call", "Calls", "Watchdog", "closed_error", "shutdown_quietly"]


def closed_error() -> McpError:
    """-32000 for a request that close() cut."""
    return errors.connection_error("The connection was closed", cause=("closed",))


def shutdown_quietly(target: Any) -> None:
    """``target.shutdown()``, ignoring its failure."""
    try:
        target.shutdown()
    except Exception:
        pass


class Attempt:
    """The socket of the request in flight, so that close() (``shutdown``) can end a response
    head that drips or never comes (its deadline bounds the socket's own waits)."""

    __slots__ = ("closed", "sock")

    def __init__(self) -> None:
        self.sock: Any = None
        self.closed = False

    def lend(self, sock: Any) -> None:
        """The socket the request goes out on (shut at close())."""
        self.sock = sock
        if self.closed:
            self._shut()

    def shutdown(self) -> None:
        """The transport was closed."""
        self.closed = True
        self._shut()

    def _shut(self) -> None:
        sock = self.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Call:
    """One request in flight: what it is blocked on (a response head's attempt, a response
    being read, a nested POST), so close() can shut each down and the caller fails at once."""

    __slots__ = ("_held", "closed", "head")

    def __init__(self) -> None:
        self.closed = False
        self.head: Attempt | None = None  # the response head being awaited
        self._held: list[Any] = []  # at most a few: the stream and one nested request

    def hold(self, target: Any) -> None:
        """``target.shutdown()`` ends what the call waits on; at once if already closed."""
        self._held.append(target)
        if self.closed:
            shutdown_quietly(target)

    def drop(self, target: Any) -> None:
        try:
            self._held.remove(target)
        except ValueError:
            pass

    def close(self) -> None:
        self.closed = True
        head = self.head
        if head is not None:
            head.shutdown()
        for target in list(self._held):
            shutdown_quietly(target)


class Calls:
    """The requests in flight on one transport, so close() fails every one at once. One entry
    per caller blocked in a request (bounded by the calling threads and greenlets); each
    leaves when its request returns."""

    __slots__ = ("_live", "closed")

    def __init__(self) -> None:
        self._live: set[Call] = set()
        self.closed = False

    def begin(self) -> Call:
        # No lock (the hot path): a call added after close() took its snapshot sees `closed`.
        call = Call()
        self._live.add(call)
        if self.closed:
            self._live.discard(call)
            raise closed_error()
        return call

    def end(self, call: Call) -> None:
        self._live.discard(call)

    def close(self) -> None:
        self.closed = True
        for call in list(self._live):
            call.close()


class Watchdog:
    """Shuts a response down at a deadline, so a blocked read fails at once."""

    __slots__ = ("_timer", "fired")

    def __init__(self) -> None:
        self._timer: Any = None
        self.fired = False

    def arm(self, response: Any, delay: float | None) -> None:
        """Shut ``response`` down in ``delay`` seconds (None: never; cancels an earlier arm)."""
        self.cancel()
        if delay is None:
            return
        from snodo.supervision.timers import call_later

        def fire() -> None:
            self.fired = True
            shutdown_quietly(response)

        self._timer = call_later(max(0.0, delay), fire)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
