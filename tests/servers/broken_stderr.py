"""Floods stderr: ``--stderr-bytes N`` at start (before serving) and tool ``spew`` {bytes}
before answering, in lines and in one long line without a newline."""

from __future__ import annotations

import sys
from typing import Any

from scripted_lib import Server, main

LINE = b"stderr noise " + b"e" * 1000 + b"\n"


def spew(size: int) -> None:
    err = sys.stderr.buffer
    written = 0
    while written < size // 2:
        err.write(LINE)
        written += len(LINE)
    err.write(b"L" * (size - written))  # one long line, cut off by the next newline
    err.write(b"\n")
    err.flush()


def configure(server: Server) -> None:
    if "--stderr-bytes" in server.extra:
        spew(int(server.extra[server.extra.index("--stderr-bytes") + 1]))

    @server.tool("spew")
    def spew_tool(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
        spew(int(args["bytes"]))
        return {"content": [{"type": "text", "text": "spewed"}]}


if __name__ == "__main__":
    main(configure)
