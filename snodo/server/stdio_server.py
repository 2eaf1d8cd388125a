"""Serve a :class:`~snodo.server.Runtime` on stdin/stdout: ``python -m snodo.server MODULE:ATTR``.

One JSON-RPC message per line, both directions (``snodo.protocol.framing`` splits the input,
``snodo.protocol.jsonrpc`` decodes and encodes). Every version the Runtime enables is served on
the same process: stateless-era requests carry their version in ``_meta``; ``initialize`` opens
the process's one session-era session (one :class:`ServerSession`, one ``Peer(kind="stdio")``).

Threads (greenlets when gevent has patched ``threading``):

- the **reader** (the caller of :func:`serve_stdio`) reads stdin in chunks, answers framing,
  JSON and envelope errors itself, runs notifications (``notifications/cancelled``,
  ``notifications/initialized``) and ``initialize`` inline (they run no user code, and running
  ``initialize`` inline means every later line sees the negotiated version), routes responses to
  the server's own requests, and starts one **worker** per other request;
- a **worker** runs :func:`dispatch` for its request and writes the progress notifications,
  the server-to-client requests and the response of that request (:mod:`snodo.server.jobs`).
  At most ``max_concurrency`` workers run at once; a request over the limit is answered -32603
  "Server busy" at once. A worker frees its slot before it writes its response, so a client
  that waits for each response before sending the next request never sees "Server busy".

Output: each message is encoded once and written (and flushed) under one lock, so lines never
interleave; only protocol messages reach the protocol stream. While :func:`serve_stdio` serves
the process's own stdin/stdout it moves them aside (:mod:`snodo.server.stdio_io`).

Server-to-client requests (session era: ``ctx.elicit``, ``ctx.sample``, ``ctx.list_roots``)
get string ids ``"srv-1"``, ``"srv-2"``, ... and block their worker until the client answers,
at most ``server_request_timeout`` seconds: an error answer raises ``McpError.from_wire``, the
timeout -32001 (the client is sent ``notifications/cancelled`` for it), end of stdin -32000.

Cancellation: ``notifications/cancelled`` marks the request's context cancelled (handlers see
``ctx.cancelled``), fails the server-to-client requests that request is waiting on (the client
is sent ``notifications/cancelled`` for each), and **suppresses the request's response** (the
session era's cancellation pages say the receiver SHOULD NOT answer; in the stateless era the
client ignores it anyway). Progress reports of a cancelled request are dropped too.

Errors nobody can be told about by id: an undecodable line and an oversized line (its id is
never read: the line is not buffered whole) are answered with ``"id": null`` (JSON-RPC 2.0 §5;
the MCP schemas type the id as optional; snodo's codec and the official Python SDK use null). An
envelope error carries the message's id when it had a valid one. A response for an id the server
is not waiting on is logged (stderr) and dropped.

End of input: the reader stops, pending server-to-client requests fail with -32000, in-flight
requests get ``shutdown_grace`` seconds to finish (their responses are still written), and
:func:`serve_stdio` returns 0. SIGTERM keeps its default action (the process ends at once).
"""

from __future__ import annotations

import itertools
import logging
import sys
import threading
from collections.abc import Iterator
from functools import partial
from typing import Any, BinaryIO, Final

from snodo.log import get_logger
from snodo.protocol import jsonrpc
from snodo.protocol.errors import INTERNAL_ERROR, PARSE_ERROR, McpError, connection_error
from snodo.protocol.framing import LineFramer, Oversized
from snodo.server.context import Peer, RequestId, ServerSession
from snodo.server.dispatcher import dispatch
from snodo.server.jobs import (
    Inflight,
    Job,
    JobTable,
    ServerRequests,
    notification_bytes,
    response_bytes,
)
from snodo.server.runtime import Runtime
from snodo.server.stdio_io import Writer, reader, std_streams
from snodo.server.subscriptions import (
    ServerSubscription,
    close_session_channel,
    open_session_channel,
)
from snodo.server.targets import EXIT_USAGE, TargetError, load_or_report, load_runtime

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_SERVER_REQUEST_TIMEOUT",
    "DEFAULT_SHUTDOWN_GRACE",
    "EXIT_USAGE",
    "TargetError",
    "load_runtime",
    "run",
    "serve_stdio",
]

DEFAULT_MAX_CONCURRENCY: Final = 64
DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024
DEFAULT_SERVER_REQUEST_TIMEOUT: Final = 300.0
#: How long in-flight requests may run on after stdin ends.
DEFAULT_SHUTDOWN_GRACE: Final = 5.0

_log = get_logger("snodo.server.stdio_server")


# -- serving ---------------------------------------------------------------------------------


