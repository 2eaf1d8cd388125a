"""A custom transport written for the tests: a Runtime served through a pipe pair.

The server side is ``serve_stdio`` (newline-delimited JSON-RPC) on a thread, reading one pipe and
writing the other; the client side is deliberately simple: one request at a time (a lock), read
in the calling thread until its response arrives, answering the server's requests and delivering
progress on the way. It implements ``snodo.Transport`` (``connect``, ``request``, ``close``; and
the optional ``notify``). Under gevent the blocking pipe reads and writes run on gevent's thread
pool, as the stdio server's own do, so the hub keeps running.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from snodo.protocol import errors, jsonrpc
from snodo.protocol.exchange import server_request_reply
from snodo.server import Runtime
from snodo.server.stdio_server import serve_stdio
from snodo.transports.base import ConnectOptions, RequestOptions

#: Bound on joining the server thread at close (seconds).
STOP_WAIT = 10.0
JOIN_SLICE = 0.01
READ_SIZE = 64 * 1024


def off_hub(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` itself, or under gevent ``fn`` run on the hub's thread pool."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched("threading"):
        return fn
    import gevent

    pool = gevent.get_hub().threadpool
    return lambda *args: pool.apply(fn, args)


class PipeTransport:
    """``snodo.connect((PipeTransport, runtime))``."""

    def __init__(self, runtime: Runtime) -> None:
        to_server, self._out = os.pipe()
        self._in, from_server = os.pipe()
        self._read = off_hub(os.read)
        self._write = off_hub(os.write)
        self._buffer = b""
        self._lock = threading.Lock()
        self._closed = False
        self.requests_sent = 0
        source = os.fdopen(to_server, "rb", buffering=0)
        sink = os.fdopen(from_server, "wb", buffering=0)

        def serve() -> None:
            with source, sink:  # closing the sink ends the client's reads
                serve_stdio(runtime, stdin=source, stdout=sink, shutdown_grace=1.0)

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
            os.close(self._out)  # end of input: the server stops
        # Joined in short slices: under gevent the server's last thread-pool read can wait for
        # the hub's next wakeup (seconds) before its greenlet sees the end of input.
        deadline = time.monotonic() + STOP_WAIT
        while self._server.is_alive() and time.monotonic() < deadline:
            self._server.join(JOIN_SLICE)
        os.close(self._in)

    def _send(self, message: dict[str, Any]) -> None:
        if self._closed:
            raise errors.connection_error("Connection closed")
        view = memoryview(jsonrpc.encode_line(message))
        try:
            while view:
                view = view[self._write(self._out, view) :]
        except OSError as exc:
            raise errors.connection_error("The pipe is closed", cause=("pipe", str(exc))) from None

    def _receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            chunk = self._read(self._in, READ_SIZE)
            if not chunk:
                raise errors.connection_error("The server closed the pipe")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        incoming: dict[str, Any] = jsonrpc.decode(line)
        return incoming

    @staticmethod
    def _answer(request: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        return server_request_reply(
            request["id"], request["method"], request.get("params"), options.on_server_request
        )
