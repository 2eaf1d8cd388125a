"""The HTTP server's session era: the table of sessions by ``Mcp-Session-Id``, the idle sweep,
the end of a session (expiry, DELETE, shutdown), and the session-era requests.

``initialize`` opens a session and answers with its id (``secrets.token_urlsafe``); later
POSTs carry it (missing: 400, unknown or ended: 404) and, if they send
``MCP-Protocol-Version``, the session's version (else 400). Notifications and the client's
answers to server requests get 202. A request runs on a worker and is answered from its
response stream; 2025-11-25 streams open with a priming event. A GET with ``Last-Event-ID``
resumes a stream; a GET without it opens the session's standalone stream (409 while one is
open). A session idle for ``session_idle_timeout`` (no request running, no stream attached)
expires.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from snodo.log import get_logger
from snodo.protocol import jsonrpc
from snodo.protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, McpError
from snodo.protocol.serving import http_rules as rules
from snodo.protocol.serving.event_stream import STANDALONE_STREAM, parse_event_id
from snodo.server.context import Peer, ServerSession
from snodo.server.dispatcher import dispatch
from snodo.server.http_streams import Streams
from snodo.server.http_workers import INLINE_METHODS, HttpJob, Session, Workers, json_reply
from snodo.server.jobs import RequestId
from snodo.server.runtime import Runtime
from snodo.server.subscriptions import close_session_channel, open_session_channel
from snodo.server.wsgi import Request, not_allowed

__all__ = ["SessionOptions", "Sessions", "session_gone"]

_log = get_logger("snodo.server.http_server")


def session_gone() -> McpError:
    """The answer to a request naming a session that is unknown or over (HTTP 404)."""
    return McpError(INVALID_REQUEST, "Session not found: send initialize again")


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """The session-era options of :func:`snodo.server.http_server.serve_http`."""

    max_sessions: int
    idle_timeout: float
    get_stream: bool
    retry_ms: int | None


class Sessions:
    """The session era of one HTTP server, under its lock; ``closing()`` says it closes."""

    def __init__(
        self,
        runtime: Runtime,
        lock: threading.Lock,
        streams: Streams,
        workers: Workers,
        closing: Callable[[], bool],
        options: SessionOptions,
    ) -> None:
        self._runtime = runtime
        self._lock = lock
        self._streams = streams
        self._workers = workers
        self._closing = closing
        self._options = options
        self.sessions: dict[str, Session] = {}

    @property
    def ids(self) -> list[str]:
        with self._lock:
            return list(self.sessions)

    def find(self, req: Request, rid: RequestId | None) -> Session | list[bytes]:
        """The session the request names, or the reply refusing it."""
        sid = req.header(rules.H_SESSION_ID)
        if sid is None:
            return req.error(
                400,
                rid,
                McpError(INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required"),
            )
        with self._lock:
            session = self.sessions.get(sid) if rules.visible_ascii(sid) else None
            if session is not None:
                session.last_seen = time.monotonic()
        if session is None:
            return req.error(404, rid, session_gone())
        version = req.header(rules.H_PROTOCOL_VERSION)
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

    def _touch(self, session: Session, finished: bool) -> None:
        with self._lock:
            session.last_seen = time.monotonic()

    # -- the life of a session -------------------------------------------------------------

    def sweep(self, now: float) -> None:
        """End the sessions idle for ``idle_timeout`` at ``now`` (``time.monotonic``)."""
        timeout = self._options.idle_timeout
        with self._lock:
            expired = [
                s
                for s in self.sessions.values()
                if not s.jobs
                and s.standalone.owner is None
                and all(st.owner is None for st in s.streams.values())
                and now - s.last_seen >= timeout
            ]
        for session in expired:
            _log.info("session expired", idle_timeout=timeout)
            self.end(session, 404, session_gone())

    def sweep_loop(self, stop: Any) -> None:  # a greenlet on the hub
        """Sweep every quarter of the idle timeout until ``stop`` (a gevent Event) is set."""
        interval = max(0.02, min(30.0, self._options.idle_timeout / 4))
        while not stop.wait(interval):
            self.sweep(time.monotonic())

    def end(self, session: Session, status: int, error: McpError | None) -> None:
        """End ``session``: its jobs are cancelled, its streams end (answered ``status`` with
        ``error`` where nothing was answered yet), its notification channel closes."""
        with self._lock:
            if session.ended:
                return
            session.ended = True
            if self.sessions.get(session.id) is session:
                del self.sessions[session.id]
            jobs = list(session.jobs.values())
            streams = [*session.streams.values(), session.standalone]
        close_session_channel(session.state)
        for job in jobs:
            self._workers.cancel(job)
        for stream in streams:
            self._streams.end(stream, status, error)

    def end_all(self, status: int, error: McpError) -> None:
        with self._lock:
            sessions = list(self.sessions.values())
        for session in sessions:
            self.end(session, status, error)

    # -- POST ------------------------------------------------------------------------------

    def initialize(
        self, req: Request, request: jsonrpc.Request, message: dict[str, Any]
    ) -> list[bytes]:
        """``initialize``: a new session when it succeeds (503 beyond ``max_sessions``)."""
        with self._lock:
            full = len(self.sessions) >= self._options.max_sessions
        if full:
            return req.error(
                503,
                request.id,
                McpError(INTERNAL_ERROR, "Server busy: too many sessions"),
                (("Retry-After", "1"),),
            )
        state = ServerSession()
        response = self._workers.dispatch(message, Peer("http", session=state))
        headers: list[tuple[str, str]] = []
        if "result" in response and state.version is not None:
            sid = secrets.token_urlsafe(32)
            state.session_id = sid
            session = self._workers.new_session(sid, state)
            with self._lock:
                if not self._closing():
                    self.sessions[sid] = session
            headers.append(("Mcp-Session-Id", sid))
            standalone = session.standalone
            open_session_channel(
                self._runtime,
                state,
                lambda note: self._streams.push(standalone, jsonrpc.encode(note)),
            )
        return json_reply(req, response, stateless=False, headers=headers)

    def request(
        self, req: Request, request: jsonrpc.Request, message: dict[str, Any]
    ) -> Iterable[bytes]:
        found = self.find(req, request.id)
        if not isinstance(found, Session):
            return found
        session = found
        if request.method in INLINE_METHODS:
            peer = Peer("http", session=session.state, inflight=session.inflight)
            return json_reply(req, self._workers.dispatch(message, peer), stateless=False)
        with self._lock:
            duplicate = request.id in session.jobs
        if duplicate:
            return json_reply(
                req,
                jsonrpc.error_response(
                    request.id,
                    McpError(INVALID_REQUEST, f"Invalid Request: id {request.id!r} is in use"),
                ),
                stateless=False,
            )
        job = self._workers.start(request, message, session)
        if not isinstance(job, HttpJob):
            return job(req)
        touch = partial(self._touch, session)
        retry_ms = self._options.retry_ms
        if session.version != "2025-11-25":
            return self._streams.respond(req, job.stream, on_close=touch)
        if retry_ms is None:
            return self._streams.respond(req, job.stream, prime=True, on_close=touch)
        return self._streams.respond(
            req, job.stream, defer=False, prime=True, retry_ms=retry_ms, poll=True, on_close=touch
        )

    def notification(
        self, req: Request, note: jsonrpc.Notification, message: dict[str, Any]
    ) -> list[bytes]:
        found = self.find(req, None)
        if not isinstance(found, Session):
            return found
        session = found
        if note.method == "notifications/cancelled" and note.params is not None:
            rid: Any = note.params.get("requestId")
            with self._lock:
                job = session.jobs.get(rid) if type(rid) in (str, int) else None
            if job is not None:
                assert isinstance(job, HttpJob)
                self._workers.cancel(job)
                self._streams.end(job.stream, 200, None)
        else:
            peer = Peer("http", session=session.state, inflight=session.inflight)
            try:
                dispatch(self._runtime, message, peer)
            except Exception:
                _log.exception("a notification failed", method=note.method)
        return req.reply(202)

    def answer(
        self, req: Request, message: jsonrpc.Response | jsonrpc.ErrorResponse
    ) -> list[bytes]:
        """The client's answer to a server request (202 even when none is waiting)."""
        found = self.find(req, None)
        if not isinstance(found, Session):
            return found
        if isinstance(message, jsonrpc.Response):
            delivered = found.asks.answer(message.id, message.result, None)
        else:
            delivered = message.id is not None and found.asks.answer(
                message.id, None, McpError.from_wire(message.error)
            )
        if not delivered:
            _log.warning("dropped a response to an unknown id", id=message.id)
        return req.reply(202)

    def malformed_answer(self, req: Request, exc: jsonrpc.DecodeError) -> list[bytes]:
        """An answer to a server request that is not valid JSON-RPC fails that request."""
        found = self.find(req, exc.id)
        if not isinstance(found, Session):
            return found
        assert exc.id is not None
        failure = McpError(INTERNAL_ERROR, f"The client's answer is malformed: {exc.reason}")
        if found.asks.answer(exc.id, None, failure):
            return req.reply(202)
        return req.error(400, exc.id, exc.to_mcp_error())

    # -- GET and DELETE --------------------------------------------------------------------

    def get(self, req: Request) -> Iterable[bytes]:
        """Resume a stream (``Last-Event-ID``) or open the standalone stream."""
        if not rules.accepts(req.header("accept"), "text/event-stream"):
            return req.error(
                406,
                None,
                McpError(INVALID_REQUEST, "Not Acceptable: Accept must list text/event-stream"),
            )
        found = self.find(req, None)
        if not isinstance(found, Session):
            return found
        session = found
        touch = partial(self._touch, session)
        enabled = self._options.get_stream
        last = req.header(rules.H_LAST_EVENT_ID)
        if last is not None:
            parsed = parse_event_id(last)
            key, n = parsed if parsed is not None else ("", -1)
            if key == STANDALONE_STREAM and not enabled:
                return not_allowed(req, "POST, DELETE")
            with self._lock:
                stream = (
                    session.standalone if key == STANDALONE_STREAM else session.streams.get(key)
                )
                valid = stream is not None and 0 <= n < stream.next_n
            if stream is None or not valid:
                return req.error(
                    400,
                    None,
                    McpError(INVALID_REQUEST, f"Bad Request: cannot resume from event {last!r}"),
                )
            return self._streams.respond(req, stream, cursor=n, defer=False, on_close=touch)
        if not enabled:
            return not_allowed(req, "POST, DELETE")
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
        return self._streams.respond(
            req,
            standalone,
            cursor=cursor,
            defer=False,
            prime=session.version == "2025-11-25",
            on_close=touch,
        )

    def delete(self, req: Request) -> list[bytes]:
        """``DELETE``: the client ends its session (200; later requests get 404)."""
        found = self.find(req, None)
        if not isinstance(found, Session):
            return found
        self.end(found, 404, session_gone())
        return req.reply(200)
