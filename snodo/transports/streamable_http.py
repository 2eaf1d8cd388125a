"""The Streamable HTTP transport: one POST per message on a shared keep-alive connection pool.

Requests run in the calling thread. A JSON answer is read whole (within ``max_response_bytes``);
an event-stream answer is read as it arrives with ``read1()``: progress is delivered as it comes,
session-era server requests are answered by the input handlers in the calling thread and
POSTed back, and the call returns at the event that carries its response. A timeout shuts the
response down, which the server treats as cancellation. What an answer means is decided in
``snodo.protocol.streamable``, deadlines and server-request replies in
``snodo.protocol.exchange``; headers come from the dialect's policy (``snodo.protocol.headers``);
bearer tokens from an optional ``TokenProvider`` (``snodo.auth``). The HTTP/1.1 client itself is
``snodo.transports.http_wire`` (docs/decisions/0024); ``http_inflight`` tracks what each request
in flight is blocked on, ``http_listen`` holds ``subscriptions/listen`` streams.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, TypeVar

from snodo.auth import (
    Challenge,
    TokenProvider,
    bearer_header,
    check_token,
    needs_refresh,
    select_challenge,
    unauthorized_error,
)
from snodo.interruptible import Task
from snodo.log import get_logger
from snodo.protocol import caching, errors, jsonrpc, redaction, streamable
from snodo.protocol.errors import McpError, too_large_error
from snodo.protocol.exchange import Deadline, is_progress_for, server_request_reply
from snodo.protocol.headers import (
    MCP_PROTOCOL_VERSION,
    check_user_headers,
    mcp_headers,
    stream_headers,
)
from snodo.protocol.sse import EventTooLarge, SseParser
from snodo.protocol.streamable import (
    is_event_stream,
    may_resume,
    messages_in,
    opens_standalone_stream,
    read_post_answer,
    response_to,
    retry_delay,
)
from snodo.transports import http_wire
from snodo.transports.base import (
    BaseTransport,
    CacheIdentity,
    RequestOptions,
    ServerRequestHandler,
    TransportTraits,
)
from snodo.transports.http_inflight import Attempt, Call, Calls, Watchdog, closed_error
from snodo.transports.http_listen import open_listen
from snodo.transports.http_wire import WireError
from snodo.transports.listening import (
    Listening,
    SessionFanout,
    SubscriptionSink,
)
from snodo.transports.sent_credentials import SentCredentials
from snodo.transports.targets import Http

__all__ = [
    "ACCEPT",
    "CANCEL_WAIT",
    "DEADLINE_CAUSE",
    "DELETE_WAIT",
    "LISTENER_CONNECT",
    "LISTENER_SETTLE",
    "LISTENER_STOP",
    "READ_SIZE",
    "REFUSAL_READ",
    "HttpSettings",
    "HttpTransport",
    "nonce_challenge",
    "too_large_error",
    "wire_failure",
]

_log = get_logger("snodo.transports.streamable_http")
_T = TypeVar("_T")

ACCEPT = "application/json, text/event-stream"
READ_SIZE = 64 * 1024
#: How long close() waits for the DELETE that ends a session-era session.
DELETE_WAIT = 5.0
#: The standalone GET stream: connect timeout, and how long close() waits for its reader.
LISTENER_CONNECT = 30.0
LISTENER_STOP = 2.0
#: How long notifications/initialized waits for the GET stream to open (or be refused), so that
#: a server request sent there after connect() returns is not lost (docs/decisions/0013).
LISTENER_SETTLE = 5.0
#: How long a timed-out session-era request's notifications/cancelled may take (seconds).
CANCEL_WAIT = 0.5
#: How long the body of a refused answer is read for its error.
REFUSAL_READ = 5.0
#: Guards making a transport's close Event on first use (rare: a retry or resumption wait).
_CLOSING_LOCK = threading.Lock()
#: The -32001 cause of a deadline that passed while the answer was awaited or read.
DEADLINE_CAUSE: Final = ("http", "deadline")
_DEADLINE = DEADLINE_CAUSE


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """What another driver of a connected transport's requests (``snodo.aio``) reads from it:
    where it sends, with which headers, credentials and TLS, and where sent credentials go."""

    url: str
    #: The user's headers, checked (``check_user_headers``).
    user_headers: Mapping[str, str]
    token_provider: TokenProvider | None
    max_response_bytes: int
    verify: bool
    ca_certs: str | None
    client_cert: str | tuple[str, str] | None
    standard_headers: bool
    #: The transport's own record of credentials sent (shared: add to it, redact with it).
    sent: SentCredentials


def _pool(verify: bool, ca_certs: str | None, client_cert: Any) -> http_wire.WirePool:
    """The process-wide keep-alive pool for one TLS configuration."""
    cert_file, key_file = (
        (client_cert, None) if isinstance(client_cert, str) else (client_cert or (None, None))
    )
    return http_wire.pool(verify, ca_certs, cert_file, key_file)


class HttpTransport(BaseTransport):
    """One MCP endpoint over Streamable HTTP."""

    #: Mcp-Name/Mcp-Param-* headers from tool definitions (the client filters listed tools and
    #: retries a -32020 once); close() sends the session's DELETE itself.
    traits = TransportTraits(header_policy=True, deletes_session_on_close=True)

    def __init__(
        self,
        target: Http,
        *,
        headers: Mapping[str, str] | None = None,
        token_provider: TokenProvider | None = None,
        max_response_bytes: int = 16 * 1024 * 1024,
        verify: bool = True,
        ca_certs: str | None = None,
        client_cert: str | tuple[str, str] | None = None,
        on_server_request: ServerRequestHandler | None = None,
        standard_headers: bool = False,
    ) -> None:
        self.target = target
        #: The session-era notifications of this connection, fanned out to subscriptions.
        self.session_events: SessionFanout = SessionFanout()
        #: Send Mcp-Method/Mcp-Name on session-era POSTs too (a client that also speaks
        #: 2026-07-28 announces SEP-2243 routing headers on every POST, fallback included).
        self.standard_headers = standard_headers
        self._server_requests = on_server_request
        self._listener: Task | None = None
        self._listening: Any = None  # the standalone GET stream's response, while open
        self.url = target.url
        self._user_headers = check_user_headers(
            dict(headers or {}), token_provider=token_provider is not None
        )
        self._provider = token_provider
        #: The most an answer (its head, a JSON body, one event) may hold.
        self.max_response_bytes = max_response_bytes
        self._pool = _pool(verify, ca_certs, client_cert)
        self._tls = (verify, ca_certs)
        self._client_cert = client_cert
        self._credential: tuple[str | None, str | None, str] | None = None
        self.session_id: str | None = None
        self._closed = False
        #: Set by close(): ends waits between attempts (made by the first wait: most
        #: connections never wait, and an Event costs ~1 KiB per idle connection).
        self._closing: threading.Event | None = None
        self._calls = Calls()
        #: Every credential sent, to redact from what is kept of answers (docs/decisions/0030).
        self._sent = SentCredentials(redaction.credentials(self._user_headers))
        #: JSON-RPC bytes posted and answer bytes read (bodies; ``Client.stats()``): plain
        #: ``+=`` on the request paths (``snodo.stats`` says why that needs no lock).
        self.bytes_in = 0
        self.bytes_out = 0
        self._pool.retain(self.url)  # its idle connections live while a client holds the URL

    # -- Transport protocol ------------------------------------------------------------------

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        """POST a request and return its response (JSON, or the event that carries it).

        close() fails it at once with -32000; a timeout or an interruption (KeyboardInterrupt,
        say) on a session-era session also POSTs ``notifications/cancelled``; nothing kept of
        an answer carries a credential sent (docs/decisions/0030, 0044).
        """
        self._check_open()
        call = self._calls.begin()
        try:
            answer = self._request(message, options, call)
        except McpError as error:
            settled = self._settle(error, call)
            if settled.code == errors.REQUEST_TIMEOUT and not call.closed:
                self._cancel(message, options, settled.message, call)
            if settled is error:
                raise
            raise settled from None
        except BaseException:
            # Interrupted from outside (KeyboardInterrupt, a gevent.Timeout, a progress
            # function that raised): the server may stop working on it, as on stdio.
            if not call.closed:
                self._cancel(message, options, "The client stopped waiting", call)
            raise
        finally:
            self._calls.end(call)
        failure = answer.get("error")
        if failure is not None:
            answer["error"] = redaction.redact_value(failure, self._sent.values())
        return answer

    def _request(
        self, message: dict[str, Any], options: RequestOptions, call: Call
    ) -> dict[str, Any]:
        body = jsonrpc.encode(message)
        headers = mcp_headers(
            options.dialect,
            message,
            tool=options.tool,
            session_id=self._session_for(message),
            standard_headers=self.standard_headers,
        )
        response, started = self._post(body, headers, options.timeout, call)
        deadline = Deadline.start(options, started)
        call.hold(response)
        capture = message.get("method") == "initialize"
        try:
            if capture:
                sid = response.headers.get("mcp-session-id")
                if sid is not None:
                    self.session_id = sid
                    self._sent.add(sid)
            return self._answer(message, response, options, deadline, call)
        finally:
            call.drop(response)
            response.release_conn()

    def _settle(self, error: McpError, call: Call) -> McpError:
        """The error the caller gets: -32000 "closed" once close() cut the call (a timeout
        stays one, and the server's own errors stay its own), with every credential sent
        redacted."""
        if call.closed and error.kind == "transport" and error.code != errors.REQUEST_TIMEOUT:
            error = closed_error()
        return redaction.redact_error(error, self._sent.values())

    def _cancel(
        self, message: dict[str, Any], options: RequestOptions, reason: str, call: Call
    ) -> None:
        """After a timeout or an interruption on a session-era session, POST
        ``notifications/cancelled`` (a disconnect is not a cancellation there), within
        ``CANCEL_WAIT``; failures are logged at debug only. 2026-07-28 cancels by the closed
        stream alone; initialize is never cancelled."""
        if options.dialect.stateless or message.get("method") == "initialize":
            return
        request_id = message.get("id")
        if not jsonrpc.is_valid_id(request_id):
            return
        note = jsonrpc.cancelled_notification(request_id, reason)
        headers = mcp_headers(
            options.dialect,
            note,
            session_id=self.session_id,
            standard_headers=self.standard_headers,
        )
        try:
            self._post_quiet(jsonrpc.encode(note), headers, CANCEL_WAIT, call)
        except McpError as error:
            _log.debug(
                "notifications/cancelled was not delivered",
                url=self.url,
                error=self.redacted(error.message),
            )

    def notify(self, message: dict[str, Any], options: RequestOptions) -> None:
        """POST a notification (or an answer to a server request); expects 202 with no body."""
        self._check_open()
        call = self._calls.begin()
        try:
            self._post_quiet(
                jsonrpc.encode(message),
                mcp_headers(
                    options.dialect,
                    message,
                    session_id=self.session_id,
                    standard_headers=self.standard_headers,
                ),
                options.timeout,
                call,
            )
        except McpError as error:
            settled = self._settle(error, call)
            if settled is error:
                raise
            raise settled from None
        finally:
            self._calls.end(call)
        if self._listener is None and opens_standalone_stream(
            message, options.dialect, self.session_id
        ):
            answered = threading.Event()  # the first GET was answered, or failed
            self._listener = Task(
                lambda: self._listen(options.dialect, answered),
                f"snodo-http-get-{(self.session_id or '')[:8]}",
            )
            settle = LISTENER_SETTLE if options.timeout is None else options.timeout
            answered.wait(min(settle, LISTENER_SETTLE))

    def listen(
        self, message: dict[str, Any], options: RequestOptions, sink: SubscriptionSink
    ) -> Listening:
        """``subscriptions/listen`` on a POST of its own (see ``http_listen``)."""
        return open_listen(self, message, options, sink)

    def open_event_stream(
        self, message: dict[str, Any], options: RequestOptions
    ) -> http_wire.Response:
        """POST ``message`` and return its event-stream answer, left open for the caller to
        read (``subscriptions/listen``). An answer that is no event stream raises its error
        (read within ``options.timeout``); no error carries a credential this transport sent."""
        self._check_open()
        body = jsonrpc.encode(message)
        headers = mcp_headers(options.dialect, message, session_id=None)
        try:
            response, _ = self._send("POST", body, headers, options.timeout, stream=True)
        except McpError as error:
            raise self.redacted(error) from None
        if is_event_stream(response.headers) and 200 <= response.status < 300:
            return response
        try:
            deadline = Deadline.within(options.timeout, time.monotonic())
            try:
                answer = self._read_all(response, deadline)
            except McpError as error:
                raise self.redacted(error) from None
            raise streamable.listen_refusal(response.status, answer, self.url, self._sent.values())
        finally:
            response.discard()

    def open_get_stream(
        self, headers: Mapping[str, str], timeout: float | None
    ) -> http_wire.Response:
        """GET this URL's event stream, left open for the caller to read and shut down (the
        HTTP+SSE transport of 2024-11-05: ``snodo.transports.http_sse``). The token provider,
        the 401 refresh, TLS and the head limit are every request's; the head must come within
        ``timeout`` (-32001), the body has no deadline. An answer that is no 2xx event stream
        raises its error (``streamable.status_error``); none carries a credential sent."""
        self._check_open()
        call = self._calls.begin()  # close() cuts the GET until its head has come
        started = time.monotonic()
        expired = threading.Event()

        def cut() -> None:
            expired.set()
            call.close()

        timer = None
        if timeout is not None:
            from snodo.supervision.timers import call_later

            timer = call_later(timeout, cut)
        try:
            response, _ = self._send("GET", None, dict(headers), timeout, stream=True, call=call)
        except McpError as error:
            if expired.is_set():
                raise Deadline.within(timeout, started).error(cause=_DEADLINE) from None
            raise self._settle(error, call) from None
        finally:
            if timer is not None:
                timer.cancel()
            self._calls.end(call)
        if expired.is_set():
            response.discard()
            raise Deadline.within(timeout, started).error(cause=_DEADLINE)
        if 200 <= response.status < 300 and is_event_stream(response.headers):
            return response
        refusal = self._refused(response)
        response.discard()
        raise refusal

    def delete_session(self, timeout: float | None = None) -> None:
        """End the session-era session with DELETE (its outcome is ignored; 405 is fine)."""
        if self.session_id is None:
            return
        wait = DELETE_WAIT if timeout is None else min(timeout, DELETE_WAIT)
        headers = {"mcp-session-id": self.session_id}
        if self._version is not None:
            headers["MCP-Protocol-Version"] = self._version
        try:
            response, _ = self._send("DELETE", None, headers, wait)
            response.drain_conn()
            response.release_conn()
        except McpError as error:
            _log.info("session DELETE failed", url=self.url, error=self.redacted(error.message))

    def close(self) -> None:
        """Send the session's DELETE (bounded), then stop; idempotent."""
        if self._closed:
            return
        self._closed = True
        with _CLOSING_LOCK:
            closing = self._closing
        if closing is not None:
            closing.set()
        self._calls.close()  # every request in flight fails with -32000 at once
        listening, listener = self._listening, self._listener
        if listening is not None:
            try:
                listening.shutdown()  # its reader closes it; closing here would race the reader
            except Exception:
                pass
        if listener is not None:
            listener.join(LISTENER_STOP)
        self.delete_session()
        self.session_events.end_all(errors.connection_error("Connection closed"))
        self._pool.release(self.url)  # the last client of the URL closes its idle connections

    @property
    def settings(self) -> HttpSettings:
        """The settings another driver of this transport's requests uses (``snodo.aio``)."""
        verify, ca_certs = self._tls
        return HttpSettings(
            url=self.url,
            user_headers=MappingProxyType(self._user_headers),
            token_provider=self._provider,
            max_response_bytes=self.max_response_bytes,
            verify=verify,
            ca_certs=ca_certs,
            client_cert=self._client_cert,
            standard_headers=self.standard_headers,
            sent=self._sent,
        )

    # -- cache identity (hashed; see snodo.protocol.caching) -------------------------------------

    def byte_counts(self) -> tuple[int, int]:
        """Body bytes read and posted, by this transport and its asyncio requester."""
        return self.bytes_in, self.bytes_out

    def count_bytes(self, read: int, posted: int) -> None:
        """Add what ``snodo.aio.streamable_http.AsyncHttp`` moved for this transport."""
        self.bytes_in += read
        self.bytes_out += posted

    def cache_identity(self) -> CacheIdentity:
        """Public results are shared by the same URL, non-credential headers and TLS options;
        the private partition is that of the next request's credentials."""
        namespace = caching.http_namespace(
            self.url, self._user_headers, self.max_response_bytes, self._tls
        )
        return CacheIdentity(namespace, self._credential_digest)

    def _credential_digest(self) -> str:
        """The private partition: credential headers, the provider's token, client cert, session."""
        token = self._token()
        known = self._credential
        if known is not None and known[0] == token and known[1] == self.session_id:
            return known[2]
        value = caching.http_credential(
            self._user_headers, token, self._client_cert, self.session_id
        )
        self._credential = (token, self.session_id, value)
        return value

    # -- internals -----------------------------------------------------------------------------

    _version: str | None = None

    def _listen(self, dialect: Any, settled: threading.Event) -> None:
        """The standalone GET stream of a session-era session: requests and notifications
        a server sends only there (405: the server has none). Broken streams are resumed with
        Last-Event-ID after the server's retry delay; it ends with close()."""
        try:
            self._listen_until_closed(dialect, settled)
        finally:
            settled.set()

    def _listen_until_closed(self, dialect: Any, settled: threading.Event) -> None:
        options = RequestOptions(
            dialect=dialect, timeout=LISTENER_CONNECT, on_server_request=self._server_requests
        )
        last_id: str | None = None
        retry_ms = streamable.DEFAULT_RETRY_MS
        failures = 0
        while not self._closed and failures < streamable.MAX_RESUMES + 2:
            headers = stream_headers(dialect, self.session_id, last_id)
            try:
                response, _ = self._send("GET", None, headers, LISTENER_CONNECT, stream=True)
            except McpError as error:
                settled.set()
                _log.info(
                    "standalone stream unavailable",
                    url=self.url,
                    error=self.redacted(error.message),
                )
                failures += 1
                self._wait_closing(retry_delay(retry_ms))
                continue
            settled.set()
            if response.status != 200 or not is_event_stream(response.headers):
                _log.debug("no standalone stream", url=self.url, status=response.status)
                response.discard()
                return
            self._listening = response
            parser = SseParser(max_event_bytes=self.max_response_bytes)
            try:
                while not self._closed:
                    chunk = response.read1(READ_SIZE)
                    if not chunk:
                        break
                    failures = 0
                    for event in parser.feed(chunk):
                        items, skipped = messages_in(event.data)  # one, or a batch's
                        if skipped is not None:
                            _log.info("skipped an event that is not JSON-RPC", reason=skipped)
                        for item in items:
                            if "method" not in item:
                                continue
                            if "id" in item:
                                self._serve(item, options)
                            else:
                                _log.debug("notification", method=item["method"])
                                self.session_events.deliver(item["method"], item.get("params"))
            except Exception as exc:  # a broken stream, or close() shutting it down
                _log.info(
                    "standalone stream broke off", url=self.url, error=self.redacted(repr(exc))
                )
            finally:
                self._listening = None
                response.discard()
            last_id = parser.last_event_id or last_id
            retry_ms = parser.retry if parser.retry is not None else retry_ms
            failures += 1
            if not self._closed:
                self._wait_closing(retry_delay(retry_ms))
        if not self._closed:  # the stream could not be resumed: session subscriptions end
            self.session_events.end_all(
                errors.connection_error(
                    "The session's event stream is gone", cause=("standalone_stream",)
                ),
            )

    def _wait_closing(self, delay: float) -> bool:
        """Wait ``delay`` seconds or until close(); True if closed."""
        with _CLOSING_LOCK:
            closing = self._closing
            if closing is None:
                closing = self._closing = threading.Event()
                if self._closed:
                    closing.set()
        return closing.wait(delay)

    def redacted(self, value: _T) -> _T:
        """``value`` (text, bytes, JSON data or an McpError kept from an answer) without any
        credential this transport sent (errors are redacted in place)."""
        return redaction.redact_value(value, self._sent.values())

    def _session_for(self, message: dict[str, Any]) -> str | None:
        return None if message.get("method") == "initialize" else self.session_id

    def _check_open(self) -> None:
        if self._closed:
            raise errors.connection_error("Connection closed", cause=("closed",))

    def _post(
        self,
        body: bytes,
        headers: dict[str, str],
        timeout: float | None,
        call: Call | None = None,
    ) -> tuple[http_wire.Response, float]:
        version = headers.get(MCP_PROTOCOL_VERSION)
        if version is not None:
            self._version = version
        self.bytes_out += len(body)
        return self._send("POST", body, headers, timeout, call=call)

    def _post_quiet(
        self,
        body: bytes,
        headers: dict[str, str],
        timeout: float | None,
        call: Call | None = None,
    ) -> None:
        response, started = self._post(body, headers, timeout, call)
        if call is not None:
            call.hold(response)
        try:
            if 200 <= response.status < 300:
                self._read_all(response, Deadline.within(timeout, started))  # usually empty (202)
                return
            raise self._refused(response)
        finally:
            if call is not None:
                call.drop(response)
            response.release_conn()

    def _send(
        self,
        method: str,
        body: bytes | None,
        headers: dict[str, str],
        timeout: float | None,
        *,
        stream: bool = False,
        call: Call | None = None,
    ) -> tuple[http_wire.Response, float]:
        """Send with the token provider's token; refresh once after a 401 (or a 403 step-up).
        Returns the response and when its attempt was sent (``timeout`` runs from there).

        ``stream``: a long-lived event stream (no read deadline; close() shuts it down).
        ``call``: the request in flight this belongs to (close() cuts it).
        """
        token = self._token()
        response, started = self._attempt(method, body, headers, token, timeout, stream, call)
        if self._provider is None or not needs_refresh(response.status, self._challenge(response)):
            return response, started
        challenge = self._challenge(response)
        status = response.status
        response.discard()
        token = self._provider.refresh(challenge, url=self.url, status=status, token=token)
        if token is not None:
            token = check_token(token)
        response, started = self._attempt(method, body, headers, token, timeout, stream, call)
        if response.status == 401 and nonce_challenge(self._challenge(response)):
            # a DPoP nonce the server just issued (RFC 9449 §9): one more proof, same token
            response.discard()
            response, started = self._attempt(method, body, headers, token, timeout, stream, call)
        if response.status in (401, 403):
            second = self._challenge(response)
            status = response.status
            response.discard()
            raise unauthorized_error(status, second)
        return response, started

    def _token(self) -> str | None:
        if self._provider is None:
            return None
        token = self._provider.token(self.url)
        return None if token is None else check_token(token)

    @staticmethod
    def _challenge(response: http_wire.Response) -> Challenge | None:
        return select_challenge(response.headers.getlist("www-authenticate"))

    def _attempt(
        self,
        method: str,
        body: bytes | None,
        headers: dict[str, str],
        token: str | None,
        timeout: float | None,
        stream: bool = False,
        call: Call | None = None,
    ) -> tuple[http_wire.Response, float]:
        all_headers = {
            "Accept": ACCEPT,
            "Accept-Encoding": "identity",
            **self._user_headers,
            **headers,
        }
        if body is not None:
            all_headers["Content-Type"] = "application/json"
        if token is not None:
            self._sent.add(token)
            custom = getattr(self._provider, "request_headers", None)
            if custom is None:
                all_headers["Authorization"] = bearer_header(token)
            else:  # a DPoP-bound token: its scheme and a fresh proof per request (RFC 9449)
                extra = custom(method, self.url, token)
                self._sent.add_headers(extra)
                all_headers.update(extra)
        if call is not None and call.closed:
            raise closed_error()
        started = time.monotonic()
        attempt = Attempt()
        if call is not None:
            call.head = attempt
            if call.closed:
                attempt.shutdown()
        # The deadline is a number the wire's waits are bounded by, not a timer per request
        # (docs/decisions/0052); close() still cuts the socket through ``attempt``.
        wire_deadline = started + timeout if timeout is not None and not stream else None
        try:
            response = self._pool.request(
                method,
                self.url,
                all_headers,
                body,
                connect_timeout=timeout,
                read_timeout=None if stream else timeout,
                head_limit=self.max_response_bytes,
                on_socket=attempt.lend,
                deadline=wire_deadline,
            )
        except http_wire.HeadTooLarge:
            raise self._too_large() from None
        except WireError as exc:
            if call is not None and call.closed:
                raise closed_error() from None
            deadline = Deadline.within(timeout, started)
            raise self._failure(exc, deadline) from None
        finally:
            if call is not None:
                call.head = None
        nonce = response.headers.get("dpop-nonce")
        note_nonce = getattr(self._provider, "dpop_nonce", None)
        if nonce is not None and note_nonce is not None:
            note_nonce(self.url, nonce)
        limit = self.max_response_bytes
        head = response.head_size
        length = response.headers.get("content-length")
        if head > limit or (length is not None and length.isdigit() and int(length) + head > limit):
            response.discard()
            raise self._too_large()
        return response, started

    def _too_large(self, what: str = "The response") -> McpError:
        return too_large_error(self.max_response_bytes, what)

    def _failure(self, exc: Exception, deadline: Deadline) -> McpError:
        return wire_failure(self.url, exc, deadline)

    def _answer(
        self,
        message: dict[str, Any],
        response: http_wire.Response,
        options: RequestOptions,
        deadline: Deadline,
        call: Call,
    ) -> dict[str, Any]:
        if 200 <= response.status < 300 and is_event_stream(response.headers):
            try:
                return self._stream(message, response, options, deadline, call)
            finally:
                response.discard()  # an event stream never goes back to the pool
        body = self._read_all(response, deadline)
        answer = read_post_answer(message["id"], body)
        if answer is None or streamable.session_expired(response.status, self.session_id):
            raise streamable.status_error(response.status, self.url, body, self._sent.values())
        return answer

    def _refused(self, response: http_wire.Response) -> McpError:
        """The error for an answer that is not the request's response, its body read within
        ``REFUSAL_READ`` (``streamable.status_error``: no credential this transport sent)."""
        try:
            body = self._read_all(response, Deadline.within(REFUSAL_READ, time.monotonic()))
        except McpError:
            body = b""
        return streamable.status_error(response.status, self.url, body, self._sent.values())

    def _read_all(self, response: http_wire.Response, deadline: Deadline) -> bytes:
        """Read a whole body within ``max_response_bytes`` and the deadline (a body already in
        memory cannot block: no watchdog timer for it, docs/decisions/0052)."""
        watchdog = Watchdog()
        if not response.buffered:
            watchdog.arm(response, deadline.remaining(time.monotonic()))
        chunks: list[bytes] = []
        total = 0
        try:
            while True:
                chunk = response.read1(READ_SIZE)
                if not chunk:
                    if watchdog.fired:  # shut down at the deadline: the body is cut short
                        raise deadline.error(cause=_DEADLINE)
                    return b"".join(chunks)
                total += len(chunk)
                self.bytes_in += len(chunk)
                if total > self.max_response_bytes:
                    response.discard()
                    raise self._too_large()
                chunks.append(chunk)
        except WireError as exc:
            if (
                watchdog.fired
                or isinstance(exc, http_wire.WireTimeout)
                or deadline.expired(time.monotonic())
            ):
                raise deadline.error(cause=_DEADLINE) from None
            raise errors.connection_error(
                "The response broke off", cause=("http", str(exc))
            ) from None
        finally:
            watchdog.cancel()

    def _stream(
        self,
        message: dict[str, Any],
        response: http_wire.Response,
        options: RequestOptions,
        deadline: Deadline,
        call: Call,
    ) -> dict[str, Any]:
        """Read an event stream until the event that carries this request's response.

        A session-era stream that breaks off after events with ids is resumed with a GET
        carrying ``Last-Event-ID``, after the server's ``retry`` delay (2025-11-25), at most
        ``streamable.MAX_RESUMES`` times and within the request's deadline.
        """
        request_id = message["id"]
        watchdog = Watchdog()
        parser = SseParser()
        total = 0
        resumes = 0
        first = response
        watchdog.arm(response, deadline.remaining(time.monotonic()))
        try:
            while True:
                if watchdog.fired or deadline.expired(time.monotonic()):
                    raise deadline.error(cause=_DEADLINE)
                try:
                    chunk = response.read1(READ_SIZE)
                    broke: str | None = None if chunk else "ended"
                    self.bytes_in += len(chunk)
                except WireError as exc:
                    chunk, broke = b"", str(exc)
                if broke is not None:
                    if call.closed:
                        raise closed_error()
                    if watchdog.fired or deadline.expired(time.monotonic()):  # a late timer
                        raise deadline.error(cause=_DEADLINE)
                    if not may_resume(
                        options.dialect, parser.last_event_id, resumes, self.session_id
                    ):
                        raise errors.connection_error(
                            "The event stream ended without a response"
                            if broke == "ended"
                            else "The event stream broke off",
                            cause=("sse_ended",) if broke == "ended" else ("http", broke),
                        )
                    resumes += 1
                    call.drop(response)
                    response.discard()
                    response = self._resume(parser, options, deadline, call)
                    call.hold(response)
                    watchdog.arm(response, deadline.remaining(time.monotonic()))
                    continue
                total += len(chunk)
                if total > self.max_response_bytes:
                    raise self._too_large()
                try:
                    events = parser.feed(chunk)
                except EventTooLarge:
                    raise self._too_large("An event") from None
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
                            self._serve(item, options, call)
                        elif item["method"] == "notifications/progress":
                            params = item.get("params")
                            if options.on_progress is not None and is_progress_for(
                                params, request_id
                            ):
                                options.on_progress(params)
                                if deadline.resets:
                                    deadline = deadline.after_progress(time.monotonic())
                                    watchdog.arm(response, deadline.remaining(time.monotonic()))
                        else:
                            self.session_events.deliver(item["method"], item.get("params"))
        except BaseException:
            response.discard()
            raise
        finally:
            watchdog.cancel()
            if response is not first:  # a resumed stream: never goes back to the pool either
                call.drop(response)
                response.discard()

    def _resume(
        self, parser: SseParser, options: RequestOptions, deadline: Deadline, call: Call
    ) -> http_wire.Response:
        """Wait the server's retry delay, then GET the stream again from its last event id."""
        delay = retry_delay(parser.retry)
        remaining = deadline.remaining(time.monotonic())
        if remaining is not None and delay >= remaining:
            raise deadline.error(cause=_DEADLINE)
        if self._wait_closing(delay) or call.closed:
            raise closed_error()
        headers = stream_headers(options.dialect, self.session_id, parser.last_event_id)
        remaining = deadline.remaining(time.monotonic())
        timeout = None if remaining is None else max(0.0, remaining)
        response, _ = self._send("GET", None, headers, timeout, call=call)
        if response.status != 200 or not is_event_stream(response.headers):
            error = self._refused(response)
            response.discard()
            raise error
        return response

    def _serve(
        self, request: dict[str, Any], options: RequestOptions, call: Call | None = None
    ) -> None:
        """Answer a server-to-client request from the stream in the calling thread; POST it.
        A handler's exception other than McpError propagates to the caller (the seed's rule
        for HTTP, as for an embedded request)."""
        reply = server_request_reply(
            request["id"], request["method"], request.get("params"), options.on_server_request
        )
        try:
            self._post_quiet(
                jsonrpc.encode(reply),
                mcp_headers(options.dialect, reply, session_id=self.session_id),
                options.timeout,
                call,
            )
        except McpError as error:
            raise errors.connection_error(
                "Could not send the answer to a server request", cause=("server_request", error)
            ) from None


