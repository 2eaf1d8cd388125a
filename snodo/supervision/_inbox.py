"""The bounded actor inbox (what ``Actor._create_actor_inbox`` returns).

One FIFO deque, guarded by one lock, with three rules:

* **User messages are bounded** (``maxsize``; ``<= 0`` means unbounded). A send to a full
  inbox blocks the sender (only the calling greenlet under gevent) for at most
  ``put_timeout`` seconds, or the ``timeout`` given to ``put``, then raises ``InboxFull``.
* **Control messages are never refused for space and never block**: exit signals, down
  notices, stop requests (snodo's and Pykka's ``_ActorStop``). They keep their place in the
  FIFO, so a ``Down`` from an actor never overtakes the messages it sent before it died.
  A supervisor must always learn that a child died, however busy it is.
* **Closing is atomic with the drain**: once the actor's teardown closed the inbox, a put
  is refused at once (an ask gets ``ActorDead`` on its future, a tell raises it). Pykka's
  own inbox has a check-then-put race here that can leave an ask unanswered forever
  (runtime-costs.md §1.2, trap 2); this inbox cannot.

``kill`` closes the inbox, drops what is queued, and puts the kill signal at the front.

Pykka contract relied on (pykka 4.4-4.5): ``ActorRef.tell``/``ask`` call
``actor_inbox.put(Envelope)``; ``Envelope`` has ``message`` and ``reply_to``; the stop
message is ``pykka.messages._ActorStop``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from pykka._envelope import Envelope
from pykka.messages import _ActorStop

from snodo.supervision.reasons import ActorDead, Down, Exit, InboxFull, Reason

__all__ = ["CONTROL_TYPES", "Inbox", "KillSignal", "StopSignal", "reject"]


@dataclass(frozen=True)
class StopSignal:
    """Internal: stop after the messages already queued, with ``reason``."""

    reason: Reason


@dataclass(frozen=True)
class KillSignal:
    """Internal: stop now with ``KILLED`` (sits at the front of a closed inbox)."""


CONTROL_TYPES: tuple[type, ...] = (Exit, Down, StopSignal, KillSignal, _ActorStop)


def reject(envelope: Envelope[Any], name: str) -> None:
    """Answer an envelope that an ended actor will never handle (asks get ``ActorDead``)."""
    if envelope.reply_to is None:
        return
    error = ActorDead(f"{name} stopped before handling the message")
    if isinstance(envelope.message, _ActorStop):
        # Pykka's ref.stop() turns ActorDeadError into "False: was already dead".
        error = ActorDead(f"{name} was not running")
    envelope.reply_to.set_exception((type(error), error, None))


class Inbox:
    """Bounded FIFO inbox with an unbounded control lane and an atomic close."""

    __slots__ = (
        "_closed",
        "_counted",
        "_items",
        "_lock",
        "_not_empty",
        "_not_full",
        "maxsize",
        "name",
        "put_timeout",
    )

    def __init__(self, maxsize: int, put_timeout: float, name: str) -> None:
        self.maxsize = maxsize
        self.put_timeout = put_timeout
        self.name = name
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._items: deque[Envelope[Any]] = deque()
        self._counted = 0  # user messages in _items (control messages do not count)
        self._closed = False

    def put(self, envelope: Envelope[Any], /, timeout: float | None = None) -> None:
        """Queue ``envelope``; block at most ``timeout`` (default ``put_timeout``) if full.

        Raises ``InboxFull`` when no room appeared in time, and ``ActorDead`` for a tell
        to a closed inbox (an ask to a closed inbox gets ``ActorDead`` on its future).
        """
        control = isinstance(envelope.message, CONTROL_TYPES)
        with self._lock:
            if not self._closed and not control and 0 < self.maxsize <= self._counted:
                wait = self.put_timeout if timeout is None else timeout
                deadline = time.monotonic() + wait
                while not self._closed and self._counted >= self.maxsize:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        msg = (
                            f"inbox of {self.name} stayed full ({self.maxsize} messages)"
                            f" for {wait} s"
                        )
                        raise InboxFull(msg)
                    self._not_full.wait(remaining)
            if not self._closed:
                self._items.append(envelope)
                if not control:
                    self._counted += 1
                self._not_empty.notify()
                return
        if envelope.reply_to is None:
            msg = f"{self.name} is not running"
            raise ActorDead(msg)
        reject(envelope, self.name)

    def put_control(self, envelope: Envelope[Any]) -> bool:
        """Queue a control message without blocking; False if the inbox is closed."""
        with self._lock:
            if self._closed:
                return False
            self._items.append(envelope)
            self._not_empty.notify()
            return True

    def get(self) -> Envelope[Any]:
        """Take the oldest envelope, waiting for one (the actor's idle wait)."""
        with self._lock:
            while not self._items:
                self._not_empty.wait()
            envelope = self._items.popleft()
            if not isinstance(envelope.message, CONTROL_TYPES):
                self._counted -= 1
                self._not_full.notify()
            return envelope

    def empty(self) -> bool:
        """True when nothing is queued."""
        with self._lock:
            return not self._items

    def qsize(self) -> int:
        """Number of queued envelopes, control messages included."""
        with self._lock:
            return len(self._items)

    @property
    def closed(self) -> bool:
        """True once the actor is ending (or killed): puts are refused."""
        return self._closed

    def close(self) -> list[Envelope[Any]]:
        """Refuse further puts and return everything still queued."""
        with self._lock:
            self._closed = True
            left = list(self._items)
            self._items.clear()
            self._counted = 0
            self._not_full.notify_all()
            return left

    def kill(self, envelope: Envelope[Any]) -> list[Envelope[Any]] | None:
        """Close, drop the queue and put ``envelope`` first; None if already closed.

        Pending stop requests are kept behind the kill signal so that their askers are
        answered once the actor has really ended. Returns the dropped envelopes.
        """
        with self._lock:
            if self._closed:
                return None
            self._closed = True
            dropped: list[Envelope[Any]] = []
            stops: list[Envelope[Any]] = []
            for item in self._items:
                (stops if isinstance(item.message, _ActorStop) else dropped).append(item)
            self._items.clear()
            self._items.append(envelope)
            self._items.extend(stops)
            self._counted = 0
            self._not_empty.notify()
            self._not_full.notify_all()
            return dropped
