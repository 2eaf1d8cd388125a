"""Close our own fds 0, 1 and 2, then spawn proc_echo.py with snodo and round-trip a line.

Exit status 0 when the line came back and the child exited 0, 1 otherwise: spawn must work
when the parent's stdio fds are closed (its pipes may then get numbers 0..2).
Used by tests/test_transport_process.py; run with the repository root on sys.path.
"""

from __future__ import annotations

import os
import select
import sys
import time

from snodo.transports import process

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    for fd in (0, 1, 2):
        os.close(fd)
    child = process.spawn(sys.executable, [os.path.join(HERE, "proc_echo.py")])
    deadline = time.monotonic() + 20
    process.write_all(child.stdin, b"ping\n", deadline)
    poller = select.poll()
    poller.register(child.stdout, select.POLLIN)
    received = b""
    while not received.endswith(b"\n") and time.monotonic() < deadline:
        poller.poll(1000)
        try:
            chunk = os.read(child.stdout, 100)
        except BlockingIOError:
            continue
        if not chunk:
            break
        received += chunk
    code = process.terminate(child, grace=10)
    return 0 if received == b"ping\n" and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
