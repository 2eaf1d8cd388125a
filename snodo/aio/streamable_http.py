"""Streamable HTTP requests driven on the event loop: asyncio connections on the sans-IO layer.

:class:`AsyncHttp` sends the requests of a connected :class:`HttpTransport` (its URL, session,
headers, credentials and TLS: ``HttpTransport.settings``) over HTTP/1.1 keep-alive connections
of its own, framed by ``snodo.protocol.http1`` and read by ``snodo.protocol.sse`` and
``snodo.protocol.streamable``, as httpcore does over h11: no thread per request. Errors are the
sync transport's for the same server behaviour (``streamable_http.wire_failure``). Cancelling
the task awaiting a request closes that request's connection at once (the server's cue to
cancel); a session-era request also gets its ``notifications/cancelled`` from a background
task the requester tracks.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from collections import deque
from functools import partial
from typing import Any, Final
from urllib.parse import urlsplit

from snodo.aio.seam import AsyncCallbacks, settle
from snodo.aio.workers import workers
from snodo.auth import (
    CachingTokenProvider,
    Challenge,
    bearer_header,
    check_token,
    needs_refresh,
    select_challenge,
    unauthorized_error,
)
from snodo.log import get_logger
from snodo.protocol import errors, http1, jsonrpc, redaction, streamable
from snodo.protocol.errors import McpError
from snodo.protocol.exchange import (
    Deadline,
    answered_without_handler,
    is_progress_for,
    server_request_reply,
)
from snodo.protocol.headers import mcp_headers, stream_headers
from snodo.protocol.http1 import FramingError, HeadTooLarge
from snodo.protocol.sse import EventTooLarge, SseParser
from snodo.protocol.streamable import (
    is_event_stream,
    may_resume,
    messages_in,
    read_post_answer,
    response_to,
    retry_delay,
)
from snodo.transports import http_wire, tls
from snodo.transports.base import RequestOptions
from snodo.transports.http_inflight import closed_error
from snodo.transports.http_wire import ConnectError, NoResponse, WireError, WireTimeout
from snodo.transports.streamable_http import (
    ACCEPT,
    CANCEL_WAIT,
    DEADLINE_CAUSE,
    REFUSAL_READ,
    HttpTransport,
    nonce_challenge,
    too_large_error,
    wire_failure,
)

__all__ = ["HIGH_WATER", "IDLE_TIMEOUT", "MAX_IDLE", "AsyncHttp"]

_log = get_logger("snodo.aio.streamable_http")

#: Idle keep-alive connections one requester keeps (the oldest is closed past this), and for how
#: long: as the sync pool (``http_wire``).
MAX_IDLE: Final = http_wire.MAX_IDLE
IDLE_TIMEOUT: Final = http_wire.IDLE_TIMEOUT
#: Bytes buffered from one connection before it stops reading (flow control).
HIGH_WATER: Final = 256 * 1024
_MAX_INTERIM: Final = http_wire.MAX_INTERIM
_NO_RESPONSE: Final = (
    "the server closed the connection without a response; the request was sent whole, so its"
    " outcome is unknown"
)
_CUT: Final = "the connection was shut down"
_NEVER: Final = float("inf")


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


class _Wire(asyncio.Protocol):
    """One connection: the bytes received and not yet read, its end, and (idle) its expiry."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        #: Received, not yet read: usually one segment, kept as it came.
        self.buf: bytes | bytearray = b""
        self.ended = False
        self.cut = False  # shut down by us (a deadline, a cancellation, aclose)
        self.reused = False
        self.expires = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._writing: asyncio.Future[None] | None = None  # set while writing is paused

    # -- asyncio.Protocol --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        if not buf:
            self.buf = data
        elif isinstance(buf, bytearray):
            buf += data
        else:
            self.buf = bytearray(buf) + data
        if len(self.buf) > HIGH_WATER and not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()
        _wake(self._waiter)

    def eof_received(self) -> bool | None:
        self.ended = True
        _wake(self._waiter)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        _wake(self._waiter)
        _wake(self._writing)

    def pause_writing(self) -> None:
        if self._writing is None:
            self._writing = self.loop.create_future()

    def resume_writing(self) -> None:
        writing, self._writing = self._writing, None
        _wake(writing)

    # -- use --

    async def send(self, data: bytes) -> None:
        """Write ``data``, waiting while the transport's buffer is full."""
        if self.transport is None or self.ended:
            raise WireError("send failed: the connection is closed")
        self.transport.write(data)
        while self._writing is not None and not self.ended:
            await self._writing

    async def receive(self) -> bytes:
        """The bytes received since the last call, waiting for some (b"" at the end)."""
        while not self.buf:
            if self.ended:
                return b""
            waiter = self._waiter = self.loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        data, self.buf = self.buf, b""
        if isinstance(data, bytearray):
            data = bytes(data)
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        return data

    @property
    def usable(self) -> bool:
        """Idle and fit for another request: open, nothing unread."""
        transport = self.transport
        return not (self.ended or self.buf or transport is None or transport.is_closing())

    def abort(self) -> None:
        """Close at once (the server sees the stream closed); a read waiting returns."""
        self.cut = True
        self.ended = True
        transport = self.transport
        if transport is not None:
            transport.abort()
        _wake(self._waiter)
        _wake(self._writing)

    def close(self) -> None:
        self.ended = True
        transport = self.transport
        if transport is not None:
            try:
                transport.close()
            except RuntimeError:  # its loop is closed already
                pass


