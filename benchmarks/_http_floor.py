"""The CPython floor for one Streamable HTTP ``tools/call`` round trip: no library, stdlib only.

    python benchmarks/_http_floor.py URL [--calls 2000] [--version 2025-11-25|2026-07-28]

A raw keep-alive socket (``TCP_NODELAY``; on Linux blocking, its waits bounded by the kernel's
``SO_RCVTIMEO``/``SO_SNDTIMEO``, as snodo's wire does: no ``poll`` before each ``send`` and
``recv``) per caller. Per call: ``json.dumps`` of the request with a fresh id, the request head
built as snodo builds it for the version (read from its wire with a tee: ``Host``, ``Accept``,
``Accept-Encoding``, ``MCP-Protocol-Version``, then ``Mcp-Session-Id`` on 2025-11-25 or
``Mcp-Method``/``Mcp-Name`` on 2026-07-28, ``Content-Type``, ``Content-Length``), head and body in
one ``sendall``, ``recv`` up to the end of the head, the status and ``Content-Length`` read from
it, the body, ``json.loads`` and a check of the id and the text. 2025-11-25 opens a session first
(``initialize``, ``notifications/initialized``) and ends it with ``DELETE``; 2026-07-28 has no
handshake and every body carries the ``_meta`` envelope. So the server
(``benchmarks/_http_echo_server.py``) does the same work as for snodo. Shapes:
sequential on one connection; N threads, each with its own keep-alive connection.

``benchmarks/streamable_http.py`` imports :func:`rates` for its floor rows (each in its own
worker process). The leading underscore keeps benchmarks/run_all from running it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import socket
import struct
import sys
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from _common import cpu_seconds

TEXT = "hi"
STATELESS = "2026-07-28"
CLIENT_INFO = {"name": "floor", "version": "0.1.0"}
#: what snodo puts in every 2026-07-28 request's params
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
}
DEADLINE = 30.0  # seconds any one reply may take
READ_SIZE = 65536


class Connection:
    """One keep-alive HTTP/1.1 connection to the server, requests one at a time."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=DEADLINE)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if hasattr(socket, "SO_RCVTIMEO") and sys.platform == "linux":
            # As snodo's wire does on Linux: a blocking socket whose waits the kernel bounds,
            # so no poll() before each send and recv (each would hand the GIL over once more).
            self.sock.settimeout(None)
            bound = struct.pack("@ll", int(DEADLINE), 0)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, bound)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, bound)
        self.pending = b""

    def exchange(self, head: bytes, body: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
        """Send one request; (status, the response's fields lower-cased, body)."""
        self.sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        recv, pending = self.sock.recv, self.pending
        while True:
            end = pending.find(b"\r\n\r\n")
            if end >= 0:
                break
            chunk = recv(READ_SIZE)
            if not chunk:
                raise EOFError("the server closed the connection")
            pending += chunk
        lines = pending[:end].split(b"\r\n")
        pending = pending[end + 4 :]
        status = int(lines[0].split(b" ", 2)[1])
        fields: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip()
        length = int(fields.get(b"content-length", b"0"))
        while len(pending) < length:
            chunk = recv(READ_SIZE)
            if not chunk:
                raise EOFError("the server closed the connection")
            pending += chunk
        self.pending = pending[length:]
        return status, fields, pending[:length]

    def close(self) -> None:
        self.sock.close()


class Floor:
    """The bare client side of one server: the request heads for the version, the ids."""

    def __init__(self, url: str, version: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None, url
        self.host, self.port = parts.hostname, parts.port
        self.version = version
        self.path = parts.path or "/"
        self.ids = itertools.count(1)
        self.base = (
            f"POST {self.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            "Accept: application/json, text/event-stream\r\nAccept-Encoding: identity\r\n"
        )
        self.params: dict[str, Any] = {"name": "echo", "arguments": {"text": TEXT}}
        self.session: str | None = None
        first = self.connect()
        if version == STATELESS:
            self.params["_meta"] = ENVELOPE
            self.call_head = (
                f"{self.base}MCP-Protocol-Version: {STATELESS}\r\n"
                "Mcp-Method: tools/call\r\nMcp-Name: echo\r\n"
                "Content-Type: application/json\r\n"
            ).encode("latin-1")
            self.negotiated = version
        else:
            init = {
                "jsonrpc": "2.0",
                "id": next(self.ids),
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": CLIENT_INFO,
                },
            }
            head = f"{self.base}Content-Type: application/json\r\n".encode("latin-1")
            status, fields, body = first.exchange(
                head, json.dumps(init, separators=(",", ":")).encode()
            )
            assert status == 200, (status, body)
            self.negotiated = json.loads(body)["result"]["protocolVersion"]
            self.session = fields[b"mcp-session-id"].decode("latin-1")
            self.call_head = (
                f"{self.base}MCP-Protocol-Version: {self.negotiated}\r\n"
                f"Mcp-Session-Id: {self.session}\r\nContent-Type: application/json\r\n"
            ).encode("latin-1")
            note = json.dumps(
                {"jsonrpc": "2.0", "method": "notifications/initialized"}, separators=(",", ":")
            )
            status, _, _ = first.exchange(self.call_head, note.encode())
            assert status == 202, status
        self.first = first

    def connect(self) -> Connection:
        return Connection(self.host, self.port)

    def call(self, connection: Connection) -> dict[str, Any]:
        """One round trip on ``connection``: encode, send, read, decode, check."""
        call_id = next(self.ids)
        message = {"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": self.params}
        body = json.dumps(message, separators=(",", ":")).encode()
        status, _, answer = connection.exchange(self.call_head, body)
        assert status == 200, (status, answer)
        reply = json.loads(answer)
        assert reply["id"] == call_id, reply
        result: dict[str, Any] = reply["result"]
        assert result["content"][0]["text"] == TEXT, result
        return result

    def close(self) -> None:
        if self.session is not None:  # end the session, as snodo does at close
            head = (
                f"DELETE {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Mcp-Session-Id: {self.session}\r\nMCP-Protocol-Version: {self.negotiated}\r\n"
            ).encode("latin-1")
            self.first.exchange(head, b"")
        self.first.close()


def concurrent(floor: Floor, callers: int, share: int) -> tuple[float, float]:
    """``callers`` threads, each on its own connection making ``share`` calls: (s, CPU s)."""
    connections = [floor.connect() for _ in range(callers)]
    gate = threading.Barrier(callers + 1)
    failures: list[BaseException] = []

    def caller(connection: Connection) -> None:
        gate.wait()
        try:
            for _ in range(share):
                floor.call(connection)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=caller, args=(c,)) for c in connections]
    for thread in threads:
        thread.start()
    gate.wait()
    cpu, started = cpu_seconds(), time.perf_counter()
    for thread in threads:
        thread.join()
    seconds, used = time.perf_counter() - started, cpu_seconds() - cpu
    for connection in connections:
        connection.close()
    if failures:
        raise failures[0]
    return seconds, used


