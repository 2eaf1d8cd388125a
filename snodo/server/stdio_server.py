"""Serve a :class:`~snodo.server.Runtime` on stdin/stdout: ``python -m snodo.server MODULE:ATTR``.

One JSON-RPC message per line, both directions (``snodo.protocol.framing`` splits the input,
``snodo.protocol.jsonrpc`` decodes and encodes). Every version the Runtime enables is served on
the same process: 2026-07-28 requests carry their version in ``_meta``; ``initialize`` opens the
process's one initialize-era session (one :class:`ServerSession`, one ``Peer(kind="stdio")``).

Threads (greenlets when gevent has patched ``threading``):

- the **reader** (the caller of :func:`serve_stdio`) reads stdin in chunks, answers framing,
  JSON and envelope errors itself, runs notifications (``notifications/cancelled``,
  ``notifications/initialized``) and ``initialize`` inline (they run no user code, and running
  ``initialize`` inline means every later line sees the negotiated version), routes responses to
  the server's own requests, and starts one **worker** per other request;
- a **worker** runs :func:`dispatch` for its request and writes the progress notifications,
  the server-to-client requests and the response of that request. At most ``max_concurrency``
  workers run at once; a request over the limit is answered -32603 "Server busy" at once. A
  worker frees its slot before it writes its response, so a client that waits for each response
  before sending the next request never sees "Server busy".

Under gevent the blocking reads of stdin and writes of stdout run on gevent's thread pool, so
the hub (and every worker greenlet) keeps running while the reader waits for input.

Output: each message is encoded once and written (and flushed) under one lock, so lines never
interleave; only protocol messages reach the protocol stream. While :func:`serve_stdio` serves
the process's own stdin/stdout it moves them aside: the protocol uses private duplicates of fd
0 and fd 1, fd 0 then reads the null device and fd 1 writes to stderr, and ``sys.stdout`` is
``sys.stderr``. A stray ``print()`` in a tool, or a child process a tool starts, therefore
cannot corrupt (or read) the protocol stream. Both are restored when serving ends.

Server-to-client requests (initialize era: ``ctx.elicit``, ``ctx.sample``, ``ctx.list_roots``)
get string ids ``"srv-1"``, ``"srv-2"``, ... (never an integer, so they cannot collide with a
client's ids in a log) and block their worker until the client answers, at most
``server_request_timeout`` seconds: an error answer raises ``McpError.from_wire``, the timeout
-32001 (the client is sent ``notifications/cancelled`` for it), end of stdin -32000.

Cancellation: ``notifications/cancelled`` marks the request's context cancelled (handlers see
``ctx.cancelled``), fails the server-to-client requests that request is waiting on (the client
is sent ``notifications/cancelled`` for each), and **suppresses the request's response** (the
initialize-era cancellation pages say the receiver SHOULD NOT answer; on 2026-07-28 the client
ignores it anyway). Progress reports of a cancelled request are dropped too.

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

import contextlib
import importlib
import itertools
import logging
import os
import socket
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, BinaryIO, Final, TypeVar

from snodo._log import get_logger
from snodo.protocol import jsonrpc
from snodo.protocol.errors import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    PARSE_ERROR,
    McpError,
    connection_error,
    timeout_error,
)
from snodo.protocol.framing import LineFramer, Oversized
from snodo.server.context import Context, Peer, RequestId, ServerSession
from snodo.server.dispatch import dispatch
from snodo.server.outbound import PendingAnswer, deliver_answer
from snodo.server.runtime import Runtime
from snodo.server.subscriptions import (
    ServerSubscription,
    close_session_channel,
    open_session_channel,
)

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_SERVER_REQUEST_TIMEOUT",
    "DEFAULT_SHUTDOWN_GRACE",
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
#: Exit status for a bad ``MODULE:ATTR`` (and bad command-line usage).
EXIT_USAGE: Final = 2
#: Bytes asked for per read of stdin.
READ_SIZE: Final = 64 * 1024

_log = get_logger("snodo.server.stdio_server")
_T = TypeVar("_T")
_R = TypeVar("_R")


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
    with _std_streams(stdin is None, stdout is None) as (own_in, own_out):
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


@dataclass(eq=False)
class _Job:
    """A client request being served by a worker."""

    id: RequestId
    method: str
    cancelled: bool = False
    holds_slot: bool = True
    #: The server-to-client requests this job is waiting on (at most one at a time).
    asking: set[str] = field(default_factory=set)


class _Inflight(dict[RequestId, Context]):
    """``Peer.inflight`` that closes the cancellation race.

    ``notifications/cancelled`` can arrive after the reader started a request's worker but
    before dispatch registered the request's Context here; the reader marks the job cancelled
    first and looks here second, the worker registers here first and looks at the job second,
    so one of them always marks the Context.
    """

    def __init__(self, local: threading.local) -> None:
        super().__init__()
        self._local = local

    def __setitem__(self, rid: RequestId, ctx: Context) -> None:
        super().__setitem__(rid, ctx)
        job: _Job | None = getattr(self._local, "job", None)
        if job is not None and job.cancelled and job.id == rid:
            ctx._cancel()


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
        self._local = threading.local()  # .job: the job a worker thread serves
        self.peer = Peer(
            "stdio",
            session=ServerSession(),
            server_request=self._server_request,
            inflight=_Inflight(self._local),
            listen=self._start_listen,
        )
        self._listens: dict[RequestId, ServerSubscription] = {}
        self._read = _reader(stdin)
        self._out = _Writer(stdout)
        self._framer = LineFramer(max_line_bytes)
        self._max_line_bytes = max_line_bytes
        self._max_concurrency = max_concurrency
        self._ask_timeout = server_request_timeout
        self._grace = shutdown_grace
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running = 0  # workers started and not finished (shutdown waits for these)
        self._busy = 0  # workers holding a concurrency slot (freed before their response)
        self._jobs: dict[RequestId, _Job] = {}
        self._pending: dict[str, PendingAnswer] = {}
        self._server_ids = itertools.count(1)
        self._eof = False

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
                and self._answer(
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
            if not self._answer(message.id, message.result, None):
                _log.warning("dropped a response to an unknown id", id=message.id)
        elif message.id is None or not self._answer(
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
        job = _Job(request.id, request.method)
        with self._lock:
            busy = self._busy >= self._max_concurrency
            if not busy:
                self._busy += 1
                self._running += 1
                self._jobs[request.id] = job
        if busy:
            self._send_error(request.id, McpError(INTERNAL_ERROR, "Server busy"))
            return
        worker = threading.Thread(
            target=self._work, args=(job, message), name=f"snodo-stdio-{request.id}", daemon=True
        )
        try:
            worker.start()
        except RuntimeError:  # no thread left to start
            self._finished(job)
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
        failed: list[tuple[str, PendingAnswer]] = []
        with self._lock:
            job = self._jobs.get(rid)
            if job is None or job.cancelled:
                return
            job.cancelled = True
            for sid in job.asking:
                pending = self._pending.pop(sid, None)
                if pending is not None:
                    pending.error = _cancelled()
                    failed.append((sid, pending))
            job.asking.clear()
        for sid, pending in failed:
            pending.done.set()
            self._send_cancelled(sid, "the request that asked was cancelled")

    def _answer(
        self, sid: RequestId, result: dict[str, Any] | None, error: McpError | None
    ) -> bool:
        """Deliver the client's answer to server request ``sid``; False if none is waiting."""
        return deliver_answer(self._lock, self._pending, sid, result, error)

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
        with self._lock:
            self._eof = True
            pending = list(self._pending.values())
            self._pending.clear()
            for job in self._jobs.values():
                job.asking.clear()
            for waiting in pending:
                waiting.error = connection_error(
                    "Connection closed: stdin ended while waiting for the client's answer"
                )
        for waiting in pending:
            waiting.done.set()
        with self._lock:
            if not self._idle.wait_for(lambda: self._running == 0, grace):
                _log.warning(
                    "requests still running after stdin ended; not waiting longer",
                    running=self._running,
                    grace=grace,
                )
        self._out.close()

    # -- workers ---------------------------------------------------------------------------

    def _work(self, job: _Job, message: dict[str, Any]) -> None:
        self._local.job = job
        try:
            response = self._dispatch(message)
            # Free the slot before answering: a client that sends its next request once this
            # response arrives must never find the slot still taken.
            self._release_slot(job)
            if job.cancelled:
                _log.debug("suppressed the response to a cancelled request", id=job.id)
            else:
                self._send_response(response)
        finally:
            self._local.job = None
            self._finished(job)

    def _release_slot(self, job: _Job) -> None:
        with self._lock:
            if job.holds_slot:
                job.holds_slot = False
                self._busy -= 1

    def _finished(self, job: _Job) -> None:
        self._release_slot(job)
        with self._lock:
            self._running -= 1
            if self._jobs.get(job.id) is job:
                del self._jobs[job.id]
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
        job: _Job | None = getattr(self._local, "job", None)
        if job is not None and job.cancelled:
            raise _cancelled()  # the Context stops reporting (and marks itself cancelled)
        try:
            data = jsonrpc.encode_line(jsonrpc.notification(method, params))
        except (TypeError, ValueError):
            _log.warning(
                "dropped a notification that is not JSON", method=method, params=repr(params)
            )
            return
        if not self._out.write(data):
            raise connection_error("Connection closed: stdout is closed")

    def _server_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        job: _Job | None = getattr(self._local, "job", None)
        sid = f"srv-{next(self._server_ids)}"
        pending = PendingAnswer(job)
        with self._lock:
            if self._eof:
                raise connection_error("Connection closed: stdin has ended")
            if job is not None:
                if job.cancelled:
                    raise _cancelled()
                job.asking.add(sid)
            self._pending[sid] = pending
        try:
            data = jsonrpc.encode_line(jsonrpc.request(sid, method, params))
        except (TypeError, ValueError) as exc:
            self._forget(sid, pending)
            raise McpError(INTERNAL_ERROR, f"Server request params are not JSON: {exc}") from None
        if not self._out.write(data):
            self._forget(sid, pending)
            raise connection_error("Connection closed: stdout is closed")
        if not pending.done.wait(self._ask_timeout) and self._forget(sid, pending):
            self._send_cancelled(sid, "timed out")
            raise timeout_error(self._ask_timeout)
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    def _forget(self, sid: str, pending: PendingAnswer) -> bool:
        """Stop waiting for ``sid``; False if an answer (or a failure) arrived meanwhile."""
        with self._lock:
            if self._pending.get(sid) is not pending:
                return False
            del self._pending[sid]
            if pending.job is not None:
                pending.job.asking.discard(sid)
            return True

    # -- output ----------------------------------------------------------------------------

    def _send_response(self, response: dict[str, Any] | None) -> None:
        if response is None:
            return
        try:
            data = jsonrpc.encode_line(response)
        except (TypeError, ValueError) as exc:
            _log.warning("a result could not be encoded", id=response.get("id"), error=str(exc))
            data = jsonrpc.encode_line(
                jsonrpc.error_response(
                    response.get("id"),
                    McpError(INTERNAL_ERROR, f"Internal error: the result is not JSON ({exc})"),
                )
            )
        self._out.write(data)

    def _send_error(self, rid: RequestId | None, error: McpError) -> None:
        self._out.write(jsonrpc.encode_line(jsonrpc.error_response(rid, error)))

    def _send_cancelled(self, sid: str, reason: str) -> None:
        self._out.write(
            jsonrpc.encode_line(
                jsonrpc.notification(
                    "notifications/cancelled", {"requestId": sid, "reason": reason}
                )
            )
        )