class _Response:
    """A response head and its body, read on demand with its framing (``http1.body_framing``)."""

    __slots__ = (
        "_chunked",
        "_done",
        "_left",
        "_mode",
        "_pending",
        "_requester",
        "_reusable",
        "flight",
        "headers",
        "status",
        "wire",
    )

    def __init__(
        self, requester: AsyncHttp, wire: _Wire, head: http1.Head, method: str, rest: bytes
    ) -> None:
        self._requester = requester
        self.wire: _Wire | None = wire
        #: The flight whose timer or aclose() cuts this response's connection.
        self.flight: _Flight | None = None
        self.status = head.status
        self.headers = head.headers
        self._mode, self._left = http1.body_framing(head, method)
        self._chunked = http1.ChunkedDecoder() if self._mode == "chunked" else None
        self._reusable = http1.keeps_alive(head) and self._mode in ("none", "length", "chunked")
        self._done = self._mode == "none" or (self._mode == "length" and self._left == 0)
        self._pending = rest

    async def read(self) -> bytes:
        """The next body bytes (b"" at the end of the body); WireError when it breaks off."""
        wire = self.wire
        while not self._done and wire is not None:
            data, self._pending = self._pending, b""
            if not data:
                data = await wire.receive()
            if not data:
                self._reusable = False
                if wire.cut:
                    raise WireError(_CUT)
                if self._mode == "close":
                    self._done = True
                    return b""
                raise WireError("the connection closed before the end of the body")
            if self._mode == "length":
                take = data[: self._left]
                self._pending = data[len(take) :]
                self._left -= len(take)
                self._done = self._left == 0
                return take
            if self._mode == "close":
                return data
            assert self._chunked is not None
            try:
                body, rest = self._chunked.feed(data)
            except FramingError as exc:
                self._reusable = False
                raise WireError(str(exc)) from None
            if self._chunked.done:
                self._done = True
                self._pending = rest
            if body:
                return body
        return b""

    def release(self) -> None:
        """Give the connection back for reuse when the body was read to its end (nothing after
        it); else close it at once."""
        wire, self.wire = self.wire, None
        if wire is None:
            return
        self._detach(wire)
        if self._done and self._reusable and not self._pending and not wire.cut and wire.usable:
            self._requester.checkin(wire)
        else:
            wire.abort()

    def discard(self) -> None:
        """Give up on the response: its connection is closed at once, never reused."""
        wire, self.wire = self.wire, None
        if wire is not None:
            self._detach(wire)
            wire.abort()

    def watched_by(self, flight: _Flight) -> None:
        """``flight``'s timer and aclose() cut this response from now on."""
        self._detach(self.wire)
        self.flight = flight
        flight.wire = self.wire

    def _detach(self, wire: _Wire | None) -> None:
        flight, self.flight = self.flight, None
        if flight is not None and flight.wire is wire:
            flight.wire = None


