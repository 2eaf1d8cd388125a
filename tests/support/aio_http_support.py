"""Helpers for the asyncio Streamable HTTP requester tests (tests/test_aio_http.py): request
messages as the client builds them, an event loop of each kind, and a TLS echo endpoint."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import ssl
import sys
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from pathlib import Path
from typing import Any, TypeVar

import snodo
from snodo.aio.seam import AsyncCallbacks
from snodo.aio.streamable_http import AsyncHttp
from snodo.protocol import jsonrpc
from snodo.protocol.exchange import progress_token
from snodo.protocol.meta import build_params
from snodo.transports.base import RequestOptions
from snodo.transports.streamable_http import HttpTransport

__all__ = [
    "LOOPS",
    "NO_CALLBACKS",
    "Wrapped",
    "call",
    "message",
    "run",
    "tls_echo",
    "wrap",
]

_T = TypeVar("_T")
_ids = count(10_000)


def _greened() -> bool:
    """True under gevent's monkey-patching (tests/gevent_pytest.py)."""
    if "gevent" not in sys.modules:
        return False
    from gevent import monkey

    return bool(monkey.is_module_patched("threading"))


#: The event loops the tests run on: the default one, and uvloop when it is installed (not
#: under gevent: uvloop's loop never yields to gevent's hub, where the test servers run).
LOOPS = ["asyncio", *(["uvloop"] if importlib.util.find_spec("uvloop") and not _greened() else [])]
NO_CALLBACKS = AsyncCallbacks()


def run(loop: str, coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to its end on a new loop of kind ``loop``."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coro)  # type: ignore[no-any-return]
    return asyncio.run(coro)


def message(
    client: snodo.Client,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    progress: bool = False,
    request_id: int | None = None,
) -> dict[str, Any]:
    """A request as the client sends it on its dialect (the 2026-07-28 envelope included);
    ``progress`` asks for progress with the request's id as token."""
    rid = next(_ids) if request_id is None else request_id
    return jsonrpc.request(
        rid,
        method,
        build_params(
            client.dialect,
            params,
            client_info={"name": "aio-http-test", "version": "1.0"},
            client_capabilities={"elicitation": {}, "sampling": {}},
            progress_token=progress_token(rid) if progress else None,
        ),
    )


def call(client: snodo.Client, tool: str, arguments: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """A tools/call message."""
    return message(client, "tools/call", {"name": tool, "arguments": arguments}, **kw)


class Wrapped:
    """A connected sync client and the requester wrapped around its transport."""

    def __init__(self, client: snodo.Client) -> None:
        self.client = client
        transport = client.transport
        assert isinstance(transport, HttpTransport)
        self.transport = transport
        self.requester = AsyncHttp(transport)

    def options(self, **kw: Any) -> RequestOptions:
        kw.setdefault("timeout", 10.0)
        return RequestOptions(dialect=self.client.dialect, **kw)

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        callbacks: AsyncCallbacks = NO_CALLBACKS,
        *,
        progress: bool = False,
        **options: Any,
    ) -> dict[str, Any]:
        """tools/call through the requester; the response dict."""
        return await self.requester.request(
            call(self.client, tool, arguments, progress=progress),
            self.options(**options),
            callbacks,
        )


@contextmanager
def wrap(url: str, version: str, **connect_options: Any) -> Iterator[Wrapped]:
    """``snodo.connect(snodo.Http(url), protocol=version)`` wrapped; the client closed after."""
    connect_options.setdefault("timeout", 10.0)
    client = snodo.connect(snodo.Http(url), protocol=version, **connect_options)
    try:
        yield Wrapped(client)
    finally:
        client.close()


class _TlsEcho(BaseHTTPRequestHandler):
    """A 2026-07-28 endpoint that echoes tools/call's text (JSON answers)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in body:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        text = ((body.get("params") or {}).get("arguments") or {}).get("text", "tls ok")
        result: dict[str, Any] = {"resultType": "complete"}
        if body["method"] == "server/discover":
            result.update(
                supportedVersions=["2026-07-28"],
                capabilities={"tools": {}},
                serverInfo={"name": "tls-echo", "version": "1.0"},
            )
        else:
            result["content"] = [{"type": "text", "text": text}]
        data = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def tls_echo(certs: Path) -> Iterator[str]:
    """A TLS endpoint on 127.0.0.1 with the test CA's server certificate; its URL."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "server.pem", certs / "server.key")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _TlsEcho)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5.0)
