"""A Runtime that logs (``Runtime(logging=True)``), for the client's server-log tests. Served
with ``python -m snodo.server tests.servers.logging_runtime:runtime`` (stdio), or built in
process with :func:`build` (direct, HTTP).

- ``chatty``: one ``ctx.log`` at each of debug, info, warning and error (logger ``chatty``,
  data ``{"level": <level>}``), then returns ``"done"``.
- ``spam``: ``count`` info messages (default 10), then returns ``"done"``.
"""

from __future__ import annotations

from typing import Any

from snodo.server import Context, Runtime

LEVELS = ("debug", "info", "warning", "error")


def build() -> Runtime:
    rt = Runtime("logs", "1.0", logging=True)

    @rt.tool
    def chatty(arguments: dict[str, Any], ctx: Context) -> str:
        """Log once at each of debug, info, warning and error."""
        for level in LEVELS:
            ctx.log(level, {"level": level}, logger="chatty")
        return "done"

    @rt.tool
    def spam(arguments: dict[str, Any], ctx: Context) -> str:
        """Log ``count`` info messages."""
        for n in range(int(arguments.get("count", 10))):
            ctx.log("info", {"n": n}, logger="spam")
        return "done"

    return rt


runtime = build()
