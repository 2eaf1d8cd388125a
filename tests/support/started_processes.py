"""Server processes a test module starts apart from snodo (the SDK's HTTP server, node servers):
reading the port a server announces, and stopping the one process we started, by pid."""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from pathlib import Path

START_DEADLINE = 30.0
STOP_DEADLINE = 10.0


def announced_port(process: subprocess.Popen[bytes], log: Path, what: str) -> int:
    """The port of the server's first stdout line, ``PORT <n>``, within START_DEADLINE; an
    AssertionError with the tail of its ``log`` when it exits or says nothing in time."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    deadline = time.monotonic() + START_DEADLINE
    seen = b""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while b"\n" not in seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or process.poll() is not None:
                raise AssertionError(
                    f"{what} gave no port within {START_DEADLINE}s (exit {process.poll()}): "
                    f"{seen!r}\n{log.read_text(errors='replace')[-2000:]}"
                )
            if selector.select(remaining):
                seen += os.read(fd, 4096)
    line = seen.split(b"\n", 1)[0].decode()
    word, port = line.split()
    assert word == "PORT", line
    return int(port)


def stop(process: subprocess.Popen[bytes]) -> None:
    """End the one process we started, by pid: SIGTERM, SIGKILL past the deadline; reap it and
    close its stdout pipe."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_DEADLINE)
    if process.stdout is not None:
        process.stdout.close()
