"""What transports share for subscriptions: the sink they feed, the handle they return, the
client side of one listen stream (:class:`StreamRoute`) and the session-era fan-out of a
session's notifications (:class:`SessionFanout`).

A transport with ``listen(message, options, sink) -> Listening`` can serve
``Client.listen``: it sends the listen request, returns once the acknowledgement arrives, and
then calls ``sink.notification(method, params)`` for each event and ``sink.closed(error)`` once
at the end (``None``: a graceful end). ``Listening.cancel()`` ends the stream from the client
side (stdio: ``notifications/cancelled``; HTTP: closes the connection; direct: closes the
source); no sink call follows it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from snodo.flag import Flag
from snodo.log import get_logger
from snodo.protocol import errors
from snodo.protocol import subscriptions as subs
from snodo.protocol.errors import McpError
from snodo.protocol.exchange import not_acknowledged_error

__all__ = [
    "Listening",
    "SessionFanout",
    "StreamRoute",
    "SubscriptionSink",
]

_log = get_logger("snodo.transports.listening")


class SubscriptionSink(Protocol):
    """Where a transport puts one subscription's events (must not block, never raises)."""

    def notification(self, method: str, params: dict[str, Any]) -> None: ...

    def closed(self, error: McpError | None) -> None: ...


@dataclass(frozen=True, slots=True)
class Listening:
    """An acknowledged subscription: the accepted filter and the way to cancel it."""

    accepted: dict[str, Any]
    cancel: Callable[[], None]


class StreamRoute:
    """The client side of one listen stream: acknowledgement first, then events, then the end."""

    __slots__ = ("_acked", "_lock", "accepted", "ended", "failure", "id", "sink")

    def __init__(self, sid: subs.SubscriptionId, sink: SubscriptionSink) -> None:
        self.id = sid
        self.sink = sink
        self.accepted: dict[str, Any] | None = None
        self.failure: McpError | None = None
        self.ended = False
        self._lock = threading.Lock()
        self._acked = Flag()

    def on_message(self, message: Mapping[str, Any]) -> None:
        """A message of this stream (a notification, or the listen request's response)."""
        method = message.get("method")
        if isinstance(method, str):
            params = message.get("params")
            self.on_notification(method, params if isinstance(params, dict) else None)
        else:
            self.end(subs.read_response(message).error)

    def on_notification(self, method: str, params: dict[str, Any] | None) -> None:
        verdict = subs.read_notification(method, params)
        if isinstance(verdict, subs.Acknowledged):
            with self._lock:
                if self.accepted is not None or self.ended:
                    return
                self.accepted = verdict.accepted
            self._acked.set()
        elif isinstance(verdict, subs.Ended):
            self.end(None)
        elif self.accepted is None:
            _log.info("dropped an event that came before the acknowledgement", method=method)
        elif not self.ended:
            self.sink.notification(verdict.method, verdict.params)

    def end(self, error: McpError | None) -> None:
        """The stream is over (a result, a cancellation, or the transport is gone)."""
        with self._lock:
            if self.ended:
                return
            self.ended = True
            acked = self.accepted is not None
            if not acked:
                self.failure = error if error is not None else not_acknowledged_error()
        if not acked:
            self._acked.set()
            return
        try:
            self.sink.closed(error)
        except Exception:
            _log.exception("a subscription sink failed")

    def silence(self) -> None:
        """The client cancelled: nothing more reaches the sink."""
        with self._lock:
            self.ended = True
            if self.accepted is None and self.failure is None:
                self.failure = errors.connection_error("Subscription cancelled")
        self._acked.set()

    def wait_ack(self, timeout: float | None) -> dict[str, Any]:
        """The accepted filter, once acknowledged; the failure, or -32001 after ``timeout``."""
        if not self._acked.wait(timeout):
            raise errors.timeout_error(timeout or 0.0, cause=("not_acknowledged",))
        if self.failure is not None:
            raise self.failure
        assert self.accepted is not None
        return self.accepted


#: The URI counts of a fan-out with no subscription (shared: never changed in place).
_NO_URIS: Counter[str] = Counter()


class SessionFanout:
    """Session era: a session's unsolicited notifications, fanned out to the subscriptions
    whose filter asked for them (``snodo.protocol.subscriptions.matches``).

    A session-era transport makes one in its constructor as ``session_events``, feeds it with
    :meth:`deliver` and ends it with :meth:`end_all` when the connection ends. Every
    transport feeds it each notification that is not for one call (both eras), so
    ``on_log``, when set, receives each ``notifications/message``'s params whether or not
    anything subscribed (it must not block and never raises: ``snodo.server_logs``)."""

    __slots__ = ("_lock", "_subs", "_uris", "on_log")

    def __init__(self) -> None:
        #: Receives each ``notifications/message``'s params (set by the connection).
        self.on_log: Callable[[object], None] | None = None
        self._lock = threading.Lock()
        # Made by the first add(): every connection has a fan-out, few ever subscribe.
        self._subs: dict[object, tuple[dict[str, Any], SubscriptionSink]] | None = None
        self._uris: Counter[str] = _NO_URIS

    def add(self, accepted: dict[str, Any], sink: SubscriptionSink) -> object:
        token = object()
        with self._lock:
            if self._subs is None:
                self._subs = {}
            self._subs[token] = (accepted, sink)
            self._uris = self._uris + Counter(accepted.get(subs.RESOURCES_KEY) or ())
        return token

    def set_uris(self, token: object, uris: list[str]) -> None:
        """Narrow a subscription's URIs to those the server accepted."""
        with self._lock:
            entry = self._subs.get(token) if self._subs is not None else None
            if entry is None:
                return
            accepted, _ = entry
            old = accepted.get(subs.RESOURCES_KEY) or []
            self._uris = self._uris.copy()  # the empty one is shared
            self._uris.subtract(old)
            self._uris.update(uris)
            if uris:
                accepted[subs.RESOURCES_KEY] = list(uris)
            else:
                accepted.pop(subs.RESOURCES_KEY, None)
            self._uris = +self._uris

    def remove(self, token: object) -> list[str]:
        """Forget a subscription; the URIs no other subscription of the session wants."""
        with self._lock:
            entry = self._subs.pop(token, None) if self._subs is not None else None
            if entry is None:
                return []
            uris = entry[0].get(subs.RESOURCES_KEY) or []
            self._uris = self._uris.copy()  # the empty one is shared
            self._uris.subtract(uris)
            gone = [u for u in uris if self._uris[u] <= 0]
            self._uris = +self._uris
        return gone

    def deliver(self, method: str, params: object) -> None:
        """A session notification: to every subscription that asked for it (params not a dict:
        none); a log message to :attr:`on_log` as well."""
        if method == "notifications/message" and self.on_log is not None:
            self.on_log(params)
        if not self._subs:
            return
        given = params if isinstance(params, dict) else None
        with self._lock:
            targets = [
                sink
                for accepted, sink in (self._subs or {}).values()
                if subs.matches(accepted, method, given)
            ]
        for sink in targets:
            try:
                sink.notification(method, given if given is not None else {})
            except Exception:
                _log.exception("a subscription sink failed")

    def end_all(self, error: McpError | None) -> None:
        """The session is over: every subscription ends (``error`` None: gracefully)."""
        with self._lock:
            sinks = [sink for _, sink in (self._subs or {}).values()]
            self._subs = None
            self._uris = _NO_URIS
        for sink in sinks:
            try:
                sink.closed(error)
            except Exception:
                _log.exception("a subscription sink failed")
