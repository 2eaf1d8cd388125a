"""A Runtime for the HTTP server tests: the example runtime plus tools a test can steer.

Each test builds its own with :func:`build` and a fresh :class:`Probe`, so tools never share
state across tests:

- ``gate``: reports progress (when asked), then blocks until ``probe.release`` is set or the
  request is cancelled; records ``(request id, "released" | "cancelled" | "gave up")`` in
  ``probe.outcomes``.
- ``meet``: waits at ``probe.barrier`` (all callers must be running at once) and returns.
- ``headered``: ``x-mcp-header`` on a string, an integer, a boolean and a nested string.
- ``café``: a tool whose name needs the base64 sentinel in ``Mcp-Name``.
- ``ask_twice``: two elicitations in a row (session era: two server requests).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from examples.example_runtime import build as build_example
from snodo.server import Context, Runtime

GATE_LIMIT = 30.0


class Probe:
    """What a test shares with the tools of its runtime."""

    def __init__(self, parties: int = 16) -> None:
        self.release = threading.Event()
        self.barrier = threading.Barrier(parties, timeout=10.0)
        self.outcomes: queue.Queue[tuple[Any, str]] = queue.Queue(maxsize=1000)
        self.started: queue.Queue[Any] = queue.Queue(maxsize=1000)


def build(probe: Probe, versions: tuple[str, ...] | None = None) -> Runtime:
    runtime = build_example() if versions is None else _example_with(versions)

    @runtime.tool
    def gate(arguments: dict[str, Any], ctx: Context) -> str:
        """Block until released or cancelled."""
        probe.started.put(ctx.request_id, timeout=1.0)
        ctx.progress(0, message="gate is waiting")
        deadline = time.monotonic() + GATE_LIMIT
        outcome = "gave up"
        while time.monotonic() < deadline:
            if probe.release.wait(0.005):
                outcome = "released"
                break
            if ctx.cancelled:
                outcome = "cancelled"
                break
        probe.outcomes.put((ctx.request_id, outcome), timeout=1.0)
        return outcome

    @runtime.tool
    def meet(arguments: dict[str, Any], ctx: Context) -> str:
        """Wait until every party has arrived."""
        index = probe.barrier.wait()
        return f"met {index}"

    @runtime.tool(
        input_schema={
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "count": {"type": "integer", "x-mcp-header": "Count"},
                "flag": {"type": "boolean", "x-mcp-header": "Flag"},
                "scope": {
                    "type": "object",
                    "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}},
                },
                "note": {"type": "string"},
            },
        }
    )
    def headered(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Echo the arguments (some are mirrored into Mcp-Param-* headers)."""
        return {"arguments": arguments}

    @runtime.tool("café")
    def cafe(arguments: dict[str, Any], ctx: Context) -> str:
        """A tool whose name is not plain ASCII."""
        return "café au lait"

    @runtime.tool
    def ask_twice(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Ask the user two questions in a row."""
        schema = {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
        }
        first = ctx.elicit("First?", schema)
        second = ctx.elicit("Second?", schema)
        return {"first": first["action"], "second": second["action"]}

    return runtime


def _example_with(versions: tuple[str, ...]) -> Runtime:
    """The example runtime's tools on a runtime that enables only ``versions``."""
    example = build_example()
    runtime = Runtime("snodo-example", "0.1.0", versions=versions)
    for name, tool in example.catalog.tools.items():
        definition = tool.definition
        runtime.add_tool(
            name,
            tool.fn,
            description=definition.get("description"),
            input_schema=definition.get("inputSchema"),
        )
    return runtime
