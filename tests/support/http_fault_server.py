"""A raw-socket HTTP/1.1 server on 127.0.0.1 for the HTTP client tests, scripted per test.

``FaultServer`` accepts connections in a thread of its own (one more per connection), parses
each request itself (method, target, headers in the order and case they arrived, body) and
records it before anything answers it. A test scripts the answers: ``once(match, handler)``
and ``always(match, handler)`` install handlers for requests whose JSON-RPC method (or HTTP
method, for ``"DELETE"``/``"GET"``) matches; everything else goes to the ``McpResponder``,
a small, well-behaved MCP server for all three versions, so that after a fault the next
request is answered normally. A handler writes whatever bytes it likes through its
``Exchange``: canned status lines, interim 1xx responses, broken framing, endless or dripping
bodies; it may close the connection, and it can wait (with a deadline) for the client to close.

``TeeProxy`` sits in front of a real server and records the requests passing through it the
same way: it is ``snodo.testing.FaultProxy.http`` with no faults armed.

Nothing here sleeps to synchronise: waits are on events and conditions with deadlines; sockets
poll a stop flag every ``POLL`` seconds so ``close()`` ends every thread promptly. The only
sleeps are a handler's deliberate pauses between writes (``Exchange.pause``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from snodo.testing.proxy import FaultProxy, HttpRequest
from tests.support.wire_schema import check_client_message, validator

POLL = 0.05
MAX_HEAD = 64 * 1024
LATEST = "2026-07-28"
SESSION_ERA = ("2025-11-25", "2025-06-18")
ALL_VERSIONS = (LATEST, *SESSION_ERA)
JSON_HEADERS = (("Content-Type", "application/json"),)
SSE_HEADERS = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"))


class Stopped(Exception):
    """The server is closing (or the peer went away) while a thread was reading."""


#: One request as it arrived (the kit's record: one implementation).
Request = HttpRequest


class _Reader:
    """Buffered reads from a socket that give up when the server stops."""

    def __init__(self, sock: socket.socket, stopping: threading.Event) -> None:
        self.sock = sock
        self.stopping = stopping
        self.buffer = b""
        self.raw: list[bytes] = []  # every byte read, for proxies

    def _fill(self) -> None:
        while True:
            if self.stopping.is_set():
                raise Stopped
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError as exc:
                raise Stopped from exc
            if not data:
                raise Stopped
            self.raw.append(data)
            self.buffer += data
            return

    def line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            if len(self.buffer) > MAX_HEAD:
                raise Stopped
            self._fill()
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._fill()
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def request(self) -> tuple[str, str, list[tuple[str, str]], bytes]:
        """Read one request; Stopped at EOF."""
        start = self.line()
        while not start:  # stray CRLF between requests (RFC 9112 §2.2)
            start = self.line()
        method, target, _version = start.decode("latin-1").split(" ", 2)
        headers: list[tuple[str, str]] = []
        while True:
            line = self.line()
            if not line:
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers.append((name, value.strip(" \t")))
        lowered = {n.lower(): v for n, v in headers}
        if lowered.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.line().split(b";")[0], 16)
                if size == 0:
                    while self.line():
                        pass
                    break
                parts.append(self.exactly(size))
                self.exactly(2)
            body = b"".join(parts)
        else:
            body = self.exactly(int(lowered.get("content-length", "0")))
        return method, target, headers, body


class Exchange:
    """The answer to one request, written by a handler."""

    def __init__(self, server: FaultServer, sock: socket.socket, request: Request) -> None:
        self.server = server
        self.sock = sock
        self.request = request
        self.keep_alive = True
        self.client_gone = False
        self.sent = 0

    # -- raw bytes ---------------------------------------------------------------------------

    def send(self, data: bytes | str) -> bool:
        """Write ``data`` whole; False once the client has gone (or the server stops)."""
        if isinstance(data, str):
            data = data.encode()
        view = memoryview(data)
        while view:
            if self.server.stopping.is_set():
                self.keep_alive = False
                return False
            try:
                n = self.sock.send(view)
            except TimeoutError:
                continue
            except OSError:
                self.client_gone = True
                self.keep_alive = False
                return False
            self.sent += n
            view = view[n:]
        return True

    def close(self) -> None:
        """Close the connection once the handler returns."""
        self.keep_alive = False

    def pause(self, seconds: float) -> bool:
        """A deliberate pause between writes (a drip); False when the server is stopping."""
        return not self.server.stopping.wait(seconds)

    def wait_client_gone(self, timeout: float = 5.0) -> bool:
        """Read (and discard) until the client closes the connection; True if it did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.server.stopping.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                data = b""
            if not data:
                self.client_gone = True
                self.keep_alive = False
                return True
        return False

    # -- framed responses --------------------------------------------------------------------

    def head(
        self,
        status: int,
        headers: Iterable[tuple[str, str]] = (),
        reason: str | None = None,
    ) -> bool:
        lines = [f"HTTP/1.1 {status} {reason if reason is not None else _REASONS.get(status, 'X')}"]
        lines += [f"{name}: {value}" for name, value in headers]
        return self.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def respond(
        self,
        status: int = 200,
        body: bytes | str = b"",
        headers: Iterable[tuple[str, str]] = (),
        reason: str | None = None,
    ) -> bool:
        """A complete response framed by Content-Length."""
        if isinstance(body, str):
            body = body.encode()
        all_headers = [*headers, ("Content-Length", str(len(body)))]
        if not self.keep_alive:
            all_headers.append(("Connection", "close"))
        return self.head(status, all_headers, reason) and self.send(body)

    def json(
        self,
        message: Any,
        status: int = 200,
        headers: Iterable[tuple[str, str]] = (),
    ) -> bool:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        return self.respond(status, body, [*JSON_HEADERS, *headers])

    def accepted(self, headers: Iterable[tuple[str, str]] = ()) -> bool:
        return self.respond(202, b"", headers)

    def start_chunked(
        self, status: int = 200, headers: Iterable[tuple[str, str]] = SSE_HEADERS
    ) -> bool:
        extra = [] if self.keep_alive else [("Connection", "close")]
        return self.head(status, [*headers, ("Transfer-Encoding", "chunked"), *extra])

    def chunk(self, data: bytes | str) -> bool:
        if isinstance(data, str):
            data = data.encode()
        if not data:
            return True
        return self.send(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunks(self) -> bool:
        return self.send(b"0\r\n\r\n")

    def sse(
        self,
        messages: Iterable[Any],
        *,
        status: int = 200,
        headers: Iterable[tuple[str, str]] = SSE_HEADERS,
    ) -> bool:
        """An event stream (chunked): one event per message (bytes are sent as they are)."""
        if not self.start_chunked(status, headers):
            return False
        for message in messages:
            if not self.chunk(message if isinstance(message, bytes) else event(message)):
                return False
        return self.end_chunks()


_REASONS = {
    100: "Continue",
    103: "Early Hints",
    200: "OK",
    202: "Accepted",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    502: "Bad Gateway",
}


def event(message: Any, *, name: str | None = None, event_id: str | None = None) -> bytes:
    """One SSE event carrying ``message`` as JSON."""
    text = message if isinstance(message, str) else json.dumps(message)
    out = b""
    if name is not None:
        out += b"event: " + name.encode() + b"\n"
    if event_id is not None:
        out += b"id: " + event_id.encode() + b"\n"
    return out + b"data: " + text.encode() + b"\n\n"


def result(request_id: Any, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": err}


def progress(token: Any, done: int, total: int | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"progressToken": token, "progress": done}
    if total is not None:
        params["total"] = total
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}


Handler = Callable[[Request, Exchange], None]
Match = str | Callable[[Request], bool]


def _matches(match: Match, request: Request) -> bool:
    if callable(match):
        return bool(match(request))
    if match == request.method:
        return True
    return request.method == "POST" and match == request.rpc


@dataclass
class _Rule:
    match: Match
    handler: Handler
    remaining: int | None  # None: always


class McpResponder:
    """A small MCP server over HTTP for every version: what a fault server says normally.

    ``versions``: what server/discover lists (without 2026-07-28 it answers ``discover`` as
    ``discover_answer`` says); ``session_id``: issued on initialize; ``tools``: tools/list.
    tools/call of any tool answers the text argument (or "ok"); ping answers {}.
    Notifications and responses get 202; DELETE gets 200; GET gets 405.
    """

    def __init__(
        self,
        versions: Iterable[str] = ALL_VERSIONS,
        *,
        session_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> None:
        self.versions = list(versions)
        self.session_id = session_id
        self.tools = tools if tools is not None else [ECHO_TOOL]
        self.discover_answer: Handler = not_found_discover

    def response_for(self, request: Request) -> dict[str, Any]:
        """The JSON-RPC response this server gives a request."""
        message = request.message
        method = message["method"]
        params = message.get("params") or {}
        rid = message["id"]
        stateless = request.header("MCP-Protocol-Version") == LATEST
        done: dict[str, Any] = {"resultType": "complete"} if stateless else {}
        if method == "server/discover":
            return result(
                rid,
                {
                    "resultType": "complete",
                    "supportedVersions": self.versions,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fault-server", "version": "1.0.0"},
                },
            )
        if method == "initialize":
            requested = params.get("protocolVersion")
            session_era = [v for v in self.versions if v != LATEST]
            chosen = requested if requested in session_era else (session_era or [requested])[0]
            return result(
                rid,
                {
                    "protocolVersion": chosen,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fault-server", "version": "1.0.0"},
                },
            )
        if method == "ping":
            return result(rid, {})
        if method == "tools/list":
            return result(rid, {**done, "tools": self.tools})
        if method == "resources/read":
            uri = params.get("uri")
            return result(rid, {**done, "contents": [{"uri": uri, "text": f"read {uri}"}]})
        if method == "prompts/get":
            return result(rid, {**done, "messages": []})
        if method == "tools/call":
            arguments = params.get("arguments") or {}
            text = arguments.get("text", "ok")
            return result(rid, {**done, "content": [{"type": "text", "text": str(text)}]})
        return error(rid, -32601, f"Method not found: {method}")

    def __call__(self, request: Request, exchange: Exchange) -> None:
        if request.method == "DELETE":
            exchange.respond(200)
            return
        if request.method != "POST":
            exchange.respond(405)
            return
        kind = request.kind
        if kind in ("notification", "response"):
            exchange.accepted()
            return
        if request.rpc == "server/discover" and LATEST not in self.versions:
            self.discover_answer(request, exchange)
            return
        headers: list[tuple[str, str]] = []
        if request.rpc == "initialize" and self.session_id is not None:
            headers.append(("Mcp-Session-Id", self.session_id))
        exchange.json(self.response_for(request), headers=headers)


ECHO_TOOL: dict[str, Any] = {
    "name": "echo",
    "description": "Echo the text",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


ELICIT_FORM: dict[str, Any] = {
    "mode": "form",
    "message": "OK?",
    "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
}


def ask_on_stream(
    server_request_id: Any,
    method: str = "elicitation/create",
    params: Any = ELICIT_FORM,
    *,
    answers: int = 1,
) -> Handler:
    """A handler for a request that asks the client ``method`` (``params`` None: no params) on
    the request's event stream, waits for ``answers`` answer POSTs (more than one when the
    first is refused and resent), then sends the request's result carrying the last answer
    (``structuredContent.answer``)."""
    request_text = {"jsonrpc": "2.0", "id": server_request_id, "method": method}
    if params is not None:
        request_text["params"] = params

    def handler(request: Request, ex: Exchange) -> None:
        before = len(ex.server.received(lambda r: r.kind == "response"))
        ex.start_chunked()
        ex.chunk(event(request_text))
        got = ex.server.wait_for(lambda r: r.kind == "response", before + answers, timeout=10.0)
        answer = got[-1].message
        ex.chunk(
            event(
                result(
                    request.message["id"], {"content": [], "structuredContent": {"answer": answer}}
                )
            )
        )
        ex.end_chunks()

    return handler


def not_found_discover(request: Request, exchange: Exchange) -> None:
    """How a session-era-only server typically answers the probe: 404 with -32601."""
    exchange.json(error(request.message["id"], -32601, "Method not found"), status=404)


class FaultServer:
    """The scripted server; use as a context manager (``close()`` joins every thread)."""

    def __init__(self, responder: McpResponder | None = None) -> None:
        self.responder = responder if responder is not None else McpResponder()
        self.requests: list[Request] = []
        self.failures: list[BaseException] = []
        self.stopping = threading.Event()
        self._rules: list[_Rule] = []
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._socks: set[socket.socket] = set()
        self._connections = 0
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(POLL)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._start(self._accept_loop, "fault-accept")

    # -- scripting ---------------------------------------------------------------------------

    def once(self, match: Match, handler: Handler, times: int = 1) -> None:
        """Answer the next ``times`` requests matching ``match`` with ``handler``."""
        with self._cond:
            self._rules.append(_Rule(match, handler, times))

    def always(self, match: Match, handler: Handler) -> None:
        with self._cond:
            self._rules.append(_Rule(match, handler, None))

    def _handler_for(self, request: Request) -> Handler:
        with self._cond:
            for rule in self._rules:
                if (rule.remaining is None or rule.remaining > 0) and _matches(rule.match, request):
                    if rule.remaining is not None:
                        rule.remaining -= 1
                    return rule.handler
        return self.responder

    # -- what arrived ------------------------------------------------------------------------

    def received(self, match: Match | None = None) -> list[Request]:
        with self._cond:
            return [r for r in self.requests if match is None or _matches(match, r)]

    def rpc_methods(self, *, standalone: bool = False) -> list[str]:
        """The JSON-RPC method of every request so far ("response" for an answer; the HTTP
        method for a request without a JSON-RPC body). A session-era client opens the
        session's standalone GET stream concurrently, so its GETs are left out unless
        ``standalone`` (tests of the GET stream look at them on their own)."""
        out = []
        for r in self.received():
            if r.method == "GET" and not standalone:
                continue
            out.append(r.rpc or ("response" if r.kind == "response" else r.method))
        return out

    def wait_for(self, match: Match, count: int = 1, timeout: float = 10.0) -> list[Request]:
        """Wait until ``count`` requests matching ``match`` have arrived."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [r for r in self.requests if _matches(match, r)]
                if len(found) >= count:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"{count} x {match!r} not received in {timeout}s")
                self._cond.wait(remaining)

    # -- threads -----------------------------------------------------------------------------

    def _start(self, target: Callable[..., None], name: str, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._cond:
            self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(POLL)
            with self._cond:
                self._connections += 1
                number = self._connections
                self._socks.add(sock)
            self._start(self._serve, f"fault-conn-{number}", sock, number)

    def _serve(self, sock: socket.socket, number: int) -> None:
        reader = _Reader(sock, self.stopping)
        try:
            while not self.stopping.is_set():
                try:
                    method, target, headers, body = reader.request()
                except Stopped:
                    return
                with self._cond:
                    request = Request(
                        len(self.requests), number, method, target, tuple(headers), body
                    )
                    self.requests.append(request)
                    self._cond.notify_all()
                exchange = Exchange(self, sock, request)
                try:
                    self._handler_for(request)(request, exchange)
                except BaseException as exc:  # a broken handler fails the test at close()
                    self.failures.append(exc)
                    return
                if not exchange.keep_alive:
                    return
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
            with self._cond:
                self._socks.discard(sock)

    def close(self) -> None:
        self.stopping.set()
        self._listener.close()
        with self._cond:
            threads = list(self._threads)
        deadline = time.monotonic() + 10.0
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t for t in threads if t.is_alive()]
        assert not alive, f"fault server threads still running: {alive}"

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TeeProxy:
    """A recording proxy in front of ``upstream`` (host, port): ``snodo.testing``'s fault proxy
    with no faults armed (one proxy implementation), with ``FaultServer``'s ways of looking at
    the requests that passed (``HttpRequest``s: the same fields as ``Request``)."""

    def __init__(self, upstream: tuple[str, int], path: str = "/mcp") -> None:
        host, port = upstream
        self.fault_proxy = FaultProxy.http(f"http://{host}:{port}{path}")
        url = self.fault_proxy.url
        assert url is not None
        self.url: str = url
        self.port = urlsplit(url).port

    @property
    def requests(self) -> list[HttpRequest]:
        return self.fault_proxy.requests

    def received(self, match: Match | None = None) -> list[Any]:
        return [r for r in self.requests if match is None or _matches(match, r)]

    rpc_methods = FaultServer.rpc_methods

    def wait_for(self, match: Match, count: int = 1, timeout: float = 10.0) -> list[Any]:
        """Wait until ``count`` requests matching ``match`` have passed."""

        def found() -> list[Any] | None:
            hits = self.received(match)
            return hits if len(hits) >= count else None

        try:
            return list(self.fault_proxy.wait_until(found, timeout))
        except AssertionError:
            raise AssertionError(f"{count} x {match!r} not received in {timeout}s") from None

    def close(self) -> None:
        self.fault_proxy.close()

    def __enter__(self) -> TeeProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- checking what the client sent ------------------------------------------------------------


def check_wire(requests: Iterable[Request], version: str) -> list[dict[str, Any]]:
    """Validate every JSON-RPC message the client POSTed against the schema of its version.

    ``initialize`` names its own version, the ``server/discover`` probe is 2026-07-28, and
    everything else is ``version``. An answer to a server request is checked as a JSON-RPC
    response of ``version`` (2025-11-25's envelope on 2026-07-28, as tests/stdio_support does).
    """
    messages = []
    for request in requests:
        if request.method != "POST":
            continue
        message = request.message
        assert isinstance(message, dict), request
        if message.get("method") == "initialize":
            check_client_message(message["params"]["protocolVersion"], message)
        elif message.get("method") == "server/discover":
            check_client_message(LATEST, message)
        elif "method" in message:
            check_client_message(version, message)
        else:
            envelope = "2025-11-25" if version == LATEST else version
            validator(envelope, "JSONRPCMessage").validate(message)
            assert ("result" in message) != ("error" in message), message
        messages.append(message)
    return messages


def b64_sentinel(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


@contextlib.contextmanager
def fault_server(responder: McpResponder | None = None) -> Iterator[FaultServer]:
    """A FaultServer whose handlers must not have failed by the end of the block."""
    server = FaultServer(responder)
    try:
        yield server
    finally:
        server.close()
    assert not server.failures, server.failures
