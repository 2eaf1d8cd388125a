"""The HTTP side of the fault proxy: enough HTTP/1.1 to break answers per request and per event.

``HttpEngine`` listens on 127.0.0.1; each client connection gets a thread and a keep-alive
connection of its own to the upstream server. Requests pass on byte for byte; answers pass on
with their head unchanged, a JSON body whole and an event stream one event at a time, so that a
fault can hit one message. A fault that needs more than one message in an answer (a duplicate,
a flood, a garbage event, a drop) turns a JSON answer into an event stream, which a Streamable
HTTP client must accept. Sockets poll a stop flag every ``POLL`` seconds; waits have deadlines.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

from snodo.testing.faults import (
    FLOOD_PREFIX,
    TO_CLIENT,
    TO_SERVER,
    Action,
    FaultBook,
    HttpRequest,
)

__all__ = ["HttpEngine"]

POLL = 0.05
MAX_HEAD = 64 * 1024
MAX_BODY = 512 * 1024 * 1024
JOIN_DEADLINE = 10.0
CONNECT_TIMEOUT = 5.0
GARBAGE_EVENT = b"data: {this is not json\n\n"
SEPARATORS = (b"\r\n\r\n", b"\n\n", b"\r\r")


class Stopped(Exception):
    """The proxy is closing, or the peer went away, while a thread was reading."""


class _Reader:
    """Buffered reads from a socket that give up when the proxy stops (or ``idle`` says so)."""

    def __init__(
        self,
        sock: socket.socket,
        stopping: threading.Event,
        idle: Callable[[], bool] | None = None,
    ) -> None:
        self.sock = sock
        self.stopping = stopping
        self.idle = idle  # called while waiting: True ends the read (the other side has gone)
        self.buffer = b""
        self.taken = bytearray()  # every byte consumed since the last ``take()``

    def fill(self) -> bool:
        """Read more; False at EOF."""
        while True:
            if self.stopping.is_set():
                raise Stopped
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                if self.idle is not None and self.idle():
                    raise Stopped from None
                continue
            except OSError as exc:
                raise Stopped from exc
            if not data:
                return False
            self.buffer += data
            return True

    def _consume(self, n: int) -> bytes:
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        self.taken += data
        return data

    def take(self) -> bytes:
        out = bytes(self.taken)
        self.taken.clear()
        return out

    def line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            if len(self.buffer) > MAX_HEAD or not self.fill():
                raise Stopped
        end = self.buffer.index(b"\r\n")
        return self._consume(end + 2)[:-2]

    def exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            if not self.fill():
                raise Stopped
        return self._consume(n)

    def some(self) -> bytes:
        """What is buffered, or the next read; b"" at EOF."""
        if not self.buffer and not self.fill():
            return b""
        return self._consume(len(self.buffer))

    def head(self) -> tuple[str, list[tuple[str, str]]]:
        """A start line and the header fields."""
        start = self.line()
        while not start:  # stray CRLF between messages (RFC 9112 §2.2)
            start = self.line()
        headers: list[tuple[str, str]] = []
        while True:
            line = self.line()
            if not line:
                return start.decode("latin-1"), headers
            name, _, value = line.decode("latin-1").partition(":")
            headers.append((name, value.strip(" \t")))

    def body(self, headers: list[tuple[str, str]], *, until_close: bool) -> Iterator[bytes]:
        """The payload of a message, piece by piece (chunked, Content-Length or to EOF)."""
        fields = {n.lower(): v for n, v in headers}
        if "chunked" in fields.get("transfer-encoding", "").lower():
            while True:
                size = int(self.line().split(b";")[0], 16)
                if size == 0:
                    while self.line():
                        pass
                    return
                while size:
                    piece = self.exactly(min(size, 65536))
                    size -= len(piece)
                    yield piece
                self.exactly(2)
        elif "content-length" in fields:
            left = int(fields["content-length"])
            while left:
                piece = self.exactly(min(left, 65536))
                left -= len(piece)
                yield piece
        elif until_close:
            while piece := self.some():
                yield piece


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    lower = name.lower()
    return next((v for n, v in headers if n.lower() == lower), None)


def _head_bytes(start: str, headers: list[tuple[str, str]]) -> bytes:
    lines = [start, *(f"{n}: {v}" for n, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _without(headers: list[tuple[str, str]], *names: str) -> list[tuple[str, str]]:
    drop = {n.lower() for n in names}
    return [(n, v) for n, v in headers if n.lower() not in drop]


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


def _event(message: object) -> bytes:
    return b"data: " + json.dumps(message).encode() + b"\n\n"


def _event_data(raw: bytes) -> bytes | None:
    """The data of one SSE event (its ``data:`` lines joined), or None when it has none."""
    lines = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    data = [line[5:].removeprefix(b" ") for line in lines if line.startswith(b"data:")]
    return b"\n".join(data) if data else None


def _padded_event(raw: bytes, nbytes: int) -> bytes:
    """``raw`` with its data padded with spaces to ``nbytes`` (its other fields kept)."""
    data = _event_data(raw) or b""
    kept = [
        line
        for line in raw.replace(b"\r\n", b"\n").split(b"\n")
        if line and not line.startswith(b"data:")
    ]
    padded = data + b" " * max(0, nbytes - len(data))
    return b"".join(line + b"\n" for line in kept) + b"data: " + padded + b"\n\n"


def _split_events(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Complete events (with their blank line) off the front of ``buffer``, and the rest."""
    events: list[bytes] = []
    while True:
        found = [(buffer.find(s), s) for s in SEPARATORS if s in buffer]
        if not found:
            return events, buffer
        at, sep = min(found)
        events.append(buffer[: at + len(sep)])
        buffer = buffer[at + len(sep) :]


