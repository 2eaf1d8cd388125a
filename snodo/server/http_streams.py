"""The HTTP server's response streams: the events of one request (or of a session's standalone
GET stream), the consumer attached to them, and how they are answered.

A worker pushes events (progress, server requests, the response) onto a :class:`Stream`; the
request's HTTP answer (:meth:`Streams.respond`, on the hub) takes them. The answer is JSON
when the response is the first event, else an SSE stream that ends with the response, with
``: keep-alive`` comments while it is quiet. Session-era streams keep their events (bounded)
for ``Last-Event-ID`` replay: a consumer that goes away is not a cancellation, and a later GET
resumes where it stopped. Stateless-era streams keep nothing once it is taken.
"""

from __future__ import annotations

import sys
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import gevent.event

from snodo.log import get_logger
from snodo.protocol.errors import INTERNAL_ERROR, McpError
from snodo.protocol.serving.event_stream import KEEPALIVE, event_id, priming_event, sse_event
from snodo.server.wsgi import SSE_HEADERS, Bridge, DisconnectWatch, Request, error_body, status_line

__all__ = ["EVENT_BUFFER", "FINISHED_STREAMS_KEPT", "Stream", "Streams", "trim_streams"]

#: Events kept per response stream for ``Last-Event-ID`` replay (oldest dropped first).
EVENT_BUFFER: Final = 1000
#: Finished response streams a session keeps for replay.
FINISHED_STREAMS_KEPT: Final = 16

_log = get_logger("snodo.server.http_server")


@dataclass(eq=False)
class Stream:
    """The events of one response stream (or a session's standalone stream), kept for the
    consumer attached to it now and, in the session era, for ``Last-Event-ID`` replay."""

    key: str | None  # event-id prefix; None in the stateless era (no ids, no resumption)
    events: deque[tuple[int, bytes]]
    rid: str | int | None = None
    next_n: int = 1
    delivered: int = 0
    final: bool = False  # the JSON-RPC response is the last event
    final_status: int = 200
    ended: bool = False  # ended without a response
    end_status: int = 503
    end_error: McpError | None = None  # told to a consumer that has not started its answer
    owner: object | None = None  # the attached consumer
    waker: Any = None  # its gevent Event (hub-only; set through the bridge)

    @property
    def over(self) -> bool:
        """True once the response was pushed or the stream was ended."""
        return self.final or self.ended


def trim_streams(streams: OrderedDict[str, Stream]) -> None:
    """Forget the oldest finished streams beyond ``FINISHED_STREAMS_KEPT`` (under the lock)."""
    done = [k for k, s in streams.items() if s.over and s.owner is None]
    for key in done[: max(0, len(done) - FINISHED_STREAMS_KEPT)]:
        del streams[key]


class Streams:
    """Pushing to streams (any thread) and answering from them (the hub), under the server's
    lock; a consumer is woken through the bridge."""

    def __init__(self, lock: Any, bridge: Bridge, keepalive: float) -> None:
        self._lock = lock
        self._bridge = bridge
        self._keepalive = keepalive
        #: The hub's loop (set once the server runs), for the disconnect watch.
        self.loop: Any = None

    def push(
        self, stream: Stream, payload: bytes, *, final: bool = False, status: int = 200
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

    def end(self, stream: Stream, status: int, error: McpError | None) -> None:
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

    def respond(
        self,
        req: Request,
        stream: Stream,
        *,
        cursor: int = 0,
        defer: bool = True,
        prime: bool = False,
        retry_ms: int | None = None,
        poll: bool = False,
        on_close: Callable[[bool], None] | None = None,
    ) -> Iterator[bytes]:
        """Answer from ``stream``: JSON when the response comes before anything else (``defer``),
        else an SSE stream of every event after ``cursor``, ending with the response.

        ``prime`` opens the stream with a priming event (``retry_ms`` in it); ``poll`` then
        closes it at once (SSE polling: the client resumes with GET). ``on_close(finished)`` is
        called when the answer ends; ``finished`` is False when the client went away first.
        """
        waker = gevent.event.Event()
        token = object()
        with self._lock:
            previous = stream.waker
            stream.owner = token
            stream.waker = waker
        if previous is not None:
            previous.set()  # the consumer it replaces ends
        watch = DisconnectWatch(req.environ.get("snodo.socket"), waker, self.loop)
        key = stream.key
        committed = False
        finished = False

        def commit() -> bytes:
            req.start_response(status_line(200), list(SSE_HEADERS))
            if prime and key is not None:
                return priming_event(event_id(key, cursor), retry_ms)
            return b""

        try:
            if not defer:
                committed = True
                # Something must be written for the status and headers to go out at once.
                yield commit() or KEEPALIVE
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
                            yield _whole(req, final_status, batch[0][1])
                            return
                        committed = True
                        head = commit()
                        if head:
                            yield head
                    cursor = batch[-1][0]
                    yield b"".join(
                        sse_event(data, None if key is None else event_id(key, n))
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
                    yield _whole(req, end_status, error_body(stream.rid, end_error))
                    return
                if not waker.wait(self._keepalive):
                    if committed:
                        yield KEEPALIVE
                    else:
                        committed = True
                        yield commit() or KEEPALIVE
        except Exception:
            _log.exception("streaming a response failed", stream=key)
            if not committed:
                body = error_body(stream.rid, McpError(INTERNAL_ERROR, "Internal error"))
                req.start_response(
                    status_line(500),
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
            if on_close is not None:
                on_close(finished)


def _whole(req: Request, status: int, body: bytes) -> bytes:
    """Start a whole JSON answer (no ``Connection: close``: the body was read) and return it."""
    req.start_response(
        status_line(status),
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return body
