"""A custom transport written for the tests: a Runtime served on the far end of a socket pair.

The server side is ``serve_stdio`` (newline-delimited JSON-RPC) on a thread; the client side is
deliberately simple: one request at a time (a lock), read in the calling thread until its
response arrives, answering the server's requests and delivering progress on the way. It
implements ``snodo.Transport`` (``connect``, ``request``, ``close``; ``notify`` optional).
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from snodo.protocol import errors, jsonrpc
from snodo.protocol.errors import McpError
from snodo.server import Runtime
from snodo.server.stdio import serve_stdio
from snodo.transports.base import ConnectOptions, RequestOptions

#: Bound on joining the server thread at close (seconds).
STOP_WAIT = 10.0


class PipeTransport:
    """``snodo.connect((PipeTransport, runtime))``."""

    def __init__(self, runtime: Runtime) -> None:
        self._mine, theirs = socket.socketpair()
        self._lines = self._mine.makefile("rb")
        self._lock = threading.Lock()
        self._closed = False
        self.requests_sent = 0
        source = theirs.makefile("rb", buffering=0)
        sink = theirs.makefile("wb", buffering=0)

        def serve() -> None:
            try:
                serve_stdio(runtime, stdin=source, stdout=sink, shutdown_grace=1.0)
            finally:
                source.close()
                sink.close()
                theirs.close()

        self._server = threading.Thread(target=serve, name="pipe-transport-server", daemon=True)
        self._server.start()

    @classmethod
    def connect(cls, runtime: Runtime, options: ConnectOptions) -> PipeTransport:
        return cls(runtime)

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        with self._lock:
            self._send(message)
            self.requests_sent += 1
            while True:
                incoming = self._receive()
                if "method" not in incoming:
                    if incoming.get("id") == message["id"]:
                        return incoming
                elif "id" in incoming:
                    self._send(self._answer(incoming, options))
                elif (
                    incoming["method"] == "notifications/progress"
                    and options.on_progress is not None
                ):
                    options.on_progress(incoming["params"])

    def notify(self, message: dict[str, Any], options: RequestOptions) -> None:
        with self._lock:
            self._send(message)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._mine.shutdown(socket.SHUT_WR)  # end of input: the server stops
            except OSError:
                pass
        self._server.join(STOP_WAIT)
        self._lines.close()
        self._mine.close()

    def _send(self, message: dict[str, Any]) -> None:
        if self._closed:
            raise errors.connection_error("Connection closed")
        try:
            self._mine.sendall(jsonrpc.encode_line(message))
        except OSError as exc:
            raise errors.connection_error("The pipe is closed", cause=("pipe", str(exc))) from None

    def _receive(self) -> dict[str, Any]:
        line = self._lines.readline()
        if not line:
            raise errors.connection_error("The server closed the pipe")
        incoming: dict[str, Any] = jsonrpc.decode(line)
        return incoming

    @staticmethod
    def _answer(request: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        method, params = request["method"], request.get("params") or {}
        try:
            if options.on_server_request is None:
                raise errors.method_not_found(method)
            result = options.on_server_request(method, params)
        except McpError as error:
            return jsonrpc.error_response(request["id"], error)
        return jsonrpc.result_response(request["id"], result)
