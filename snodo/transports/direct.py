"""The in-process transport: message dicts go straight into a Runtime's dispatch, no JSON text.

A request without ``progress`` is dispatched in the calling thread (the fast path). With
``progress`` the dispatch runs in a linked task (a thread, or a greenlet under gevent) while the
caller receives the reports and calls the progress function itself, as the reference says. Input
handlers for server-to-client requests always run in the caller's thread; an exception they raise
propagates to the caller, as it does for an input handler of a multi round-trip call.

``close()`` fails every pending call with -32000: a linked call at once (its handler runs on in
its task, told ``notifications/cancelled``); an inline call, which runs the handler in the
caller's own thread, when the handler returns; the handler is told ``notifications/cancelled``
at once, so one that watches ``ctx.cancelled`` returns early (docs/decisions/0029).
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Any

from snodo.protocol import errors, jsonrpc
from snodo.protocol.errors import McpError
from snodo.protocol.exchange import not_acknowledged_error, server_request_result
from snodo.transports.base import (
    BaseTransport,
    CacheIdentity,
    RequestOptions,
    ServerRequestHandler,
    TransportTraits,
)
from snodo.transports.listening import (
    Listening,
    SessionFanout,
    StreamRoute,
    SubscriptionSink,
)

if TYPE_CHECKING:
    from snodo.server import Peer, Runtime

__all__ = [
    "CHANNEL_SIZE",
    "LIVENESS_INTERVAL",
    "DirectTransport",
]

#: Bound on undelivered progress reports and server requests between the task and the caller.
CHANNEL_SIZE = 64
#: How often a waiting caller checks that its linked task is still alive (seconds).
LIVENESS_INTERVAL = 0.5

_current = threading.local()


class _Abandoned(Exception):
    """Raised inside a linked task whose caller stopped waiting."""


class _InlineCall:
    """A request dispatched in the caller's own thread."""

    def __init__(self, answer: ServerRequestHandler | None) -> None:
        self.answer = answer
        self.raised: BaseException | None = None

    def server_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return server_request_result(method, params, self.answer)
        except McpError:
            raise
        except Exception as exc:
            # The handler's exception reaches the caller once dispatch returns.
            self.raised = exc
            raise errors.internal_error("The client's input handler raised") from exc


class _TaskCall:
    """A request dispatched in a linked task; the caller drains ``channel``."""

    def __init__(self) -> None:
        self.channel: queue.Queue[tuple[str, Any]] = queue.Queue(CHANNEL_SIZE)
        self.abandoned = threading.Event()
        self.raised: BaseException | None = None
        self.closed = False  # close() failed the call; the caller raises -32000

    def close(self) -> None:
        """Fail the waiting caller now (it wakes on the channel, or sees the flag next)."""
        self.closed = True
        try:
            self.channel.put_nowait(("closed", None))
        except queue.Full:
            pass  # the caller has items to take and checks the flag after each one

    def post(self, kind: str, value: Any) -> None:
        while True:
            if self.abandoned.is_set():
                raise _Abandoned("The client stopped waiting")
            try:
                self.channel.put((kind, value), timeout=LIVENESS_INTERVAL)
                return
            except queue.Full:
                continue

    def progress(self, params: dict[str, Any]) -> None:
        self.post("progress", params)

    def server_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        reply: queue.Queue[tuple[bool, Any]] = queue.Queue(1)
        self.post("server_request", (method, params, reply))
        while True:
            if self.abandoned.is_set():
                raise _Abandoned("The client stopped waiting")
            try:
                ok, value = reply.get(timeout=LIVENESS_INTERVAL)
            except queue.Empty:
                continue
            if ok:
                result: dict[str, Any] = value
                return result
            if isinstance(value, McpError):
                raise value
            self.raised = value
            raise errors.internal_error("The client's input handler raised")


