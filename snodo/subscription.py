"""``Client.listen``: the :class:`Subscription` handle and how a listen is opened.

One ``SubscriptionStream`` actor per subscription holds its buffer and demand
(``snodo.actors.subscription_stream``). The transport feeds it through a sink that first shows
every event to ``Client._observe_notification`` (the response cache's hook). The owner (the
calling thread, greenlet or snodo actor, or ``owner=``) is watched: when it ends, the
subscription is cancelled. An actor owner receives ``SubscriptionEvent(ref, event)`` messages;
any other owner pulls with ``next()`` or iteration.

2026-07-28 connections use the transport's ``listen``; initialize-era ones map the filter onto
``resources/subscribe`` and the session's list-changed notifications (docs/decisions/0017).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pykka

from snodo._log import get_logger
from snodo.actors.subscription_stream import SubscriptionStream
from snodo.protocol import errors
from snodo.protocol import subscriptions as subs
from snodo.protocol.errors import McpError
from snodo.protocol.subscriptions import Closed, Event, Notification, SubscriptionEvent
from snodo.supervision import (
    CallTimeout,
    Owner,
    Watch,
    call,
    current_owner,
    owner_of,
    stop,
    watch,
)
from snodo.transports.base import supports_listen
from snodo.transports.listening import Listening, session_fanout

if TYPE_CHECKING:
    from snodo.client import Client

_log = get_logger("snodo.subscription")

#: How long close() waits for the stream actor to acknowledge (it never blocks in a handler).
CLOSE_WAIT = 5.0


class _Sink:
    """The transport's way into the stream actor (never blocks long, never raises)."""

    __slots__ = ("_observe", "_ref")

    def __init__(self, client: Client, ref: Any) -> None:
        self._observe = client._observe_notification
        self._ref = ref

    def notification(self, method: str, params: dict[str, Any]) -> None:
        try:
            self._observe(method, params)
        except Exception:
            _log.exception("the notification observer failed", method=method)
        try:
            self._ref.tell(("event", method, params))
        except Exception:  # the stream has ended
            pass

    def closed(self, error: McpError | None) -> None:
        try:
            self._ref.tell(("end", Closed(error)))
        except Exception:
            pass


class Subscription:
    """An open ``subscriptions/listen`` stream (see ``Client.listen``)."""

    def __init__(self, ref: Any, owner: Owner, mailbox: queue.SimpleQueue[Event] | None) -> None:
        self.ref = ref
        self.owner = owner
        self.accepted: dict[str, Any] = {}
        self._mailbox = mailbox
        self._listening: Listening | None = None
        self._watch: Watch | None = None
        self._lock = threading.Lock()
        self._ended = False  # Closed was returned, or close() ran
        self._cancelled = False
        self._owed = False  # next() timed out with its demand outstanding

    def __repr__(self) -> str:
        state = "ended" if self._ended else "open"
        return f"<snodo.Subscription {self.accepted!r} {state}>"

    @property
    def closed(self) -> bool:
        return self._ended

    def demand(self, n: int = 1) -> None:
        """Ask for ``n`` more events."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError("demand must be a positive integer")
        try:
            self.ref.tell(("demand", n))
        except pykka.ActorDeadError:  # snodo.supervision.ActorDead included
            pass  # ended: nothing more comes

    def next(self, timeout: float | None = None) -> Event:
        """Ask for one event and wait for it (``Dropped`` and ``Closed`` take no demand).

        On an ended stream (after its ``Closed``, or after ``close()``) it returns
        ``Closed`` with an ``McpError`` at once. -32001 when nothing arrives within ``timeout``.
        """
        mailbox = self._mailbox
        if mailbox is None:
            raise TypeError(
                "an actor owner receives SubscriptionEvent messages; next() is for pulling"
            )
        if self._ended:
            return _ended()
        try:
            event = mailbox.get_nowait()
        except queue.Empty:
            if not self._owed:
                self.demand(1)
                self._owed = True
            try:
                event = mailbox.get(timeout=timeout)
            except queue.Empty:
                raise errors.timeout_error(timeout or 0.0, cause=("subscription",)) from None
        if isinstance(event, Notification):
            self._owed = False
        elif isinstance(event, Closed):
            self._end_here()
        if self._ended and not isinstance(event, Closed):
            return _ended()
        return event

    def __iter__(self) -> Iterator[Event]:
        """Every event, ending with the ``Closed`` event."""
        while True:
            event = self.next()
            yield event
            if isinstance(event, Closed):
                return

    def close(self) -> None:
        """End the stream (stdio: notifications/cancelled; HTTP: the connection closes; direct:
        the source closes). Nothing is delivered after it returns. Idempotent."""
        self._end_here()
        self._cancel_transport()
        try:
            call(self.ref, lambda actor: actor.on_receive(("close",)), CLOSE_WAIT)
        except (pykka.ActorDeadError, CallTimeout):
            pass

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------

    def _end_here(self) -> None:
        with self._lock:
            self._ended = True
            w, self._watch = self._watch, None
        if w is not None:
            w.cancel()

    def _cancel_transport(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            listening = self._listening
        if listening is not None:
            try:
                listening.cancel()
            except Exception:
                _log.exception("cancelling a subscription failed")

    def _owner_down(self, reason: Any) -> None:
        """The owner ended: cancel off the watcher's thread, and stop the stream."""
        from snodo._tasks import Task

        def cancel() -> None:
            self._cancel_transport()
            try:
                stop(self.ref, timeout=CLOSE_WAIT)
            except Exception:
                pass

        with self._lock:
            self._ended = True
            self._watch = None
        Task(cancel, "snodo-subscription-cancel")


