"""A 2025-03-26 server that answers in JSON-RPC batches (tests/test_interop_legacy_stdio.py).

``echo`` calls are held until two are waiting; then one line carries an empty batch (``[]``,
which the client must skip with a warning) and the next one line holds a batch of: a log
notification, a ``ping`` request to the client, the two responses in reverse order, and one
element that is not JSON-RPC (``7``), which the client must skip alone. ``alone`` answers on its own line.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from scripted_lib import Server, main, text

VERSION = "2025-03-26"


def configure(server: Server) -> None:
    held: list[tuple[Any, dict[str, Any]]] = []
    lock = threading.Lock()

    @server.tool("echo")
    def echo(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
        with lock:
            held.append((rid, text(str(args.get("text", "")))))
            if len(held) < 2:
                return None
            pair = held[:]
            held.clear()
        batch: list[Any] = [
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "in a batch"},
            },
            {"jsonrpc": "2.0", "id": "batch-ping", "method": "ping"},
            *({"jsonrpc": "2.0", "id": i, "result": r} for i, r in reversed(pair)),
            7,
        ]
        server.write_raw(b"[]\n" + json.dumps(batch, separators=(",", ":")).encode() + b"\n")
        return None

    @server.tool("alone")
    def alone(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
        return text("alone")


if __name__ == "__main__":
    main(configure)