class DirectTransport(BaseTransport):
    """Serves one client from a Runtime in this process."""

    traits = TransportTraits()

    def __init__(self, runtime: Runtime) -> None:
        from snodo.server import Peer, ServerSession

        self._runtime = runtime
        #: The session-era notifications of this connection, fanned out to subscriptions.
        self.session_events: SessionFanout = SessionFanout()
        #: Where a request's notifications from the runtime go (``ctx.log``), made once.
        self._notified = self.session_events.deliver
        self._peer: Peer = Peer(
            kind="direct", session=ServerSession(), server_request=self._server_request
        )
        self._closed = False
        self._linked: set[_TaskCall] = set()  # linked calls in flight, failed by close()
        self._linked_lock = threading.Lock()

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        """Dispatch ``message`` and return the response (direct requests have no timeout)."""
        if self._closed:
            raise errors.connection_error("Connection closed")
        if options.on_progress is None:
            response = self._dispatch_inline(message, options.on_server_request)
            if self._closed:
                # close() came while the handler ran in this thread: it was told, and the
                # call fails like every other pending call (its answer is not used).
                raise errors.connection_error("Connection closed", cause=("closed",))
        else:
            response = self._dispatch_linked(message, options)
        if response is None:
            raise errors.connection_error(
                "The runtime answered a request with no response",
                cause=("no_response", message.get("method")),
            )
        if message.get("method") == "initialize" and "result" in response:
            self._open_session_channel()
        return response

    def listen(
        self, message: dict[str, Any], options: RequestOptions, sink: SubscriptionSink
    ) -> Listening:
        """Serve ``subscriptions/listen`` from the runtime: the server-side subscription emits
        its messages straight into this stream's route (no JSON text); cancelling closes the
        source. ``close()`` of the client leaves it open."""
        from snodo.server import Peer, dispatch
        from snodo.server.subscriptions import ServerSubscription

        if self._closed:
            raise errors.connection_error("Connection closed")
        taken: list[ServerSubscription] = []
        peer = Peer("direct", session=None, listen=taken.append)
        response = dispatch(self._runtime, message, peer)
        if not taken:
            if response is not None and isinstance(response.get("error"), dict):
                raise McpError.from_wire(response["error"])
            raise not_acknowledged_error()
        sub = taken[0]
        route = StreamRoute(message["id"], sink)
        sub.start(route.on_message)
        accepted = route.wait_ack(0)

        def cancel() -> None:
            route.silence()
            sub.close()

        return Listening(accepted, cancel)

    def _open_session_channel(self) -> None:
        from snodo.server.subscriptions import open_session_channel

        def emit(note: dict[str, Any]) -> None:
            self.session_events.deliver(note["method"], note.get("params"))

        open_session_channel(self._runtime, self._peer.session, emit)

    def notify(self, message: dict[str, Any], options: RequestOptions) -> None:
        """Deliver a notification to the runtime."""
        if self._closed:
            raise errors.connection_error("Connection closed")
        self._dispatch_inline(message, options.on_server_request)

    def close(self) -> None:
        """Fail every pending call with -32000: linked calls at once, inline ones when their
        handler (told ``notifications/cancelled`` now) returns; end session subscriptions."""
        from snodo.server import dispatch
        from snodo.server.subscriptions import close_session_channel

        self._closed = True
        with self._linked_lock:
            linked = list(self._linked)
        for call in linked:
            call.close()
        for request_id in list(self._peer.inflight):  # inline and linked handlers alike
            dispatch(
                self._runtime,
                jsonrpc.cancelled_notification(request_id, "Connection closed"),
                self._peer,
            )
        close_session_channel(self._peer.session)
        self.session_events.end_all(errors.connection_error("Connection closed"))

    def cache_identity(self) -> CacheIdentity:
        """Clients of the same Runtime share public results; one private partition per Runtime
        (no credentials in process, and no session id)."""
        from snodo.cache import namespace_of

        return CacheIdentity(namespace_of("direct", self._runtime), _direct_partition)

    def _server_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        call: _InlineCall | _TaskCall | None = getattr(_current, "call", None)
        if call is None:
            raise errors.internal_error("No client request is in flight to carry a server request")
        return call.server_request(method, params)

    def _dispatch_inline(
        self, message: dict[str, Any], answer: ServerRequestHandler | None
    ) -> dict[str, Any] | None:
        from snodo.server import dispatch

        call = _InlineCall(answer)
        outer = getattr(_current, "call", None)
        _current.call = call
        try:
            response = dispatch(self._runtime, message, self._peer, notify=self._notified)
        finally:
            _current.call = outer
        if call.raised is not None:
            raise call.raised
        return response

    def _dispatch_linked(
        self, message: dict[str, Any], options: RequestOptions
    ) -> dict[str, Any] | None:
        from snodo.server import dispatch

        call = _TaskCall()
        runtime, peer, notified = self._runtime, self._peer, self._notified

        def run() -> None:
            _current.call = call
            try:
                outcome: tuple[str, Any] = (
                    "done",
                    dispatch(runtime, message, peer, progress=call.progress, notify=notified),
                )
            except BaseException as exc:  # contained: reported to the caller, never lost
                outcome = ("crash", exc)
            try:
                call.post(*outcome)
            except _Abandoned:
                pass

        with self._linked_lock:
            self._linked.add(call)
        try:
            if self._closed:  # close() may have missed this call: fail it here
                raise errors.connection_error("Connection closed", cause=("closed",))
            task = threading.Thread(target=run, name="snodo-direct-request", daemon=True)
            task.start()
            try:
                return self._drain(call, task, options)
            except BaseException:
                self._abandon(call, message)
                raise
        finally:
            with self._linked_lock:
                self._linked.discard(call)

    def _drain(
        self, call: _TaskCall, task: threading.Thread, options: RequestOptions
    ) -> dict[str, Any] | None:
        assert options.on_progress is not None
        while True:
            if call.closed:
                raise errors.connection_error("Connection closed", cause=("closed",))
            try:
                kind, value = call.channel.get(timeout=LIVENESS_INTERVAL)
            except queue.Empty:
                if not task.is_alive() and call.channel.empty():
                    raise errors.connection_error(
                        "The in-process request ended without a response"
                    ) from None
                continue
            if kind == "progress":
                options.on_progress(value)
            elif kind == "server_request":
                method, params, reply = value
                reply.put(self._answer(options.on_server_request, method, params))
            elif kind == "crash":
                raise value
            elif kind == "closed":
                continue  # close() failed the call: the loop raises
            else:
                if call.raised is not None:
                    raise call.raised
                response: dict[str, Any] | None = value
                return response

    @staticmethod
    def _answer(
        answer: ServerRequestHandler | None, method: str, params: dict[str, Any]
    ) -> tuple[bool, Any]:
        try:
            return True, server_request_result(method, params, answer)
        except Exception as exc:
            return False, exc

    def _abandon(self, call: _TaskCall, message: dict[str, Any]) -> None:
        """The caller stopped waiting: cancel the request in the runtime and free the task."""
        from snodo.server import dispatch

        call.abandoned.set()
        cancelled = jsonrpc.cancelled_notification(message["id"], "The client stopped waiting")
        dispatch(self._runtime, cancelled, self._peer)


def _direct_partition() -> str:
    return "direct"
