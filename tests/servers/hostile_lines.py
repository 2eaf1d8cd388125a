"""A hostile stdio server for a pinned 2026-07-28 client (no handshake): it first writes
``--garbage N`` lines that are not JSON-RPC, then serves ``tools/call`` line by line: tool
``echo`` answers its ``text``; tool ``both`` answers with a response carrying both "result" and
"error"; tool ``never`` is not answered. Anything else gets -32601. ``--log FILE`` gets every
line read from stdin. No snodo import."""

from __future__ import annotations

import json
import sys
from typing import Any


def write(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
    out.flush()


def main() -> None:
    args = sys.argv[1:]
    garbage = int(args[args.index("--garbage") + 1]) if "--garbage" in args else 0
    log = open(args[args.index("--log") + 1], "ab") if "--log" in args else None  # noqa: SIM115
    out = sys.stdout.buffer
    if garbage:
        out.write(b"".join(b"garbage line %d {not json\n" % i for i in range(garbage)))
        out.flush()
    for line in sys.stdin.buffer:
        if log is not None:
            log.write(line)
            log.flush()
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            continue  # notifications (cancelled) and anything else
        rid = message["id"]
        params = message.get("params") or {}
        name = params.get("name")
        if message["method"] != "tools/call":
            error = {"code": -32601, "message": f"Method not found: {message['method']}"}
            write(out, {"jsonrpc": "2.0", "id": rid, "error": error})
        elif name == "echo":
            text = str((params.get("arguments") or {}).get("text", ""))
            result = {"content": [{"type": "text", "text": text}]}
            write(out, {"jsonrpc": "2.0", "id": rid, "result": result})
        elif name == "both":
            result = {"content": [{"type": "text", "text": "which one?"}]}
            error = {"code": -32603, "message": "both at once"}
            write(out, {"jsonrpc": "2.0", "id": rid, "result": result, "error": error})
        elif name != "never":
            error = {"code": -32602, "message": f"Unknown tool: {name}"}
            write(out, {"jsonrpc": "2.0", "id": rid, "error": error})


if __name__ == "__main__":
    main()
