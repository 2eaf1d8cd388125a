"""Tool ``big`` {bytes}: answers with one line of that many bytes (written in chunks, so this
process stays small). Every other tool behaves."""

from __future__ import annotations

from typing import Any

from scripted_lib import Server, main

CHUNK = 1 << 16


def configure(server: Server) -> None:
    @server.tool("big")
    def big(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
        size = int(args["bytes"])
        head = b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"' % rid
        tail = b'"}]}}\n'
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
