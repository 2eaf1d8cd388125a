"""``Client.listen``: the :class:`Subscription` handle and how a listen is opened.

One ``SubscriptionStream`` actor per subscription holds its buffer and demand
(``snodo.actors.subscription_stream``). The transport feeds it through a sink that first shows
every event to the client's observer (the response cache's hook). What opening a subscription
needs from the client comes in a :class:`ListenContext` the client builds. The owner (the
calling thread, greenlet or snodo actor, or ``owner=``) is watched: when it ends, the
subscription is cancelled. An actor owner receives ``SubscriptionEvent(ref, event)`` messages;
any other owner pulls with ``next()`` or iteration.

2026-07-28 connections use the transport's ``listen``; session-era ones map the filter onto
``resources/subscribe`` and the session's list-changed notifications (docs/decisions/0017).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pykka

from snodo.actors.subscription_stream import SubscriptionStream
from snodo.log import get_logger
from snodo.protocol import errors
from snodo.protocol import subscriptions as subs
from snodo.protocol.dialects import Dialect
from snodo.protocol.errors import McpError
from snodo.protocol.negotiation import Session
from snodo.protocol.subscriptions import (
    Closed,
    Dropped,
    Event,
    Gap,
    Notification,
    SubscriptionEvent,
)
from snodo.stats import CallStats
from snodo.supervision import (
    CallTimeout,
    Owner,
    OwnerWatch,
    call,
    current_owner,
    owner_of,
    stop,
    watch,
)
from snodo.transports.base import ListeningTransport, RequestOptions, Transport
from snodo.transports.listening import Listening, SessionFanout

_log = get_logger("snodo.subscription")

#: How long close() waits for the stream actor to acknowledge (it never blocks in a handler).
CLOSE_WAIT = 5.0


@dataclass(frozen=True, slots=True)
class ListenContext:
    """What opening a subscription needs from the client that opens it."""

    transport: Transport
    dialect: Dialect
    #: The session-era session (its capabilities say what the server can notify), or None.
    session: Session | None
    #: Builds the ``subscriptions/listen`` request and its options (2026-07-28):
    #: ``(notifications, timeout, meta, trace_context) -> (message, options)``.
    listen_message: Callable[
        [dict[str, Any], float | None, Mapping[str, Any] | None, Mapping[str, Any] | None],
        tuple[dict[str, Any], RequestOptions],
    ]
    #: Sees every event before its owner demands it (the response cache's invalidation).
    observe: Callable[[str, dict[str, Any]], None]
    #: A request on the connection (session era: ``resources/subscribe`` and unsubscribe).
    request: Callable[..., Any]
    #: Whether the client was closed.
    is_closed: Callable[[], bool]
    #: The transport's fan-out of session notifications (``session_events_of``), or None.
    session_events: SessionFanout | None
    #: On a connection that restarts: ``park(resume, error)`` keeps a stream cut off by
    #: ``error`` to be opened again after the restart (``snodo.lifecycle``); None elsewhere.
    park: (
        Callable[[Callable[[ListenContext | None, McpError | None], None], McpError], bool] | None
    ) = None
    #: The client's counters: events handed to the owner, and drops (``Client.stats()``).
    stats: CallStats | None = None


class _Sink:
    """The transport's way into the stream actor (never blocks long, never raises)."""

    __slots__ = ("_cut", "_observe", "_ref")

    def __init__(self, observe: Callable[[str, dict[str, Any]], None], ref: Any) -> None:
        self._observe = observe
        self._ref = ref
        #: On a connection that restarts: takes an end by error; True when it will resume.
        self._cut: Callable[[McpError], bool] | None = None

    def on_cut(self, cut: Callable[[McpError], bool]) -> None:
        self._cut = cut

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
        cut = self._cut
        if error is not None and cut is not None and cut(error):
            return  # opened again after the restart, with a Gap first
        try:
            self._ref.tell(("end", Closed(error)))
        except Exception:
            pass


