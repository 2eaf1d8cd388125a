"""A Runtime for the actor proxy tests, served over stdio (``python -m snodo.server
tests.servers.actor_runtime:runtime --max-concurrency 200``).

- ``held(n)``: counts itself in, waits for the gate (at most 30 s), answers ``held <n>``.
- ``running`` / ``peak``: how many ``held`` calls run now / ran at once at most.
- ``open_gate``: lets every ``held`` call (and later ones) answer.
- ``refuse``: fails with JSON-RPC error -32099; ``pid``: the server process id.
- ``touch(uri)``: publishes ``notifications/resources/updated`` for ``uri``.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from snodo.protocol.errors import McpError
from snodo.server import Context, Runtime

runtime = Runtime("actor-runtime", "1.0")
runtime.add_resource("mem://actor", lambda ctx: "actor")

_gate = threading.Event()
_lock = threading.Lock()
_count = {"running": 0, "peak": 0}


@runtime.tool
def held(arguments: dict[str, Any], ctx: Context) -> str:
    """Wait for the gate, counted among the calls running at once."""
    with _lock:
        _count["running"] += 1
        _count["peak"] = max(_count["peak"], _count["running"])
    try:
        opened = _gate.wait(30.0)
    finally:
        with _lock:
            _count["running"] -= 1
    return f"held {arguments['n']}" if opened else "the gate stayed shut"


@runtime.tool
def running(arguments: dict[str, Any], ctx: Context) -> int:
    """How many ``held`` calls run now."""
    return _count["running"]


@runtime.tool
def peak(arguments: dict[str, Any], ctx: Context) -> int:
    """The most ``held`` calls that ran at once."""
    return _count["peak"]


@runtime.tool
def open_gate(arguments: dict[str, Any], ctx: Context) -> str:
    """Let every ``held`` call answer."""
    _gate.set()
    return "open"


@runtime.tool
def refuse(arguments: dict[str, Any], ctx: Context) -> str:
    """Fail with a JSON-RPC error."""
    raise McpError(-32099, "refused on purpose", {"why": "test"})


@runtime.tool
def pid(arguments: dict[str, Any], ctx: Context) -> int:
    """The server's process id."""
    return os.getpid()


@runtime.tool
def touch(arguments: dict[str, Any], ctx: Context) -> str:
    """Publish one update of ``uri``."""
    runtime.resource_updated(str(arguments["uri"]))
    return "touched"
