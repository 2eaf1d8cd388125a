"""Writes every message in small pieces (a few bytes per write, flushed) with CRLF line ends,
and sometimes two messages in one write: a client must reassemble lines from any split."""

from __future__ import annotations

import json
import os
from typing import Any

from scripted_lib import Server, main

PIECE = 7


def configure(server: Server) -> None:
    def send(message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\r\n"
        with server.out_lock:
            for start in range(0, len(data), PIECE):
                os.write(1, data[start : start + PIECE])

    server.send = send  # type: ignore[method-assign]


if __name__ == "__main__":
    main(configure)
