"""A tiny raw MCP stdio server for benchmarks/subscriptions.py (2026-07-28); stdlib only.

It answers ``server/discover``, acknowledges every ``subscriptions/listen`` with the filter it
was sent, forgets a subscription on ``notifications/cancelled``, and serves one tool,
``burst(count)``: ``count`` ``notifications/resources/updated`` for ``mem://bench`` to every
open subscription (written in blocks), then its result. It does almost nothing per message, so
the client is the bottleneck. The leading underscore keeps benchmarks/run_all from running it.
"""

import json
import sys
from typing import Any

KEY = "io.modelcontextprotocol/subscriptionId"
INFO = {"name": "bench-subs", "version": "1.0"}
BLOCK = 256


def main() -> None:
    out = sys.stdout
    listening: dict[Any, None] = {}
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        params = message.get("params") or {}
        if "id" not in message:
            if method == "notifications/cancelled":
                listening.pop(params.get("requestId"), None)
            continue
        rid = message["id"]
        if method == "subscriptions/listen":
            listening[rid] = None
            ack = {"notifications": params.get("notifications", {}), "_meta": {KEY: rid}}
            note = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged"}
            out.write(json.dumps({**note, "params": ack}) + "\n")
            out.flush()
            continue
        if method == "server/discover":
            result: dict[str, Any] = {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "resources": {"subscribe": True}},
            }
        elif method == "tools/call":
            count = int(params["arguments"]["count"])
            lines = [
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/resources/updated",
                        "params": {"uri": "mem://bench", "_meta": {KEY: sid}},
                    }
                )
                + "\n"
                for sid in listening
            ]
            block = "".join(lines)
            for start in range(0, count, BLOCK):
                out.write(block * min(BLOCK, count - start))
            result = {"content": [{"type": "text", "text": f"sent {count}"}]}
        else:
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "nope"}}
            out.write(json.dumps(reply) + "\n")
            out.flush()
            continue
        result["resultType"] = "complete"
        out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