def serve_stdio(
    runtime: Runtime,
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    server_request_timeout: float = DEFAULT_SERVER_REQUEST_TIMEOUT,
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
) -> int:
    """Serve ``runtime`` on ``stdin``/``stdout`` until ``stdin`` ends; the exit status (0).

    ``None`` means the process's own stream, which is then moved aside while serving (see the
    module docstring). Given streams are used as they are: ``stdin`` is read with ``read1``
    (or ``read`` when it has none, which must then return what is available, as a raw stream
    does), and ``stdout`` is written and flushed once per message.
    """
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    if max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be at least 1, got {max_line_bytes}")
    if not server_request_timeout > 0:
        raise ValueError(f"server_request_timeout must be positive, got {server_request_timeout}")
    if not shutdown_grace >= 0:
        raise ValueError(f"shutdown_grace must be >= 0, got {shutdown_grace}")
    with std_streams(stdin is None, stdout is None) as (own_in, own_out):
        source = stdin if stdin is not None else own_in
        sink = stdout if stdout is not None else own_out
        assert source is not None and sink is not None
        server = _Server(
            runtime,
            source,
            sink,
            max_concurrency=max_concurrency,
            max_line_bytes=max_line_bytes,
            server_request_timeout=server_request_timeout,
            shutdown_grace=shutdown_grace,
        )
        return server.serve()


