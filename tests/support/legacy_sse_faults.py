"""A scripted HTTP+SSE (2024-11-05) server on ``FaultServer`` for the transport's fault tests:
``GET /sse`` opens the stream and sends the endpoint event (``endpoint`` chooses what it
says), every POST is answered 202 and its response, by the ``McpResponder``, is put on the
stream; ``hold`` names tools/call tools that are never answered."""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.support.http_fault_server import (
    Exchange,
    FaultServer,
    McpResponder,
    Request,
    event,
)

LEGACY = "2024-11-05"


class LegacySse:
    """The scripted stream and endpoint of one FaultServer (one stream open at a time)."""

    def __init__(self, server: FaultServer) -> None:
        self.server = server
        self.url = f"http://127.0.0.1:{server.port}/sse"
        self.endpoint: Callable[[LegacySse], str] = lambda _: (
            "/messages?sessionId=s3cr3t-0123456789abcdef"
        )
        self.outbox: queue.Queue[bytes | None] = queue.Queue(maxsize=1000)
        self.hold: set[str] = set()
        self.before_endpoint: bytes = b""
        self.responder = McpResponder((LEGACY,))
        self.authorize: Callable[[Request], bool] = lambda _: True
        server.always(lambda r: r.method == "GET" and r.target.startswith("/sse"), self._stream)
        server.always(lambda r: r.method == "POST" and r.target.startswith("/messages"), self._post)

    def posts(self, method: str | None = None) -> list[Request]:
        return self.server.received(
            lambda r: r.method == "POST" and (method is None or r.rpc == method)
        )

    def _unauthorized(self, request: Request, ex: Exchange) -> bool:
        if self.authorize(request):
            return False
        ex.respond(401, b"", [("WWW-Authenticate", 'Bearer error="invalid_token"')])
        return True

    def _stream(self, request: Request, ex: Exchange) -> None:
        if self._unauthorized(request, ex):
            return
        ex.keep_alive = False
        ex.start_chunked()
        if self.before_endpoint:
            ex.chunk(self.before_endpoint)
        ex.chunk(b"event: endpoint\ndata: " + self.endpoint(self).encode() + b"\n\n")
        while not ex.server.stopping.is_set():
            try:
                item = self.outbox.get(timeout=0.02)
            except queue.Empty:
                if ex.wait_client_gone(0.02):
                    return
                continue
            if item is None:  # drop the stream
                return
            if not ex.chunk(item):
                return

    def _post(self, request: Request, ex: Exchange) -> None:
        if self._unauthorized(request, ex):
            return
        ex.accepted()
        message = request.message
        if request.kind != "request":
            return
        if request.rpc == "tools/call" and message["params"]["name"] in self.hold:
            return
        self.outbox.put(event(self.responder.response_for(request), name="message"))


@contextmanager
def legacy_sse_server() -> Iterator[LegacySse]:
    server = FaultServer()
    try:
        yield LegacySse(server)
    finally:
        server.close()
    assert not server.failures, server.failures


__all__ = ["LEGACY", "LegacySse", "legacy_sse_server"]
