"""A listen stream over TLS: the listen connection (its own pool, small read buffer) verifies the
server like every other request. A tiny TLS server answers listen with a close-delimited event
stream: the acknowledgement, one event, the listen result."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import snodo
from tests.test_transport_http_tls import certs  # noqa: F401 - the fixture

KEY = "io.modelcontextprotocol/subscriptionId"


class _Listen(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        rid = body["id"]
        messages = [
            {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {"notifications": {"toolsListChanged": True}, "_meta": {KEY: rid}},
            },
            {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": {"_meta": {KEY: rid}},
            },
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {"resultType": "complete", "_meta": {KEY: rid}},
            },
        ]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for message in messages:
            self.wfile.write(f"data: {json.dumps(message)}\n\n".encode())
            self.wfile.flush()


@pytest.fixture
def tls_listen_url(certs: Path) -> Iterator[str]:  # noqa: F811
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "server.pem", certs / "server.key")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Listen)
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


def test_listen_over_tls(tls_listen_url: str, certs: Path) -> None:  # noqa: F811
    with snodo.connect(snodo.Http(tls_listen_url), protocol="2026-07-28") as untrusting:
        with pytest.raises(snodo.McpError) as caught:
            untrusting.listen({"toolsListChanged": True})
        assert caught.value.code == -32000
    with snodo.connect(
        snodo.Http(tls_listen_url), protocol="2026-07-28", ca_certs=str(certs / "ca.pem")
    ) as client:
        sub = client.listen({"toolsListChanged": True})
        assert sub.accepted == {"toolsListChanged": True}
        first, last = list(sub)
        assert isinstance(first, snodo.Notification)
        assert first.method == "notifications/tools/list_changed"
        assert last == snodo.Closed(None)
