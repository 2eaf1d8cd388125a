"""The HTTP server's stateless era (2026-07-28): one POST per request.

The headers must mirror the body (:func:`snodo.protocol.serving.http_rules.check_stateless_request`):
``MCP-Protocol-Version`` = ``_meta`` protocol version, ``Mcp-Method`` = method, ``Mcp-Name`` =
tool/prompt name or resource URI (``=?base64?...?=`` decoded), ``Mcp-Param-<Name>`` = each
``x-mcp-header`` argument; a failure is HTTP 400 with -32020. A request that runs user code
runs on a worker and is answered from its response stream; closing that stream before the
response is the cancellation. ``subscriptions/listen`` answers with an event stream of its own
(the acknowledgement, then the events) until the client closes it or the server ends it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any

from snodo.log import get_logger
from snodo.protocol import jsonrpc
from snodo.protocol.errors import HEADER_MISMATCH, INTERNAL_ERROR, McpError, connection_error
from snodo.protocol.serving import http_rules as rules
from snodo.protocol.serving.selection import unsupported_version
from snodo.server.context import Peer
from snodo.server.dispatcher import dispatch
from snodo.server.http_streams import Stream, Streams
from snodo.server.http_workers import INLINE_METHODS, HttpJob, Workers, json_reply
from snodo.server.runtime import Runtime
from snodo.server.subscriptions import ServerSubscription
from snodo.server.wsgi import Request

__all__ = ["StatelessEra"]

_log = get_logger("snodo.server.http_server")


class StatelessEra:
    """The stateless era of one HTTP server, under its lock.

    ``listen_backlog`` bounds the events queued for a listen stream whose client does not keep
    up; beyond it the stream ends (without its result: the client sees an abrupt end and may
    listen again).
    """

    def __init__(
        self,
        runtime: Runtime,
        lock: threading.Lock,
        streams: Streams,
        workers: Workers,
        *,
        listen_backlog: int,
    ) -> None:
        self._runtime = runtime
        self._lock = lock
        self._streams = streams
        self._workers = workers
        self._listen_backlog = listen_backlog
        #: The open listen streams (the server finishes them when it closes).
        self.listening: set[ServerSubscription] = set()

    def notification(self, req: Request, note: jsonrpc.Notification) -> list[bytes]:
        """A notification: checked against its headers, then accepted (202)."""
        version = req.header(rules.H_PROTOCOL_VERSION)
        if version is None:
            return req.error(
                400,
                None,
                McpError(HEADER_MISMATCH, "Header mismatch: Missing MCP-Protocol-Version header"),
            )
        runtime = self._runtime
        if version not in runtime.stateless_dialects:
            return req.error(
                400,
                None,
                unsupported_version(version, runtime.session_dialects, runtime.enabled_versions),
            )
        named = req.header(rules.H_METHOD)
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
        # The stateless era defines no client notification over HTTP (closing the response
        # stream is the cancellation), so an accepted notification changes nothing.
        return req.reply(202)

    def request(
        self, req: Request, request: jsonrpc.Request, message: dict[str, Any]
    ) -> Iterable[bytes]:
        params = request.params
        schema: Any = None
        if request.method == "tools/call" and params is not None:
            name = params.get("name")
            tool = self._runtime.catalog.tools.get(name) if type(name) is str else None
            if tool is not None:
                schema = tool.definition.get("inputSchema")
        problem = rules.check_stateless_request(request.method, params, req.headers, schema)
        if problem is not None:
            return req.error(400, request.id, problem)
        if request.method == "subscriptions/listen":
            return self._listen(req, message)
        if request.method in INLINE_METHODS:
            response = self._workers.dispatch(message, self._workers.stateless_peer)
            return json_reply(req, response, stateless=True)
        job = self._workers.start(request, message, None)
        if not isinstance(job, HttpJob):
            return job(req)
        return self._streams.respond(req, job.stream, on_close=partial(self._closed, job))

    def _closed(self, job: HttpJob, finished: bool) -> None:
        """The answer of a stateless-era job ended: closing it first is the cancellation."""
        if not finished:
            self._workers.cancel(job)

    def _listen(self, req: Request, message: dict[str, Any]) -> Iterable[bytes]:
        """``subscriptions/listen``: its response is an event stream of its own (the
        acknowledgement, then the events) until the client closes it or the server ends it."""
        taken: list[ServerSubscription] = []
        try:
            response = dispatch(self._runtime, message, Peer("http", listen=taken.append))
        except (Exception, SystemExit) as exc:
            _log.exception("dispatch failed", method="subscriptions/listen")
            response = jsonrpc.error_response(
                message.get("id"), McpError(INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")
            )
        if not taken:
            assert response is not None
            return json_reply(req, response, stateless=True)
        sub = taken[0]
        stream = Stream(None, deque(), rid=sub.id)

        def emit(note: dict[str, Any]) -> None:
            with self._lock:
                full = len(stream.events) >= self._listen_backlog
            if full:  # the client stopped reading: end the stream rather than lose events
                _log.warning("a listen stream's backlog is full; ending it", id=sub.id)
                self._streams.end(stream, 200, None)
            if full or not self._streams.push(stream, jsonrpc.encode(note), final="id" in note):
                raise connection_error("Connection closed: the subscription stream has ended")

        with self._lock:
            self.listening.add(sub)
        sub.start(emit)
        return self._listen_stream(req, stream, sub)

    def _listen_stream(
        self, req: Request, stream: Stream, sub: ServerSubscription
    ) -> Iterator[bytes]:
        try:
            yield from self._streams.respond(req, stream, defer=False)
        finally:
            sub.close()  # the client closed the connection: that is the cancellation
            with self._lock:
                self.listening.discard(sub)