class Subscription:
    """An open ``subscriptions/listen`` stream (see ``Client.listen``): iterate it for the
    events the filter asked for, delivered against demand so a slow consumer cannot be flooded."""

    def __init__(
        self,
        ref: Any,
        owner: Owner,
        mailbox: queue.SimpleQueue[Event] | None,
        listening: Listening,
    ) -> None:
        """An acknowledged ``listening`` fed into the stream actor ``ref``; ``owner`` is watched
        from here on (``mailbox``: where a pulling owner's events wait, None for an actor)."""
        self.ref = ref
        self.owner = owner
        self.accepted: dict[str, Any] = listening.accepted
        self._mailbox = mailbox
        self._listening: Listening | None = listening
        self._watch: OwnerWatch | None = None
        self._lock = threading.Lock()
        self._ended = False  # Closed was returned, or close() ran
        self._cancelled = False
        self._owed = False  # next() timed out with its demand outstanding
        self._watch = watch(owner, self._owner_down)

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

    def ended_elsewhere(self) -> None:
        """The reader took the ``Closed`` event from ``into`` (``snodo.aio``): the owner is no
        longer watched, as after ``next()`` returned it. Never blocks."""
        self._end_here()

    def resumed(self, listening: Listening) -> None:
        """The stream was opened again on a restarted connection (``snodo.lifecycle``)."""
        with self._lock:
            cancelled = self._cancelled
            if not cancelled:
                self._listening = listening
                self.accepted = listening.accepted
        if cancelled:
            listening.cancel()

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
        from snodo.interruptible import Task

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
    context: ListenContext,
    notifications: Mapping[str, Any],
    *,
    timeout: float | None,
    max_buffer: int,
    overflow: str,
    owner: Any,
    meta: Mapping[str, Any] | None,
    trace_context: Mapping[str, Any] | None,
    into: Callable[[Event], None] | None = None,
) -> Subscription:
    """Start the stream actor, open the listen on the transport, watch the owner.

    ``into``: where the events go instead of the owner (``snodo.aio``: the event loop);
    ``next()`` is then refused, the demand is the caller's.
    """
    requested = subs.client_filter(notifications)
    subs.check_buffer(max_buffer, overflow)
    dialect = context.dialect
    transport = context.transport
    if dialect.stateless and not isinstance(transport, ListeningTransport):
        raise TypeError(f"{type(transport).__name__} has no listen(); it cannot subscribe")
    if context.is_closed():
        raise errors.connection_error("Connection closed")
    who = owner_of(owner) if owner is not None else current_owner()
    mailbox: queue.SimpleQueue[Event] | None = None
    box: list[Any] = []
    deliver: Callable[[Event], None]
    counters = context.stats
    if into is not None:
        deliver = into
    elif who.kind == "actor":
        target = who.target

        def tell(event: Event) -> None:
            try:
                target.tell(SubscriptionEvent(box[0], event))
            except Exception:
                pass  # the owner is gone; its watch cancels the subscription

        deliver = tell
    else:
        pull: queue.SimpleQueue[Event] = queue.SimpleQueue()
        mailbox = pull
        deliver = pull.put

    if counters is not None:
        handed = deliver

        def deliver(event: Event) -> None:
            if isinstance(event, Notification):
                counters.events += 1
            elif isinstance(event, Dropped):
                counters.dropped += event.n
            handed(event)

    ref = SubscriptionStream.start(deliver, max_buffer, overflow)
    box.append(ref)
    sink = _Sink(context.observe, ref)

    def open_listening(on: ListenContext, events: _Sink) -> Listening:
        if isinstance(on.transport, ListeningTransport) and on.dialect.stateless:
            message, options = on.listen_message(requested, timeout, meta, trace_context)
            return on.transport.listen(message, options, events)
        return _listen_session(on, requested, events, timeout)

    try:
        listening = open_listening(context, sink)
    except BaseException:
        stop(ref, timeout=CLOSE_WAIT)
        raise
    subscription = Subscription(ref, who, mailbox, listening)
    if context.park is not None:
        _Resumption(context.park, subscription, sink, open_listening)
    return subscription


class _Resumption:
    """A subscription on a connection that restarts: cut off by an end, it is parked with the
    connection's lifecycle and opened again after the restart (a ``Gap`` first), or ends with
    ``Closed`` when the connection closes for good."""

    __slots__ = ("_cut_by", "_open", "_park", "_sink", "_subscription")

    def __init__(
        self,
        park: Callable[[Callable[[ListenContext | None, McpError | None], None], McpError], bool],
        subscription: Subscription,
        sink: _Sink,
        open_listening: Callable[[ListenContext, _Sink], Listening],
    ) -> None:
        self._park = park
        self._subscription = subscription
        self._sink = sink
        self._open = open_listening
        self._cut_by: McpError | None = None
        sink.on_cut(self._cut)

    def _cut(self, error: McpError) -> bool:
        if self._subscription.closed:
            return False
        if self._cut_by is None:
            self._cut_by = error
        return self._park(self._resume, error)

    def _resume(self, context: ListenContext | None, error: McpError | None) -> None:
        ref = self._subscription.ref
        if context is None or self._subscription.closed:
            closed = error if error is not None else errors.connection_error("Connection closed")
            _tell(ref, ("end", Closed(closed)))
            return
        self._park = context.park or self._park
        try:
            listening = self._open(context, self._sink)
        except McpError as failure:
            if not self._cut(failure):
                _tell(ref, ("end", Closed(failure)))
            return
        _tell(ref, ("gap", Gap(self._cut_by)))
        self._cut_by = None
        self._subscription.resumed(listening)


def _tell(ref: Any, message: Any) -> None:
    try:
        ref.tell(message)
    except Exception:  # the stream has ended
        pass


def _listen_session(
    context: ListenContext, requested: dict[str, Any], sink: _Sink, timeout: float | None
) -> Listening:
    """Session era: filter the session's notifications; resources/subscribe each URI."""
    session = context.session
    caps = session.capabilities if session is not None else {}
    accepted, uris = subs.session_accepts(requested, caps or {})
    if uris:
        accepted[subs.RESOURCES_KEY] = list(uris)
    # A transport with no fan-out delivers no session notifications: the subscription then
    # sees none (resources/subscribe is still sent), as before transports declared theirs.
    fanout = context.session_events if context.session_events is not None else SessionFanout()
    token = fanout.add(accepted, sink)
    kept: list[str] = []
    try:
        for uri in uris:
            try:
                context.request("resources/subscribe", {"uri": uri}, timeout=timeout)
                kept.append(uri)
            except McpError as error:
                if error.kind == "transport":
                    raise
                _log.info("the server refused resources/subscribe", uri=uri, error=error.message)
    except BaseException:
        for uri in fanout.remove(token):
            _unsubscribe(context, uri)
        raise
    fanout.set_uris(token, kept)
    if kept:
        accepted[subs.RESOURCES_KEY] = kept
    else:
        accepted.pop(subs.RESOURCES_KEY, None)

    def cancel() -> None:
        for uri in fanout.remove(token):
            _unsubscribe(context, uri)

    return Listening(dict(accepted), cancel)


def _unsubscribe(context: ListenContext, uri: str) -> None:
    if context.is_closed():
        return
    try:
        context.request("resources/unsubscribe", {"uri": uri})
    except McpError as error:
        _log.info("resources/unsubscribe failed", uri=uri, error=error.message)


__all__ = ["CLOSE_WAIT", "ListenContext", "Subscription", "open_subscription"]
