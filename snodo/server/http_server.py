"""Serve a :class:`~snodo.server.Runtime` over Streamable HTTP, for both protocol eras.

``serve_http(runtime)`` binds ``127.0.0.1`` (an ephemeral port unless told otherwise), serves
the MCP endpoint (``/mcp``) on a ``gevent.pywsgi`` server and returns an :class:`HttpServer`;
``close()`` stops it. ``python -m snodo.server --http MODULE:ATTR`` does the same from a shell.

This module routes and runs the server's life; the rest is split by job, like httpcore's pool,
connection and http11: the gevent glue (:mod:`snodo.server.wsgi`), the session era and its
table (:mod:`snodo.server.http_sessions`), the response streams (:mod:`snodo.server.http_streams`),
the workers (:mod:`snodo.server.http_workers`, on :mod:`snodo.server.jobs`) and the pure rules
(:mod:`snodo.protocol.serving.http_rules`).

**Stateless era** (2026-07-28): one POST per request, its headers mirroring the body (a
mismatch is HTTP 400 with -32020); ``Mcp-Session-Id`` is ignored; GET and DELETE are 405. A
response is ``application/json`` with the status of its error (400 for -32020/-32021/-32022
and a malformed ``_meta``, 404 for -32601, else 200), or ``text/event-stream`` once the request
emits a notification (progress) before its response, or stays silent for
``keepalive_interval`` (the stream then carries ``: keep-alive`` comments); closing that stream
cancels the request. ``subscriptions/listen`` answers with an event stream of its own.

**Session era** (2025-11-25, 2025-06-18): see :mod:`snodo.server.http_sessions`.

**Both**: ``Origin`` (when sent) must be allowed (403); on a loopback bind the ``Host`` must be
a loopback name (403, DNS rebinding). POST bodies are ``application/json`` (415), at most
``max_body_bytes`` (413), one JSON object (400, -32700 or -32600; batches refused), with an
``Accept`` that lists ``application/json`` and ``text/event-stream`` (406). At most
``max_concurrency`` requests run at once (503 "Server busy" beyond). Discovery, lists and
``ping`` run inline on the server's hub; every other request runs on a worker.

Threads: the WSGI server runs on a gevent hub. Unpatched, that hub lives in a thread of its own
and each dispatch runs on a real worker thread, so a blocking tool never stalls the hub. Under
``gevent.monkey.patch_all()`` the same code runs on greenlets of the main hub (where a tool that
blocks without yielding stalls everything, as any greenlet does). Workers wake the hub with
``loop.run_callback_threadsafe``, the hub wakes workers with ``threading.Event``, and the shared
state sits behind one lock. Authorization headers are never logged or echoed.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final

import gevent
import gevent.event
import gevent.pool
import gevent.pywsgi

from snodo.log import get_logger
from snodo.protocol import jsonrpc
from snodo.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    McpError,
)
from snodo.protocol.serving import http_rules as rules
from snodo.server.http_sessions import SessionOptions, Sessions
from snodo.server.http_stateless import StatelessEra
from snodo.server.http_streams import Streams
from snodo.server.http_workers import Workers
from snodo.server.runtime import Runtime
from snodo.server.targets import EXIT_USAGE, load_or_report
from snodo.server.wsgi import (
    BodyTooLarge,
    Bridge,
    Connections,
    Handler,
    Request,
    listening_socket,
    not_allowed,
)
from snodo.supervision.owner import green_mode

__all__ = [
    "DEFAULT_KEEPALIVE_INTERVAL",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_PORT",
    "DEFAULT_SERVER_REQUEST_TIMEOUT",
    "DEFAULT_SESSION_IDLE_TIMEOUT",
    "DEFAULT_SHUTDOWN_GRACE",
    "HttpOptions",
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
#: Events queued for a listen stream whose client does not keep up; beyond it the stream ends
#: (without its result: the client sees an abrupt end and may listen again).
LISTEN_BACKLOG: Final = 10_000
#: How long ``serve_http`` waits for the server thread to start listening.
START_DEADLINE: Final = 10.0

_log = get_logger("snodo.server.http_server")


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """The checked options of one :class:`HttpServer` (see :func:`serve_http`)."""

    path: str
    allowed_origins: frozenset[str] | None
    allowed_hosts: frozenset[str] | bool | None
    max_body_bytes: int
    max_concurrency: int
    server_request_timeout: float
    keepalive_interval: float
    shutdown_grace: float
    max_connections: int
    sessions: SessionOptions


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
    options = HttpOptions(
        path,
        allowed_origins=None
        if allowed_origins is None
        else frozenset(o.strip().lower().rstrip("/") for o in allowed_origins),
        allowed_hosts=_host_policy(host, allowed_hosts),
        max_body_bytes=max_body_bytes,
        max_concurrency=max_concurrency,
        server_request_timeout=server_request_timeout,
        keepalive_interval=keepalive_interval,
        shutdown_grace=shutdown_grace,
        max_connections=max_connections,
        sessions=SessionOptions(
            max_sessions, session_idle_timeout, enable_get_stream, sse_retry_ms
        ),
    )
    listener = listening_socket(host, port)
    try:
        server = HttpServer(runtime, listener, options)
    except BaseException:
        listener.close()
        raise
    server.start()
    return server


def _host_policy(host: str, allowed: Iterable[str] | None) -> frozenset[str] | bool | None:
    """The Host allow-list: the given names, the loopback names for a loopback bind (None),
    or False (no check) for any other bind."""
    if allowed is not None:
        return frozenset(h.strip().lower() for h in allowed)
    return None if rules.is_loopback(host) else False


class HttpServer:
    """A running Streamable HTTP server (see :func:`serve_http`); a context manager."""

    def __init__(self, runtime: Runtime, listener: socket.socket, options: HttpOptions) -> None:
        self.runtime = runtime
        self._listener = listener
        self._options = options
        address = listener.getsockname()
        self.host: str = address[0]
        self.port: int = address[1]
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url: str = f"http://{shown}:{self.port}{options.path}"
        self._serves_stateless = bool(runtime.stateless_dialects)
        self._serves_session = bool(runtime.session_dialects)
        self._allow = "GET, POST, DELETE" if self._serves_session else "POST"

        self._lock = threading.Lock()
        self._bridge = Bridge()
        self._closing = False
        self._streams = Streams(self._lock, self._bridge, options.keepalive_interval)
        self._workers = Workers(
            runtime,
            self._lock,
            self._bridge,
            self._streams,
            self._is_closing,
            max_concurrency=options.max_concurrency,
            server_request_timeout=options.server_request_timeout,
        )
        self._sessions = Sessions(
            runtime, self._lock, self._streams, self._workers, self._is_closing, options.sessions
        )
        self._stateless = StatelessEra(
            runtime, self._lock, self._streams, self._workers, listen_backlog=LISTEN_BACKLOG
        )
        self._connections = Connections()
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._stop_event: Any = None
        self._thread = threading.Thread(
            target=self._main, name=f"snodo-http-{self.port}", daemon=True
        )

    def _is_closing(self) -> bool:
        return self._closing

    @property
    def client_sockets(self) -> list[Any]:
        """The sockets of the open client connections (a snapshot)."""
        return list(self._connections.busy)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start serving (:func:`serve_http` does); ``OSError`` when it could not."""
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
        self._connections.closing = True
        self._bridge.call(self._request_stop)
        deadline = time.monotonic() + self._options.shutdown_grace + 5.0
        if threading.current_thread() is not self._thread and self._thread.ident is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
            if self._thread.is_alive():
                _log.warning("the HTTP server thread did not stop in time", url=self.url)
        with self._lock:
            workers = list(self._workers.table.threads)
        for worker in workers:
            if worker is not threading.current_thread():
                worker.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            stuck = [w.name for w in self._workers.table.threads if w.is_alive()]
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
                self._streams.loop = hub.loop
                self._stop_event = gevent.event.Event()
                self._workers.idle_event = gevent.event.Event()
                pool = gevent.pool.Pool(self._options.max_connections)
                server = gevent.pywsgi.WSGIServer(
                    self._listener,
                    self._app,
                    spawn=pool,
                    handler_class=Handler,
                    log=gevent.pywsgi.LoggingLogAdapter(
                        logging.getLogger("snodo.server.http_server.access"), logging.DEBUG
                    ),
                    error_log=gevent.pywsgi.LoggingLogAdapter(
                        logging.getLogger("snodo.server.http_server"), logging.WARNING
                    ),
                )
                server.snodo_connections = self._connections
                server.start()
                sweeper = gevent.spawn(self._sessions.sweep_loop, self._stop_event)
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
            if not green_mode():
                hub.destroy(destroy_loop=True)

    def _shutdown(self, server: Any) -> None:
        """On the hub: stop listening, end everything, let responses finish, stop handlers."""
        server.close()
        closing = McpError(INTERNAL_ERROR, "Server shutting down")
        with self._lock:
            listening = list(self._stateless.listening)
        for sub in listening:
            sub.finish()  # each stream ends with its listen result
        self._sessions.end_all(503, closing)
        self._workers.cancel_all(closing)
        with self._lock:
            idle = self._workers.table.running == 0
        if not idle:
            self._workers.idle_event.wait(self._options.shutdown_grace)
        self._connections.shutdown_idle()
        server.stop(timeout=self._options.shutdown_grace)

    # -- sessions --------------------------------------------------------------------------

    @property
    def session_ids(self) -> list[str]:
        """The ids of the open session-era sessions."""
        return self._sessions.ids

    def notify(
        self, method: str, params: dict[str, Any] | None = None, *, session_id: str | None = None
    ) -> int:
        """Queue a notification on the standalone (GET) stream of one session, or of every
        session; the number of sessions it was queued for. Delivered when the client has its
        GET stream open, or opens it later (at most ``STANDALONE_BUFFER`` queued)."""
        payload = jsonrpc.encode(jsonrpc.notification(method, params))
        with self._lock:
            targets = [
                s
                for s in self._sessions.sessions.values()
                if session_id is None or s.id == session_id
            ]
        return sum(1 for s in targets if self._streams.push(s.standalone, payload))

    # -- routing ---------------------------------------------------------------------------

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        req = Request(environ, start_response)
        try:
            return self._route(req)
        except Exception:
            _log.exception("answering an HTTP request failed")
            return req.error(500, None, McpError(INTERNAL_ERROR, "Internal error"))

    def _route(self, req: Request) -> Iterable[bytes]:
        environ = req.environ
        if environ.get("PATH_INFO") != self._options.path:
            return req.reply(404)
        hosts = self._options.allowed_hosts
        if hosts is not False and not rules.host_allowed(
            req.header("host"), hosts if isinstance(hosts, frozenset) else None
        ):
            return req.error(403, None, McpError(INVALID_REQUEST, "Forbidden: Host not allowed"))
        origin = req.header("origin")
        if origin is not None and not rules.origin_allowed(origin, self._options.allowed_origins):
            return req.error(403, None, McpError(INVALID_REQUEST, "Forbidden: Origin not allowed"))
        if self._closing:
            return req.error(503, None, McpError(INTERNAL_ERROR, "Server shutting down"))
        method = environ.get("REQUEST_METHOD")
        if method == "POST":
            return self._post(req)
        if method not in ("GET", "DELETE"):
            return not_allowed(req, self._allow)
        if not self._serves_session or (
            req.header(rules.H_PROTOCOL_VERSION) in rules.STATELESS_VERSIONS
        ):
            return not_allowed(req, "POST")
        return self._sessions.get(req) if method == "GET" else self._sessions.delete(req)

    def _post(self, req: Request) -> Iterable[bytes]:
        if not rules.is_json_content_type(req.environ.get("CONTENT_TYPE")):
            return req.error(
                415,
                None,
                McpError(
                    INVALID_REQUEST, "Unsupported Media Type: the body must be application/json"
                ),
            )
        accept = req.header("accept")
        if not (
            rules.accepts(accept, "application/json") and rules.accepts(accept, "text/event-stream")
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
            body = req.read_body(self._options.max_body_bytes)
        except BodyTooLarge:
            return req.error(
                413,
                None,
                McpError(
                    PARSE_ERROR,
                    f"Parse error: message larger than {self._options.max_body_bytes} bytes",
                ),
            )
        except (OSError, ValueError) as exc:
            _log.info("could not read a request body", error=str(exc))
            req.abandon_body()
            return req.error(
                400, None, McpError(PARSE_ERROR, "Parse error: the request body is incomplete")
            )
        try:
            obj = jsonrpc.decode(body, max_bytes=self._options.max_body_bytes)
        except jsonrpc.DecodeError as exc:
            return req.error(400, None, exc.to_mcp_error())
        try:
            message = jsonrpc.classify(obj)
        except jsonrpc.DecodeError as exc:
            if (
                self._serves_session
                and type(obj) is dict
                and "method" not in obj
                and type(exc.id) is str
                and req.header(rules.H_SESSION_ID) is not None
            ):
                return self._sessions.malformed_answer(req, exc)
            return req.error(400, exc.id, exc.to_mcp_error())
        if isinstance(message, (jsonrpc.Request, jsonrpc.Notification)):
            route = rules.route_post(
                "request" if isinstance(message, jsonrpc.Request) else "notification",
                message.method,
                message.params,
                req.headers,
                serves_stateless=self._serves_stateless,
                serves_session=self._serves_session,
            )
            if isinstance(message, jsonrpc.Notification):
                if route == "stateless":
                    return self._stateless.notification(req, message)
                return self._sessions.notification(req, message, obj)
            if route == "initialize":
                return self._sessions.initialize(req, message, obj)
            if route == "stateless":
                return self._stateless.request(req, message, obj)
            return self._sessions.request(req, message, obj)
        if not self._serves_session:
            return req.error(
                400,
                None,
                McpError(INVALID_REQUEST, "Invalid Request: a client must not send responses"),
            )
        return self._sessions.answer(req, message)


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
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    runtime = load_or_report(target)
    if runtime is None:
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
        runtime.close_tasks()  # the process ends: tasks still running are cancelled
        if in_main:
            signal.signal(signal.SIGTERM, previous)
