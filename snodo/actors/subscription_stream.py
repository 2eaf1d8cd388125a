"""``SubscriptionStream``: one pooled actor per subscription, between the transport and the owner.

The transport tells it each event as it arrives (``("event", method, params)``) and the end
(``("end", Closed)``). Events go to the owner only against demand (``("demand", n)``); the rest
wait in a buffer of at most ``max_buffer``, and when it is full ``overflow`` drops the oldest
queued event or the arriving one. The drop count reaches the owner as ``Dropped(n)`` just before
the next event it receives (it takes no demand), and ``Closed`` comes after the queued events.
After a restart of the connection ``("gap", Gap)`` comes; the owner receives the ``Gap`` after the
events queued before it, taking no demand. ``close`` (an ask) stops it at once: nothing is delivered after it returns.

Delivery is ``deliver(event)``: an actor owner's ``tell(SubscriptionEvent(ref, event))``, or a
put into the pull mailbox that ``Subscription.next()`` reads. Pooled: handlers never block (a
tell into an owner's full inbox would; demand keeps the owner's inbox within what it asked for).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from snodo.protocol.subscriptions import Closed, Dropped, Event, Gap, Notification
from snodo.supervision import NORMAL, PooledActor, stop

__all__ = ["Deliver", "SubscriptionStream"]

Deliver = Callable[[Event], None]

#: The buffer's marker of a ``Gap`` (a method name no notification can have).
_GAP = "\x00gap"


class SubscriptionStream(PooledActor):
    """Buffer, demand and overflow policy of one subscription."""

    def __init__(self, deliver: Deliver, max_buffer: int, overflow: str) -> None:
        super().__init__()
        self._deliver = deliver
        self._max = max_buffer
        self._drop_oldest = overflow == "drop_oldest"
        self._buffer: deque[tuple[str, dict[str, Any]]] = deque()
        self._demand = 0
        self._dropped = 0
        self._end: Closed | None = None
        self._done = False

    def on_receive(self, message: Any) -> Any:
        if self._done:
            return None
        kind = message[0]
        if kind == "event":
            self._event(message[1], message[2])
        elif kind == "demand":
            self._demand += message[1]
            self._flush()
        elif kind == "end":
            if self._end is None:
                self._end = message[1]
                self._flush()
        elif kind == "gap":
            self._gap(message[1])
        elif kind == "close":
            self._finish()
        return None

    def stats(self) -> dict[str, int]:
        """Buffered events, outstanding demand, undelivered drop count (for tests)."""
        return {"buffered": len(self._buffer), "demand": self._demand, "dropped": self._dropped}

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if self._end is not None:
            return
        if self._demand > 0 and not self._buffer:
            self._demand -= 1
            self._send_dropped()
            self._deliver(Notification(method, params))
            return
        if len(self._buffer) >= self._max:
            self._dropped += 1
            if not self._drop_oldest:
                return
            self._buffer.popleft()
        self._buffer.append((method, params))

    def _gap(self, gap: Gap) -> None:
        """The connection restarted: after what is queued, ``gap`` (it takes no demand)."""
        if self._end is not None:
            return
        if not self._buffer:
            self._send_dropped()
            self._deliver(gap)
            return
        self._buffer.append((_GAP, {"gap": gap}))

    def _flush(self) -> None:
        buffer = self._buffer
        while buffer and (self._demand > 0 or buffer[0][0] is _GAP):
            method, params = buffer.popleft()
            self._send_dropped()
            if method is _GAP:
                self._deliver(params["gap"])
                continue
            self._demand -= 1
            self._deliver(Notification(method, params))
        if self._end is not None and not buffer:
            self._send_dropped()
            self._deliver(self._end)
            self._finish()

    def _send_dropped(self) -> None:
        if self._dropped:
            n, self._dropped = self._dropped, 0
            self._deliver(Dropped(n))

    def _finish(self) -> None:
        self._done = True
        self._buffer.clear()
        stop(self.actor_ref, NORMAL)