def rates(
    url: str, version: str, calls: int, concurrent_calls: int, warmup: int, callers: int
) -> dict[str, Any]:
    """The floor in the shape of benchmarks/streamable_http.py's workers."""
    floor = Floor(url, version)
    try:
        floor.call(floor.first)
        for _ in range(warmup):
            floor.call(floor.first)
        cpu, started = cpu_seconds(), time.perf_counter()
        for _ in range(calls):
            floor.call(floor.first)
        seq_seconds, seq_cpu = time.perf_counter() - started, cpu_seconds() - cpu
        share = concurrent_calls // callers
        conc_seconds, conc_cpu = concurrent(floor, callers, share)
    finally:
        floor.close()
    return {
        "seq_seconds": seq_seconds,
        "seq_cpu": seq_cpu,
        "conc_seconds": conc_seconds,
        "conc_calls": share * callers,
        "conc_cpu": conc_cpu,
        "negotiated": floor.negotiated,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="e.g. http://127.0.0.1:PORT/mcp (_http_echo_server.py)")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--version", default="2025-11-25", choices=["2025-11-25", STATELESS])
    args = parser.parse_args()
    got = rates(args.url, args.version, args.calls, args.calls, 50, 16)
    print(f"{args.version}, {args.calls} calls each")
    print(f"sequential, one connection:   {args.calls / got['seq_seconds']:,.0f} round trips/s")
    print(
        f"16 threads, 16 connections:   {got['conc_calls'] / got['conc_seconds']:,.0f} "
        "round trips/s"
    )


if __name__ == "__main__":
    main()