def _cancelled() -> McpError:
    return McpError(CONNECTION_CLOSED, "Request cancelled by the client", kind="transport")


# -- stream I/O ------------------------------------------------------------------------------


def _green() -> bool:
    """True when gevent has patched ``threading`` (never imports gevent)."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and bool(monkey.is_module_patched("threading"))


def _off_hub(fn: Callable[[_T], _R], stream: BinaryIO) -> Callable[[_T], _R]:
    """Under gevent, blocking stream calls run on gevent's thread pool so the hub runs on; a
    socket's stream is already cooperative there (and must stay on its hub's thread)."""
    if not _green() or isinstance(getattr(stream, "raw", stream), socket.SocketIO):
        return fn
    import gevent

    pool = gevent.get_hub().threadpool

    def call(arg: _T) -> _R:
        result: _R = pool.apply(fn, (arg,))
        return result

    return call


def _reader(stream: BinaryIO) -> Callable[[], bytes]:
    read: Callable[[int], bytes | None] = getattr(stream, "read1", None) or stream.read
    blocking_read = _off_hub(read, stream)

    def read_chunk() -> bytes:
        try:
            return blocking_read(READ_SIZE) or b""
        except ValueError:  # the stream was closed under us: end of input
            return b""

    return read_chunk


class _Writer:
    """Whole messages onto the protocol stream, one at a time, flushed; never raises."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._closed = False
        self._put = _off_hub(self._put_data, stream)

    def write(self, data: bytes) -> bool:
        """Write one encoded message; False once the stream is closed or broken."""
        with self._lock:
            if self._closed:
                return False
            try:
                self._put(data)
            except (OSError, ValueError) as exc:
                self._closed = True
                _log.warning("stdout failed; dropping further output", error=str(exc))
                return False
            return True

    def _put_data(self, data: bytes) -> None:
        stream = self._stream
        view = memoryview(data)
        while view:
            written = stream.write(view)
            if type(written) is not int or written >= len(view):
                break
            view = view[max(written, 0) :]
        stream.flush()

    def close(self) -> None:
        """Refuse further writes (late workers after shutdown write nothing)."""
        with self._lock:
            self._closed = True


