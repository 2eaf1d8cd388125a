"""Closes its stdout at start and keeps running, reading (and ignoring) stdin until EOF: no
answer can ever reach the client. ``--ready FILE`` is written once stdout is closed."""

from __future__ import annotations

import os
import sys


def main() -> None:
    args = sys.argv[1:]
    os.close(1)
    if "--ready" in args:
        with open(args[args.index("--ready") + 1], "w") as f:
            f.write(f"{os.getpid()}\n")
    for _ in sys.stdin.buffer:
        pass


if __name__ == "__main__":
    main()
