"""Serve a :class:`~snodo.server.Runtime` over Streamable HTTP, for both protocol eras.

``serve_http(runtime)`` binds ``127.0.0.1`` (an ephemeral port unless told otherwise), serves
the MCP endpoint (``/mcp``) on a ``gevent.pywsgi`` server and returns an :class:`HttpServer`;
``close()`` stops it. ``python -m snodo.server --http MODULE:ATTR`` does the same from a shell.

**2026-07-28** (stateless): one POST per request. The headers must mirror the body
(``snodo.server.http_checks``): ``MCP-Protocol-Version`` = ``_meta`` protocol version,
``Mcp-Method`` = method, ``Mcp-Name`` = tool/prompt name or resource URI (``=?base64?...?=``
decoded), ``Mcp-Param-<Name>`` = each ``x-mcp-header`` argument; a failure is HTTP 400 with
-32020. ``Mcp-Session-Id`` is ignored; GET and DELETE are 405. A response is
``application/json`` with the status of its error (400 for -32020/-32021/-32022 and a malformed
``_meta``, 404 for -32601, else 200), or ``text/event-stream`` once the request emits a
notification (progress) before its response, or stays silent for ``keepalive_interval`` (the
stream then carries ``: keep-alive`` comments); closing that stream cancels the request.

**2025-11-25, 2025-06-18** (initialize era): ``initialize`` opens a session and answers with
``Mcp-Session-Id`` (``secrets.token_urlsafe``); later POSTs carry it (missing: 400, unknown or
ended: 404) and, if they send ``MCP-Protocol-Version``, the session's version (else 400).
Notifications and the client's responses get 202. A request runs on a worker and is answered
as JSON, or as an SSE stream once it sends something first: progress, or a server-to-client
request (``ctx.elicit``/``sample``/``list_roots``, ids ``srv-N``) that the client answers
with a POST. Events carry ids ``<stream>-<n>``; 2025-11-25 streams open with a priming event
(an id, empty data). A disconnect is not a cancellation: the request runs on, its events are
kept (bounded) and a GET with ``Last-Event-ID`` resumes the stream. A GET without it opens the
session's standalone stream (messages from :meth:`HttpServer.notify`, keep-alive comments);
DELETE ends the session; sessions idle for ``session_idle_timeout`` expire.

**Both**: ``Origin`` (when sent) must be allowed (403); on a loopback bind the ``Host`` must be
a loopback name (403, DNS rebinding). POST bodies are ``application/json`` (415), at most
``max_body_bytes`` (413, refused from ``Content-Length`` before reading, or while reading a
chunked body), one JSON object (400, -32700 or -32600; batches refused), with an ``Accept`` that
lists ``application/json`` and ``text/event-stream`` (406). At most ``max_concurrency`` requests
run at once (503 "Server busy" beyond). Discovery, lists and ``ping`` run inline on the
server's hub; every other request runs on a worker thread.

Threads: the WSGI server runs on a gevent hub. Unpatched, that hub lives in a thread of its own
and each dispatch runs on a real worker thread, so a blocking tool never stalls the hub. Under
``gevent.monkey.patch_all()`` the same code runs on greenlets of the main hub (where a tool that
blocks without yielding stalls everything, as any greenlet does). Workers wake the hub with
``loop.run_callback_threadsafe``, the hub wakes workers with ``threading.Event``, and the shared
state sits behind one lock. Every accepted socket gets TCP_NODELAY (the Nagle trap of
runtime-costs §4).

Authorization headers are never logged or echoed.
"""

from __future__ import annotations

import contextlib
import http
import ipaddress
import itertools
import logging
import secrets
import signal
import socket
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import TracebackType
from typing import Any, Final

import gevent
import gevent.event
import gevent.pool
import gevent.pywsgi

from snodo._log import get_logger
from snodo.protocol import jsonrpc
from snodo.protocol.errors import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    McpError,
    connection_error,
    timeout_error,
)
from snodo.server import http_checks as checks
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
    "DEFAULT_KEEPALIVE_INTERVAL",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_PORT",
    "DEFAULT_SERVER_REQUEST_TIMEOUT",
    "DEFAULT_SESSION_IDLE_TIMEOUT",
    "DEFAULT_SHUTDOWN_GRACE",
    "HttpServer",
    "run_http",
    "serve_http",
]

DEFAULT_MAX_BODY_BYTES: Final = 16 * 1024 * 1024
DEFAULT_MAX_CONCURRENCY: Final = 64
DEFAULT_SESSION_IDLE_TIMEOUT: Final = 600.0
DEFAULT_SERVER_REQUEST_TIMEOUT: Final = 300.0
DEFAULT_KEEPALIVE_INTERVAL: Final = 15.0
DEFAULT_SHUTDOWN_GRACE: Final = 5.0
DEFAULT_MAX_SESSIONS: Final = 1000
DEFAULT_MAX_CONNECTIONS: Final = 1000
#: The port ``python -m snodo.server --http`` binds unless told otherwise.
DEFAULT_PORT: Final = 8000
#: Events kept per response stream for ``Last-Event-ID`` replay (oldest dropped first).
EVENT_BUFFER: Final = 1000
#: Events queued for a listen stream whose client does not keep up; beyond it the stream ends
#: (without its result: the client sees an abrupt end and may listen again).
LISTEN_BACKLOG: Final = 10_000
#: Messages queued per session for its standalone GET stream (oldest dropped first).
STANDALONE_BUFFER: Final = 256
#: Finished response streams a session keeps for replay.
FINISHED_STREAMS_KEPT: Final = 16
#: How long ``serve_http`` waits for the server thread to start listening.
START_DEADLINE: Final = 10.0

#: Requests that run no user code: served inline on the hub, answered as JSON.
INLINE_METHODS: Final = frozenset(
    {
        "ping",
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
    }
)

_SSE_HEADERS: Final = (
    ("Content-Type", "text/event-stream"),
    ("Cache-Control", "no-cache, no-transform"),
    ("X-Accel-Buffering", "no"),
)

_log = get_logger("snodo.server.http_server")