def _ended() -> Closed:
    return Closed(errors.connection_error("Subscription closed", cause=("subscription_closed",)))


def open_subscription(
    client: Client,
    notifications: Mapping[str, Any],
    *,
    timeout: float | None,
    max_buffer: int,
    overflow: str,
    owner: Any,
    meta: Mapping[str, Any] | None,
    trace_context: Mapping[str, Any] | None,
) -> Subscription:
    """Start the stream actor, open the listen on the transport, watch the owner."""
    requested = subs.client_filter(notifications)
    subs.check_buffer(max_buffer, overflow)
    dialect = client.dialect
    transport = client.transport
    if dialect.stateless and not supports_listen(transport):
        raise TypeError(f"{type(transport).__name__} has no listen(); it cannot subscribe")
    if client.closed:
        raise errors.connection_error("Connection closed")
    who = owner_of(owner) if owner is not None else current_owner()
    mailbox: queue.SimpleQueue[Event] | None = None
    box: list[Any] = []
    if who.kind == "actor":
        target = who.target

        def deliver(event: Event) -> None:
            try:
                target.tell(SubscriptionEvent(box[0], event))
            except Exception:
                pass  # the owner is gone; its watch cancels the subscription

    else:
        pull: queue.SimpleQueue[Event] = queue.SimpleQueue()
        mailbox = pull

        def deliver(event: Event) -> None:
            pull.put(event)

    ref = SubscriptionStream.start(deliver, max_buffer, overflow)
    box.append(ref)
    handle = Subscription(ref, who, mailbox)
    sink = _Sink(client, ref)
    try:
        if dialect.stateless:
            listening = client._listen_request(requested, sink, timeout, meta, trace_context)
        else:
            listening = _listen_session(client, requested, sink, timeout)
    except BaseException:
        stop(ref, timeout=CLOSE_WAIT)
        raise
    handle.accepted = listening.accepted
    handle._listening = listening
    handle._watch = watch(who, handle._owner_down)
    return handle


def _listen_session(
    client: Client, requested: dict[str, Any], sink: _Sink, timeout: float | None
) -> Listening:
    """Initialize era: filter the session's notifications; resources/subscribe each URI."""
    session = client.session
    caps = session.capabilities if session is not None else {}
    accepted, uris = subs.session_accepts(requested, caps or {})
    if uris:
        accepted[subs.RESOURCES_KEY] = list(uris)
    fanout = session_fanout(client.transport)
    token = fanout.add(accepted, sink)
    kept: list[str] = []
    try:
        for uri in uris:
            try:
                client.request("resources/subscribe", {"uri": uri}, timeout=timeout)
                kept.append(uri)
            except McpError as error:
                if error.kind == "transport":
                    raise
                _log.info("the server refused resources/subscribe", uri=uri, error=error.message)
    except BaseException:
        for uri in fanout.remove(token):
            _unsubscribe(client, uri)
        raise
    fanout.set_uris(token, kept)
    if kept:
        accepted[subs.RESOURCES_KEY] = kept
    else:
        accepted.pop(subs.RESOURCES_KEY, None)

    def cancel() -> None:
        for uri in fanout.remove(token):
            _unsubscribe(client, uri)

    return Listening(dict(accepted), cancel)


def _unsubscribe(client: Client, uri: str) -> None:
    if client.closed:
        return
    try:
        client.request("resources/unsubscribe", {"uri": uri})
    except McpError as error:
        _log.info("resources/unsubscribe failed", uri=uri, error=error.message)
