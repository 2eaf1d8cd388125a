"""A Runtime for the stdio server tests: the example runtime plus tools that block, misbehave
and nap. Served with ``python -m snodo.server tests.servers.server_stdio_tools:runtime``.

- ``gate``: reports progress once it runs (when asked for progress), then blocks until
  ``release`` is called or the request is cancelled (it writes ``gate <id> saw cancel`` to stderr
  then); gives up after 30 s so a broken test cannot hang the server.
- ``release``: opens the gate for every waiting ``gate``.
- ``shout``: writes to stdout three ways (``print``, fd 1, a child process that also reads
  its stdin) and returns; none of it may reach the protocol stream.
- ``nap``: returns after ``seconds`` (default 0.3), without being asked anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

from examples.example_runtime import build
from snodo.server import Context, Runtime

# Output at import time must not reach the protocol stream either.
print("STRAY-IMPORT from the module's import")

GATE_LIMIT = 30.0
_gate = threading.Event()

runtime = build()


@runtime.tool
def gate(arguments: dict[str, Any], ctx: Context) -> str:
    """Block until released or cancelled."""
    ctx.progress(0, message="gate is waiting")
    deadline = time.monotonic() + GATE_LIMIT
    while not _gate.wait(0.01):
        if ctx.cancelled:
            sys.stderr.write(f"gate {ctx.request_id} saw cancel\n")
            sys.stderr.flush()
            return "cancelled"
        if time.monotonic() > deadline:
            return "gave up"
    return "released"


@runtime.tool
def release(arguments: dict[str, Any], ctx: Context) -> str:
    """Open the gate."""
    _gate.set()
    return "open"


@runtime.tool
def shout(arguments: dict[str, Any], ctx: Context) -> str:
    """Write to stdout in every way a tool might."""
    print("STRAY-PRINT from a tool")
    os.write(1, b"STRAY-FD1 from a tool\n")
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; data = sys.stdin.read(); print(f'STRAY-CHILD stdin={len(data)}')",
        ],
        check=True,
        timeout=20,
    )
    return "shouted"


@runtime.tool
def nap(arguments: dict[str, Any], ctx: Context) -> str:
    """Return after a short while."""
    threading.Event().wait(float(arguments.get("seconds", 0.3)))
    return "rested"


def not_a_factory() -> str:
    """A callable that does not return a Runtime (a bad target)."""
    return "not a runtime"


def broken_factory() -> Runtime:
    """A callable that raises (a bad target)."""
    raise RuntimeError("the factory is broken")