class _Flight:
    """One request (or one POST of its own) in flight: the connection it waits on, when its
    deadline passes, and whether it passed or aclose() cut the flight."""

    __slots__ = ("closed", "closing", "connecting", "deadlines", "ends", "fired", "wire")

    def __init__(self, deadlines: _Deadlines) -> None:
        self.deadlines = deadlines
        self.wire: _Wire | None = None
        self.connecting: asyncio.Future[Any] | None = None
        self.closing: asyncio.Future[None] | None = None  # made by a wait that aclose() ends
        self.ends: float | None = None  # monotonic; None: no deadline now
        self.fired = False
        self.closed = False

    def arm(self, loop: asyncio.AbstractEventLoop, ends: float | None) -> None:
        """Cut the flight at monotonic time ``ends`` (None: never); replaces an earlier arm."""
        self.ends = ends
        if ends is not None:
            self.deadlines.watch(loop, ends)

    def fire(self) -> None:
        self.ends = None
        self.fired = True
        self._cut()

    def close(self) -> None:
        self.closed = True
        self._cut()
        _wake(self.closing)

    def _cut(self) -> None:
        if self.connecting is not None:
            self.connecting.cancel()
        if self.wire is not None:
            self.wire.abort()

    def end(self) -> None:
        self.ends = None