@contextlib.contextmanager
def _std_streams(
    claim_in: bool, claim_out: bool
) -> Iterator[tuple[BinaryIO | None, BinaryIO | None]]:
    """The protocol's stdin/stdout (those claimed), with fd 0/1 moved aside for user code."""
    restore: list[Callable[[], None]] = []
    try:
        proto_in = _claim_stdin(restore) if claim_in else None
        proto_out = _claim_stdout(restore) if claim_out else None
        yield proto_in, proto_out
    finally:
        for undo in reversed(restore):
            try:
                undo()
            except Exception:
                _log.exception("could not restore a standard stream")


def _fd_of(stream: Any) -> int | None:
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return fd if isinstance(fd, int) else None


def _dup_private(fd: int) -> int:
    """A close-on-exec duplicate of ``fd`` above the standard descriptors."""
    if sys.platform != "win32":
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    return os.dup(fd)  # non-inheritable by default (PEP 446)


def _divert(fd: int, private: int, open_target: Callable[[], int]) -> Callable[[], None] | None:
    """Point ``fd`` at ``open_target()``; the undo, or None (nothing changed) on failure."""
    try:
        target = open_target()
    except OSError:
        return None
    try:
        os.dup2(target, fd)
    except OSError:
        return None
    finally:
        os.close(target)

    def undo() -> None:
        os.dup2(private, fd)

    return undo


