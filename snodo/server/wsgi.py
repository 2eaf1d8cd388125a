"""The HTTP server's glue to ``gevent.pywsgi``: the listening socket, the connection handler,
one request and its replies, the disconnect watch, and the bridge that hands work to the hub.

Nothing here knows MCP: :mod:`snodo.server.http_server` routes, the pure rules are
:mod:`snodo.protocol.serving.http_rules`. Every accepted socket gets TCP_NODELAY (the Nagle
trap of runtime-costs §4).
"""

from __future__ import annotations

import contextlib
import http
import ipaddress
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

import gevent.pywsgi

from snodo.protocol import jsonrpc
from snodo.protocol.errors import INVALID_REQUEST, McpError
from snodo.protocol.serving import http_rules as rules
from snodo.protocol.serving.selection import error_reply

__all__ = [
    "SSE_HEADERS",
    "BodyTooLarge",
    "Bridge",
    "Connections",
    "DisconnectWatch",
    "Handler",
    "Request",
    "error_body",
    "listening_socket",
    "not_allowed",
    "status_line",
]

#: The headers of every event-stream answer.
SSE_HEADERS: Final = (
    ("Content-Type", "text/event-stream"),
    ("Cache-Control", "no-cache, no-transform"),
    ("X-Accel-Buffering", "no"),
)


def status_line(code: int) -> str:
    """``"200 OK"`` for 200 (any code gets a reason phrase)."""
    try:
        return f"{code} {http.HTTPStatus(code).phrase}"
    except ValueError:
        return f"{code} Status"


def error_body(rid: str | int | None, error: McpError) -> bytes:
    """A JSON-RPC error response; without an id when none could be read (the HTTP transport
    pages: "a JSON-RPC error response that has no id")."""
    return jsonrpc.encode(error_reply(rid, error))


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening, non-blocking TCP socket bound to ``host:port``."""
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:  # no resolver (gevent's would start its thread pool)
        family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
        address: Any = (str(literal), port)
        sock = socket.socket(family, socket.SOCK_STREAM)
    else:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
        if not infos:
            raise OSError(f"cannot resolve {host!r}")
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    try:
        if sys.platform != "win32":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class Bridge:
    """Hands callables to the server's hub from any thread (``run_callback_threadsafe``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: Any = None

    def open(self, loop: Any) -> None:
        with self._lock:
            self._loop = loop

    def close(self) -> None:
        with self._lock:
            self._loop = None

    def call(self, fn: Callable[[], Any]) -> bool:
        """Run ``fn`` on the hub soon; False once the hub is gone."""
        with self._lock:
            if self._loop is None:
                return False
            self._loop.run_callback_threadsafe(fn)
            return True


class Connections:
    """The open client connections (hub-only state): socket -> busy answering a request."""

    def __init__(self) -> None:
        self.busy: dict[Any, bool] = {}
        #: Set when the server closes: connections answer their current request and close.
        self.closing = False

    def shutdown_idle(self) -> None:
        """Shut down every connection that is not answering a request."""
        for sock, busy in list(self.busy.items()):
            if not busy:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class DisconnectWatch:
    """Notices, while a response waits, that the client closed its connection."""

    def __init__(self, sock: Any, waker: Any, loop: Any) -> None:
        self._sock = sock
        self._waker = waker
        self._io: Any = None
        self._readable = False
        self.gone = False
        if sock is None:
            return
        try:
            self._io = loop.io(sock.fileno(), 1)
            self._io.start(self._on_readable)
        except (OSError, ValueError, AttributeError):
            self._io = None

    def _on_readable(self) -> None:
        self._readable = True
        if self._io is not None:
            self._io.stop()
        self._waker.set()

    def check(self) -> bool:
        """True once the client has gone (its end of the connection is closed)."""
        if self.gone or not self._readable:
            return self.gone
        self._readable = False
        # gevent's socket wraps the real one; peek on the real one, without blocking.
        raw = getattr(self._sock, "_sock", self._sock)
        flags = socket.MSG_PEEK | getattr(socket, "MSG_DONTWAIT", 0)
        try:
            data = raw.recv(1, flags)
        except (BlockingIOError, InterruptedError):
            if self._io is not None:
                self._io.start(self._on_readable)
            return False
        except OSError:
            self.gone = True
            return True
        if not data:
            self.gone = True
        # Bytes of a pipelined request: the client is there; stop watching.
        return self.gone

    def close(self) -> None:
        if self._io is not None:
            self._io.stop()
            self._io.close()
            self._io = None