class _Deadlines:
    """One loop timer for the deadlines of every flight of a requester, armed at the earliest
    (no timer made per request: a later deadline waits for the earlier one's tick)."""

    __slots__ = ("_at", "_flights", "_timer")

    def __init__(self, flights: set[_Flight]) -> None:
        self._flights = flights
        self._timer: asyncio.TimerHandle | None = None
        self._at = _NEVER

    def watch(self, loop: asyncio.AbstractEventLoop, ends: float) -> None:
        """A flight's deadline is ``ends``: the timer fires by then."""
        if ends >= self._at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._at = ends
        self._timer = loop.call_later(max(0.0, ends - time.monotonic()), self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cut the flights whose deadline passed; wait for the next one."""
        self._timer = None
        self._at = _NEVER
        now = time.monotonic()
        nearest = _NEVER
        for flight in list(self._flights):
            ends = flight.ends
            if ends is None:
                continue
            if ends <= now:
                flight.fire()
            elif ends < nearest:
                nearest = ends
        if nearest < _NEVER:
            self.watch(loop, nearest)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._at = _NEVER


class AsyncHttp:
    """Sends a connected :class:`HttpTransport`'s requests from the event loop (see module)."""

    def __init__(self, transport: HttpTransport) -> None:
        settings = transport.settings
        self._transport = transport
        self._url = settings.url
        self._user_headers = dict(settings.user_headers)
        self._provider = settings.token_provider
        #: The provider's non-blocking read of its token, when it has one.
        self._cached_token = (
            self._provider.cached_token
            if isinstance(self._provider, CachingTokenProvider)
            else None
        )
        self._limit = settings.max_response_bytes
        self._standard_headers = settings.standard_headers
        self._sent = settings.sent
        cert = settings.client_cert
        cert_file, key_file = (cert, None) if isinstance(cert, str) else (cert or (None, None))
        self._tls = (settings.verify, settings.ca_certs, cert_file, key_file)
        self._context: ssl.SSLContext | None = None
        parts = urlsplit(self._url)
        scheme = parts.scheme.lower()
        self._https = scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        host_field = f"[{self._host}]" if ":" in self._host else self._host
        if parts.port is not None:
            host_field += f":{parts.port}"
        self._host_field = host_field
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._usable_url = scheme in ("http", "https") and bool(self._host)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: deque[_Wire] = deque()  # oldest on the left, reused from the right
        self._sweeper: asyncio.TimerHandle | None = None
        self._flights: set[_Flight] = set()
        self._deadlines = _Deadlines(self._flights)
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False

    # -- AsyncRequester --------------------------------------------------------------------------

    async def request(
        self, message: dict[str, Any], options: RequestOptions, callbacks: AsyncCallbacks
    ) -> dict[str, Any]:
        """POST ``message``; its response as ``HttpTransport.request`` returns it (same errors).
        Cancelling the awaiting task closes the request's connection at once (and, on the
        session era, POSTs ``notifications/cancelled`` in the background)."""
        if self._closed:
            raise errors.connection_error("Connection closed", cause=("closed",))
        loop = self._loop_now()
        flight = _Flight(self._deadlines)
        self._flights.add(flight)
        try:
            answer = await self._request(loop, message, options, callbacks, flight)
        except McpError as error:
            flight.end()
            settled = self._settle(error, flight)
            if settled.code == errors.REQUEST_TIMEOUT and not flight.closed:
                await self._cancel(message, options, settled.message)
            if settled is error:
                raise
            raise settled from None
        except asyncio.CancelledError:
            flight.close()
            if not self._closed:
                self._cancel_later(loop, message, options, "The request was cancelled")
            raise
        finally:
            flight.end()
            self._flights.discard(flight)
        failure = answer.get("error")
        if failure is not None:
            answer["error"] = redaction.redact_value(failure, self._sent.values())
        return answer

    async def aclose(self) -> None:
        """Close every connection held; requests in flight fail with -32000; idempotent."""
        if self._closed:
            return
        self._closed = True
        for flight in list(self._flights):
            flight.close()
        background = list(self._background)
        for task in background:
            task.cancel()
        if background:
            await asyncio.wait(background, timeout=CANCEL_WAIT)
        self._deadlines.stop()
        self._close_idle()

    # -- one request -------------------------------------------------------------------------------

    async def _request(
        self,
        loop: asyncio.AbstractEventLoop,
        message: dict[str, Any],
        options: RequestOptions,
        callbacks: AsyncCallbacks,
        flight: _Flight,
    ) -> dict[str, Any]:
        body = jsonrpc.encode(message)
        headers = mcp_headers(
            options.dialect,
            message,
            tool=options.tool,
            session_id=None if message.get("method") == "initialize" else self._session_id,
            standard_headers=self._standard_headers,
        )
        response, started = await self._send(loop, "POST", body, headers, options.timeout, flight)
        try:
            deadline = Deadline.start(options, started)
            flight.arm(loop, deadline.ends())
            if 200 <= response.status < 300 and is_event_stream(response.headers):
                return await self._stream(
                    loop, message, response, options, callbacks, deadline, flight
                )
            data = await self._read_all(response, deadline, flight)
            answer = read_post_answer(message["id"], data)
            if answer is None or streamable.session_expired(response.status, self._session_id):
                raise streamable.status_error(response.status, self._url, data, self._sent.values())
            return answer
        finally:
            response.release()

    @property
    def _session_id(self) -> str | None:
        return self._transport.session_id

    def _settle(self, error: McpError, flight: _Flight) -> McpError:
        """As ``HttpTransport``: -32000 "closed" once aclose() cut the request (a timeout stays
        one, the server's own errors stay its own), every credential sent redacted."""
        if flight.closed and error.kind == "transport" and error.code != errors.REQUEST_TIMEOUT:
            error = closed_error()
        return redaction.redact_error(error, self._sent.values())

    async def _cancel(self, message: dict[str, Any], options: RequestOptions, reason: str) -> None:
        """POST ``notifications/cancelled`` on the session era within ``CANCEL_WAIT`` (the sync
        transport's rule: never for initialize, never on 2026-07-28); failures logged only."""
        if options.dialect.stateless or message.get("method") == "initialize":
            return
        request_id = message.get("id")
        if not jsonrpc.is_valid_id(request_id):
            return
        note = jsonrpc.cancelled_notification(request_id, reason)
        headers = mcp_headers(
            options.dialect,
            note,
            session_id=self._session_id,
            standard_headers=self._standard_headers,
        )
        try:
            await self._post_quiet(jsonrpc.encode(note), headers, CANCEL_WAIT)
        except McpError as error:
            _log.debug(
                "notifications/cancelled was not delivered",
                url=self._url,
                error=redaction.redact_value(error.message, self._sent.values()),
            )

    def _cancel_later(
        self,
        loop: asyncio.AbstractEventLoop,
        message: dict[str, Any],
        options: RequestOptions,
        reason: str,
    ) -> None:
        """:meth:`_cancel` in a background task (the cancelled caller does not wait for it)."""
        if options.dialect.stateless or message.get("method") == "initialize":
            return
        task = loop.create_task(self._cancel(message, options, reason))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- answers -------------------------------------------------------------------------------------

    async def _read_all(self, response: _Response, deadline: Deadline, flight: _Flight) -> bytes:
        """A whole body within ``max_response_bytes``; the flight's timer enforces the deadline."""
        chunks: list[bytes] = []
        total = 0
        while True:
            try:
                chunk = await response.read()
                self._transport.count_bytes(len(chunk), 0)
            except WireError as exc:
                if flight.fired or deadline.expired(time.monotonic()):
                    raise deadline.error(cause=DEADLINE_CAUSE) from None
                raise errors.connection_error(
                    "The response broke off", cause=("http", str(exc))
                ) from None
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > self._limit:
                response.discard()
                raise too_large_error(self._limit)
            chunks.append(chunk)

    async def _refused(self, response: _Response) -> McpError:
        """The error for an answer that is not the request's response (its body read within
        ``REFUSAL_READ``)."""
        flight = _Flight(self._deadlines)
        self._flights.add(flight)
        response.watched_by(flight)
        try:
            flight.arm(self._loop_now(), time.monotonic() + REFUSAL_READ)
            deadline = Deadline.within(REFUSAL_READ, time.monotonic())
            data = await self._read_all(response, deadline, flight)
        except McpError:
            data = b""
        finally:
            flight.end()
            self._flights.discard(flight)
        return streamable.status_error(response.status, self._url, data, self._sent.values())

    async def _stream(
        self,
        loop: asyncio.AbstractEventLoop,
        message: dict[str, Any],
        response: _Response,
        options: RequestOptions,
        callbacks: AsyncCallbacks,
        deadline: Deadline,
        flight: _Flight,
    ) -> dict[str, Any]:
        """Read an event stream until the event that carries the response (resumed with a GET
        from ``Last-Event-ID`` on the session era, as the sync transport does)."""
        request_id = message["id"]
        parser = SseParser()
        total = 0
        resumes = 0
        progress = callbacks.progress
        events_out = self._transport.session_events
        try:
            while True:
                if flight.fired or deadline.expired(time.monotonic()):
                    raise deadline.error(cause=DEADLINE_CAUSE)
                try:
                    chunk = await response.read()
                    self._transport.count_bytes(len(chunk), 0)
                    broke: str | None = None if chunk else "ended"
                except WireError as exc:
                    chunk, broke = b"", str(exc)
                if broke is not None:
                    if flight.closed:
                        raise closed_error()
                    if flight.fired or deadline.expired(time.monotonic()):
                        raise deadline.error(cause=DEADLINE_CAUSE)
                    if not may_resume(
                        options.dialect, parser.last_event_id, resumes, self._session_id
                    ):
                        raise errors.connection_error(
                            "The event stream ended without a response"
                            if broke == "ended"
                            else "The event stream broke off",
                            cause=("sse_ended",) if broke == "ended" else ("http", broke),
                        )
                    resumes += 1
                    response.discard()
                    response = await self._resume(loop, parser, options, deadline, flight)
                    flight.arm(loop, deadline.ends())
                    continue
                total += len(chunk)
                if total > self._limit:
                    raise too_large_error(self._limit)
                try:
                    events = parser.feed(chunk)
                except EventTooLarge:
                    raise too_large_error(self._limit, "An event") from None
                for event in events:
                    items, skipped = messages_in(event.data)  # one, or a batch's
                    if skipped is not None:
                        _log.info("skipped an event that is not JSON-RPC", reason=skipped)
                    for item in items:
                        if "method" not in item:
                            answer = response_to(item, request_id)
                            if answer is not None:
                                return answer
                            continue
                        if "id" in item:
                            await self._serve(item, options, callbacks)
                        elif item["method"] == "notifications/progress":
                            params = item.get("params")
                            if progress is not None and is_progress_for(params, request_id):
                                await settle(progress(params))
                                if deadline.resets:
                                    deadline = deadline.after_progress(time.monotonic())
                                    flight.arm(loop, deadline.ends())
                        else:
                            events_out.deliver(item["method"], item.get("params"))
        finally:
            response.discard()  # an event stream never goes back to the pool

    async def _resume(
        self,
        loop: asyncio.AbstractEventLoop,
        parser: SseParser,
        options: RequestOptions,
        deadline: Deadline,
        flight: _Flight,
    ) -> _Response:
        """Wait the server's retry delay, then GET the stream again from its last event id."""
        delay = retry_delay(parser.retry)
        remaining = deadline.remaining(time.monotonic())
        if remaining is not None and delay >= remaining:
            raise deadline.error(cause=DEADLINE_CAUSE)
        flight.closing = loop.create_future()
        try:
            await asyncio.wait([flight.closing], timeout=delay)
        finally:
            flight.closing = None
        if flight.closed or self._closed:
            raise closed_error()
        headers = stream_headers(options.dialect, self._session_id, parser.last_event_id)
        remaining = deadline.remaining(time.monotonic())
        timeout = None if remaining is None else max(0.0, remaining)
        response, _ = await self._send(loop, "GET", None, headers, timeout, flight)
        if response.status != 200 or not is_event_stream(response.headers):
            try:
                raise await self._refused(response)
            finally:
                response.discard()
        return response

    async def _serve(
        self, request: dict[str, Any], options: RequestOptions, callbacks: AsyncCallbacks
    ) -> None:
        """Answer a server request from the stream with ``callbacks.server_request`` (awaited)
        and POST the answer; a handler's exception other than McpError propagates (the seed's
        rule for HTTP)."""
        request_id, method, params = request["id"], request["method"], request.get("params")
        answer = callbacks.server_request
        if answer is None or answered_without_handler(method, params):
            reply = server_request_reply(request_id, method, params, None)
        else:
            try:
                result = await settle(answer(method, params if isinstance(params, dict) else {}))
            except McpError as error:
                reply = jsonrpc.error_response(request_id, error)
            else:
                reply = jsonrpc.result_response(request_id, result)
        try:
            await self._post_quiet(
                jsonrpc.encode(reply),
                mcp_headers(options.dialect, reply, session_id=self._session_id),
                options.timeout,
            )
        except McpError as error:
            raise errors.connection_error(
                "Could not send the answer to a server request", cause=("server_request", error)
            ) from None

    async def _post_quiet(
        self, body: bytes, headers: dict[str, str], timeout: float | None
    ) -> None:
        """POST a notification or an answer on a flight of its own; expects 2xx (202)."""
        loop = self._loop_now()
        flight = _Flight(self._deadlines)
        self._flights.add(flight)
        try:
            response, started = await self._send(loop, "POST", body, headers, timeout, flight)
            try:
                if 200 <= response.status < 300:
                    deadline = Deadline.within(timeout, started)
                    flight.arm(loop, deadline.ends())
                    await self._read_all(response, deadline, flight)
                    return
                raise await self._refused(response)
            finally:
                response.release()
        except McpError as error:
            settled = self._settle(error, flight)
            if settled is error:
                raise
            raise settled from None
        finally:
            flight.end()
            self._flights.discard(flight)

    # -- sending, with credentials -----------------------------------------------------------------

    async def _send(
        self,
        loop: asyncio.AbstractEventLoop,
        method: str,
        body: bytes | None,
        headers: dict[str, str],
        timeout: float | None,
        flight: _Flight,
    ) -> tuple[_Response, float]:
        """Send with the provider's token; refresh once (in a worker thread) after a 401 or a
        403 step-up, one more proof for a DPoP nonce; as ``HttpTransport._send``."""
        provider = self._provider
        token = await self._token()
        response, started = await self._attempt(loop, method, body, headers, token, timeout, flight)
        if provider is None:
            return response, started
        challenge = _challenge(response)
        if not needs_refresh(response.status, challenge):
            return response, started
        status = response.status
        response.discard()
        flight.arm(loop, None)  # the timeout covers each attempt, not the provider's refresh
        refresh = partial(provider.refresh, challenge, url=self._url, status=status, token=token)
        token = await asyncio.wrap_future(workers().run(refresh))
        if token is not None:
            token = check_token(token)
        response, started = await self._attempt(loop, method, body, headers, token, timeout, flight)
        if response.status == 401 and nonce_challenge(_challenge(response)):
            response.discard()
            response, started = await self._attempt(
                loop, method, body, headers, token, timeout, flight
            )
        if response.status in (401, 403):
            second = _challenge(response)
            status = response.status
            response.discard()
            raise unauthorized_error(status, second)
        return response, started

    async def _token(self) -> str | None:
        """The provider's token: a token it holds (``CachingTokenProvider.cached_token``) is
        read on the loop; one it must fetch or renew is got on a worker thread. A provider
        without ``cached_token`` is called on the loop (its ``token`` must not block)."""
        provider = self._provider
        if provider is None:
            return None
        cached = self._cached_token
        if cached is not None:
            known, token = cached(self._url)
            if not known:
                fetch = partial(provider.token, self._url)
                token = await asyncio.wrap_future(workers().run(fetch))
        else:
            token = provider.token(self._url)
        return None if token is None else check_token(token)

    async def _attempt(
        self,
        loop: asyncio.AbstractEventLoop,
        method: str,
        body: bytes | None,
        headers: dict[str, str],
        token: str | None,
        timeout: float | None,
        flight: _Flight,
    ) -> tuple[_Response, float]:
        """One exchange up to the response head, within ``timeout`` from its start."""
        fields = {
            "Accept": ACCEPT,
            "Accept-Encoding": "identity",
            **self._user_headers,
            **headers,
        }
        if body is not None:
            fields["Content-Type"] = "application/json"
        if token is not None:
            self._sent.add(token)
            custom = getattr(self._provider, "request_headers", None)
            if custom is None:
                fields["Authorization"] = bearer_header(token)
            else:  # a DPoP-bound token: its scheme and a fresh proof per request (RFC 9449)
                extra = custom(method, self._url, token)
                self._sent.add_headers(extra)
                fields.update(extra)
        if flight.closed or self._closed:
            raise closed_error()
        if not self._usable_url:
            raise wire_failure(
                self._url,
                ConnectError(f"unsupported URL {self._url!r}"),
                Deadline.within(timeout, time.monotonic()),
            )
        if body is not None:
            fields["Content-Length"] = str(len(body))
        payload = http1.request_head(method, self._target, self._host_field, fields)
        if body:
            payload += body
            self._transport.count_bytes(0, len(body))
        started = time.monotonic()
        deadline = Deadline.within(timeout, started)
        flight.arm(loop, deadline.ends())
        try:
            response = await self._exchange(loop, method, payload, flight)
        except HeadTooLarge:
            raise too_large_error(self._limit) from None
        except WireError as exc:
            if flight.closed:
                raise closed_error() from None
            raise wire_failure(self._url, exc, deadline, flight.fired) from None
        nonce = response.headers.get("dpop-nonce")
        note_nonce = getattr(self._provider, "dpop_nonce", None)
        if nonce is not None and note_nonce is not None:
            note_nonce(self._url, nonce)
        limit = self._limit
        head = sum(len(name) + len(value) + 4 for name, value in response.headers.items())
        length = response.headers.get("content-length")
        if head > limit or (length is not None and length.isdigit() and int(length) + head > limit):
            response.discard()
            raise too_large_error(limit)
        return response, started

    async def _exchange(
        self, loop: asyncio.AbstractEventLoop, method: str, payload: bytes, flight: _Flight
    ) -> _Response:
        """Write the request and read its final response head (interim 1xx skipped)."""
        wire = self._take()
        if wire is None:
            wire = await self._open(loop, flight)
        flight.wire = wire
        handed = False
        try:
            await wire.send(payload)
            limit = self._limit
            reader = http1.HeadReader(limit)
            interim = 0
            while True:
                data = await wire.receive()
                if not data:
                    if wire.cut:
                        raise WireError(_CUT)
                    raise NoResponse(_NO_RESPONSE)
                try:
                    head = reader.feed(data)
                    while head is not None and 100 <= head.status < 200:
                        interim += 1
                        if interim > _MAX_INTERIM:
                            raise WireError(f"more than {_MAX_INTERIM} interim responses")
                        limit -= head.size
                        rest, reader = reader.rest, http1.HeadReader(limit)
                        head = reader.feed(rest) if rest else None
                    if head is not None:
                        response = _Response(self, wire, head, method, reader.rest)
                        response.flight = flight
                        handed = True
                        return response
                except HeadTooLarge:
                    raise
                except FramingError as exc:
                    raise WireError(str(exc)) from None
        finally:
            if not handed:
                flight.wire = None
                wire.abort()

    # -- connections -------------------------------------------------------------------------------

    async def _open(self, loop: asyncio.AbstractEventLoop, flight: _Flight) -> _Wire:
        """A new connection (TLS per the transport's settings); the flight's timer or aclose()
        ends the attempt."""
        host, port = self._host, self._port
        context = None
        if self._https:
            if self._context is None:
                self._context = tls.client_context(*self._tls)
            context = self._context
        connecting = asyncio.ensure_future(
            loop.create_connection(
                lambda: _Wire(loop),
                host,
                port,
                ssl=context,
                server_hostname=host if context is not None else None,
            )
        )
        flight.connecting = connecting
        try:
            transport, wire = await connecting
        except asyncio.CancelledError:
            if flight.fired:
                raise WireTimeout(f"connecting to {host}:{port} timed out") from None
            if flight.closed and not _cancelling():
                raise WireError(_CUT) from None
            raise
        except ssl.SSLError as exc:
            raise ConnectError(
                f"TLS with {host}:{port} failed: {exc}", tls.failure_reason(exc)
            ) from None
        except OSError as exc:
            if exc.errno is not None:  # the OS's words, as the sync connect reports them
                exc = OSError(exc.errno, os.strerror(exc.errno))
            raise ConnectError(
                f"cannot connect to {host}:{port}: {exc}", tls.failure_reason(exc)
            ) from None
        finally:
            flight.connecting = None
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except (OSError, AttributeError):
                pass
        if flight.closed or flight.fired:
            wire.abort()
            raise WireError(_CUT)
        return wire

    def _loop_now(self) -> asyncio.AbstractEventLoop:
        """The running loop; idle connections of another (earlier) loop are dropped."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._close_idle()
            self._deadlines.stop()
            self._loop = loop
        return loop

    def _take(self) -> _Wire | None:
        """The newest idle connection still usable; expired or closed ones are closed."""
        idle = self._idle
        now = time.monotonic()
        while idle:
            wire = idle.pop()
            if wire.expires <= now or not wire.usable:
                wire.close()
                continue
            wire.reused = True
            return wire
        return None

    def checkin(self, wire: _Wire) -> None:
        """Keep a connection whose answer was read to its end (at most ``MAX_IDLE``, the oldest
        closed first) for ``IDLE_TIMEOUT`` seconds."""
        if self._closed or wire.loop is not self._loop:
            wire.close()
            return
        idle = self._idle
        if len(idle) >= MAX_IDLE:
            idle.popleft().close()
        wire.expires = time.monotonic() + IDLE_TIMEOUT
        idle.append(wire)
        if self._sweeper is None:
            self._sweeper = wire.loop.call_later(IDLE_TIMEOUT, self._sweep)

    def _sweep(self) -> None:
        """Close idle connections past their expiry or closed; again while some stay idle."""
        self._sweeper = None
        now = time.monotonic()
        idle = self._idle
        keep = [wire for wire in idle if wire.expires > now and wire.usable]
        for wire in idle:
            if wire.expires <= now or not wire.usable:
                wire.close()
        idle.clear()
        idle.extend(keep)
        if idle and self._loop is not None:
            self._sweeper = self._loop.call_later(max(0.0, idle[0].expires - now), self._sweep)

    def _close_idle(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
        while self._idle:
            self._idle.pop().close()

    def idle_count(self) -> int:
        """How many idle connections are kept now."""
        return len(self._idle)


def _challenge(response: _Response) -> Challenge | None:
    return select_challenge(response.headers.getlist("www-authenticate"))


def _cancelling() -> bool:
    """True when the current task itself is being cancelled (not just its connect attempt)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return cancelling is not None and cancelling() > 0