def _reset(sock: socket.socket) -> None:
    """Close with a TCP RST (SO_LINGER 0)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class _Gone(Exception):
    """The client went away (or was cut or reset): the connection ends."""


class _Connection:
    """One client connection and its upstream connection."""

    def __init__(self, engine: HttpEngine, client: socket.socket, number: int) -> None:
        self.engine = engine
        self.book = engine.book
        self.client = client
        self.number = number
        self.upstream: socket.socket | None = None
        self.up: _Reader | None = None

    # -- writing to the client ---------------------------------------------------------------

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self.book.stopping.is_set():
                raise _Gone
            try:
                n = self.client.send(view)
            except TimeoutError:
                continue
            except OSError as exc:
                raise _Gone from exc
            view = view[n:]

    def client_gone(self) -> bool:
        """True once the client has closed its side (checked while waiting on the server)."""
        try:
            readable, _, _ = select.select([self.client], [], [], 0)
            if not readable:
                return False
            return self.client.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def respond(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send(
            _head_bytes(f"HTTP/1.1 {status}", [*headers, ("Content-Length", str(len(body)))]) + body
        )

    # -- the loop ----------------------------------------------------------------------------

    def serve(self) -> None:
        reader = _Reader(self.client, self.book.stopping)
        try:
            while not self.book.stopping.is_set():
                try:
                    start, headers = reader.head()
                    body = b"".join(reader.body(headers, until_close=False))
                except (Stopped, ValueError):
                    return
                raw = reader.take()
                if not self.request(start, headers, body, raw):
                    return
        except _Gone:
            return
        finally:
            self.close()

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            if sock is None:
                continue
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def request(self, start: str, headers: list[tuple[str, str]], body: bytes, raw: bytes) -> bool:
        """Pass one request on and its answer back; False when the connection ends."""
        method, target, _ = [*start.split(" ", 2), "", ""][:3]
        book = self.book
        book.record_request(
            HttpRequest(len(book.requests), self.number, method, target, tuple(headers), body)
        )
        message = book.record(
            TO_SERVER,
            body,
            self.number,
            http_method=method,
            session_id=_header(headers, "mcp-session-id"),
        )
        if message.kind == "response" and str(message.id).startswith(FLOOD_PREFIX):
            self.respond("202 Accepted", [], b"")  # the answer to a flood's request stops here
            return True
        actions = book.decide(message)
        book.applied(message, actions)
        kinds = {a.kind for a in actions}
        for action in actions:
            if action.kind == "delay" and not book.pause(action.seconds):
                return False
        if "reset" in kinds:
            _reset(self.client)
            return False
        if "cut" in kinds:
            return False
        if "session_404" in kinds:
            error = {"code": -32001, "message": "Session not found (fault proxy)"}
            answer = {"jsonrpc": "2.0", "id": message.id, "error": error}
            self.respond(
                "404 Not Found", [("Content-Type", "application/json")], json.dumps(answer).encode()
            )
            return True
        if "drop" in kinds:
            if message.kind == "request":  # its stream ends without an answer
                self.send(
                    _head_bytes(
                        "HTTP/1.1 200 OK",
                        [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")],
                    )
                    + b"0\r\n\r\n"
                )
            else:
                self.respond("202 Accepted", [], b"")
            return True
        up = self.forward(raw)
        if up is None:
            self.respond(
                "502 Bad Gateway", [("Content-Type", "text/plain")], b"upstream unreachable"
            )
            return False
        return self.answer(up, method, "stall_head" in kinds, "stall_body" in kinds)

    def forward(self, raw: bytes) -> _Reader | None:
        """Send the request upstream (a fresh connection if the kept one is closed)."""
        for _ in range(2):
            if self.upstream is None:
                try:
                    self.upstream = socket.create_connection(
                        self.engine.upstream, timeout=CONNECT_TIMEOUT
                    )
                except OSError:
                    return None
                self.upstream.settimeout(POLL)
                self.up = _Reader(self.upstream, self.book.stopping, self.client_gone)
            try:
                self.upstream.sendall(raw)
            except OSError:
                self.drop_upstream()
                continue
            return self.up
        return None

    def drop_upstream(self) -> None:
        if self.upstream is not None:
            with contextlib.suppress(OSError):
                self.upstream.close()
        self.upstream = self.up = None

    def answer(self, up: _Reader, method: str, stall_head: bool, stall_body: bool) -> bool:
        try:
            while True:
                start, headers = up.head()
                status = int(start.split(" ", 2)[1])
                if 100 <= status < 200 and status != 101:
                    self.send(up.take())
                    continue
                break
        except (Stopped, ValueError, IndexError):
            self.drop_upstream()
            return False
        head_raw = up.take()
        if stall_head:
            self.book.stall(self.engine.stall_timeout)
        keep = "close" not in (_header(headers, "connection") or "").lower()
        if method == "HEAD" or status in (204, 304):
            self.send(head_raw)
            return keep
        framed = (
            _header(headers, "content-length") is not None
            or "chunked" in (_header(headers, "transfer-encoding") or "").lower()
        )
        if "text/event-stream" in (_header(headers, "content-type") or "").lower():
            return self.stream(up, start, headers, head_raw, stall_body) and keep and framed
        try:
            body = b"".join(up.body(headers, until_close=True))
        except Stopped:
            self.drop_upstream()
            return False
        up.take()
        if not framed:
            self.drop_upstream()
        if len(body) > MAX_BODY:
            raise _Gone
        self.whole(start, headers, head_raw, body, stall_body)
        return keep and framed

    def whole(
        self,
        start: str,
        headers: list[tuple[str, str]],
        head_raw: bytes,
        body: bytes,
        stall_body: bool,
    ) -> None:
        """A JSON (or other) answer read whole: one message."""
        book = self.book
        actions: list[Action] = []
        if body:
            message = book.record(TO_CLIENT, body, self.number)
            actions = book.decide(message)
            book.applied(message, actions)
        kinds = {a.kind for a in actions}
        for action in actions:
            if action.kind == "delay" and not book.pause(action.seconds):
                raise _Gone
        if "reset" in kinds:
            _reset(self.client)
            raise _Gone
        plain = _without(headers, "content-length", "transfer-encoding")
        if "cut" in kinds:
            self.send(_head_bytes(start, [*plain, ("Content-Length", str(len(body)))]))
            self.send(body[: max(1, len(body) // 2)])
            raise _Gone
        for action in actions:
            if action.kind == "oversize":
                body += b" " * max(0, action.nbytes - len(body))
        if kinds & {"drop", "duplicate", "garbage", "flood"}:
            stream = [
                *_without(plain, "content-type"),
                ("Content-Type", "text/event-stream"),
                ("Transfer-Encoding", "chunked"),
            ]
            self.send(_head_bytes(start, stream))
            if stall_body:
                book.stall(self.engine.stall_timeout)
            self.send(b"".join(_chunk(e) for e in self.extra(actions)))
            if "drop" not in kinds:
                event = b"data: " + body + b"\n\n"
                self.send(_chunk(event) * (2 if "duplicate" in kinds else 1))
            self.send(b"0\r\n\r\n")
            return
        resized = "oversize" in kinds
        chunked = "chunked" in (_header(headers, "transfer-encoding") or "").lower()
        if resized:
            head_raw = _head_bytes(start, [*plain, ("Content-Length", str(len(body)))])
            chunked = False
        self.send(head_raw)
        if stall_body:
            book.stall(self.engine.stall_timeout)
        self.send(_chunk(body) + b"0\r\n\r\n" if chunked else body)

    def extra(self, actions: list[Action]) -> list[bytes]:
        """The events a garbage or flood action puts before a message."""
        out = []
        for action in actions:
            if action.kind == "garbage":
                out.append(GARBAGE_EVENT)
            elif action.kind == "flood":
                for _ in range(action.count):
                    request = {
                        "jsonrpc": "2.0",
                        "id": self.book.flood_id(),
                        "method": action.method,
                    }
                    out.append(_event(request))
        return out

    def stream(
        self,
        up: _Reader,
        start: str,
        headers: list[tuple[str, str]],
        head_raw: bytes,
        stall_body: bool,
    ) -> bool:
        """An event stream, passed on one event at a time; False when the connection ends."""
        book = self.book
        upstream_chunked = "chunked" in (_header(headers, "transfer-encoding") or "").lower()
        framed = upstream_chunked or _header(headers, "content-length") is not None
        if framed and not upstream_chunked:  # a Content-Length stream goes on chunked
            head_raw = _head_bytes(
                start, [*_without(headers, "content-length"), ("Transfer-Encoding", "chunked")]
            )
        chunked = framed
        self.send(head_raw)
        if stall_body:
            book.stall(self.engine.stall_timeout)

        def out(data: bytes) -> None:
            self.send(_chunk(data) if chunked else data)

        buffer = b""
        try:
            for piece in up.body(headers, until_close=True):
                up.take()
                events, buffer = _split_events(buffer + piece)
                for raw in events:
                    self.event(raw, out)
        except Stopped:
            self.drop_upstream()
            return False
        up.take()
        if buffer:
            out(buffer)
        if chunked:
            self.send(b"0\r\n\r\n")
        if not framed:
            self.drop_upstream()
        return True

    def event(self, raw: bytes, out: Callable[[bytes], None]) -> None:
        data = _event_data(raw)
        if data is None:
            out(raw)
            return
        book = self.book
        message = book.record(TO_CLIENT, data, self.number)
        actions = book.decide(message)
        book.applied(message, actions)
        kinds = {a.kind for a in actions}
        for action in actions:
            if action.kind == "delay" and not book.pause(action.seconds):
                raise _Gone
            if action.kind == "oversize":
                raw = _padded_event(raw, action.nbytes)
        if "reset" in kinds:
            _reset(self.client)
            raise _Gone
        if "cut" in kinds:
            out(raw[: max(1, len(raw) // 2)])
            raise _Gone
        for extra in self.extra(actions):
            out(extra)
        if "drop" in kinds:
            return
        out(raw)
        if "duplicate" in kinds:
            out(raw)


class HttpEngine:
    """The listener on 127.0.0.1 and its connections' threads."""

    def __init__(self, book: FaultBook, upstream_url: str, stall_timeout: float) -> None:
        parts = urlsplit(upstream_url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"the fault proxy passes plain http:// on; got {upstream_url!r}")
        self.book = book
        self.stall_timeout = stall_timeout
        self.upstream = (parts.hostname, parts.port or 80)
        self._threads: list[threading.Thread] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(POLL)
        self.port = self._listener.getsockname()[1]
        path = parts.path or "/"
        self.url = f"http://127.0.0.1:{self.port}{path}" + (
            f"?{parts.query}" if parts.query else ""
        )
        self._start(self._accept, "fault-proxy-http-accept")

    def _start(self, target: Callable[..., None], name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self.book.cond:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self.book.stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(POLL)
            connection = _Connection(self, client, self.book.connection())
            self._start(connection.serve, f"fault-proxy-http-{connection.number}")

    def close(self) -> None:
        self.book.stopping.set()
        self._listener.close()
        with self.book.cond:
            threads = list(self._threads)
        deadline = time.monotonic() + JOIN_DEADLINE
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t for t in threads if t.is_alive()]
        if alive:
            raise RuntimeError(f"fault proxy threads still running: {alive}")
