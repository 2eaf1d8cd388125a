"""A tiny raw MCP Streamable HTTP server for benchmarks/streamable_http.py: one echo tool.

    python benchmarks/_http_echo_server.py [PORT]      # 0 (the default): the OS chooses

Stdlib only: ``socketserver.ThreadingTCPServer`` on 127.0.0.1 with just enough HTTP/1.1 for these
clients (a request head, a ``Content-Length`` body, keep-alive), one thread per connection; the
stdlib's ``http.server`` parses every head with the ``email`` package, which costs about three
times as much per request. It prints ``PORT <port>`` on stdout once it listens. Every POST to
any path is one JSON-RPC message answered with one JSON body (never an event stream):

* ``initialize`` (the client's version when it is a session-era one, and an
  ``Mcp-Session-Id``), ``ping``, ``tools/list``, ``tools/call`` (echo) and ``server/discover``
  (2026-07-28) are answered; anything else is -32601.
* A notification or a response is answered ``202 Accepted`` with no body.
* ``DELETE`` (ending a session) is ``200``; ``GET`` (the optional server stream) is ``405``.

Every accepted socket gets ``TCP_NODELAY``, and each response (head and body) goes out in one
write: the stdlib server sets no TCP_NODELAY and writes the head and the body separately, which on
a reused connection meets the client's delayed ACK and stalls every response about 40 ms (the
Nagle trap in the research notes, section 4E). Nothing is logged per request.
The leading underscore keeps benchmarks/run_all from running it as a benchmark.
"""

from __future__ import annotations

import json
import socket
import socketserver
import sys
import uuid
from typing import Any

HANDSHAKE = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
STATELESS = "2026-07-28"
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
MAX_HEAD = 64 * 1024
READ_SIZE = 64 * 1024


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
            "supportedVersions": [STATELESS],
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": INFO},
        }
    if method == "ping":
        return {}
    return None


def respond(method: bytes, body: bytes) -> bytes:
    """The whole HTTP response (head and body) to one request."""
    if method == b"DELETE":
        return response("200 OK")
    if method != b"POST":
        return response("405 Method Not Allowed", extra="Allow: POST, DELETE\r\n")
    try:
        message = json.loads(body)
    except ValueError:
        return response("400 Bad Request")
    if not isinstance(message, dict) or "id" not in message or "method" not in message:
        return response("202 Accepted")  # a notification or a response: nothing to answer
    params = message.get("params") or {}
    name = message["method"]
    result = answer(name, params)
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
    extra = ""
    if result is None:
        reply["error"] = {"code": -32601, "message": "Method not found"}
    else:
        if ENVELOPE in (params.get("_meta") or {}):  # a 2026-07-28 request
            result["resultType"] = "complete"
            if name in CACHEABLE:
                result.update(cacheScope="private", ttlMs=0)
        elif name == "initialize":
            extra = f"Mcp-Session-Id: {uuid.uuid4().hex}\r\n"
        reply["result"] = result
    return response("200 OK", json.dumps(reply).encode(), extra)


def response(status: str, body: bytes = b"", extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{extra}"
    if body:
        head += "Content-Type: application/json\r\n"
    return head.encode("latin-1") + b"\r\n" + body


class Handler(socketserver.BaseRequestHandler):
    """One keep-alive connection: read a head and a Content-Length body, answer, repeat."""

    def handle(self) -> None:
        sock = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending = b""
        while True:
            while b"\r\n\r\n" not in pending:
                chunk = sock.recv(READ_SIZE)
                if not chunk or len(pending) > MAX_HEAD:
                    return
                pending += chunk
            head, pending = pending.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            method = lines[0].split(b" ", 1)[0]
            length, close = 0, False
            for line in lines[1:]:
                field, _, value = line.partition(b":")
                field = field.strip().lower()
                if field == b"content-length":
                    length = int(value)
                elif field == b"connection":
                    close = value.strip().lower() == b"close"
                elif field == b"transfer-encoding":  # no client here sends a chunked body
                    sock.sendall(response("501 Not Implemented", extra="Connection: close\r\n"))
                    return
            if not 0 <= length <= MAX_BODY:
                sock.sendall(response("413 Content Too Large", extra="Connection: close\r\n"))
                return
            while len(pending) < length:
                chunk = sock.recv(READ_SIZE)
                if not chunk:
                    return
                pending += chunk
            body, pending = pending[:length], pending[length:]
            sock.sendall(respond(method, body))  # head and body in one write
            if close:
                return


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    with Server(("127.0.0.1", port), Handler) as server:
        print(f"PORT {server.server_address[1]}", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