class _Server:
    def __init__(
        self,
        runtime: Runtime,
        stdin: BinaryIO,
        stdout: BinaryIO,
        *,
        max_concurrency: int,
        max_line_bytes: int,
        server_request_timeout: float,
        shutdown_grace: float,
    ) -> None:
        self.runtime = runtime
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._table = JobTable(self._lock, max_concurrency, self._finished)
        self._jobs: dict[RequestId, Job] = {}
        self._asks = ServerRequests(
            self._lock,
            itertools.count(1),
            timeout=server_request_timeout,
            closed_message="Connection closed: stdin has ended",
        )
        self.peer = Peer(
            "stdio",
            session=ServerSession(),
            server_request=self._server_request,
            inflight=Inflight(self._table),
            listen=self._start_listen,
        )
        self._listens: dict[RequestId, ServerSubscription] = {}
        self._read = reader(stdin)
        self._out = Writer(stdout)
        self._framer = LineFramer(max_line_bytes)
        self._max_line_bytes = max_line_bytes
        self._grace = shutdown_grace

    # -- the reader ------------------------------------------------------------------------

    def serve(self) -> int:
        try:
            for event in self._events():
                if isinstance(event, Oversized):
                    self._oversized(event)
                else:
                    self._line(event)
        except BaseException:
            self._end_of_input(grace=0.0)  # Ctrl-C or a failure of our own: do not linger
            raise
        self._end_of_input(grace=self._grace)
        return 0

    def _events(self) -> Iterator[bytes | Oversized]:
        framer = self._framer
        while True:
            chunk = self._read()
            if not chunk:
                yield from framer.flush()
                return
            yield from framer.feed(chunk)

    def _oversized(self, event: Oversized) -> None:
        _log.warning(
            "discarded an oversized line",
            size=event.size,
            max_line_bytes=self._max_line_bytes,
        )
        self._send_error(
            None,
            McpError(
                PARSE_ERROR,
                f"Parse error: message larger than {self._max_line_bytes} bytes "
                f"({event.size} bytes discarded)",
            ),
        )

    def _line(self, line: bytes) -> None:
        if line.isspace():
            return
        try:
            obj = jsonrpc.decode(line, max_bytes=self._max_line_bytes)
        except jsonrpc.DecodeError as exc:
            self._send_error(None, exc.to_mcp_error())
            return
        try:
            message = jsonrpc.classify(obj)
        except jsonrpc.DecodeError as exc:
            if (
                type(obj) is dict
                and "method" not in obj
                and exc.id is not None
                and self._asks.answer(
                    exc.id,
                    None,
                    McpError(INTERNAL_ERROR, f"The client's answer is malformed: {exc.reason}"),
                )
            ):
                return  # a malformed answer to one of our requests fails that request
            self._send_error(exc.id, exc.to_mcp_error())
            return
        if isinstance(message, jsonrpc.Request):
            self._request(message, obj)
        elif isinstance(message, jsonrpc.Notification):
            self._notification(message, obj)
        elif isinstance(message, jsonrpc.Response):
            if not self._asks.answer(message.id, message.result, None):
                _log.warning("dropped a response to an unknown id", id=message.id)
        elif message.id is None or not self._asks.answer(
            message.id, None, McpError.from_wire(message.error)
        ):
            _log.warning(
                "dropped an error response from the client", id=message.id, error=message.error
            )

    def _request(self, request: jsonrpc.Request, message: dict[str, Any]) -> None:
        if request.method == "initialize":
            # No user code runs here, and every later line must see the negotiated version.
            self._send_response(self._dispatch(message))
            if self.peer.session is not None and self.peer.session.version is not None:
                open_session_channel(self.runtime, self.peer.session, self._emit)
            return
        job = Job(request.id, request.method, self._jobs)
        with self._lock:
            admitted = self._table.admit(job)
        if not admitted or not self._table.spawn(
            job, partial(self._work, message), f"snodo-stdio-{request.id}"
        ):
            self._send_error(request.id, McpError(INTERNAL_ERROR, "Server busy"))

    def _notification(self, note: jsonrpc.Notification, message: dict[str, Any]) -> None:
        if note.method == "notifications/cancelled" and note.params is not None:
            rid: Any = note.params.get("requestId")
            with self._lock:
                listening = self._listens.pop(rid, None) if type(rid) in (str, int) else None
            if listening is not None:
                listening.close()  # the client cancelled its subscription: no result follows
                return
            self._cancel(rid)
        try:
            dispatch(self.runtime, message, self.peer)  # cheap: marks a context, sets a flag
        except Exception:
            _log.exception("a notification failed", method=note.method)

    def _cancel(self, rid: object) -> None:
        if type(rid) is not str and type(rid) is not int:
            return
        with self._lock:
            job = self._jobs.get(rid)
        if job is not None and self._table.cancel(job):
            self._asks.fail_job(job, self._emit)

    def _start_listen(self, sub: ServerSubscription) -> None:
        """A ``subscriptions/listen`` stream: acknowledged at once, then its events are
        interleaved on stdout until the client cancels it or the server finishes it."""
        rid = sub.id
        assert rid is not None
        with self._lock:
            self._listens[rid] = sub

        def ended() -> None:
            with self._lock:
                if self._listens.get(rid) is sub:
                    del self._listens[rid]

        sub.start(self._emit, ended)

    def _emit(self, message: dict[str, Any]) -> None:
        if not self._out.write(jsonrpc.encode_line(message)):
            raise connection_error("Connection closed: stdout is closed")

    def _end_of_input(self, grace: float) -> None:
        with self._lock:
            listens = list(self._listens.values())
            self._listens.clear()
        for listening in listens:
            listening.close()
        close_session_channel(self.peer.session)
        self._asks.close(
            connection_error("Connection closed: stdin ended while waiting for the client's answer")
        )
        with self._lock:
            if not self._idle.wait_for(lambda: self._table.running == 0, grace):
                _log.warning(
                    "requests still running after stdin ended; not waiting longer",
                    running=self._table.running,
                    grace=grace,
                )
        self._out.close()

    # -- workers ---------------------------------------------------------------------------

    def _work(self, message: dict[str, Any], job: Job) -> None:
        response = self._dispatch(message)
        # Free the slot before answering: a client that sends its next request once this
        # response arrives must never find the slot still taken.
        self._table.release_slot(job)
        if job.cancelled:
            _log.debug("suppressed the response to a cancelled request", id=job.id)
        else:
            self._send_response(response)

    def _finished(self, job: Job, running: int) -> None:  # under the lock
        self._idle.notify_all()

    def _dispatch(self, message: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return dispatch(
                self.runtime,
                message,
                self.peer,
                progress=partial(self._notify, "notifications/progress"),
                notify=self._notify,
            )
        except (Exception, SystemExit) as exc:  # dispatch answers client errors itself
            _log.exception("dispatch failed", method=message.get("method"))
            return jsonrpc.error_response(
                message.get("id"), McpError(INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")
            )

    def _notify(self, method: str, params: dict[str, Any]) -> None:
        """Progress or a log message about the current request, on stdout."""
        data = notification_bytes(self._table.current(), method, params, jsonrpc.encode_line)
        if data is not None and not self._out.write(data):
            raise connection_error("Connection closed: stdout is closed")

    def _server_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self._asks.ask(self._table.current(), method, params, self._emit)

    # -- output ----------------------------------------------------------------------------

    def _send_response(self, response: dict[str, Any] | None) -> None:
        if response is not None:
            self._out.write(response_bytes(response, jsonrpc.encode_line)[0])

    def _send_error(self, rid: RequestId | None, error: McpError) -> None:
        self._out.write(jsonrpc.encode_line(jsonrpc.error_response(rid, error)))


# -- python -m snodo.server ------------------------------------------------------------------


def run(
    target: str,
    *,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    server_request_timeout: float = DEFAULT_SERVER_REQUEST_TIMEOUT,
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
) -> int:
    """Load ``MODULE:ATTR`` and serve it on this process's stdin/stdout; the exit status.

    0 when stdin ends, 2 (with a message on stderr) when the target is bad, 130 on Ctrl-C.
    Logging goes to stderr (WARNING and up, unless the application configured it already).
    """
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        # Claim the streams before importing user code: output at import time must not
        # reach the protocol stream either.
        with std_streams(True, True) as (proto_in, proto_out):
            assert proto_in is not None and proto_out is not None
            runtime = load_or_report(target)
            if runtime is None:
                return EXIT_USAGE
            try:
                return serve_stdio(
                    runtime,
                    stdin=proto_in,
                    stdout=proto_out,
                    max_concurrency=max_concurrency,
                    max_line_bytes=max_line_bytes,
                    server_request_timeout=server_request_timeout,
                    shutdown_grace=shutdown_grace,
                )
            finally:
                runtime.close_tasks()  # stdin ended: tasks still running are cancelled
    except KeyboardInterrupt:
        return 130
