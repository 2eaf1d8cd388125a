"""Never reads its stdin: a client's writes fill the pipe and then block. It only watches for
the client closing the pipe (POLLHUP, without reading) and exits then. ``--ready FILE`` is
written at start. Ends after 60 s at the latest."""

from __future__ import annotations

import os
import select
import sys
import time


def main() -> None:
    args = sys.argv[1:]
    if "--ready" in args:
        with open(args[args.index("--ready") + 1], "w") as f:
            f.write(f"{os.getpid()}\n")
    poller = select.poll()
    poller.register(0, select.POLLHUP)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        for _, events in poller.poll(50):
            if events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                return


if __name__ == "__main__":
    main()
