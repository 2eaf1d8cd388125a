"""The CPython floor for one stdio round trip: a bare loop of os.write + os.read against
benchmarks/_echo_server.py, with no MCP logic, no threads and no hand-off; then the same through
one reader thread and a queue (the shape of a shared reader). Any CPython stdio client is bounded
by these numbers on this machine.

    python benchmarks/_stdio_floor.py
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CALLS = 5000


def _request(i: int) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}},
    }
    return (json.dumps(message) + "\n").encode()


def main() -> None:
    server = subprocess.Popen(
        [sys.executable, str(HERE / "_echo_server.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None
    fd_in, fd_out = server.stdin.fileno(), server.stdout.fileno()
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "floor", "version": "1"},
        },
    }
    os.write(fd_in, (json.dumps(init) + "\n").encode())
    os.read(fd_out, 65536)

    started = time.perf_counter()
    for i in range(1, CALLS + 1):
        os.write(fd_in, _request(i))
        os.read(fd_out, 65536)
    direct = CALLS / (time.perf_counter() - started)

    lines: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    os.set_blocking(fd_out, False)

    def reader() -> None:
        selector = selectors.DefaultSelector()
        selector.register(fd_out, selectors.EVENT_READ)
        while True:
            for _ in selector.select():
                data = os.read(fd_out, 65536)
                if not data:
                    return
                for line in data.split(b"\n")[:-1]:
                    lines.put(line)

    threading.Thread(target=reader, daemon=True).start()
    started = time.perf_counter()
    for i in range(1, CALLS + 1):
        os.write(fd_in, _request(i))
        lines.get(timeout=10)
    handoff = CALLS / (time.perf_counter() - started)
    server.stdin.close()
    server.wait(10)
    print(f"bare os.write/os.read loop: {direct:,.0f} round trips/s")
    print(f"through one reader thread:  {handoff:,.0f} round trips/s")


if __name__ == "__main__":
    main()