def wire_failure(url: str, exc: Exception, deadline: Deadline, fired: bool = False) -> McpError:
    """The McpError for a failed exchange with ``url``. A request whose deadline passed is
    -32001, whatever the socket said first (a busy thread can delay the timer past the socket's
    own timeout or the server's close: docs/decisions/0030)."""
    if fired or deadline.expired(time.monotonic()):
        # Whichever came first, the timer or the socket's timeout (taken from the deadline), the
        # cause is the deadline: the sync and async transports race them differently.
        return deadline.error(cause=_DEADLINE)
    if isinstance(exc, http_wire.WireTimeout):
        return deadline.error(cause=("http", str(exc)))
    if isinstance(exc, http_wire.ConnectError):
        return errors.with_outcome(
            errors.connection_error(
                f"Cannot connect to {url}: {exc.reason}", cause=("http", str(exc))
            ),
            "not_sent",
        )
    if isinstance(exc, http_wire.NoResponse):
        return errors.outcome_unknown_error(
            "The server closed the connection without answering; the request may have "
            "been processed",
            cause=("http", str(exc)),
        )
    return errors.connection_error(
        f"HTTP request to {url} failed: {type(exc).__name__}", cause=("http", str(exc))
    )


def nonce_challenge(challenge: Challenge | None) -> bool:
    """True for a DPoP ``use_dpop_nonce`` challenge (RFC 9449 §9)."""
    return challenge is not None and challenge.error == "use_dpop_nonce"
