"""The Runtime benchmarks/subscriptions.py serves over HTTP (``python -m snodo.server --http``):
one tool, ``burst(count)``, that publishes ``count`` updates of ``mem://bench``. The leading
underscore keeps benchmarks/run_all from running it."""

from __future__ import annotations

from typing import Any

from snodo.server import Context, Runtime

runtime = Runtime("bench-subs-http", "1.0")


@runtime.tool
def burst(arguments: dict[str, Any], ctx: Context) -> str:
    """Publish ``count`` updates of mem://bench."""
    count = int(arguments["count"])
    for _ in range(count):
        runtime.resource_updated("mem://bench")
    return f"sent {count}"
