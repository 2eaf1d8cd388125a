"""A tiny raw MCP stdio server for benchmarks/stdio.py: one tool, echo(text) -> text; stdlib only.

    python benchmarks/_echo_server.py [--no-discover]

It answers ``initialize`` (with the client's version when it is a session-era one), ``ping``,
``tools/list``, ``tools/call`` and ``server/discover`` (2026-07-28; with --no-discover it is
-32601, as in the research note's raw_server.py, so probing clients fall back to initialize).
Notifications are ignored. It does almost nothing per message, so the client is the bottleneck.
The leading underscore keeps benchmarks/run_all from running it as a benchmark.
"""

import json
import sys
from typing import Any

HANDSHAKE = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
ENVELOPE = "io.modelcontextprotocol/protocolVersion"
CACHEABLE = ("tools/list", "server/discover")
INFO = {"name": "bench-echo", "version": "1.0"}
TOOL = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def answer(method: str, params: dict[str, Any], discover: bool) -> dict[str, Any] | None:
    if method == "tools/call":
        return {"content": [{"type": "text", "text": params["arguments"]["text"]}]}
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in HANDSHAKE else HANDSHAKE[0]
        return {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": INFO}
    if method == "server/discover" and discover:
        return {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
    if method == "ping":
        return {}
    return None


def main() -> None:
    discover = "--no-discover" not in sys.argv[1:]
    write, flush = sys.stdout.write, sys.stdout.flush
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # a notification (or a response): nothing to answer
        params = message.get("params") or {}
        result = answer(message["method"], params, discover)
        reply = {"jsonrpc": "2.0", "id": message["id"]}
        if result is None:
            reply["error"] = {"code": -32601, "message": "Method not found"}
        else:
            if ENVELOPE in (params.get("_meta") or {}):  # a 2026-07-28 request
                result["resultType"] = "complete"
                if message["method"] in CACHEABLE:
                    result.update(cacheScope="private", ttlMs=0)
            reply["result"] = result
        write(json.dumps(reply) + "\n")
        flush()


if __name__ == "__main__":
    main()
