"""Tool ``big`` {bytes, order}: answers with one line of that many bytes (written in chunks, so
this process stays small). ``order`` places the id: "id_first" (the default; the Python SDK's
order), "id_last" (the TypeScript SDK's: result, jsonrpc, id) or "hidden" (an id inside neither
edge the client keeps of an oversized line). Every other tool behaves."""

from __future__ import annotations

from typing import Any

from scripted_lib import Server, main

CHUNK = 1 << 16


def configure(server: Server) -> None:
    @server.tool("big")
    def big(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
        size = int(args["bytes"])
        order = args.get("order", "id_first")
        text = b'{"content":[{"type":"text","text":"'
        if order == "id_first":
            head = b'{"jsonrpc":"2.0","id":%d,"result":' % rid + text
            tail = b'"}]}}\n'
        elif order == "id_last":
            head = b'{"result":' + text
            tail = b'"}]},"jsonrpc":"2.0","id":%d}\n' % rid
        else:  # the id between the result and a member that pads the end past the kept edge
            head = b'{"result":' + text
            tail = b'"}]},"id":%d,"jsonrpc":"2.0","padding":"%s"}\n' % (rid, b"p" * 2048)
        remaining = max(0, size - len(head) - len(tail))
        server.write_raw(head)
        while remaining > 0:
            n = min(CHUNK, remaining)
            server.write_raw(b"x" * n)
            remaining -= n
        server.write_raw(tail)
        return None


if __name__ == "__main__":
    main(configure)