def _claim_stdin(restore: list[Callable[[], None]]) -> BinaryIO:
    stdin = sys.stdin
    if stdin is None:
        raise OSError("there is no stdin to serve on")
    if _fd_of(stdin) != 0:
        return stdin.buffer  # not fd 0 (already redirected): read it in place
    try:
        private = _dup_private(0)
    except OSError:
        return stdin.buffer
    undo = _divert(0, private, lambda: os.open(os.devnull, os.O_RDONLY))
    if undo is None:
        os.close(private)
        return stdin.buffer
    null_in = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - closed on restore

    def put_back() -> None:
        undo()
        sys.stdin = stdin
        null_in.close()

    restore.append(put_back)
    sys.stdin = null_in
    # closefd=False: a thread may still be blocked on the descriptor when serving ends.
    return os.fdopen(private, "rb", buffering=0, closefd=False)


def _claim_stdout(restore: list[Callable[[], None]]) -> BinaryIO:
    stdout = sys.stdout
    if stdout is None:
        raise OSError("there is no stdout to serve on")
    with contextlib.suppress(Exception):
        stdout.flush()

    def user_stdout_to_stderr() -> None:
        if sys.stderr is not None:
            sys.stdout = sys.stderr
            restore.append(lambda: setattr(sys, "stdout", stdout))

    if _fd_of(stdout) != 1:
        user_stdout_to_stderr()
        return stdout.buffer
    try:
        private = _dup_private(1)
    except OSError:
        user_stdout_to_stderr()
        return stdout.buffer

    def to_stderr() -> int:
        try:
            return os.dup(2)
        except OSError:
            return os.open(os.devnull, os.O_WRONLY)

    undo = _divert(1, private, to_stderr)
    if undo is None:
        os.close(private)
        user_stdout_to_stderr()
        return stdout.buffer

    def put_back() -> None:
        with contextlib.suppress(Exception):
            stdout.flush()  # stray output buffered meanwhile goes to stderr, not the protocol
        undo()

    restore.append(put_back)
    user_stdout_to_stderr()
    return os.fdopen(private, "wb", closefd=False)


