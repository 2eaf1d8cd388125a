"""The Streamable HTTP transport: one POST per message on a shared keep-alive connection pool.

Requests run in the calling thread. A JSON answer is read whole (within ``max_response_bytes``);
an event-stream answer is read as it arrives with ``read1()``: progress is delivered as it comes,
initialize-era server requests are answered by the input handlers in the calling thread and
POSTed back, and the call returns at the event that carries its response. A timeout shuts the
response down, which the server treats as cancellation. Headers come from the dialect's policy
(``snodo.protocol.headers``); bearer tokens from an optional ``TokenProvider`` (``snodo.auth``).
The HTTP/1.1 client itself is ``snodo.transports.http_wire`` (docs/decisions/0024).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Mapping
from typing import Any, TypeVar

from snodo._log import get_logger
from snodo._tasks import Task
from snodo.auth import Challenge, TokenProvider, check_token, needs_refresh, select_challenge
from snodo.protocol import errors, jsonrpc, redaction
from snodo.protocol.errors import McpError
from snodo.protocol.headers import check_user_headers, filter_tools, mcp_headers
from snodo.protocol.sse import EventTooLarge, SseParser
from snodo.transports import http_wire
from snodo.transports.base import (
    BaseTransport,
    CacheIdentity,
    RequestOptions,
    ServerRequestHandler,
    TransportTraits,
)
from snodo.transports.http_wire import WireError
from snodo.transports.listening import (
    Listening,
    SessionFanout,
    SubscriptionSink,
)
from snodo.transports.sent_credentials import SentCredentials
from snodo.transports.targets import Http

_log = get_logger("snodo.transports.streamable_http")
_T = TypeVar("_T")

ACCEPT = "application/json, text/event-stream"
READ_SIZE = 64 * 1024
#: How long close() waits for the DELETE that ends an initialize-era session.
DELETE_WAIT = 5.0
#: Resumptions of one broken initialize-era event stream, and the wait without a `retry` field.
MAX_RESUMES = 3
DEFAULT_RETRY_MS = 1000
#: The standalone GET stream: connect timeout, and how long close() waits for its reader.
LISTENER_CONNECT = 30.0
LISTENER_STOP = 2.0
#: How long notifications/initialized waits for the GET stream to open (or be refused), so that
#: a server request sent there after connect() returns is not lost (docs/decisions/0013).
LISTENER_SETTLE = 5.0
#: How long a timed-out initialize-era request's notifications/cancelled may take (seconds).
CANCEL_WAIT = 0.5
#: Guards making a transport's close Event on first use (rare: a retry or resumption wait).
_CLOSING_LOCK = threading.Lock()
#: Connections kept per host in the shared pool (concurrent requests beyond it open and close).
POOL_MAXSIZE = http_wire.MAX_IDLE


class _Attempt:
    """The socket of the request in flight, so a deadline (``cut``) or close() (``shutdown``)
    can end a response head that drips or never comes."""

    __slots__ = ("closed", "fired", "sock")

    def __init__(self) -> None:
        self.sock: Any = None
        self.fired = False
        self.closed = False

    def lend(self, sock: Any) -> None:
        """The socket the request goes out on (cut at the deadline, or at close())."""
        self.sock = sock
        if self.fired or self.closed:
            self._shut()

    def cut(self) -> None:
        """The deadline passed."""
        self.fired = True
        self._shut()

    def shutdown(self) -> None:
        """The transport was closed."""
        self.closed = True
        self._shut()

    def _shut(self) -> None:
        sock = self.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Call:
    """One request in flight: what it is blocked on (a response head's attempt, a response
    being read, a nested POST), so close() can shut each down and the caller fails at once."""

    __slots__ = ("_held", "closed", "head")

    def __init__(self) -> None:
        self.closed = False
        self.head: _Attempt | None = None  # the response head being awaited
        self._held: list[Any] = []  # at most a few: the stream and one nested request

    def hold(self, target: Any) -> None:
        """``target.shutdown()`` ends what the call waits on; at once if already closed."""
        self._held.append(target)
        if self.closed:
            _shutdown(target)

    def drop(self, target: Any) -> None:
        try:
            self._held.remove(target)
        except ValueError:
            pass

    def close(self) -> None:
        self.closed = True
        head = self.head
        if head is not None:
            head.shutdown()
        for target in list(self._held):
            _shutdown(target)


class _Calls:
    """The requests in flight on one transport, so close() fails every one at once. One entry
    per caller blocked in a request (bounded by the calling threads and greenlets); each
    leaves when its request returns."""

    def __init__(self) -> None:
        self._live: set[_Call] = set()
        self.closed = False

    def begin(self) -> _Call:
        # No lock (the hot path): a call added after close() took its snapshot sees `closed`.
        call = _Call()
        self._live.add(call)
        if self.closed:
            self._live.discard(call)
            raise _closed_error()
        return call

    def end(self, call: _Call) -> None:
        self._live.discard(call)

    def close(self) -> None:
        self.closed = True
        for call in list(self._live):
            call.close()


def _closed_error() -> McpError:
    return errors.connection_error("The connection was closed", cause=("closed",))


def _shutdown(target: Any) -> None:
    try:
        target.shutdown()
    except Exception:
        pass


def _pool(verify: bool, ca_certs: str | None, client_cert: Any) -> http_wire.WirePool:
    """The process-wide keep-alive pool for one TLS configuration."""
    cert_file, key_file = (
        (client_cert, None) if isinstance(client_cert, str) else (client_cert or (None, None))
    )
    return http_wire.pool(verify, ca_certs, cert_file, key_file)


class _Watchdog:
    """Shuts a response down at a deadline, so a blocked read fails at once (the shared timer
    service runs it: no thread per request)."""

    def __init__(self) -> None:
        self._timer: Any = None
        self.fired = False

    def arm(self, response: Any, delay: float) -> None:
        from snodo.supervision.timers import call_later

        self.cancel()

        def fire() -> None:
            self.fired = True
            try:
                response.shutdown()
            except Exception:
                pass

        self._timer = call_later(max(0.0, delay), fire)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class HttpTransport(BaseTransport):
    """One MCP endpoint over Streamable HTTP."""

    #: Mcp-Name/Mcp-Param-* headers from tool definitions (the client filters listed tools and
    #: retries a -32020 once); close() sends the session's DELETE itself.
    traits = TransportTraits(header_policy=True, deletes_session_on_close=True)
    #: Old spellings of the traits, kept while the client moves to ``traits_of``.
    tool_headers = True
    deletes_session_on_close = True

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
        #: Send Mcp-Method/Mcp-Name on initialize-era POSTs too (a client that also speaks
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
        self._limit = max_response_bytes
        self._pool = _pool(verify, ca_certs, client_cert)
        self._tls = (verify, ca_certs)
        self._client_cert = client_cert
        self._credential: tuple[str | None, str | None, str] | None = None
        self.session_id: str | None = None
        self._closed = False
        #: Set by close(): ends waits between attempts (made by the first wait: most
        #: connections never wait, and an Event costs ~1 KiB per idle connection).
        self._closing: threading.Event | None = None
        self._calls = _Calls()
        #: Every credential sent, to redact from what is kept of answers (docs/decisions/0030).
        self._sent = SentCredentials(redaction.credentials(self._user_headers))
        self._pool.retain(self.url)  # its idle connections live while a client holds the URL

    # -- Transport protocol ------------------------------------------------------------------

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        """POST a request and return its response (JSON, or the event that carries it).

        close() fails it at once with -32000; a timeout on an initialize-era session also
        POSTs ``notifications/cancelled``; nothing kept of an answer carries a credential sent
        (docs/decisions/0030).
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
        finally:
            self._calls.end(call)
        failure = answer.get("error")
        if failure is not None:
            answer["error"] = redaction.redact_value(failure, self._sent.values())
        return answer

    def _request(
        self, message: dict[str, Any], options: RequestOptions, call: _Call
    ) -> dict[str, Any]:
        body = jsonrpc.encode(message)
        headers = mcp_headers(
            options.dialect,
            message,
            tool=options.tool,
            session_id=self._session_for(message),
            standard_headers=self.standard_headers,
        )
        response, deadline = self._post(body, headers, options.timeout, call)
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

    def _settle(self, error: McpError, call: _Call) -> McpError:
        """The error the caller gets: -32000 "closed" once close() cut the call (a timeout
        stays one, and the server's own errors stay its own), with every credential sent
        redacted."""
        if call.closed and error.kind == "transport" and error.code != errors.REQUEST_TIMEOUT:
            error = _closed_error()
        return redaction.redact_error(error, self._sent.values())

    def _cancel(
        self, message: dict[str, Any], options: RequestOptions, reason: str, call: _Call
    ) -> None:
        """After a timeout on an initialize-era session, POST ``notifications/cancelled`` (a
        disconnect is not a cancellation there), within ``CANCEL_WAIT``; failures are logged
        at debug only. 2026-07-28 cancels by the closed stream alone; initialize is never
        cancelled."""
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
        if (
            message.get("method") == "notifications/initialized"
            and not options.dialect.stateless
            and self.session_id is not None
            and self._listener is None
        ):
            answered = threading.Event()  # the first GET was answered, or failed
            self._listener = Task(
                lambda: self._listen(options.dialect, answered),
                f"snodo-http-get-{self.session_id[:8]}",
            )
            settle = LISTENER_SETTLE if options.timeout is None else options.timeout
            answered.wait(min(settle, LISTENER_SETTLE))

    def listen(
        self, message: dict[str, Any], options: RequestOptions, sink: SubscriptionSink
    ) -> Listening:
        """``subscriptions/listen`` on a POST of its own (see ``http_listen``)."""
        from snodo.transports.http_listen import open_listen

        return open_listen(self, message, options, sink)

    def delete_session(self, timeout: float | None = None) -> None:
        """End the initialize-era session with DELETE (its outcome is ignored; 405 is fine)."""
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

    # -- cache identity (hashed; see snodo.protocol.caching) -------------------------------------

    def _cache_namespace(self) -> tuple[str, str]:
        """Public results are shared by the same URL, non-credential headers and TLS options."""
        from snodo.protocol import caching

        return caching.http_namespace(self.url, self._user_headers, self._limit, self._tls)

    def _cache_credential(self) -> str:
        """The private partition: credential headers, the provider's token, client cert, session."""
        token = self._token()
        known = self._credential
        if known is not None and known[0] == token and known[1] == self.session_id:
            return known[2]
        from snodo.protocol import caching

        value = caching.http_credential(
            self._user_headers, token, self._client_cert, self.session_id
        )
        self._credential = (token, self.session_id, value)
        return value

    def cache_identity(self) -> CacheIdentity:
        """The public namespace of the endpoint; the private partition of the next request."""
        return CacheIdentity(self._cache_namespace(), self._cache_credential)

    # -- internals -----------------------------------------------------------------------------

    _version: str | None = None

    def _listen(self, dialect: Any, settled: threading.Event) -> None:
        """The standalone GET stream of an initialize-era session: requests and notifications
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
        retry_ms = DEFAULT_RETRY_MS
        failures = 0
        while not self._closed and failures < MAX_RESUMES + 2:
            headers = mcp_headers(
                dialect,
                {"jsonrpc": "2.0", "method": "notifications/listen"},
                session_id=self.session_id,
            )
            headers.pop("Mcp-Method", None)
            if last_id:
                headers["Last-Event-ID"] = last_id
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
                self._wait_closing(retry_ms / 1000.0)
                continue
            settled.set()
            content_type = (response.headers.get("content-type") or "").split(";")[0].strip()
            if response.status != 200 or content_type != "text/event-stream":
                _log.debug("no standalone stream", url=self.url, status=response.status)
                _discard(response)
                return
            self._listening = response
            parser = SseParser(max_event_bytes=self._limit)
            try:
                while not self._closed:
                    chunk = response.read1(READ_SIZE)
                    if not chunk:
                        break
                    failures = 0
                    for event in parser.feed(chunk):
                        item = _event_message(event.data)
                        if item is None or "method" not in item:
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
                _discard(response)
            last_id = parser.last_event_id or last_id
            retry_ms = parser.retry if parser.retry is not None else retry_ms
            failures += 1
            if not self._closed:
                self._wait_closing(retry_ms / 1000.0)
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
        call: _Call | None = None,
    ) -> tuple[Any, float | None]:
        version = headers.get("MCP-Protocol-Version")
        if version is not None:
            self._version = version
        return self._send("POST", body, headers, timeout, call=call)

    def _post_quiet(
        self,
        body: bytes,
        headers: dict[str, str],
        timeout: float | None,
        call: _Call | None = None,
    ) -> None:
        response, deadline = self._post(body, headers, timeout, call)
        if call is not None:
            call.hold(response)
        try:
            if 200 <= response.status < 300:
                self._read_all(response, deadline, timeout)  # usually empty (202)
                return
            raise self._status_error(response, None)
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
        call: _Call | None = None,
    ) -> tuple[Any, float | None]:
        """Send with the token provider's token; refresh once after a 401 (or a 403 step-up).

        ``stream``: a long-lived event stream (no read deadline; close() shuts it down).
        ``call``: the request in flight this belongs to (close() cuts it).
        """
        token = self._token()
        response, deadline = self._attempt(method, body, headers, token, timeout, stream, call)
        if self._provider is None or not needs_refresh(response.status, self._challenge(response)):
            return response, deadline
        challenge = self._challenge(response)
        status = response.status
        _discard(response)
        token = self._provider.refresh(challenge, url=self.url, status=status, token=token)
        if token is not None:
            token = check_token(token)
        response, deadline = self._attempt(method, body, headers, token, timeout, stream, call)
        if response.status == 401 and _nonce_challenge(self._challenge(response)):
            # a DPoP nonce the server just issued (RFC 9449 §9): one more proof, same token
            _discard(response)
            response, deadline = self._attempt(method, body, headers, token, timeout, stream, call)
        if response.status in (401, 403):
            second = self._challenge(response)
            status = response.status
            _discard(response)
            raise errors.connection_error(
                f"The server refused the request twice (HTTP {status})",
                cause=("unauthorized", status, second),
            )
        return response, deadline

    def _token(self) -> str | None:
        if self._provider is None:
            return None
        token = self._provider.token(self.url)
        return None if token is None else check_token(token)

    @staticmethod
    def _challenge(response: Any) -> Challenge | None:
        return select_challenge(response.headers.getlist("www-authenticate"))

    def _attempt(
        self,
        method: str,
        body: bytes | None,
        headers: dict[str, str],
        token: str | None,
        timeout: float | None,
        stream: bool = False,
        call: _Call | None = None,
    ) -> tuple[Any, float | None]:
        all_headers = {
            "Accept": ACCEPT if method == "POST" else "application/json, text/event-stream",
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
                all_headers["Authorization"] = f"Bearer {token}"
            else:  # a DPoP-bound token: its scheme and a fresh proof per request (RFC 9449)
                extra = custom(method, self.url, token)
                self._sent.add_headers(extra)
                all_headers.update(extra)
        if call is not None and call.closed:
            raise _closed_error()
        deadline = None if timeout is None else time.monotonic() + timeout
        attempt = _Attempt()
        if call is not None:
            call.head = attempt
            if call.closed:
                attempt.shutdown()
        timer = None
        if timeout is not None and not stream:
            from snodo.supervision.timers import call_later

            timer = call_later(timeout, attempt.cut)
        try:
            response = self._pool.request(
                method,
                self.url,
                all_headers,
                body,
                connect_timeout=timeout,
                read_timeout=None if stream else timeout,
                head_limit=self._limit,
                on_socket=attempt.lend,
            )
        except http_wire.HeadTooLarge:
            raise errors.connection_error(
                f"The response is larger than max_response_bytes ({self._limit})",
                cause=("max_response_bytes", self._limit),
            ) from None
        except WireError as exc:
            if call is not None and call.closed:
                raise _closed_error() from None
            raise self._failure(exc, timeout, deadline, attempt.fired) from None
        finally:
            if timer is not None:
                timer.cancel()
            if call is not None:
                call.head = None
        nonce = response.headers.get("dpop-nonce")
        note_nonce = getattr(self._provider, "dpop_nonce", None)
        if nonce is not None and note_nonce is not None:
            note_nonce(self.url, nonce)
        head = sum(len(name) + len(value) + 4 for name, value in response.headers.items())
        length = response.headers.get("content-length")
        if head > self._limit or (
            length is not None and length.isdigit() and int(length) + head > self._limit
        ):
            _discard(response)
            raise errors.connection_error(
                f"The response is larger than max_response_bytes ({self._limit})",
                cause=("max_response_bytes", self._limit),
            )
        return response, deadline

    def _failure(
        self, exc: Exception, timeout: float | None, deadline: float | None, fired: bool = False
    ) -> McpError:
        """The McpError for a failed exchange. A request whose deadline passed is -32001,
        whatever the socket said first (a busy thread can delay the timer past the socket's
        own timeout or the server's close: docs/decisions/0030)."""
        if fired:
            return errors.timeout_error(timeout or 0.0, cause=("http", "deadline"))
        if isinstance(exc, http_wire.WireTimeout) or _past(deadline, None):
            return errors.timeout_error(timeout or 0.0, cause=("http", str(exc)))
        if isinstance(exc, http_wire.ConnectError):
            return errors.connection_error(
                f"Cannot connect to {self.url}: {exc.reason}", cause=("http", str(exc))
            )
        if isinstance(exc, http_wire.NoResponse):
            return errors.outcome_unknown_error(
                "The server closed the connection without answering; the request may have "
                "been processed",
                cause=("http", str(exc)),
            )
        return errors.connection_error(
            f"HTTP request to {self.url} failed: {type(exc).__name__}", cause=("http", str(exc))
        )

    def _answer(
        self,
        message: dict[str, Any],
        response: Any,
        options: RequestOptions,
        deadline: float | None,
        call: _Call,
    ) -> dict[str, Any]:
        content_type = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
        if content_type == "text/event-stream" and 200 <= response.status < 300:
            try:
                return self._stream(message, response, options, deadline, call)
            finally:
                _discard(response)  # an event stream never goes back to the pool
        body = self._read_all(response, deadline, options.timeout)
        decoded = _json_rpc(body)
        if decoded is not None and "method" not in decoded:
            answer = _response_to(decoded, message["id"])
            if answer is not None:
                return answer
            if "error" in decoded and decoded.get("id") is None:
                return {**decoded, "id": message["id"]}
            if "result" in decoded or "error" in decoded:
                raise errors.connection_error(
                    "The server answered another request id",
                    cause=("unexpected_id", decoded.get("id")),
                )
        raise self._status_error(response, body)

    def _status_error(self, response: Any, body: bytes | None) -> McpError:
        """The error for an answer that is not this request's response: the server's JSON-RPC
        error if it sent one, else -32000 with the status and the body's first 512 bytes;
        either way without any credential this transport sent."""
        if body is None:
            try:
                body = self._read_all(response, time.monotonic() + 5.0)
            except McpError:
                body = b""
        secrets = self._sent.values()
        decoded = _json_rpc(body)
        if decoded is not None and isinstance(decoded.get("error"), dict):
            error = McpError.from_wire(decoded["error"], cause=("http_status", response.status))
            return redaction.redact_error(error, secrets)
        return errors.connection_error(
            f"HTTP {response.status} from {self.url}",
            cause=("http_status", response.status, redaction.excerpt(body, secrets, 512)),
        )

    def _read_all(
        self, response: Any, deadline: float | None, timeout: float | None = None
    ) -> bytes:
        """Read a whole body within ``max_response_bytes`` and the deadline."""
        watchdog = _Watchdog()
        if deadline is not None:
            watchdog.arm(response, deadline - time.monotonic())
        chunks: list[bytes] = []
        total = 0
        try:
            while True:
                chunk = response.read1(READ_SIZE)
                if not chunk:
                    if watchdog.fired:  # shut down at the deadline: the body is cut short
                        raise errors.timeout_error(timeout or 0.0, cause=("http", "deadline"))
                    return b"".join(chunks)
                total += len(chunk)
                if total > self._limit:
                    _discard(response)
                    raise errors.connection_error(
                        f"The response is larger than max_response_bytes ({self._limit})",
                        cause=("max_response_bytes", self._limit),
                    )
                chunks.append(chunk)
        except WireError as exc:
            if watchdog.fired or isinstance(exc, http_wire.WireTimeout) or _past(deadline, None):
                raise errors.timeout_error(timeout or 0.0, cause=("http", "deadline")) from None
            raise errors.connection_error(
                "The response broke off", cause=("http", str(exc))
            ) from None
        finally:
            watchdog.cancel()

    def _stream(
        self,
        message: dict[str, Any],
        response: Any,
        options: RequestOptions,
        deadline: float | None,
        call: _Call,
    ) -> dict[str, Any]:
        """Read an event stream until the event that carries this request's response.

        An initialize-era stream that breaks off after events with ids is resumed with a GET
        carrying ``Last-Event-ID``, after the server's ``retry`` delay (2025-11-25), at most
        ``MAX_RESUMES`` times and within the request's deadline.
        """
        request_id = message["id"]
        watchdog = _Watchdog()
        started = time.monotonic()
        cap = (
            started + options.max_total_timeout
            if options.reset_timeout_on_progress and options.max_total_timeout is not None
            else None
        )
        state = {"deadline": deadline}
        parser = SseParser()
        total = 0
        resumes = 0

        def arm(target: Any) -> None:
            limit = _earliest(state["deadline"], cap)
            if limit is not None:
                watchdog.arm(target, limit - time.monotonic())

        def on_progress(params: dict[str, Any]) -> None:
            assert options.on_progress is not None
            options.on_progress(params)
            if options.reset_timeout_on_progress and options.timeout is not None:
                state["deadline"] = time.monotonic() + options.timeout
                arm(response)

        first = response
        arm(response)
        try:
            while True:
                if watchdog.fired or _past(state["deadline"], cap):
                    raise self._stream_timeout(options, state["deadline"], cap)
                try:
                    chunk = response.read1(READ_SIZE)
                    broke: str | None = None if chunk else "ended"
                except WireError as exc:
                    chunk, broke = b"", str(exc)
                if broke is not None:
                    if call.closed:
                        raise _closed_error()
                    if watchdog.fired or _past(state["deadline"], cap):  # a late timer
                        raise self._stream_timeout(options, state["deadline"], cap)
                    resumable = (
                        not options.dialect.stateless
                        and parser.last_event_id
                        and resumes < MAX_RESUMES
                        and self.session_id is not None
                    )
                    if not resumable:
                        raise errors.connection_error(
                            "The event stream ended without a response"
                            if broke == "ended"
                            else "The event stream broke off",
                            cause=("sse_ended",) if broke == "ended" else ("http", broke),
                        )
                    resumes += 1
                    call.drop(response)
                    _discard(response)
                    response = self._resume(parser, options, state["deadline"], cap, call)
                    call.hold(response)
                    arm(response)
                    continue
                total += len(chunk)
                if total > self._limit:
                    raise errors.connection_error(
                        f"The response is larger than max_response_bytes ({self._limit})",
                        cause=("max_response_bytes", self._limit),
                    )
                try:
                    events = parser.feed(chunk)
                except EventTooLarge:
                    raise errors.connection_error(
                        "An event is larger than max_response_bytes",
                        cause=("max_response_bytes", self._limit),
                    ) from None
                for event in events:
                    item = _event_message(event.data)
                    if item is None:
                        continue
                    if "method" not in item:
                        answer = _response_to(item, request_id)
                        if answer is not None:
                            return answer
                        continue
                    if "id" in item:
                        self._serve(item, options, call)
                    elif item["method"] == "notifications/progress":
                        params = item.get("params") or {}
                        if params.get("progressToken") == request_id and options.on_progress:
                            on_progress(params)
                    else:
                        self.session_events.deliver(item["method"], item.get("params"))
        except BaseException:
            _discard(response)
            raise
        finally:
            watchdog.cancel()
            if response is not first:  # a resumed stream: never goes back to the pool either
                call.drop(response)
                _discard(response)

    def _resume(
        self,
        parser: SseParser,
        options: RequestOptions,
        deadline: float | None,
        cap: float | None,
        call: _Call,
    ) -> Any:
        """Wait the server's retry delay, then GET the stream again from its last event id."""
        delay = (parser.retry if parser.retry is not None else DEFAULT_RETRY_MS) / 1000.0
        limit = _earliest(deadline, cap)
        if limit is not None and time.monotonic() + delay >= limit:
            raise self._stream_timeout(options, deadline, cap)
        if self._wait_closing(delay) or call.closed:
            raise _closed_error()
        headers = mcp_headers(
            options.dialect,
            {"jsonrpc": "2.0", "method": "notifications/resume"},
            session_id=self.session_id,
        )
        headers.pop("Mcp-Method", None)
        headers["Last-Event-ID"] = parser.last_event_id or ""
        remaining = None if limit is None else max(0.0, limit - time.monotonic())
        response, _ = self._send("GET", None, headers, remaining, call=call)
        content_type = (response.headers.get("content-type") or "").split(";")[0].strip()
        if response.status != 200 or content_type != "text/event-stream":
            error = self._status_error(response, None)
            _discard(response)
            raise error
        return response

    @staticmethod
    def _stream_timeout(
        options: RequestOptions, deadline: float | None, cap: float | None
    ) -> McpError:
        if cap is not None and (deadline is None or cap <= deadline):
            return errors.max_total_timeout_error(options.max_total_timeout or 0.0)
        return errors.timeout_error(options.timeout or 0.0, cause=("http", "deadline"))

    def _serve(
        self, request: dict[str, Any], options: RequestOptions, call: _Call | None = None
    ) -> None:
        """Answer a server-to-client request from the stream in the calling thread; POST it."""
        method = request["method"]
        params = request.get("params")
        if method == "ping":
            reply = jsonrpc.result_response(request["id"], {})
        elif options.on_server_request is None:
            reply = jsonrpc.error_response(request["id"], errors.method_not_found(method))
        else:
            try:
                result = options.on_server_request(
                    method, params if isinstance(params, dict) else {}
                )
                reply = jsonrpc.result_response(request["id"], result)
            except McpError as error:
                reply = jsonrpc.error_response(request["id"], error)
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


def filter_listed_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Leave out tools whose x-mcp-header annotations are invalid, with a warning for each."""
    kept, dropped = filter_tools(tools)
    for name, reason in dropped:
        _log.warning(
            "left out a tool with an invalid x-mcp-header annotation", tool=name, reason=reason
        )
    return kept


def _json_rpc(body: bytes) -> dict[str, Any] | None:
    if not body:
        return None
    try:
        decoded = jsonrpc.decode(body)
    except jsonrpc.DecodeError:
        return None
    if isinstance(decoded, dict) and decoded.get("jsonrpc") == "2.0":
        return decoded
    return None


def _response_to(item: dict[str, Any], request_id: Any) -> dict[str, Any] | None:
    """``item`` when it is the response to ``request_id``; None when it answers nothing of
    ours. A message shaped as our response that ``classify`` refuses (both "result" and
    "error", say) fails the call at once instead of leaving it to wait for its timeout."""
    if jsonrpc.refused_response_id(item) != request_id:
        return None
    if "error" not in item and type(item.get("result")) is dict:
        return item  # the usual answer: exactly what classify accepts as a Response
    try:
        jsonrpc.classify(item)
    except jsonrpc.DecodeError as exc:
        raise errors.broken_response_error(
            exc.reason, cause=("broken_response", request_id)
        ) from None
    return item


def _earliest(deadline: float | None, cap: float | None) -> float | None:
    if deadline is None:
        return cap
    return deadline if cap is None else min(deadline, cap)


def _event_message(data: str) -> dict[str, Any] | None:
    """The JSON-RPC message an event carries (None for a priming event or anything else)."""
    if not data:
        return None
    item = _json_rpc(data.encode())
    if item is None:
        _log.info("skipped an event that is not JSON-RPC")
    return item


def _past(deadline: float | None, cap: float | None) -> bool:
    now = time.monotonic()
    return (deadline is not None and now >= deadline) or (cap is not None and now >= cap)


def _discard(response: Any) -> None:
    """Give up on a response: shut it down so its connection is not reused."""
    try:
        response.shutdown()
    except Exception:
        pass
    try:
        response.close()
    except Exception:
        pass


def _nonce_challenge(challenge: Challenge | None) -> bool:
    """True for a DPoP ``use_dpop_nonce`` challenge (RFC 9449 §9)."""
    return challenge is not None and challenge.error == "use_dpop_nonce"
