"""Closes its stdin at once and keeps running without reading: the client's next write fails
with EPIPE. ``--ready FILE`` is written once stdin is closed. Ends after 60 s at the latest."""

from __future__ import annotations

import os
import sys
import time


def main() -> None:
    args = sys.argv[1:]
    os.close(0)
    if "--ready" in args:
        with open(args[args.index("--ready") + 1], "w") as f:
            f.write(f"{os.getpid()}\n")
    end = time.monotonic() + 60
    while time.monotonic() < end:
        time.sleep(0.1)


if __name__ == "__main__":
    main()