class Handler(gevent.pywsgi.WSGIHandler):  # type: ignore[misc]
    """pywsgi's handler plus TCP_NODELAY, raw headers, the socket, and connection tracking
    (the WSGI server carries the :class:`Connections` as ``snodo_connections``)."""

    def __init__(self, sock: Any, address: Any, server: Any, rfile: Any = None) -> None:
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().__init__(sock, address, server, rfile)

    def handle(self) -> None:
        connections: Connections = self.server.snodo_connections
        sock = self.socket
        connections.busy[sock] = False
        try:
            super().handle()
        finally:
            connections.busy.pop(sock, None)

    def handle_one_response(self) -> None:
        connections: Connections = self.server.snodo_connections
        sock = self.socket
        connections.busy[sock] = True
        try:
            super().handle_one_response()
        finally:
            if sock in connections.busy:
                connections.busy[sock] = False
            if connections.closing:
                self.close_connection = True

    def get_environ(self) -> dict[str, Any]:
        env: dict[str, Any] = super().get_environ()
        env["snodo.headers"] = list(self.headers.items())
        env["snodo.socket"] = self.socket
        return env


class BodyTooLarge(Exception):
    """The request body is larger than the limit."""


class Request:
    """One HTTP request being answered: environ, parsed headers, and the reply helpers."""

    __slots__ = ("body_read", "environ", "headers", "start_response")

    def __init__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> None:
        self.environ = environ
        self.start_response = start_response
        self.headers = rules.header_map(environ.get("snodo.headers", ()))
        self.body_read = False

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (lower case)."""
        return rules.first(self.headers, name)

    def _declares_body(self) -> bool:
        length = self.environ.get("CONTENT_LENGTH")
        chunked = self.environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked"
        return chunked or (bool(length) and length != "0")

    def read_body(self, limit: int) -> bytes:
        """The whole body; :class:`BodyTooLarge` past ``limit`` bytes (refused from
        ``Content-Length`` before reading, or while reading a chunked body)."""
        stream = self.environ["wsgi.input"]
        length = self.environ.get("CONTENT_LENGTH")
        if length:
            try:
                size = int(length)
            except ValueError:
                size = -1
            if size > limit:
                raise BodyTooLarge()
            if size >= 0:
                data: bytes = stream.read(size)
                self.body_read = True
                return data
        chunks: list[bytes] = []
        total = 0
        while True:
            # A chunked read returns only once it has this much (or the body ended), so never
            # ask for more than would cross the limit.
            chunk = stream.read(min(65536, limit + 1 - total))
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise BodyTooLarge()
            chunks.append(chunk)
        self.body_read = True
        return b"".join(chunks)

    def abandon_body(self) -> None:
        """Never read the rest of the body (the connection is closed after the reply)."""
        stream: Any = self.environ.get("wsgi.input")
        with contextlib.suppress(AttributeError, TypeError):
            stream.chunked_input = False
            stream.content_length = stream.position

    def reply(
        self, status: int, body: bytes = b"", headers: Sequence[tuple[str, str]] = ()
    ) -> list[bytes]:
        """A whole answer: ``body`` is JSON when not empty."""
        out = list(headers)
        if body:
            out.append(("Content-Type", "application/json"))
        out.append(("Content-Length", str(len(body))))
        if not self.body_read and self._declares_body():
            self.abandon_body()
            out.append(("Connection", "close"))
        self.start_response(status_line(status), out)
        return [body] if body else []

    def error(
        self,
        status: int,
        rid: str | int | None,
        error: McpError,
        headers: Sequence[tuple[str, str]] = (),
    ) -> list[bytes]:
        """A JSON-RPC error answered with HTTP ``status``."""
        return self.reply(status, error_body(rid, error), headers)


def not_allowed(req: Request, allow: str) -> list[bytes]:
    """405, with the methods the endpoint does allow."""
    return req.error(
        405, None, McpError(INVALID_REQUEST, "Method Not Allowed"), (("Allow", allow),)
    )
