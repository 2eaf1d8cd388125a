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

``BaseInbox`` holds these rules and nothing about who consumes: after every envelope it
queues it calls ``_ready()`` under the lock and, if that returned True, ``_schedule()``
after releasing it. ``Inbox`` (a thread actor's) wakes the actor's blocking ``get``;
``pooled.PooledInbox`` puts an idle pooled actor on its dispatcher's run queue. The
condition senders wait on for room is made only when a sender first has to wait.

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

from pykka._envelope import Envelope  # Pykka's message carrier (annotations only)
from pykka.messages import _ActorStop  # noqa: PLC2701  # what ref.stop() sends (see above)

from snodo.supervision.reasons import ActorDead, Down, Exit, InboxFull, Reason

__all__ = ["CONTROL_TYPES", "BaseInbox", "Inbox", "KillSignal", "StopSignal", "reject"]


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


class BaseInbox:
    """Bounded FIFO with an unbounded control lane and an atomic close; no consumer wait."""

    __slots__ = (
        "_closed",
        "_counted",
        "_items",
        "_lock",
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
        self._not_full: threading.Condition | None = None  # made by the first waiting sender
        self._items: deque[Envelope[Any]] = deque()
        self._counted = 0  # user messages in _items (control messages do not count)
        self._closed = False

    # -- the consumer's side, overridden by subclasses ------------------------------------

    def _ready(self) -> bool:
        """Called under the lock after an envelope was queued; True: call ``_schedule``."""
        return False

    def _schedule(self) -> None:
        """Called after the lock is released when ``_ready`` returned True."""

    def _pop(self) -> Envelope[Any]:
        """Take the oldest envelope (under the lock, ``_items`` not empty)."""
        envelope = self._items.popleft()
        if not isinstance(envelope.message, CONTROL_TYPES):
            self._counted -= 1
            if self._not_full is not None:
                self._not_full.notify()
        return envelope

    def _room_for_all(self) -> None:
        if self._not_full is not None:
            self._not_full.notify_all()

    # -- the senders' side ----------------------------------------------------------------

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
                    if self._not_full is None:
                        self._not_full = threading.Condition(self._lock)
                    self._not_full.wait(remaining)
            if not self._closed:
                self._items.append(envelope)
                if not control:
                    self._counted += 1
                wake = self._ready()
                closed = False
            else:
                closed = True
        if not closed:
            if wake:
                self._schedule()
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
            wake = self._ready()
        if wake:
            self._schedule()
        return True

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
            self._room_for_all()
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
            wake = self._ready()
            self._room_for_all()
        if wake:
            self._schedule()
        return dropped


class Inbox(BaseInbox):
    """A thread actor's inbox: ``get`` blocks the actor's thread until an envelope comes."""

    __slots__ = ("_not_empty",)

    def __init__(self, maxsize: int, put_timeout: float, name: str) -> None:
        super().__init__(maxsize, put_timeout, name)
        self._not_empty = threading.Condition(self._lock)

    def _ready(self) -> bool:
        self._not_empty.notify()
        return False

    def get(self) -> Envelope[Any]:
        """Take the oldest envelope, waiting for one (the actor's idle wait)."""
        with self._lock:
            while not self._items:
                self._not_empty.wait()
            return self._pop()