# -- python -m snodo.server ------------------------------------------------------------------


class TargetError(Exception):
    """``MODULE:ATTR`` does not name a Runtime (or a callable returning one)."""


def load_runtime(target: str) -> Runtime:
    """The Runtime ``MODULE:ATTR`` names: ``ATTR`` (dotted) is a Runtime or a zero-argument
    callable returning one. The current directory is importable, as under ``python -m``."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise TargetError(
            f"expected MODULE:ATTR (for example mypkg.server:runtime), got {target!r}"
        )
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise TargetError(
                f"no module named {missing!r} (searched sys.path, current directory {cwd} included)"
            ) from None
        raise TargetError(
            f"importing {module_name!r} failed:\n{traceback.format_exc().rstrip()}"
        ) from None
    except Exception:
        raise TargetError(
            f"importing {module_name!r} failed:\n{traceback.format_exc().rstrip()}"
        ) from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"module {module_name!r} has no attribute {attr!r}") from None
    if isinstance(obj, Runtime):
        return obj
    if not callable(obj):
        raise TargetError(
            f"{target} is {type(obj).__name__!s}, not a Runtime or a zero-argument callable "
            "returning one"
        )
    try:
        made = obj()
    except Exception:
        raise TargetError(
            f"calling {target}() failed:\n{traceback.format_exc().rstrip()}"
        ) from None
    if not isinstance(made, Runtime):
        raise TargetError(f"{target}() returned {type(made).__name__}, not a Runtime")
    return made


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
        with _std_streams(True, True) as (proto_in, proto_out):
            assert proto_in is not None and proto_out is not None
            try:
                runtime = load_runtime(target)
            except TargetError as exc:
                print(f"snodo.server: error: {exc}", file=sys.stderr, flush=True)
                return EXIT_USAGE
            return serve_stdio(
                runtime,
                stdin=proto_in,
                stdout=proto_out,
                max_concurrency=max_concurrency,
                max_line_bytes=max_line_bytes,
                server_request_timeout=server_request_timeout,
                shutdown_grace=shutdown_grace,
            )
    except KeyboardInterrupt:
        return 130
