"""The HTTP+SSE transport of 2024-11-05 (``snodo.Sse``, and ``snodo.Http``'s fallback).

A GET opens the server's event stream; its first event, ``endpoint``, names the URL where every
message is POSTed (answered 202); responses, server requests and notifications come back as
``message`` events on that one stream, read by a task of the connection's own. A request waits
in the calling thread for what the reader puts in its inbox: its response, its progress (the
progress function runs in the calling thread), or the stream's end. The HTTP itself is
Streamable HTTP's (``HttpTransport``: the same headers, TLS, token provider with its 401
refresh, limits and errors): one for the stream's URL, whose ``open_get_stream`` opens it, and
one for the endpoint, whose ``notify`` POSTs each message. The rules (the endpoint, the events,
the fallback) are ``snodo.protocol.legacy_sse``'s (docs/decisions/0040).

Server requests are answered by the input handlers in the connection's handler pool (at most
``max_server_requests`` at once, as on stdio: a stream has no calling thread to lend), and the
answer is POSTed. A POST is never sent twice. When the stream ends or breaks, every request
waiting on it fails at once with -32000 and the connection reports its end
(``EndReportingTransport``: the restart policy follows); an event over ``max_response_bytes``
ends the stream the same way, with ``cause`` ``("max_response_bytes", limit)``.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

import pykka

from snodo.actors.handler_pool import HandlerPool, HandlerTasks, RunHandler
from snodo.auth import TokenProvider
from snodo.interruptible import Task
from snodo.log import get_logger
from snodo.protocol import dialects, errors, jsonrpc, legacy_sse
from snodo.protocol.errors import McpError, too_large_error
from snodo.protocol.exchange import (
    Deadline,
    answered_without_handler,
    busy_reply,
    handler_raised_reply,
    progress_request_id,
    server_request_reply,
)
from snodo.protocol.sse import Event, EventTooLarge, SseParser
from snodo.protocol.streamable import EVENT_STREAM, event_message, response_to
from snodo.supervision import ChildSpec, connections, start_child, terminate_child
from snodo.transports.base import (
    BaseTransport,
    CacheIdentity,
    RequestOptions,
    ServerRequestHandler,
    TransportTraits,
)
from snodo.transports.http_inflight import Watchdog, closed_error
from snodo.transports.http_wire import Response, WireError
from snodo.transports.listening import SessionFanout
from snodo.transports.streamable_http import CANCEL_WAIT, READ_SIZE, HttpTransport
from snodo.transports.targets import Http, Sse

__all__ = [
    "HANDLERS_STOP",
    "MAX_QUEUED_PROGRESS",
    "READER_STOP",
    "STREAM_HEADERS",
    "SseTransport",
]

_log = get_logger("snodo.transports.http_sse")

#: The GET that opens the stream.
STREAM_HEADERS: Final[Mapping[str, str]] = {"Accept": EVENT_STREAM, "Cache-Control": "no-cache"}
#: Progress reports queued for one caller that has not taken them yet (more are dropped).
MAX_QUEUED_PROGRESS: Final = 1024
#: How long close() waits for the reader, and for the handler pool and then its tasks (s).
READER_STOP: Final = 2.0
HANDLERS_STOP: Final = 2.0
#: The handler pool once closing: no new one starts.
_STOPPED: Final = "stopped"
#: Names the handler pool of each connection under the connections supervisor.
_numbers = itertools.count(1)


class _Waiter:
    """One request waiting for its response: the reader fills ``inbox``."""

    __slots__ = ("dropped", "inbox", "queued")

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.queued = 0  # progress reports in the inbox
        self.dropped = 0


class SseTransport(BaseTransport):
    """One MCP server over the HTTP+SSE transport of 2024-11-05 (see the module docstring).

    Opening it opens the stream and reads the endpoint (within ``connect_timeout``); a failure
    there raises and leaves nothing open.
    """

    #: No Mcp-Name/Mcp-Param-* headers; no session DELETE (closing the stream ends it).
    traits = TransportTraits()

    def __init__(
        self,
        target: Sse,
        *,
        headers: Mapping[str, str] | None = None,
        token_provider: TokenProvider | None = None,
        max_response_bytes: int = 16 * 1024 * 1024,
        verify: bool = True,
        ca_certs: str | None = None,
        client_cert: str | tuple[str, str] | None = None,
        on_server_request: ServerRequestHandler | None = None,
        max_server_requests: int = 16,
        connect_timeout: float | None = 30.0,
    ) -> None:
        self.target = target
        self.url = target.url
        #: The session's notifications (log messages among them: ``snodo.server_logs``).
        self.session_events: SessionFanout = SessionFanout()
        self.max_response_bytes = max_response_bytes
        self._answer = on_server_request
        self._max_server_requests = max_server_requests
        self._lock = threading.Lock()
        self._waiting: dict[Any, _Waiter] = {}
        self._closed = False
        self._lost: McpError | None = None
        self._on_end: Callable[[McpError], None] | None = None
        self._reported_end = False
        self._handler_tasks = HandlerTasks()
        self._handler_pool: Any = None
        self._handlers_id = f"sse-{next(_numbers)}-handlers"
        self._reader: Task | None = None
        #: Answers to server requests wait this long for their POST (the client's timeout).
        self._reply_timeout = connect_timeout
        #: The events read with the endpoint event, after it (the reader dispatches them).
        self._early: list[Event] = []
        self._parser = SseParser(max_event_bytes=max_response_bytes)
        self.bytes_in = 0

        def http(url: str) -> HttpTransport:
            return HttpTransport(
                Http(url),
                headers=headers,
                token_provider=token_provider,
                max_response_bytes=max_response_bytes,
                verify=verify,
                ca_certs=ca_certs,
                client_cert=client_cert,
            )

        self._stream_http = http(target.url)
        self._poster: HttpTransport | None = None
        self._stream: Response | None = None
        try:
            started = time.monotonic()
            self._stream = self._stream_http.open_get_stream(STREAM_HEADERS, connect_timeout)
            endpoint = self._read_endpoint(Deadline.within(connect_timeout, started))
            self._poster = http(endpoint)
            for secret in legacy_sse.endpoint_secrets(endpoint):
                self._stream_http.settings.sent.add(secret)
                self._poster.settings.sent.add(secret)
            self.endpoint = endpoint
            self._start_handlers()
            self._reader = Task(self._read, "snodo-sse-reader")
        except BaseException:
            self._release()
            raise

    # -- Transport protocol ------------------------------------------------------------------

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        """POST a request, then wait for its response on the stream (-32001 at the deadline,
        after which ``notifications/cancelled`` is POSTed; -32000 when the stream ends)."""
        request_id = message["id"]
        deadline = Deadline.start(options, time.monotonic())
        waiter = _Waiter()
        with self._lock:
            self._check_usable()
            if request_id in self._waiting:
                raise ValueError(f"request id {request_id!r} is already in flight")
            self._waiting[request_id] = waiter
        try:
            try:
                self._post(message, options, deadline.remaining(time.monotonic()))
            except McpError as error:
                lost = self._lost  # the stream went first (its end then closed the POST)
                if lost is None or error.code == errors.REQUEST_TIMEOUT:
                    raise
                raise _copy(lost) from None
            while True:
                remaining = deadline.remaining(time.monotonic())
                if remaining is not None and remaining <= 0:
                    raise deadline.error(cause=("sse", "deadline"))
                try:
                    kind, value = waiter.inbox.get(timeout=remaining)
                except queue.Empty:
                    continue
                if kind == "response":
                    response: dict[str, Any] = value
                    return response
                if kind == "error":
                    raise _copy(value)
                with self._lock:
                    waiter.queued -= 1
                if options.on_progress is not None:
                    options.on_progress(value)
                    deadline = deadline.after_progress(time.monotonic())
        except McpError as error:
            if error.code == errors.REQUEST_TIMEOUT:
                self._cancel(message, options, error.message)
            raise
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)

    def notify(self, message: dict[str, Any], options: RequestOptions) -> None:
        """POST a notification (or an answer to a server request); 202 expected."""
        with self._lock:
            self._check_usable()
        self._post(message, options, options.timeout)

    def on_end(self, callback: Callable[[McpError], None]) -> None:
        """``EndReportingTransport``: ``callback(error)`` once the stream is gone."""
        with self._lock:
            self._on_end = callback
            ended = self._lost is not None and not self._closed
        if ended:
            self._report_end()

    def close(self) -> None:
        """End the stream (the server's cue that the session is over) and stop; idempotent.
        Every request waiting fails at once with -32000."""
        if self._handler_tasks.is_running_here():  # closing joins the handlers: not from one
            Task(self.close, "snodo-sse-close")
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            waiting = list(self._waiting.values())
        closed = closed_error()
        for waiter in waiting:
            waiter.inbox.put(("error", closed))
        self._release()
        self.session_events.end_all(errors.connection_error("Connection closed"))

    # -- declared optional members -----------------------------------------------------------

    def cache_identity(self) -> CacheIdentity:
        """The stream URL's, as Streamable HTTP's (URL, non-credential headers, TLS; the
        private partition from the credentials of the next request)."""
        return self._stream_http.cache_identity()

    def byte_counts(self) -> tuple[int, int]:
        """Event-stream bytes read and bytes POSTed (with their 202 answers)."""
        poster = self._poster
        read, posted = poster.byte_counts() if poster is not None else (0, 0)
        return self.bytes_in + read, posted

    # -- internals -----------------------------------------------------------------------------

    def _check_usable(self) -> None:
        """Raise when no request can go out (with the lock held)."""
        if self._closed:
            raise errors.with_outcome(
                errors.connection_error("Connection closed", cause=("closed",)), "not_sent"
            )
        if self._lost is not None:
            raise errors.with_outcome(_copy(self._lost), "not_sent")

    def _post(
        self, message: dict[str, Any], options: RequestOptions, timeout: float | None
    ) -> None:
        poster = self._poster
        assert poster is not None
        poster.notify(message, replace(options, timeout=timeout))

    def _cancel(self, message: dict[str, Any], options: RequestOptions, reason: str) -> None:
        """After a timeout, POST ``notifications/cancelled`` within ``CANCEL_WAIT`` (not for
        initialize); a failure is logged at debug only."""
        request_id = message.get("id")
        if message.get("method") == "initialize" or not jsonrpc.is_valid_id(request_id):
            return
        note = jsonrpc.cancelled_notification(request_id, reason)
        try:
            self._post(note, options, CANCEL_WAIT)
        except McpError as error:
            _log.debug("notifications/cancelled was not delivered", url=self.url, error=str(error))

    def _read_endpoint(self, deadline: Deadline) -> str:
        """Read the stream until its ``endpoint`` event, within ``deadline``: the POST URL."""
        response = self._stream
        assert response is not None
        watchdog = Watchdog()
        watchdog.arm(response, deadline.remaining(time.monotonic()))
        try:
            while True:
                try:
                    chunk = response.read1(READ_SIZE)
                except WireError as exc:
                    if watchdog.fired:
                        raise deadline.error(cause=("sse_endpoint", "deadline")) from None
                    raise errors.connection_error(
                        "The HTTP+SSE event stream broke off before its endpoint event",
                        cause=("http", str(exc)),
                    ) from None
                if not chunk:
                    if watchdog.fired:
                        raise deadline.error(cause=("sse_endpoint", "deadline"))
                    raise errors.connection_error(
                        "The HTTP+SSE event stream ended before its endpoint event",
                        cause=("sse_ended",),
                    )
                self.bytes_in += len(chunk)
                try:
                    events = self._parser.feed(chunk)
                except EventTooLarge:
                    raise too_large_error(self.max_response_bytes, "An event") from None
                for number, event in enumerate(events):
                    if legacy_sse.event_role(event.event, False) == "endpoint":
                        endpoint = legacy_sse.endpoint_url(self.url, event.data)
                        self._early = events[number + 1 :]
                        return endpoint
        finally:
            watchdog.cancel()

    def _read(self) -> None:
        """The reader task: dispatch each event until the stream ends, then fail the waiting
        requests and report the end (unless closing)."""
        response = self._stream
        assert response is not None
        lost: McpError
        try:
            for event in self._early:
                self._dispatch(event)
            while True:
                try:
                    chunk = response.read1(READ_SIZE)
                except WireError as exc:
                    lost = errors.connection_error(
                        "The HTTP+SSE event stream broke off", cause=("http", str(exc))
                    )
                    break
                if not chunk:
                    lost = errors.connection_error(
                        "The HTTP+SSE event stream ended", cause=("sse_ended",)
                    )
                    break
                self.bytes_in += len(chunk)
                try:
                    events = self._parser.feed(chunk)
                except EventTooLarge as exc:
                    for event in exc.events:
                        self._dispatch(event)
                    lost = too_large_error(self.max_response_bytes, "An event")
                    break
                for event in events:
                    self._dispatch(event)
        except Exception as exc:  # a bug here must still fail the waiting requests
            _log.exception("the HTTP+SSE reader failed", url=self.url)
            lost = errors.connection_error(
                "The HTTP+SSE event stream could not be read", cause=("sse", repr(exc))
            )
        self._lose(lost)

    def _lose(self, error: McpError) -> None:
        with self._lock:
            if self._closed or self._lost is not None:
                return
            self._lost = error
            waiting = list(self._waiting.values())
        for waiter in waiting:
            waiter.inbox.put(("error", error))
        _log.info("the HTTP+SSE stream is gone", url=self.url, error=error.message)
        self.session_events.end_all(error)
        self._report_end()

    def _report_end(self) -> None:
        with self._lock:
            callback, error = self._on_end, self._lost
            if callback is None or error is None or self._reported_end:
                return
            self._reported_end = True
        try:
            callback(error)
        except Exception:
            _log.exception("an end callback failed", url=self.url)

    def _dispatch(self, event: Event) -> None:
        """One event of the stream: a message to its waiting request, the handlers or the
        session's subscribers; anything else skipped."""
        try:
            role = legacy_sse.event_role(event.event, True)
        except McpError:
            return
        if role != "message":
            _log.debug("skipped an event", url=self.url, event=event.event)
            return
        item = event_message(event.data)
        if item is None:
            if event.data:
                _log.info("skipped an event that is not JSON-RPC", url=self.url)
            return
        method = item.get("method")
        if not isinstance(method, str):
            self._on_response(item)
        elif "id" in item:
            self._on_server_request(item, method)
        elif method == "notifications/progress":
            self._on_progress(item.get("params"))
        else:
            self.session_events.deliver(method, item.get("params"))

    def _on_response(self, item: dict[str, Any]) -> None:
        request_id = jsonrpc.refused_response_id(item)
        with self._lock:
            waiter = None if request_id is None else self._waiting.get(request_id)
        if waiter is None or request_id is None:
            _log.debug("a response no request waits for", url=self.url, id=item.get("id"))
            return
        try:
            answer = response_to(item, request_id)
        except McpError as error:
            waiter.inbox.put(("error", error))
            return
        if answer is not None:
            waiter.inbox.put(("response", answer))

    def _on_progress(self, params: Any) -> None:
        token = progress_request_id(params)
        with self._lock:  # the caller takes reports off ``queued`` on its own thread
            waiter = None if token is None else self._waiting.get(token)
            if waiter is None:
                return
            full = waiter.queued >= MAX_QUEUED_PROGRESS
            if full:
                waiter.dropped += 1
                first_drop = waiter.dropped == 1
            else:
                waiter.queued += 1
        if not full:
            waiter.inbox.put(("progress", params))
        elif first_drop:
            _log.warning("dropping progress reports for a slow caller", url=self.url, id=token)

    def _on_server_request(self, item: dict[str, Any], method: str) -> None:
        """Reply at once when no handler has to run (ping, or no handler at all); else run
        the handler in the pool. A handler that raises is answered -32603 (as on stdio)."""
        request_id, params = item["id"], item.get("params")
        answer = self._answer
        if answer is None or answered_without_handler(method, params):
            self._reply(server_request_reply(request_id, method, params, None))
            return

        def run() -> None:
            try:
                reply = server_request_reply(request_id, method, params, answer)
            except Exception as exc:
                _log.warning("an input handler raised", url=self.url, method=method)
                reply = handler_raised_reply(request_id, exc)
            self._reply(reply)

        pool = self._handler_pool
        try:
            if pool is None or pool is _STOPPED:
                raise pykka.ActorDeadError("closed")
            pool.tell(RunHandler(run, lambda: self._reply(busy_reply(request_id))))
        except pykka.ActorDeadError:
            self._reply(busy_reply(request_id))

    def _reply(self, reply: dict[str, Any]) -> None:
        """POST the answer to a server request (a failure is logged: the server's request
        then goes unanswered, as when the connection is gone)."""
        options = RequestOptions(
            dialect=dialects.get(legacy_sse.LEGACY_VERSION), timeout=self._reply_timeout
        )
        try:
            with self._lock:
                self._check_usable()
            self._post(reply, options, options.timeout)
        except McpError as error:
            _log.info("the answer to a server request was not delivered", error=error.message)

    def _start_handlers(self) -> None:
        limit, tasks = self._max_server_requests, self._handler_tasks
        spec = ChildSpec(
            id=self._handlers_id,
            start=lambda: HandlerPool.start(limit, tasks),
            restart="temporary",
            shutdown=HANDLERS_STOP,
        )
        self._handler_pool = start_child(connections(), spec)

    def _stop_handlers(self) -> None:
        with self._lock:
            pool, self._handler_pool = self._handler_pool, _STOPPED
        if pool is not None and pool is not _STOPPED:
            try:
                terminate_child(connections(), self._handlers_id, HANDLERS_STOP + 1.0)
            except Exception:
                _log.debug("the handler pool had ended", url=self.url)
        self._handler_tasks.interrupt_and_join(HANDLERS_STOP)

    def _release(self) -> None:
        """Shut the stream down, join the reader, stop the handlers, close both HTTP sides."""
        stream = self._stream
        if stream is not None:
            stream.shutdown()
        reader = self._reader
        if reader is not None and not reader.is_current():
            reader.join(READER_STOP)
        if stream is not None:
            stream.close()
        self._stop_handlers()
        if self._poster is not None:
            self._poster.close()
        self._stream_http.close()


def _copy(error: McpError) -> McpError:
    """A fresh copy: one error fails every request waiting on a lost stream."""
    return McpError(error.code, error.message, error.data, kind=error.kind, cause=error.cause)
