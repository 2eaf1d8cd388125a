"""Writes junk before every response: lines that are not JSON, JSON that is not JSON-RPC, bad
envelopes (a request-shaped one carrying the pending request's id, response-shaped ones for
other ids), and responses to ids nobody asked for. The real
response always follows; a client must skip the rest."""

from __future__ import annotations

import json
from typing import Any

from scripted_lib import Server, main


def junk(server: Server, request_id: Any) -> None:
    wrong = {"wrong": True}
    other = request_id + 1_000_000 if isinstance(request_id, int) else f"{request_id}-other"
    lines = [
        b"this is not JSON",
        b"",
        b"   ",
        b"\xff\xfe not UTF-8 \xc3\x28",
        b'{"unterminated": ',
        b'"a JSON string"',
        b"[1, 2, 3]",
        b"[]",
        b"null",
        b"42",
        b'{"hello": "world"}',
        b'{"jsonrpc": "2.0"}',
        # Bad envelopes shaped as responses, for an id nobody waits on (one carrying the pending
        # id fails that call at once: broken_both.py).
        json.dumps({"jsonrpc": "1.0", "id": other, "result": wrong}).encode(),
        json.dumps({"id": other, "result": wrong}).encode(),
        json.dumps({"jsonrpc": "2.0", "id": other, "result": "not an object"}).encode(),
        json.dumps({"jsonrpc": "2.0", "id": other, "result": wrong, "error": wrong}).encode(),
        json.dumps({"jsonrpc": "2.0", "id": request_id, "method": 7}).encode(),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": None}).encode(),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": [1]}).encode(),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}).encode(),
        json.dumps(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}}
        ).encode(),
    ]
    if isinstance(request_id, int) and not isinstance(request_id, bool):
        lines += [
            # Responses to ids the client never used, and look-alikes of the pending id.
            json.dumps({"jsonrpc": "2.0", "id": request_id + 1_000_000, "result": wrong}).encode(),
            json.dumps({"jsonrpc": "2.0", "id": str(request_id), "result": wrong}).encode(),
            json.dumps({"jsonrpc": "2.0", "id": float(request_id), "result": wrong}).encode(),
            json.dumps({"jsonrpc": "2.0", "id": -request_id, "result": wrong}).encode(),
            json.dumps({"jsonrpc": "2.0", "id": request_id + 2**64, "result": wrong}).encode(),
            json.dumps({"jsonrpc": "2.0", "id": request_id * 10**40, "result": wrong}).encode(),
            b'{"jsonrpc": "2.0", "id": %d.0e0, "result": {"wrong": true}}' % request_id,
            json.dumps({"jsonrpc": "2.0", "id": True, "result": wrong}).encode(),
        ]
    server.write_raw(b"\n".join(lines) + b"\n")


def configure(server: Server) -> None:
    server.before_response = junk


if __name__ == "__main__":
    main(configure)
