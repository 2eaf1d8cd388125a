"""Start a grandchild that ignores SIGTERM, print its pid, then behave as argv[1] says.

``stay``: read stdin to EOF, then exit 0 (the grandchild keeps running).
``leave``: exit 0 at once, leaving the grandchild running in our process group.
The grandchild (``grandchild``) ignores SIGTERM, prints "ready" and waits for a signal.
Used by tests/test_transport_process.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys


def grandchild() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdout.close()
    while True:
        signal.pause()


def main() -> int:
    mode = sys.argv[1]
    if mode == "grandchild":
        grandchild()
        return 0
    proc = subprocess.Popen(
        [sys.executable, __file__, "grandchild"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    if proc.stdout.readline() != b"ready\n":
        return 2
    sys.stdout.write(f"{proc.pid}\n")
    sys.stdout.flush()
    if mode == "stay":
        sys.stdin.buffer.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
