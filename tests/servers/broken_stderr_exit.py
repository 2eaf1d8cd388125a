"""Says why on stderr, then dies. ``--stderr-lines N``: write ``stderr line i`` for i < N at
start; ``--last-line TEXT``: then that line (without a newline when ``--no-newline``);
``--exit-at-start N``: then exit with status N before reading anything. Tool ``say`` {lines, hex}:
write those stderr lines (and the line of bytes ``hex``) and answer; tool ``crash`` {lines, code}: write them and exit with
``code`` without answering."""

from __future__ import annotations

import os
import sys
from typing import Any

from scripted_lib import Server, main


def option(server: Server, name: str) -> str | None:
    if name not in server.extra:
        return None
    return server.extra[server.extra.index(name) + 1]


def write(lines: list[str], *, newline: bool = True) -> None:
    err = sys.stderr.buffer
    for i, line in enumerate(lines):
        err.write(line.encode())
        if newline or i < len(lines) - 1:
            err.write(b"\n")
    err.flush()


def configure(server: Server) -> None:
    count = option(server, "--stderr-lines")
    lines = [f"stderr line {i}" for i in range(int(count or 0))]
    last = option(server, "--last-line")
    if last is not None:
        lines.append(last)
    write(lines, newline="--no-newline" not in server.extra)
    status = option(server, "--exit-at-start")
    if status is not None:
        os._exit(int(status))

    @server.tool("say")
    def say(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
        write(list(args.get("lines", [])))
        if "hex" in args:  # raw bytes (not UTF-8, say)
            sys.stderr.buffer.write(bytes.fromhex(args["hex"]) + b"\n")
            sys.stderr.buffer.flush()
        return {"content": [{"type": "text", "text": "said"}]}

    @server.tool("crash")
    def crash(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
        write(list(args.get("lines", [])))
        sys.stdout.flush()
        os._exit(int(args.get("code", 3)))


if __name__ == "__main__":
    main(configure)
