"""Ignores SIGTERM and stdin EOF: only SIGKILL ends it (or 60 s). It serves normally until then.
``--ready FILE`` is written once SIGTERM is ignored."""

from __future__ import annotations

import os
import signal
import time

from scripted_lib import Server, main


def linger(server: Server) -> None:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        time.sleep(0.1)
    os._exit(0)


def configure(server: Server) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    server.on_eof = linger
    if "--ready" in server.extra:
        with open(server.extra[server.extra.index("--ready") + 1], "w") as f:
            f.write(f"{os.getpid()}\n")


if __name__ == "__main__":
    main(configure)
