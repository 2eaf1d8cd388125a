"""A stdio server that keeps crashing, for the fleet tests (tests/test_fleet_interop.py).

    python tests/servers/fleet_crasher.py --lifetime S [--starts FILE]
    python tests/servers/fleet_crasher.py --die-on METHOD [--starts FILE]

``--lifetime S``: serve normally, and S seconds after answering its first request write
``fleet-crasher: crashing after S s`` to stderr and exit with status 3 (a crash, so a transient
connection restarts it, and the next process crashes the same way). ``--die-on METHOD``: on the
first request for METHOD write ``fleet-crasher: dying on METHOD`` to stderr and exit with status
3 without answering. ``--starts FILE`` (scripted_lib's) appends each process's pid to FILE.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from scripted_lib import Server, main

CRASH_STATUS = 3


def option(server: Server, name: str) -> str | None:
    if name not in server.extra:
        return None
    return str(server.extra[server.extra.index(name) + 1])


def crash(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    os._exit(CRASH_STATUS)


def configure(server: Server) -> None:
    lifetime = option(server, "--lifetime")
    die_on = option(server, "--die-on")
    handle = server.handle
    armed = threading.Event()

    def handle_then_crash(message: dict[str, Any]) -> None:
        if die_on is not None and message.get("method") == die_on and "id" in message:
            crash(f"fleet-crasher: dying on {die_on}")
        handle(message)
        if lifetime is not None and "id" in message and not armed.is_set():
            armed.set()
            seconds = float(lifetime)
            timer = threading.Timer(seconds, crash, (f"fleet-crasher: crashing after {seconds} s",))
            timer.daemon = True
            timer.start()

    server.handle = handle_then_crash


if __name__ == "__main__":
    main(configure)
