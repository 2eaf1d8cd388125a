"""The HTTP server's workers: one job per request that runs user code, answered from its
response stream (:mod:`snodo.server.http_streams`).

A job's progress, log messages and server-to-client requests (session era) are events of its
stream; its response is the last one. A session-era job outlives its HTTP answer (a disconnect
is not a cancellation); a stateless-era job is cancelled when its answer closes first. A
cancelled job's response is suppressed and the server requests it waits on fail, the client
told ``notifications/cancelled`` for each. The table, the slots and the cancellation race are
:mod:`snodo.server.jobs`, shared with the stdio server.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from snodo.log import get_logger
from snodo.protocol import jsonrpc
from snodo.protocol.errors import INTERNAL_ERROR, McpError, connection_error
from snodo.protocol.serving import http_rules as rules
from snodo.protocol.serving.event_stream import STANDALONE_STREAM
from snodo.server.context import Peer, ServerSession
from snodo.server.dispatcher import dispatch
from snodo.server.http_streams import EVENT_BUFFER, Stream, Streams, trim_streams
from snodo.server.jobs import (
    Inflight,
    Job,
    JobTable,
    RequestId,
    ServerRequests,
    notification_bytes,
    response_bytes,
)
from snodo.server.runtime import Runtime
from snodo.server.wsgi import Bridge, Request

__all__ = [
    "INLINE_METHODS",
    "STANDALONE_BUFFER",
    "HttpJob",
    "Refusal",
    "Session",
    "Workers",
    "encoded",
    "json_reply",
]

_log = get_logger("snodo.server.http_server")

Refusal = Callable[[Request], list[bytes]]
"""The reply refusing a request that could not start (busy, shutting down)."""

#: Messages queued per session for its standalone GET stream (oldest dropped first).
STANDALONE_BUFFER: Final = 256

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


@dataclass(eq=False, kw_only=True)
class HttpJob(Job):
    """A client request served by a worker, answered from its response stream."""

    stream: Stream
    session: Session | None


@dataclass(eq=False)
class Session:
    """One session-era session."""

    id: str
    state: ServerSession
    last_seen: float
    asks: ServerRequests
    inflight: Inflight
    jobs: dict[RequestId, Job] = field(default_factory=dict)
    streams: OrderedDict[str, Stream] = field(default_factory=OrderedDict)
    standalone: Stream = field(
        default_factory=lambda: Stream(STANDALONE_STREAM, deque(maxlen=STANDALONE_BUFFER))
    )
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    ended: bool = False

    @property
    def version(self) -> str:
        assert self.state.version is not None
        return self.state.version


def json_reply(
    req: Request,
    response: dict[str, Any],
    *,
    stateless: bool,
    headers: Sequence[tuple[str, str]] = (),
) -> list[bytes]:
    """Answer ``response`` as ``application/json``."""
    payload, status = encoded(response, stateless)
    return req.reply(status, payload, headers)


def encoded(response: dict[str, Any], stateless: bool) -> tuple[bytes, int]:
    """A response's JSON and its HTTP status (the stateless era's error statuses)."""
    payload, sent = response_bytes(response, jsonrpc.encode)
    return payload, rules.stateless_status(sent) if stateless else 200


class Workers:
    """The jobs of one HTTP server, under its lock; ``closing()`` says the server is closing."""

    def __init__(
        self,
        runtime: Runtime,
        lock: threading.Lock,
        bridge: Bridge,
        streams: Streams,
        closing: Callable[[], bool],
        *,
        max_concurrency: int,
        server_request_timeout: float,
    ) -> None:
        self.runtime = runtime
        self._lock = lock
        self._bridge = bridge
        self._streams = streams
        self._closing = closing
        self._ask_timeout = server_request_timeout
        self._server_ids = itertools.count(1)
        self.table = JobTable(lock, max_concurrency, self._finished)
        #: Set on the hub while the server shuts down: the last job to finish sets it.
        self.idle_event: Any = None
        #: The Peer of every stateless-era request (no session; a registration reaches the
        #: current worker's job).
        self.stateless_peer = Peer("http", inflight=Inflight(self.table))

    def new_session(self, sid: str, state: ServerSession) -> Session:
        """A session whose server requests fail once it ended or the server closes."""
        holder: list[Session] = []
        asks = ServerRequests(
            self._lock,
            self._server_ids,
            timeout=self._ask_timeout,
            closed_message="Connection closed: the session has ended",
            refused=lambda: self._closing() or holder[0].ended,
        )
        session = Session(sid, state, time.monotonic(), asks, Inflight(self.table))
        holder.append(session)
        return session

    def start(
        self, request: jsonrpc.Request, message: dict[str, Any], session: Session | None
    ) -> HttpJob | Refusal:
        """Start a worker for ``request``; or the reply refusing it (busy, closing)."""
        with self._lock:
            if self._closing() or (session is not None and session.ended):
                refusal = McpError(INTERNAL_ERROR, "Server shutting down")
                return lambda req: req.error(503, request.id, refusal)
            key = None if session is None else str(next(session.counter))
            stream = Stream(key, deque(maxlen=EVENT_BUFFER), rid=request.id)
            job = HttpJob(
                request.id,
                request.method,
                None if session is None else session.jobs,
                stream=stream,
                session=session,
            )
            admitted = self.table.admit(job)
            if admitted and session is not None:
                assert key is not None
                session.streams[key] = stream
                trim_streams(session.streams)
        if admitted:
            if session is None:
                peer = self.stateless_peer
            else:
                peer = Peer(
                    "http",
                    session=session.state,
                    server_request=partial(self._server_request, job),
                    inflight=session.inflight,
                )
            work = partial(self._work, peer, message)
            if self.table.spawn(job, work, f"snodo-http-{request.id}"):
                return job
        busy = McpError(INTERNAL_ERROR, "Server busy")
        return lambda req: req.error(503, request.id, busy, (("Retry-After", "1"),))

    def _work(self, peer: Peer, message: dict[str, Any], job: Job) -> None:
        assert isinstance(job, HttpJob)
        response = self.dispatch(message, peer, job)
        self.table.release_slot(job)
        if job.cancelled:
            _log.debug("suppressed the response to a cancelled request", id=job.id)
            self._streams.end(job.stream, 200, None)
        else:
            payload, status = encoded(response, job.session is None)
            self._streams.push(job.stream, payload, final=True, status=status)

    def _finished(self, job: Job, running: int) -> None:  # under the lock
        assert isinstance(job, HttpJob)
        if job.session is not None:
            job.session.last_seen = time.monotonic()
        if running == 0 and self.idle_event is not None and self._closing():
            self._bridge.call(self.idle_event.set)

    def dispatch(
        self, message: dict[str, Any], peer: Peer, job: HttpJob | None = None
    ) -> dict[str, Any]:
        """Serve one request (on the hub, or on ``job``'s worker); its response."""
        progress = notify = None
        if job is not None:
            progress = partial(self._notification, job, "notifications/progress")
            notify = partial(self._notification, job)
        try:
            response = dispatch(self.runtime, message, peer, progress=progress, notify=notify)
        except (Exception, SystemExit) as exc:  # dispatch answers client errors itself
            _log.exception("dispatch failed", method=message.get("method"))
            response = jsonrpc.error_response(
                message.get("id"), McpError(INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")
            )
        assert response is not None  # only requests are dispatched here
        return response

    def _notification(self, job: HttpJob, method: str, params: dict[str, Any]) -> None:
        """Progress or a log message about ``job``, on its response stream."""
        payload = notification_bytes(job, method, params, jsonrpc.encode)
        if payload is not None and not self._streams.push(job.stream, payload):
            raise connection_error("Connection closed: the response stream has ended")

    def _send(self, job: HttpJob, message: dict[str, Any]) -> None:
        """A server request (or its cancellation) on ``job``'s response stream."""
        if not self._streams.push(job.stream, jsonrpc.encode(message)):
            raise connection_error("Connection closed: the response stream has ended")

    def _server_request(self, job: HttpJob, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert job.session is not None
        return job.session.asks.ask(job, method, params, partial(self._send, job))

    def cancel(self, job: Job) -> None:
        """Mark ``job`` cancelled: its Context sees ``cancelled``, the server requests it waits
        on fail (and the client is told), its progress stops."""
        assert isinstance(job, HttpJob)
        if self.table.cancel(job) and job.session is not None:
            job.session.asks.fail_job(job, partial(self._send, job))

    def cancel_all(self, error: McpError) -> None:
        """Shutdown: cancel every job and end its stream (answered 503 with ``error``)."""
        with self._lock:
            jobs = list(self.table.jobs)
        for job in jobs:
            assert isinstance(job, HttpJob)
            self.cancel(job)
            self._streams.end(job.stream, 503, error)
