"""The Runtime's subscription source: who listens, and what each listener is sent.

A :class:`ServerSubscription` is one ``subscriptions/listen`` stream (stateless era) or one
session-era session's notification channel. Its ``emit(message)`` is the transport's way out
(stdio writes a line, HTTP pushes an event, direct hands the dict to the client); it must not
block for long. The :class:`SubscriptionSource` fans list changes and resource updates out to
every open subscription whose filter asked for them (``snodo.protocol.subscriptions.matches``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from snodo.log import get_logger
from snodo.protocol import subscriptions as subs

__all__ = [
    "Emit",
    "ListenStarted",
    "ServerSubscription",
    "SubscriptionSource",
    "close_session_channel",
    "open_session_channel",
]

_log = get_logger("snodo.server.subscriptions")

Emit = Callable[[dict[str, Any]], Any]

_KIND_METHODS = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}


class ServerSubscription:
    """One open stream: its id (the listen request's; None for a session channel) and filter."""

    __slots__ = ("_emit", "_end", "_lock", "_source", "accepted", "closed", "id")

    def __init__(
        self, sid: subs.SubscriptionId | None, accepted: dict[str, Any], source: SubscriptionSource
    ) -> None:
        self.id = sid
        self.accepted = accepted
        self.closed = False
        self._source = source
        self._emit: Emit | None = None
        self._end: Callable[[], None] | None = None
        self._lock = threading.Lock()  # one message at a time, the acknowledgement first

    def start(self, emit: Emit, end: Callable[[], None] | None = None) -> None:
        """Send the acknowledgement (a listen stream), then receive events. ``end()`` is called
        when the server ends the stream gracefully (after the listen result was emitted)."""
        with self._lock:
            self._emit = emit
            self._end = end
            # Registered before the acknowledgement goes out (an event published meanwhile
            # waits for the lock), so nothing published after the client saw it is missed.
            self._source.attach(self)
            if self.id is not None:
                emit(subs.acknowledgement(self.id, self.accepted))

    def add_uri(self, uri: str) -> None:
        """Session era: ``resources/subscribe``."""
        uris = self.accepted.setdefault(subs.RESOURCES_KEY, [])
        if uri not in uris:
            self.accepted[subs.RESOURCES_KEY] = [*uris, uri]

    def remove_uri(self, uri: str) -> None:
        """Session era: ``resources/unsubscribe``."""
        uris = self.accepted.get(subs.RESOURCES_KEY) or []
        self.accepted[subs.RESOURCES_KEY] = [u for u in uris if u != uri]

    def send(self, method: str, params: dict[str, Any] | None) -> None:
        if not subs.matches(self.accepted, method, params):
            return
        with self._lock:
            emit = self._emit
            if self.closed or emit is None:
                return
            try:
                emit(subs.stream_notification(self.id, method, params))
                return
            except Exception as exc:  # a transport that is gone: the stream is over
                _log.info("a subscription's transport failed; closing it", error=repr(exc))
        self.close()

    def close(self) -> None:
        """The client cancelled, or the transport is gone: stop sending (no result)."""
        self.closed = True
        self._source.detach(self)

    def finish(self) -> None:
        """End the stream gracefully: the listen result, then ``end()``."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            emit, end = self._emit, self._end
            if self.id is not None and emit is not None:
                try:
                    emit(subs.listen_result(self.id))
                except Exception:
                    pass
        self._source.detach(self)
        if end is not None:
            end()


class SubscriptionSource:
    """Every open subscription of one Runtime."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[ServerSubscription, None] = {}

    def open(self, sid: subs.SubscriptionId | None, accepted: dict[str, Any]) -> ServerSubscription:
        """A subscription (not receiving until ``start``)."""
        return ServerSubscription(sid, accepted, self)

    def list_changed(self, kind: str) -> None:
        """A Runtime change listener: ``kind`` is "tools", "prompts", "resources", ..."""
        method = _KIND_METHODS.get(kind)
        if method is not None:
            self.publish(method, None)

    def resource_updated(self, uri: str) -> None:
        self.publish(subs.RESOURCE_UPDATED, {"uri": uri})

    def publish(self, method: str, params: dict[str, Any] | None) -> None:
        with self._lock:
            targets = list(self._open)
        for sub in targets:
            sub.send(method, params)

    def finish_all(self) -> None:
        """End every open listen stream gracefully (a server shutting down)."""
        with self._lock:
            targets = list(self._open)
        for sub in targets:
            sub.finish()

    @property
    def count(self) -> int:
        """How many subscriptions are open."""
        return len(self._open)

    def attach(self, sub: ServerSubscription) -> None:
        """``sub`` receives what is published from now on (unless it closed meanwhile)."""
        with self._lock:
            if not sub.closed:
                self._open[sub] = None

    def detach(self, sub: ServerSubscription) -> None:
        """``sub`` receives nothing more."""
        with self._lock:
            self._open.pop(sub, None)


class ListenStarted(BaseException):
    """Raised by the listen handler once the transport took the stream: no response is due."""


def open_session_channel(runtime: Any, session: Any, emit: Emit) -> None:
    """Session era: after ``initialize``, the session's list-changed notifications (and the
    resources it subscribes to) go out through ``emit``."""
    source: SubscriptionSource | None = getattr(runtime, "subscription_source", None)
    if source is None or session is None or getattr(session, "channel", None) is not None:
        return
    channel = source.open(None, {flag: True for flag in subs.LIST_FLAGS})
    session.channel = channel
    channel.start(emit)


def close_session_channel(session: Any) -> None:
    """Session era: the session is over, so is its notification channel."""
    channel = getattr(session, "channel", None)
    if channel is not None:
        channel.close()
