"""A Runtime for the subscription tests, served over stdio (``python -m snodo.server
tests.servers.subs_runtime:runtime``) and HTTP.

- ``burst``: ``resources/updated`` for ``mem://<first>`` .. ``mem://<first + count - 1>``, in
  order, before it returns (the events precede its response on a shared stdio connection).
- ``touch``: adds (or replaces) a tool, a prompt or a resource: a list change of that kind.
- ``finish``: ends every open listen stream gracefully (each gets its listen result).
- ``pid``: the server process id.
- ``open_count``: how many subscriptions the server holds open (listen streams and sessions).

``build()`` makes a fresh one (in-process tests); ``runtime`` is the one stdio serves.
"""

from __future__ import annotations

import os
from typing import Any

from snodo.server import Context, Runtime


def build() -> Runtime:
    """A fresh runtime with the tools above."""
    runtime = Runtime("snodo-subs", "1.0.0")
    runtime.add_resource("mem://0", lambda ctx: "zero")

    @runtime.tool
    def burst(arguments: dict[str, Any], ctx: Context) -> str:
        """Publish resource updates mem://first .. mem://first+count-1."""
        first = int(arguments.get("first", 0))
        count = int(arguments.get("count", 1))
        for n in range(first, first + count):
            runtime.resource_updated(f"mem://{n}")
        return f"sent {count}"

    @runtime.tool
    def touch(arguments: dict[str, Any], ctx: Context) -> str:
        """Change the tools, prompts or resources list."""
        kind = arguments.get("kind", "tools")
        if kind == "tools":
            runtime.add_tool("extra", lambda a, c: "extra")
        elif kind == "prompts":
            runtime.add_prompt("extra", lambda a, c: "extra")
        else:
            runtime.add_resource("mem://extra", lambda c: "extra")
        return kind

    @runtime.tool
    def finish(arguments: dict[str, Any], ctx: Context) -> str:
        """End every listen stream gracefully."""
        runtime.close_subscriptions()
        return "finished"

    @runtime.tool
    def pid(arguments: dict[str, Any], ctx: Context) -> int:
        """The server's process id."""
        return os.getpid()

    @runtime.tool
    def open_count(arguments: dict[str, Any], ctx: Context) -> int:
        """Open subscriptions on the server."""
        source = runtime.subscription_source
        return source.count if source is not None else 0

    return runtime


runtime = build()
