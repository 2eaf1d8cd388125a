"""A tiny raw MCP Streamable HTTP server for benchmarks/http.py: one tool, echo(text) -> text.

    python benchmarks/_http_echo_server.py [PORT]      # 0 (the default): the OS chooses

Stdlib only: ``http.server.ThreadingHTTPServer`` on 127.0.0.1, HTTP/1.1 keep-alive, one thread
per connection. It prints ``PORT <port>`` on stdout once it listens. Every POST to any path is
one JSON-RPC message answered with one JSON body (never an event stream):

* ``initialize`` (the client's version when it is an initialize-era one, and an
  ``Mcp-Session-Id``), ``ping``, ``tools/list``, ``tools/call`` (echo) and ``server/discover``
  (2026-07-28) are answered; anything else is -32601.
* A notification or a response is answered ``202 Accepted`` with no body.
* ``DELETE`` (ending a session) is ``200``; ``GET`` (the optional server stream) is ``405``.

Two details keep it fast. Every accepted socket gets ``TCP_NODELAY``, and each response (head and
body) goes out in one write: the stdlib server sets no TCP_NODELAY and writes the head and the body
separately, which on a reused connection meets the client's delayed ACK and stalls every response
about 40 ms (the Nagle trap in the research notes, section 4E). Nothing is logged per request.
The leading underscore keeps benchmarks/run_all from running it as a benchmark.
"""

from __future__ import annotations

import json
import socket
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HANDSHAKE = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MODERN = "2026-07-28"
ENVELOPE = "io.modelcontextprotocol/protocolVersion"
CACHEABLE = ("tools/list", "server/discover")
INFO = {"name": "bench-http-echo", "version": "1.0"}
TOOL = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}
MAX_BODY = 4 * 1024 * 1024


def answer(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "tools/call":
        return {"content": [{"type": "text", "text": params["arguments"]["text"]}]}
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in HANDSHAKE else HANDSHAKE[0]
        return {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": INFO}
    if method == "server/discover":
        return {
            "supportedVersions": [MODERN],
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": INFO},
        }
    if method == "ping":
        return {}
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def setup(self) -> None:
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # nothing per request

    def _send(self, status: str, body: bytes = b"", extra: str = "") -> None:
        """Head and body in one write (see the module docstring)."""
        head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{extra}"
        if body:
            head += "Content-Type: application/json\r\n"
        self.wfile.write(head.encode("latin-1") + b"\r\n" + body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY:
            self._send("400 Bad Request")
            self.close_connection = True
            return
        try:
            message = json.loads(self.rfile.read(length))
        except ValueError:
            self._send("400 Bad Request")
            return
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            self._send("202 Accepted")  # a notification or a response: nothing to answer
            return
        params = message.get("params") or {}
        method = message["method"]
        result = answer(method, params)
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        extra = ""
        if result is None:
            reply["error"] = {"code": -32601, "message": "Method not found"}
        else:
            if ENVELOPE in (params.get("_meta") or {}):  # a 2026-07-28 request
                result["resultType"] = "complete"
                if method in CACHEABLE:
                    result.update(cacheScope="private", ttlMs=0)
            elif method == "initialize":
                extra = f"Mcp-Session-Id: {uuid.uuid4().hex}\r\n"
            reply["result"] = result
        self._send("200 OK", json.dumps(reply).encode(), extra)

    def do_DELETE(self) -> None:
        self._send("200 OK")

    def do_GET(self) -> None:
        self._send("405 Method Not Allowed", extra="Allow: POST, DELETE\r\n")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    with Server(("127.0.0.1", port), Handler) as server:
        print(f"PORT {server.server_address[1]}", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
