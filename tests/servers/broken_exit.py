"""Exits on purpose. ``--exit-at-start N``: exit with status N before reading anything. Tool
``die`` {code}: exit with that status in the middle of the request (no response)."""

from __future__ import annotations

import os
import sys
from typing import Any

from scripted_lib import Server, main


def configure(server: Server) -> None:
    if "--exit-at-start" in server.extra:
        os._exit(int(server.extra[server.extra.index("--exit-at-start") + 1]))

    @server.tool("die")
    def die(server: Server, rid: Any, args: dict[str, Any], meta: dict[str, Any]) -> Any:
        sys.stdout.flush()
        os._exit(int(args.get("code", 3)))


if __name__ == "__main__":
    main(configure)
