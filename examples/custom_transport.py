"""A custom transport: snodo.connect((SocketPairTransport, runtime)) reaches a Runtime through a
socket pair, with snodo's stdio server loop serving the far end on a thread.

    python examples/custom_transport.py

Any class works as a transport when it has a ``connect(init_arg, options)`` class method that
returns an object with ``request(message, options)`` and ``close()`` (``snodo.Transport``).
This one also has ``notify`` (so session-era connections can open), and it honours the options
the client passes: ``on_progress`` (progress reports of the request), ``on_server_request``
(requests the server sends while a call is in flight) and ``timeout``. The rules every
transport shares come from ``snodo.protocol.exchange``: the request's ``Deadline``, the
progress-token rule (the token is the request's id) and the replies to server requests.

It is an example, not a product: one reader thread routes responses to their callers by id and
progress by token; each server-to-client request is answered on a thread of its own.
"""

from __future__ import annotations

import queue
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import snodo
from snodo.protocol import errors, jsonrpc
from snodo.protocol.errors import McpError
from snodo.protocol.exchange import (
    Deadline,
    handler_raised_reply,
    progress_request_id,
    server_request_reply,
)
from snodo.server import Runtime
from snodo.server.stdio_server import serve_stdio
from snodo.transports.base import ConnectOptions, RequestOptions

#: How long close() waits for the server and reader threads (seconds).
STOP_WAIT = 10.0


class SocketPairTransport:
    """A connection to a Runtime served on the other end of a socket pair."""

    def __init__(self, runtime: Runtime, options: ConnectOptions) -> None:
        self._answer = options.on_server_request
        self._socket, theirs = socket.socketpair()
        self._pending: dict[Any, queue.Queue[tuple[str, Any]]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._closed = False
        source = theirs.makefile("rb", buffering=0)
        sink = theirs.makefile("wb", buffering=0)

        def serve() -> None:
            try:
                serve_stdio(runtime, stdin=source, stdout=sink, shutdown_grace=1.0)
            finally:
                source.close()
                sink.close()
                theirs.close()  # the reader sees the end of the stream

        self._server = threading.Thread(target=serve, name="socketpair-server", daemon=True)
        self._reader = threading.Thread(target=self._read, name="socketpair-reader", daemon=True)
        self._server.start()
        self._reader.start()

    # -- snodo.Transport -----------------------------------------------------------------------

    @classmethod
    def connect(cls, runtime: Runtime, options: ConnectOptions) -> SocketPairTransport:
        """Open a connection (the client calls this again when negotiation reopens)."""
        return cls(runtime, options)

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        """Send a request; wait for its response, delivering its progress on the way."""
        inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        request_id = message["id"]
        with self._lock:
            if self._closed:
                raise errors.connection_error("Connection closed")
            self._pending[request_id] = inbox
        # The request's deadline, with reset_timeout_on_progress and max_total_timeout applied.
        deadline = Deadline.start(options, time.monotonic())
        try:
            self._send(message)
            while True:
                left = deadline.remaining(time.monotonic())
                try:
                    kind, value = inbox.get(timeout=None if left is None else max(0.0, left))
                except queue.Empty:
                    self._cancel(request_id)
                    raise deadline.error() from None
                if kind == "response":
                    response: dict[str, Any] = value
                    return response
                if kind == "progress" and options.on_progress is not None:
                    options.on_progress(value)
                    deadline = deadline.after_progress(time.monotonic())
                elif kind == "closed":
                    raise errors.connection_error("The connection was closed")
        finally:
            with self._lock:
                self._pending.pop(request_id, None)

    def notify(self, message: dict[str, Any], options: RequestOptions) -> None:
        """Send a notification (``notifications/initialized``, ``notifications/cancelled``)."""
        self._send(message)

    def close(self) -> None:
        """Fail the requests in flight at once, end the input; the server loop stops, then the
        reader."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            inboxes = list(self._pending.values())
        for inbox in inboxes:
            inbox.put(("closed", None))
        try:
            self._socket.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self._server.join(STOP_WAIT)
        self._reader.join(STOP_WAIT)
        self._socket.close()

    # -- internals -----------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        with self._write_lock:
            try:
                self._socket.sendall(jsonrpc.encode_line(message))
            except OSError as exc:
                raise errors.connection_error("Connection closed", cause=str(exc)) from None

    def _cancel(self, request_id: Any) -> None:
        cancelled = jsonrpc.cancelled_notification(request_id, "Request timed out")
        try:
            self._send(cancelled)
        except McpError:
            pass

    def _read(self) -> None:
        """Route each incoming line: responses by id, progress by token, server requests."""
        with self._socket.makefile("rb") as lines:
            for line in lines:
                message = jsonrpc.decode(line)
                method = message.get("method")
                if method is None:
                    self._deliver(message.get("id"), ("response", message))
                elif "id" in message:
                    threading.Thread(target=self._serve_request, args=(message,)).start()
                elif method == "notifications/progress":  # its token is the request's id
                    params = message.get("params")
                    self._deliver(progress_request_id(params), ("progress", params))
        with self._lock:
            self._closed = True
            inboxes = list(self._pending.values())
        for inbox in inboxes:
            inbox.put(("closed", None))

    def _deliver(self, key: Any, item: tuple[str, Any]) -> None:
        with self._lock:
            inbox = self._pending.get(key)
        if inbox is not None:
            inbox.put(item)

    def _serve_request(self, request: dict[str, Any]) -> None:
        """Answer a server-to-client request with the client's input handlers (ping without
        them); a handler that raises is answered -32603, as snodo's stdio transport does."""
        request_id, method, params = request["id"], request["method"], request.get("params")
        try:
            reply = server_request_reply(request_id, method, params, self._answer)
        except Exception as exc:
            reply = handler_raised_reply(request_id, exc)
        try:
            self._send(reply)
        except McpError:
            pass  # closed meanwhile


def main() -> int:
    from example_runtime import build

    for version in snodo.SUPPORTED_VERSIONS:
        with snodo.connect((SocketPairTransport, build()), protocol=version) as client:
            tools = [tool["name"] for tool in client.list_tools()]
            echoed = client.call_tool("echo", {"text": "through a socket pair"})
            print(f"{client.version}: {len(tools)} tools; echo -> {echoed['content'][0]['text']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