def _green() -> bool:
    """True when gevent has patched ``threading`` (never imports gevent.monkey)."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and bool(monkey.is_module_patched("threading"))


def _status(code: int) -> str:
    try:
        return f"{code} {http.HTTPStatus(code).phrase}"
    except ValueError:
        return f"{code} Status"


def _error_body(rid: RequestId | None, error: McpError) -> bytes:
    """A JSON-RPC error response; without an id when none could be read (the HTTP transport
    pages: "a JSON-RPC error response that has no id")."""
    message: dict[str, Any] = {"jsonrpc": "2.0"}
    if rid is not None:
        message["id"] = rid
    message["error"] = error.to_wire()
    return jsonrpc.encode(message)


def _cancelled() -> McpError:
    return McpError(CONNECTION_CLOSED, "Request cancelled by the client", kind="transport")


# -- serving ---------------------------------------------------------------------------------


def serve_http(
    runtime: Runtime,
    host: str = "127.0.0.1",
    port: int = 0,
    path: str = "/mcp",
    *,
    allowed_origins: Iterable[str] | None = None,
    allowed_hosts: Iterable[str] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT,
    enable_get_stream: bool = True,
    server_request_timeout: float = DEFAULT_SERVER_REQUEST_TIMEOUT,
    keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL,
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    sse_retry_ms: int | None = None,
) -> HttpServer:
    """Serve ``runtime`` at ``http://host:port/path``; the running :class:`HttpServer`.

    ``port=0`` picks a free port (see :attr:`HttpServer.url`). ``allowed_origins`` replaces the
    default Origin allow-list (any port of ``http(s)://localhost``, ``127.0.0.1``, ``[::1]``)
    with exact origins such as ``"https://app.example"``. ``allowed_hosts`` are the accepted
    ``Host`` names (``name`` or ``name:port``); by default a loopback bind accepts only loopback
    names and any other bind accepts any Host. ``sse_retry_ms`` is for testing clients'
    resumption: 2025-11-25 POST streams then send ``retry: N`` in their priming event and
    close the connection at once, so the client must resume with GET and ``Last-Event-ID``.
    """
    if not path.startswith("/"):
        raise ValueError(f"path must start with '/', got {path!r}")
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    if max_sessions < 1 or max_connections < 1:
        raise ValueError("max_sessions and max_connections must be at least 1")
    for name, value in (
        ("session_idle_timeout", session_idle_timeout),
        ("server_request_timeout", server_request_timeout),
        ("keepalive_interval", keepalive_interval),
    ):
        if not 0 < value < float("inf"):
            raise ValueError(f"{name} must be a positive number of seconds, got {value}")
    if not 0 <= shutdown_grace < float("inf"):
        raise ValueError(f"shutdown_grace must be >= 0, got {shutdown_grace}")
    if sse_retry_ms is not None and sse_retry_ms < 0:
        raise ValueError(f"sse_retry_ms must be >= 0, got {sse_retry_ms}")
    listener = _listen(host, port)
    try:
        server = HttpServer(
            runtime,
            listener,
            path,
            allowed_origins=None
            if allowed_origins is None
            else frozenset(o.strip().lower().rstrip("/") for o in allowed_origins),
            allowed_hosts=_host_policy(host, allowed_hosts),
            max_body_bytes=max_body_bytes,
            max_concurrency=max_concurrency,
            session_idle_timeout=session_idle_timeout,
            enable_get_stream=enable_get_stream,
            server_request_timeout=server_request_timeout,
            keepalive_interval=keepalive_interval,
            shutdown_grace=shutdown_grace,
            max_sessions=max_sessions,
            max_connections=max_connections,
            sse_retry_ms=sse_retry_ms,
        )
    except BaseException:
        listener.close()
        raise
    server._start()
    return server


def _listen(host: str, port: int) -> socket.socket:
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


def _host_policy(host: str, allowed: Iterable[str] | None) -> frozenset[str] | bool | None:
    """The Host allow-list: the given names, the loopback names for a loopback bind (None),
    or False (no check) for any other bind."""
    if allowed is not None:
        return frozenset(h.strip().lower() for h in allowed)
    return None if checks.is_loopback(host) else False


# -- state -----------------------------------------------------------------------------------


@dataclass(eq=False)
class _Stream:
    """The events of one response stream (or a session's standalone stream), kept for the
    consumer attached to it now and, in the initialize era, for ``Last-Event-ID`` replay."""

    key: str | None  # event-id prefix; None on 2026-07-28 (no ids, no resumption)
    events: deque[tuple[int, bytes]]
    rid: RequestId | None = None
    next_n: int = 1
    delivered: int = 0
    final: bool = False  # the JSON-RPC response is the last event
    final_status: int = 200
    ended: bool = False  # ended without a response
    end_status: int = 503
    end_error: McpError | None = None  # told to a consumer that has not started its answer
    owner: object | None = None  # the attached consumer
    waker: Any = None  # its gevent Event (hub-only; set through the bridge)


@dataclass(eq=False)
class _Job:
    """A client request served by a worker."""

    id: RequestId
    method: str
    stream: _Stream
    session: _Session | None
    peer: Peer = field(init=False)
    thread: threading.Thread | None = None
    cancelled: bool = False
    holds_slot: bool = True
    asking: set[str] = field(default_factory=set)


class _JobInflight(dict[RequestId, Context]):
    """``Peer.inflight`` of one 2026-07-28 request: a Context registered after the client went
    away is cancelled at once."""

    def __init__(self, job: _Job) -> None:
        super().__init__()
        self._job = job

    def __setitem__(self, rid: RequestId, ctx: Context) -> None:
        super().__setitem__(rid, ctx)
        if self._job.cancelled:
            ctx._cancel()


class _SessionInflight(dict[RequestId, Context]):
    """``Peer.inflight`` of a session: ``notifications/cancelled`` may arrive before dispatch
    registered the request's Context; the canceller marks the job first and looks here second,
    the worker registers here first and looks at the job second."""

    def __init__(self, jobs: dict[RequestId, _Job]) -> None:
        super().__init__()
        self._jobs = jobs

    def __setitem__(self, rid: RequestId, ctx: Context) -> None:
        super().__setitem__(rid, ctx)
        job = self._jobs.get(rid)
        if job is not None and job.cancelled:
            ctx._cancel()


@dataclass(eq=False)
class _Session:
    id: str
    state: ServerSession
    last_seen: float
    jobs: dict[RequestId, _Job] = field(default_factory=dict)
    pending: dict[str, PendingAnswer] = field(default_factory=dict)
    streams: OrderedDict[str, _Stream] = field(default_factory=OrderedDict)
    standalone: _Stream = field(
        default_factory=lambda: _Stream("0", deque(maxlen=STANDALONE_BUFFER))
    )
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    ended: bool = False
    inflight: _SessionInflight = field(init=False)

    def __post_init__(self) -> None:
        self.inflight = _SessionInflight(self.jobs)

    @property
    def version(self) -> str:
        assert self.state.version is not None
        return self.state.version


class _Bridge:
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
        with self._lock:
            if self._loop is None:
                return False
            self._loop.run_callback_threadsafe(fn)
            return True


class _DisconnectWatch:
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


class _Handler(gevent.pywsgi.WSGIHandler):  # type: ignore[misc]
    """pywsgi's handler plus TCP_NODELAY, raw headers, the socket, and connection tracking."""

    def __init__(self, sock: Any, address: Any, server: Any, rfile: Any = None) -> None:
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().__init__(sock, address, server, rfile)

    def handle(self) -> None:
        owner: HttpServer = self.server.snodo
        sock = self.socket
        owner._connections[sock] = False
        try:
            super().handle()
        finally:
            owner._connections.pop(sock, None)

    def handle_one_response(self) -> None:
        owner: HttpServer = self.server.snodo
        sock = self.socket
        owner._connections[sock] = True
        try:
            super().handle_one_response()
        finally:
            if sock in owner._connections:
                owner._connections[sock] = False
            if owner._closing:
                self.close_connection = True

    def get_environ(self) -> dict[str, Any]:
        env: dict[str, Any] = super().get_environ()
        env["snodo.headers"] = list(self.headers.items())
        env["snodo.socket"] = self.socket
        return env


class _Request:
    """One HTTP request being answered: environ, parsed headers, and the reply helpers."""

    __slots__ = ("body_read", "environ", "headers", "start_response")

    def __init__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> None:
        self.environ = environ
        self.start_response = start_response
        self.headers = checks.header_map(environ.get("snodo.headers", ()))
        self.body_read = False

    def header(self, name: str) -> str | None:
        return checks.first(self.headers, name)

    def _declares_body(self) -> bool:
        length = self.environ.get("CONTENT_LENGTH")
        chunked = self.environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked"
        return chunked or (bool(length) and length != "0")

    def abandon_body(self) -> None:
        """Never read the rest of the body (the connection is closed after the reply)."""
        stream: Any = self.environ.get("wsgi.input")
        with contextlib.suppress(AttributeError, TypeError):
            stream.chunked_input = False
            stream.content_length = stream.position

    def reply(
        self, status: int, body: bytes = b"", headers: Sequence[tuple[str, str]] = ()
    ) -> list[bytes]:
        out = list(headers)
        if body:
            out.append(("Content-Type", "application/json"))
        out.append(("Content-Length", str(len(body))))
        if not self.body_read and self._declares_body():
            self.abandon_body()
            out.append(("Connection", "close"))
        self.start_response(_status(status), out)
        return [body] if body else []

    def error(
        self,
        status: int,
        rid: RequestId | None,
        error: McpError,
        headers: Sequence[tuple[str, str]] = (),
    ) -> list[bytes]:
        return self.reply(status, _error_body(rid, error), headers)


class _TooLarge(Exception):
    pass


class HttpServer:
    """A running Streamable HTTP server (see :func:`serve_http`); a context manager."""

    def __init__(
        self,
        runtime: Runtime,
        listener: socket.socket,
        path: str,
        *,
        allowed_origins: frozenset[str] | None,
        allowed_hosts: frozenset[str] | bool | None,
        max_body_bytes: int,
        max_concurrency: int,
        session_idle_timeout: float,
        enable_get_stream: bool,
        server_request_timeout: float,
        keepalive_interval: float,
        shutdown_grace: float,
        max_sessions: int,
        max_connections: int,
        sse_retry_ms: int | None,
    ) -> None:
        self.runtime = runtime
        self._listener = listener
        self._path = path
        address = listener.getsockname()
        self.host: str = address[0]
        self.port: int = address[1]
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url: str = f"http://{shown}:{self.port}{path}"
        self._origins = allowed_origins
        self._hosts = allowed_hosts
        self._max_body = max_body_bytes
        self._max_concurrency = max_concurrency
        self._idle_timeout = session_idle_timeout
        self._get_stream = enable_get_stream
        self._ask_timeout = server_request_timeout
        self._keepalive = keepalive_interval
        self._grace = shutdown_grace
        self._max_sessions = max_sessions
        self._max_connections = max_connections
        self._retry_ms = sse_retry_ms
        self._modern = bool(runtime._stateless)
        self._legacy = bool(runtime._session)
        self._allow = "GET, POST, DELETE" if self._legacy else "POST"

        self._lock = threading.Lock()
        self._bridge = _Bridge()
        self._sessions: dict[str, _Session] = {}
        self._jobs: set[_Job] = set()
        self._listen_subs: set[ServerSubscription] = set()
        self._workers: set[threading.Thread] = set()
        self._busy = 0  # workers holding a concurrency slot
        self._running = 0  # workers not finished
        self._server_ids = itertools.count(1)
        self._closing = False
        #: Open client connections -> busy answering a request (hub-only state).
        self._connections: dict[Any, bool] = {}
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._loop: Any = None
        self._stop_event: Any = None
        self._idle_event: Any = None
        self._thread = threading.Thread(
            target=self._main, name=f"snodo-http-{self.port}", daemon=True
        )

    # -- lifecycle -------------------------------------------------------------------------

    def _start(self) -> None:
        self._thread.start()
        if not self._ready.wait(START_DEADLINE):
            self.close()
            raise OSError(f"the HTTP server did not start within {START_DEADLINE} s")
        if self._start_error is not None:
            self._thread.join(START_DEADLINE)
            with contextlib.suppress(OSError):
                self._listener.close()
            raise self._start_error

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closing" if self._closing else "serving"
        return f"<HttpServer {self.url} {state}>"

    def close(self) -> None:
        """Stop accepting, cancel running requests, end open streams and sessions, and join
        the server's thread and workers (each wait bounded by ``shutdown_grace`` plus a few
        seconds). Idempotent; safe from any thread."""
        with self._lock:
            self._closing = True
        self._bridge.call(self._request_stop)
        deadline = time.monotonic() + self._grace + 5.0
        if threading.current_thread() is not self._thread and self._thread.ident is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
            if self._thread.is_alive():
                _log.warning("the HTTP server thread did not stop in time", url=self.url)
        for worker in list(self._workers):
            if worker is not threading.current_thread():
                worker.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            stuck = [w.name for w in self._workers if w.is_alive()]
        if stuck:
            _log.warning("requests still running after close; not waiting longer", workers=stuck)
        with contextlib.suppress(OSError):
            self._listener.close()

    def _request_stop(self) -> None:  # on the hub
        if self._stop_event is not None:
            self._stop_event.set()

    def _main(self) -> None:
        """The server thread: its own hub (unpatched) or a greenlet of the main hub."""
        hub = gevent.get_hub()
        server: Any = None
        sweeper: Any = None
        try:
            try:
                self._loop = hub.loop
                self._stop_event = gevent.event.Event()
                self._idle_event = gevent.event.Event()
                pool = gevent.pool.Pool(self._max_connections)
                server = gevent.pywsgi.WSGIServer(
                    self._listener,
                    self._app,
                    spawn=pool,
                    handler_class=_Handler,
                    log=gevent.pywsgi.LoggingLogAdapter(
                        logging.getLogger("snodo.server.http_server.access"), logging.DEBUG
                    ),
                    error_log=gevent.pywsgi.LoggingLogAdapter(
                        logging.getLogger("snodo.server.http_server"), logging.WARNING
                    ),
                )
                server.snodo = self
                server.start()
                sweeper = gevent.spawn(self._sweep_loop)
                self._bridge.open(hub.loop)
            except BaseException as exc:
                self._start_error = exc
                return
            finally:
                self._ready.set()
            with self._lock:
                closing = self._closing
            if closing:
                self._stop_event.set()
            self._stop_event.wait()
            self._shutdown(server)
        finally:
            if sweeper is not None:
                sweeper.kill()
            if server is not None and not server.closed:
                server.close()
            self._bridge.close()
            if not _green():
                hub.destroy(destroy_loop=True)

    def _shutdown(self, server: Any) -> None:
        """On the hub: stop listening, end everything, let responses finish, stop handlers."""
        server.close()
        with self._lock:
            sessions = list(self._sessions.values())
            jobs = list(self._jobs)
        closing = McpError(INTERNAL_ERROR, "Server shutting down")
        with self._lock:
            listening = list(self._listen_subs)
        for sub in listening:
            sub.finish()  # each stream ends with its listen result
        for session in sessions:
            self._end_session(session, "the server is closing", 503, closing)
        for job in jobs:
            self._cancel_job(job)
            self._end_stream(job.stream, 503, closing)
        with self._lock:
            idle = self._running == 0
        if not idle:
            self._idle_event.wait(self._grace)
        for sock, busy in list(self._connections.items()):
            if not busy:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        server.stop(timeout=self._grace)

    # -- sessions --------------------------------------------------------------------------

    @property
    def session_ids(self) -> list[str]:
        """The ids of the open initialize-era sessions."""
        with self._lock:
            return list(self._sessions)

    def notify(
        self, method: str, params: dict[str, Any] | None = None, *, session_id: str | None = None
    ) -> int:
        """Queue a notification on the standalone (GET) stream of one session, or of every
        session; the number of sessions it was queued for. Delivered when the client has its
        GET stream open, or opens it later (at most ``STANDALONE_BUFFER`` queued)."""
        payload = jsonrpc.encode(jsonrpc.notification(method, params))
        with self._lock:
            targets = [
                s for s in self._sessions.values() if session_id is None or s.id == session_id
            ]
        return sum(1 for s in targets if self._push(s.standalone, payload))

    def _sweep_loop(self) -> None:  # a greenlet on the hub
        interval = max(0.02, min(30.0, self._idle_timeout / 4))
        stop = self._stop_event
        while not stop.wait(interval):
            now = time.monotonic()
            with self._lock:
                expired = [
                    s
                    for s in self._sessions.values()
                    if not s.jobs
                    and s.standalone.owner is None
                    and all(st.owner is None for st in s.streams.values())
                    and now - s.last_seen >= self._idle_timeout
                ]
            for session in expired:
                _log.info("session expired", idle_timeout=self._idle_timeout)
                self._end_session(session, "the session expired", 404, _session_gone())

    def _end_session(
        self, session: _Session, reason: str, status: int, error: McpError | None
    ) -> None:
        with self._lock:
            if session.ended:
                return
            session.ended = True
            if self._sessions.get(session.id) is session:
                del self._sessions[session.id]
            jobs = list(session.jobs.values())
            streams = [*session.streams.values(), session.standalone]
        close_session_channel(session.state)
        for job in jobs:
            self._cancel_job(job)
        for stream in streams:
            self._end_stream(stream, status, error)

    def _session_for(self, req: _Request, rid: RequestId | None) -> _Session | list[bytes]:
        """The session the request names, or the reply refusing it."""
        sid = req.header(checks.H_SESSION_ID)
        if sid is None:
            return req.error(
                400,
                rid,
                McpError(INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required"),
            )
        with self._lock:
            session = self._sessions.get(sid) if checks.visible_ascii(sid) else None
            if session is not None:
                session.last_seen = time.monotonic()
        if session is None:
            return req.error(404, rid, _session_gone())
        version = req.header(checks.H_PROTOCOL_VERSION)
        if version is not None and version != session.version:
            return req.error(
                400,
                rid,
                McpError(
                    INVALID_REQUEST,
                    f"Bad Request: MCP-Protocol-Version {version!r} is not the session's "
                    f"version {session.version!r}",
                ),
            )
        return session

    # -- the WSGI application --------------------------------------------------------------

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        req = _Request(environ, start_response)
        try:
            return self._route(req)
        except Exception:
            _log.exception("answering an HTTP request failed")
            return req.error(500, None, McpError(INTERNAL_ERROR, "Internal error"))

    def _route(self, req: _Request) -> Iterable[bytes]:
        environ = req.environ
        if environ.get("PATH_INFO") != self._path:
            return req.reply(404)
        if self._hosts is not False and not checks.host_allowed(
            req.header("host"), self._hosts if isinstance(self._hosts, frozenset) else None
        ):
            return req.error(403, None, McpError(INVALID_REQUEST, "Forbidden: Host not allowed"))
        origin = req.header("origin")
        if origin is not None and not checks.origin_allowed(origin, self._origins):
            return req.error(403, None, McpError(INVALID_REQUEST, "Forbidden: Origin not allowed"))
        if self._closing:
            return req.error(503, None, McpError(INTERNAL_ERROR, "Server shutting down"))
        method = environ.get("REQUEST_METHOD")
        if method == "POST":
            return self._post(req)
        if method == "GET":
            return self._get(req)
        if method == "DELETE":
            return self._delete(req)
        return self._not_allowed(req)

    def _not_allowed(self, req: _Request, allow: str | None = None) -> list[bytes]:
        return req.error(
            405,
            None,
            McpError(INVALID_REQUEST, "Method Not Allowed"),
            (("Allow", allow or self._allow),),
        )

    def _read_body(self, req: _Request) -> bytes:
        stream = req.environ["wsgi.input"]
        length = req.environ.get("CONTENT_LENGTH")
        limit = self._max_body
        if length:
            try:
                size = int(length)
            except ValueError:
                size = -1
            if size > limit:
                raise _TooLarge()
            if size >= 0:
                data: bytes = stream.read(size)
                req.body_read = True
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
                raise _TooLarge()
            chunks.append(chunk)
        req.body_read = True
        return b"".join(chunks)

    def _post(self, req: _Request) -> Iterable[bytes]:
        if not checks.is_json_content_type(req.environ.get("CONTENT_TYPE")):
            return req.error(
                415,
                None,
                McpError(
                    INVALID_REQUEST, "Unsupported Media Type: the body must be application/json"
                ),
            )
        accept = req.header("accept")
        if not (
            checks.accepts(accept, "application/json")
            and checks.accepts(accept, "text/event-stream")
        ):
            return req.error(
                406,
                None,
                McpError(
                    INVALID_REQUEST,
                    "Not Acceptable: Accept must list application/json and text/event-stream",
                ),
            )
        try:
            body = self._read_body(req)
        except _TooLarge:
            return req.error(
                413,
                None,
                McpError(PARSE_ERROR, f"Parse error: message larger than {self._max_body} bytes"),
            )
        except (OSError, ValueError) as exc:
            _log.info("could not read a request body", error=str(exc))
            req.abandon_body()
            return req.error(
                400, None, McpError(PARSE_ERROR, "Parse error: the request body is incomplete")
            )
        try:
            obj = jsonrpc.decode(body, max_bytes=self._max_body)
        except jsonrpc.DecodeError as exc:
            return req.error(400, None, exc.to_mcp_error())
        try:
            message = jsonrpc.classify(obj)
        except jsonrpc.DecodeError as exc:
            if (
                self._legacy
                and type(obj) is dict
                and "method" not in obj
                and type(exc.id) is str
                and req.header(checks.H_SESSION_ID) is not None
            ):
                return self._malformed_answer(req, exc)
            return req.error(400, exc.id, exc.to_mcp_error())
        if isinstance(message, jsonrpc.Request):
            era = checks.route_post(
                "request",
                message.method,
                message.params,
                req.headers,
                serves_modern=self._modern,
                serves_legacy=self._legacy,
            )
            if era == "initialize":
                return self._initialize(req, message, obj)
            if era == "modern":
                return self._modern_request(req, message, obj)
            return self._legacy_request(req, message, obj)
        if isinstance(message, jsonrpc.Notification):
            era = checks.route_post(
                "notification",
                message.method,
                message.params,
                req.headers,
                serves_modern=self._modern,
                serves_legacy=self._legacy,
            )
            if era == "modern":
                return self._modern_notification(req, message)
            return self._legacy_notification(req, message, obj)
        if not self._legacy:
            return req.error(
                400,
                None,
                McpError(INVALID_REQUEST, "Invalid Request: a client must not send responses"),
            )
        return self._legacy_answer(req, message)

    # -- 2026-07-28 --------------------------------------------------------------------------

    def _modern_notification(self, req: _Request, note: jsonrpc.Notification) -> list[bytes]:
        version = req.header(checks.H_PROTOCOL_VERSION)
        if version is None:
            return req.error(
                400,
                None,
                McpError(HEADER_MISMATCH, "Header mismatch: Missing MCP-Protocol-Version header"),
            )
        if version not in self.runtime._stateless:
            return req.error(400, None, _unsupported(self.runtime, version))
        named = req.header(checks.H_METHOD)
        if named is not None and named != note.method:
            return req.error(
                400,
                None,
                McpError(
                    HEADER_MISMATCH,
                    f"Header mismatch: Mcp-Method header {named!r} does not match method "
                    f"{note.method!r}",
                ),
            )
        # 2026-07-28 defines no client notification over HTTP (closing the response stream
        # is the cancellation), so an accepted notification changes nothing.
        return req.reply(202)

    def _modern_request(
        self, req: _Request, request: jsonrpc.Request, message: dict[str, Any]
    ) -> Iterable[bytes]:
        params = request.params
        schema: Any = None
        if request.method == "tools/call" and params is not None:
            name = params.get("name")
            tool = self.runtime._tools.get(name) if type(name) is str else None
            if tool is not None:
                schema = tool.definition.get("inputSchema")
        problem = checks.check_modern_request(request.method, params, req.headers, schema)
        if problem is not None:
            return req.error(400, request.id, problem)
        if request.method == "subscriptions/listen":
            return self._modern_listen(req, message)
        if request.method in INLINE_METHODS:
            response = self._dispatch(message, Peer("http"))
            return self._json(req, response, modern=True)
        job = self._start_job(request, message, None)
        if not isinstance(job, _Job):
            return job(req)
        return self._respond(req, job.stream, job=job, modern=True)

    def _modern_listen(self, req: _Request, message: dict[str, Any]) -> Iterable[bytes]:
        """``subscriptions/listen``: its response is an event stream of its own (the
        acknowledgement, then the events) until the client closes it or the server ends it."""
        taken: list[ServerSubscription] = []
        try:
            response = dispatch(self.runtime, message, Peer("http", listen=taken.append))
        except (Exception, SystemExit) as exc:
            _log.exception("dispatch failed", method="subscriptions/listen")
            response = jsonrpc.error_response(
                message.get("id"), McpError(INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")
            )
        if not taken:
            assert response is not None
            return self._json(req, response, modern=True)
        sub = taken[0]
        stream = _Stream(None, deque(), rid=sub.id)

        def emit(note: dict[str, Any]) -> None:
            with self._lock:
                full = len(stream.events) >= LISTEN_BACKLOG
            if full:  # the client stopped reading: end the stream rather than lose events
                _log.warning("a listen stream's backlog is full; ending it", id=sub.id)
                self._end_stream(stream, 200, None)
            if full or not self._push(stream, jsonrpc.encode(note), final="id" in note):
                raise connection_error("Connection closed: the subscription stream has ended")

        with self._lock:
            self._listen_subs.add(sub)
        sub.start(emit)
        return self._listen_stream(req, stream, sub)

    def _listen_stream(
        self, req: _Request, stream: _Stream, sub: ServerSubscription
    ) -> Iterator[bytes]:
        try:
            yield from self._respond(req, stream, defer=False, modern=True)
        finally:
            sub.close()  # the client closed the connection: that is the cancellation
            with self._lock:
                self._listen_subs.discard(sub)

    # -- initialize era ----------------------------------------------------------------------

    def _initialize(
        self, req: _Request, request: jsonrpc.Request, message: dict[str, Any]
    ) -> list[bytes]:
        with self._lock:
            full = len(self._sessions) >= self._max_sessions
        if full:
            return req.error(
                503,
                request.id,
                McpError(INTERNAL_ERROR, "Server busy: too many sessions"),
                (("Retry-After", "1"),),
            )
        state = ServerSession()
        response = self._dispatch(message, Peer("http", session=state))
        headers: list[tuple[str, str]] = []
        if "result" in response and state.version is not None:
            sid = secrets.token_urlsafe(32)
            state.session_id = sid
            session = _Session(sid, state, time.monotonic())
            with self._lock:
                if not self._closing:
                    self._sessions[sid] = session
            headers.append(("Mcp-Session-Id", sid))
            standalone = session.standalone
            open_session_channel(
                self.runtime, state, lambda note: self._push(standalone, jsonrpc.encode(note))
            )
        return self._json(req, response, modern=False, headers=headers)

    def _legacy_request(
        self, req: _Request, request: jsonrpc.Request, message: dict[str, Any]
    ) -> Iterable[bytes]:
        found = self._session_for(req, request.id)
        if not isinstance(found, _Session):
            return found
        session = found
        if request.method in INLINE_METHODS:
            peer = Peer("http", session=session.state, inflight=session.inflight)
            return self._json(req, self._dispatch(message, peer), modern=False)
        with self._lock:
            duplicate = request.id in session.jobs
        if duplicate:
            return self._json(
                req,
                jsonrpc.error_response(
                    request.id,
                    McpError(INVALID_REQUEST, f"Invalid Request: id {request.id!r} is in use"),
                ),
                modern=False,
            )
        job = self._start_job(request, message, session)
        if not isinstance(job, _Job):
            return job(req)
        primed = session.version == "2025-11-25"
        if primed and self._retry_ms is not None:
            return self._respond(
                req,
                job.stream,
                session=session,
                defer=False,
                prime=True,
                retry_ms=self._retry_ms,
                poll=True,
            )
        return self._respond(req, job.stream, session=session, prime=primed)

    def _legacy_notification(
        self, req: _Request, note: jsonrpc.Notification, message: dict[str, Any]
    ) -> list[bytes]:
        found = self._session_for(req, None)
        if not isinstance(found, _Session):
            return found
        session = found
        if note.method == "notifications/cancelled" and note.params is not None:
            rid: Any = note.params.get("requestId")
            with self._lock:
                job = session.jobs.get(rid) if type(rid) in (str, int) else None
            if job is not None:
                self._cancel_job(job)
                self._end_stream(job.stream, 200, None)
        else:
            peer = Peer("http", session=session.state, inflight=session.inflight)
            try:
                dispatch(self.runtime, message, peer)
            except Exception:
                _log.exception("a notification failed", method=note.method)
        return req.reply(202)

    def _legacy_answer(
        self, req: _Request, message: jsonrpc.Response | jsonrpc.ErrorResponse
    ) -> list[bytes]:
        found = self._session_for(req, None)
        if not isinstance(found, _Session):
            return found
        if isinstance(message, jsonrpc.Response):
            delivered = self._answer(found, message.id, message.result, None)
        else:
            delivered = message.id is not None and self._answer(
                found, message.id, None, McpError.from_wire(message.error)
            )
        if not delivered:
            _log.warning("dropped a response to an unknown id", id=message.id)
        return req.reply(202)

    def _malformed_answer(self, req: _Request, exc: jsonrpc.DecodeError) -> list[bytes]:
        found = self._session_for(req, exc.id)
        if not isinstance(found, _Session):
            return found
        assert exc.id is not None
        failure = McpError(INTERNAL_ERROR, f"The client's answer is malformed: {exc.reason}")
        if self._answer(found, exc.id, None, failure):
            return req.reply(202)
        return req.error(400, exc.id, exc.to_mcp_error())

    def _answer(
        self,
        session: _Session,
        sid: RequestId,
        result: dict[str, Any] | None,
        error: McpError | None,
    ) -> bool:
        """Deliver the client's answer to server request ``sid``; False if none is waiting."""
        return deliver_answer(self._lock, session.pending, sid, result, error)

    def _get(self, req: _Request) -> Iterable[bytes]:
        if not self._legacy or req.header(checks.H_PROTOCOL_VERSION) in checks.STATELESS_VERSIONS:
            return self._not_allowed(req, "POST")
        if not checks.accepts(req.header("accept"), "text/event-stream"):
            return req.error(
                406,
                None,
                McpError(INVALID_REQUEST, "Not Acceptable: Accept must list text/event-stream"),
            )
        found = self._session_for(req, None)
        if not isinstance(found, _Session):
            return found
        session = found
        last = req.header(checks.H_LAST_EVENT_ID)
        if last is not None:
            parsed = checks.parse_event_id(last)
            key, n = parsed if parsed is not None else ("", -1)
            if key == "0" and not self._get_stream:
                return self._not_allowed(req, "POST, DELETE")
            with self._lock:
                stream = session.standalone if key == "0" else session.streams.get(key)
                valid = stream is not None and 0 <= n < stream.next_n
            if stream is None or not valid:
                return req.error(
                    400,
                    None,
                    McpError(INVALID_REQUEST, f"Bad Request: cannot resume from event {last!r}"),
                )
            return self._respond(req, stream, session=session, cursor=n, defer=False)
        if not self._get_stream:
            return self._not_allowed(req, "POST, DELETE")
        with self._lock:
            standalone = session.standalone
            taken = standalone.owner is not None
            cursor = standalone.delivered
        if taken:
            return req.error(
                409,
                None,
                McpError(INVALID_REQUEST, "Conflict: this session's GET stream is already open"),
            )
        return self._respond(
            req,
            standalone,
            session=session,
            cursor=cursor,
            defer=False,
            prime=session.version == "2025-11-25",
        )

    def _delete(self, req: _Request) -> list[bytes]:
        if not self._legacy or req.header(checks.H_PROTOCOL_VERSION) in checks.STATELESS_VERSIONS:
            return self._not_allowed(req, "POST")
        found = self._session_for(req, None)
        if not isinstance(found, _Session):
            return found
        self._end_session(found, "deleted by the client", 404, _session_gone())
        return req.reply(200)

    # -- answers -----------------------------------------------------------------------------

    def _json(
        self,
        req: _Request,
        response: dict[str, Any],
        *,
        modern: bool,
        headers: Sequence[tuple[str, str]] = (),
    ) -> list[bytes]:
        payload, status = self._encode_response(response, modern)
        return req.reply(status, payload, headers)

    def _encode_response(self, response: dict[str, Any], modern: bool) -> tuple[bytes, int]:
        try:
            payload = jsonrpc.encode(response)
        except (TypeError, ValueError) as exc:
            _log.warning("a result could not be encoded", id=response.get("id"), error=str(exc))
            response = {
                "jsonrpc": "2.0",
                "id": response.get("id"),
                "error": McpError(
                    INTERNAL_ERROR, f"Internal error: the result is not JSON ({exc})"
                ).to_wire(),
            }
            payload = jsonrpc.encode(response)
        return payload, checks.modern_status(response) if modern else 200

    def _respond(
        self,
        req: _Request,
        stream: _Stream,
        *,
        job: _Job | None = None,
        session: _Session | None = None,
        modern: bool = False,
        cursor: int = 0,
        defer: bool = True,
        prime: bool = False,
        retry_ms: int | None = None,
        poll: bool = False,
    ) -> Iterator[bytes]:
        """Answer from ``stream``: JSON when the response comes before anything else (``defer``),
        else an SSE stream of every event after ``cursor``, ending with the response."""
        waker = gevent.event.Event()
        token = object()
        with self._lock:
            previous = stream.waker
            stream.owner = token
            stream.waker = waker
        if previous is not None:
            previous.set()  # the consumer it replaces ends
        watch = _DisconnectWatch(req.environ.get("snodo.socket"), waker, self._loop)
        key = stream.key
        committed = False
        finished = False

        def commit() -> bytes:
            req.start_response(_status(200), list(_SSE_HEADERS))
            if prime and key is not None:
                return checks.priming_event(f"{key}-{cursor}", retry_ms)
            return b""

        try:
            if not defer:
                committed = True
                # Something must be written for the status and headers to go out at once.
                yield commit() or checks.KEEPALIVE
                if poll:
                    finished = True
                    return
            while True:
                waker.clear()
                with self._lock:
                    replaced = stream.owner is not token
                    batch = [] if replaced else [e for e in stream.events if e[0] > cursor]
                    last_n = stream.next_n - 1
                    final, ended = stream.final, stream.ended
                    final_status = stream.final_status
                    end_status, end_error = stream.end_status, stream.end_error
                    if key is None:  # no replay: forget what this consumer takes
                        upto = batch[-1][0] if batch else cursor
                        while stream.events and stream.events[0][0] <= upto:
                            stream.events.popleft()
                if replaced:
                    finished = True
                    return
                if watch.check():
                    return
                if batch:
                    if not committed:
                        if final and len(batch) == 1 and batch[0][0] == last_n:
                            finished = True
                            body = batch[0][1]
                            req.start_response(
                                _status(final_status),
                                [
                                    ("Content-Type", "application/json"),
                                    ("Content-Length", str(len(body))),
                                ],
                            )
                            yield body
                            return
                        committed = True
                        head = commit()
                        if head:
                            yield head
                    cursor = batch[-1][0]
                    yield b"".join(
                        checks.sse_event(data, None if key is None else f"{key}-{n}")
                        for n, data in batch
                    )
                    with self._lock:
                        stream.delivered = max(stream.delivered, cursor)
                    if final and cursor >= last_n:
                        finished = True
                        return
                    continue
                if final:
                    finished = True
                    return
                if ended:
                    finished = True
                    if committed:
                        return
                    if end_error is None:
                        head = commit()
                        if head:
                            yield head
                        return
                    body = _error_body(stream.rid, end_error)
                    req.start_response(
                        _status(end_status),
                        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
                    )
                    yield body
                    return
                if not waker.wait(self._keepalive):
                    if committed:
                        yield checks.KEEPALIVE
                    else:
                        committed = True
                        yield commit() or checks.KEEPALIVE
        except Exception:
            _log.exception("streaming a response failed", stream=key)
            if not committed:
                body = _error_body(stream.rid, McpError(INTERNAL_ERROR, "Internal error"))
                req.start_response(
                    _status(500),
                    [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
                    sys.exc_info(),
                )
                yield body
        finally:
            watch.close()
            with self._lock:
                if stream.owner is token:
                    stream.owner = None
                    stream.waker = None
                if session is not None:
                    session.last_seen = time.monotonic()
            if not finished and modern and job is not None:
                # 2026-07-28: closing the response stream is the cancellation.
                self._cancel_job(job)

    # -- workers -----------------------------------------------------------------------------

    def _start_job(
        self, request: jsonrpc.Request, message: dict[str, Any], session: _Session | None
    ) -> _Job | Callable[[_Request], list[bytes]]:
        """Start a worker for ``request``; or the reply refusing it (busy, closing)."""
        with self._lock:
            if self._closing or (session is not None and session.ended):
                refusal = McpError(INTERNAL_ERROR, "Server shutting down")
                return lambda req: req.error(503, request.id, refusal)
            if self._busy >= self._max_concurrency:
                busy = McpError(INTERNAL_ERROR, "Server busy")
                return lambda req: req.error(503, request.id, busy, (("Retry-After", "1"),))
            self._busy += 1
            self._running += 1
            if session is None:
                stream = _Stream(None, deque(maxlen=EVENT_BUFFER), rid=request.id)
            else:
                stream = _Stream(
                    str(next(session.counter)), deque(maxlen=EVENT_BUFFER), rid=request.id
                )
            job = _Job(request.id, request.method, stream, session)
            self._jobs.add(job)
            if session is not None:
                session.jobs[request.id] = job
                session.streams[str(stream.key)] = stream
                self._trim_streams(session)
        if session is None:
            job.peer = Peer("http", inflight=_JobInflight(job))
        else:
            job.peer = Peer(
                "http",
                session=session.state,
                server_request=lambda method, params: self._server_request(job, method, params),
                inflight=session.inflight,
            )
        worker = threading.Thread(
            target=self._work, args=(job, message), name=f"snodo-http-{request.id}", daemon=True
        )
        job.thread = worker
        with self._lock:
            self._workers.add(worker)
        try:
            worker.start()
        except RuntimeError:  # no thread left to start
            self._finished(job)
            busy = McpError(INTERNAL_ERROR, "Server busy")
            return lambda req: req.error(503, request.id, busy, (("Retry-After", "1"),))
        return job

    @staticmethod
    def _trim_streams(session: _Session) -> None:
        """Forget the oldest finished streams beyond ``FINISHED_STREAMS_KEPT`` (under the lock)."""
        done = [k for k, s in session.streams.items() if (s.final or s.ended) and s.owner is None]
        for key in done[: max(0, len(done) - FINISHED_STREAMS_KEPT)]:
            del session.streams[key]

    def _work(self, job: _Job, message: dict[str, Any]) -> None:
        try:
            response = self._dispatch(message, job.peer, job)
            self._release_slot(job)
            if job.cancelled:
                _log.debug("suppressed the response to a cancelled request", id=job.id)
                self._end_stream(job.stream, 200, None)
            elif response is not None:
                payload, status = self._encode_response(response, job.session is None)
                self._push(job.stream, payload, final=True, status=status)
        finally:
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
            self._jobs.discard(job)
            if job.thread is not None:
                self._workers.discard(job.thread)
            session = job.session
            if session is not None:
                if session.jobs.get(job.id) is job:
                    del session.jobs[job.id]
                session.last_seen = time.monotonic()
            idle = self._closing and self._running == 0
        if idle and self._idle_event is not None:
            self._bridge.call(self._idle_event.set)

    def _dispatch(
        self, message: dict[str, Any], peer: Peer, job: _Job | None = None
    ) -> dict[str, Any]:
        progress = notify = None
        if job is not None:
            progress = partial(self._notification, job, "notifications/progress")
            notify = partial(self._notification, job)
        try:
            response = dispatch(self.runtime, message, peer, progress=progress, notify=notify)
        except (Exception, SystemExit) as exc:  # dispatch answers client errors itself
            _log.exception("dispatch failed", method=message.get("method"))
            response = {
                "jsonrpc": "2.0",
                "id": message.get("id"),
                "error": McpError(
                    INTERNAL_ERROR, f"Internal error: {type(exc).__name__}"
                ).to_wire(),
            }
        assert response is not None  # only requests are dispatched here
        return response

    def _notification(self, job: _Job, method: str, params: dict[str, Any]) -> None:
        """Progress or a log message about ``job``, on its response stream."""
        if job.cancelled:
            raise _cancelled()  # the Context stops reporting (and marks itself cancelled)
        try:
            payload = jsonrpc.encode(jsonrpc.notification(method, params))
        except (TypeError, ValueError):
            _log.warning(
                "dropped a notification that is not JSON", method=method, params=repr(params)
            )
            return
        if not self._push(job.stream, payload):
            raise connection_error("Connection closed: the response stream has ended")

    def _server_request(self, job: _Job, method: str, params: dict[str, Any]) -> dict[str, Any]:
        session = job.session
        assert session is not None
        sid = f"srv-{next(self._server_ids)}"
        pending = PendingAnswer(job)
        with self._lock:
            if self._closing or session.ended:
                raise connection_error("Connection closed: the session has ended")
            if job.cancelled:
                raise _cancelled()
            job.asking.add(sid)
            session.pending[sid] = pending
        try:
            payload = jsonrpc.encode(jsonrpc.request(sid, method, params))
        except (TypeError, ValueError) as exc:
            self._forget(session, sid, pending)
            raise McpError(INTERNAL_ERROR, f"Server request params are not JSON: {exc}") from None
        if not self._push(job.stream, payload):
            self._forget(session, sid, pending)
            raise connection_error("Connection closed: the response stream has ended")
        if not pending.done.wait(self._ask_timeout) and self._forget(session, sid, pending):
            self._push(job.stream, _cancel_note(sid, "timed out"))
            raise timeout_error(self._ask_timeout)
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    def _forget(self, session: _Session, sid: str, pending: PendingAnswer) -> bool:
        """Stop waiting for ``sid``; False if an answer (or a failure) arrived meanwhile."""
        with self._lock:
            if session.pending.get(sid) is not pending:
                return False
            del session.pending[sid]
            if pending.job is not None:
                pending.job.asking.discard(sid)
            return True

    def _cancel_job(self, job: _Job) -> None:
        """Mark ``job`` cancelled: its Context sees ``cancelled``, the server requests it waits
        on fail (and the client is told), its progress stops."""
        failed: list[tuple[str, PendingAnswer]] = []
        with self._lock:
            if job.cancelled:
                return
            job.cancelled = True
            session = job.session
            if session is not None:
                for sid in job.asking:
                    pending = session.pending.pop(sid, None)
                    if pending is not None:
                        pending.error = _cancelled()
                        failed.append((sid, pending))
            job.asking.clear()
        for sid, pending in failed:
            pending.done.set()
            self._push(job.stream, _cancel_note(sid, "the request that asked was cancelled"))
        ctx = job.peer.inflight.get(job.id) if hasattr(job, "peer") else None
        if ctx is not None:
            ctx._cancel()

    # -- streams -----------------------------------------------------------------------------

    def _push(
        self, stream: _Stream, payload: bytes, *, final: bool = False, status: int = 200
    ) -> bool:
        """Append an event to ``stream`` and wake its consumer; False once the stream is over."""
        with self._lock:
            if stream.final or stream.ended:
                return False
            n = stream.next_n
            stream.next_n += 1
            if (
                len(stream.events) == stream.events.maxlen
                and stream.events[0][0] > stream.delivered
            ):
                _log.warning(
                    "a response stream overflowed; dropped its oldest event", stream=stream.key
                )
            stream.events.append((n, payload))
            if final:
                stream.final = True
                stream.final_status = status
            waker = stream.waker
        if waker is not None:
            self._bridge.call(waker.set)
        return True

    def _end_stream(self, stream: _Stream, status: int, error: McpError | None) -> None:
        """End ``stream`` without a response (a consumer that has not answered yet answers
        ``status`` with ``error``, or an empty event stream when ``error`` is None)."""
        with self._lock:
            if stream.final or stream.ended:
                return
            stream.ended = True
            stream.end_status = status
            stream.end_error = error
            waker = stream.waker
        if waker is not None:
            self._bridge.call(waker.set)


def _cancel_note(sid: str, reason: str) -> bytes:
    return jsonrpc.encode(
        jsonrpc.notification("notifications/cancelled", {"requestId": sid, "reason": reason})
    )


def _session_gone() -> McpError:
    return McpError(INVALID_REQUEST, "Session not found: send initialize again")


def _unsupported(runtime: Runtime, version: str) -> McpError:
    return McpError(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version: {version}",
        {"supported": list(runtime.enabled_versions), "requested": version},
    )


# -- python -m snodo.server --http -----------------------------------------------------------


def run_http(
    target: str,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    server_request_timeout: float = DEFAULT_SERVER_REQUEST_TIMEOUT,
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
    sse_retry_ms: int | None = None,
) -> int:
    """Load ``MODULE:ATTR`` and serve it over HTTP until SIGTERM or Ctrl-C; the exit status.

    The URL is printed on stderr (``snodo.server: serving http://...``) once the server
    listens. 0 after SIGTERM, 130 after Ctrl-C, 2 for a bad target, 1 when the port cannot be
    bound.
    """
    from snodo.server.stdio_server import EXIT_USAGE, TargetError, load_runtime

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        runtime = load_runtime(target)
    except TargetError as exc:
        print(f"snodo.server: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    try:
        server = serve_http(
            runtime,
            host,
            port,
            max_concurrency=max_concurrency,
            server_request_timeout=server_request_timeout,
            shutdown_grace=shutdown_grace,
            sse_retry_ms=sse_retry_ms,
        )
    except OSError as exc:
        print(
            f"snodo.server: error: cannot serve on {host}:{port}: {exc}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    stop = threading.Event()
    previous: Any = None
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        print(f"snodo.server: serving {server.url}", file=sys.stderr, flush=True)
        stop.wait()
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        server.close()
        if in_main:
            signal.signal(signal.SIGTERM, previous)
