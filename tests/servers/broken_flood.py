"""Tool ``flood`` {count}: writes ``count`` notifications (log messages, progress for tokens
nobody holds, resource updates) and, when the call carries a progress token, as many progress
reports for it; then answers. ``--done FILE`` gets a line once a flood is written.
``flood_inline`` does the same on the main loop: the server reads no stdin until it is done."""

from __future__ import annotations

import json
from typing import Any

from scripted_lib import Server, main

BATCH = 1000


def configure(server: Server) -> None:
    @server.tool("flood", threaded=True)
    def flood(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
        count = int(args["count"])
        token = meta.get("progressToken")
        batch: list[bytes] = []
        for i in range(count):
            if token is not None:
                params: dict[str, Any] = {"progressToken": token, "progress": i + 1}
                message = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
            elif i % 3 == 0:
                message = {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "data": f"flood line {i} " + "x" * 40},
                }
            elif i % 3 == 1:
                message = {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": f"nobody-{i}", "progress": i},
                }
            else:
                message = {
                    "jsonrpc": "2.0",
                    "method": "notifications/resources/updated",
                    "params": {"uri": f"file:///flood/{i}"},
                }
            batch.append(json.dumps(message, separators=(",", ":")).encode())
            if len(batch) == BATCH:
                server.write_raw(b"\n".join(batch) + b"\n")
                batch = []
        if batch:
            server.write_raw(b"\n".join(batch) + b"\n")
        if "--done" in server.extra:
            with open(server.extra[server.extra.index("--done") + 1], "a") as f:
                f.write("flooded\n")
        return {"content": [{"type": "text", "text": f"flooded {count}"}]}

    server.tool("flood_inline")(flood)


if __name__ == "__main__":
    main(configure)
