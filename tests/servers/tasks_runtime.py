"""A Runtime with task-capable tools, for the client's task tests (tests/test_client_tasks.py):
in process (direct, HTTP) and over stdio (``python -m snodo.server
tests.servers.tasks_runtime:runtime``; ``short_ttl`` keeps a task 0.4 s, ``slow_poll`` hints 1.5 s between polls)."""

from __future__ import annotations

import os
import threading
from typing import Any

from snodo.protocol.errors import INTERNAL_ERROR, McpError
from snodo.server import Context, Runtime

CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
SECONDS = {"type": "object", "properties": {"seconds": {"type": "number"}}}


def build(*, ttl: float | None = 60.0, poll_interval: float = 0.05) -> Runtime:
    """The runtime: ``quick``, ``slow`` (ends early when cancelled), ``fails`` (a protocol
    error: the task fails), ``tool_error`` (a tool error: the task completes with isError),
    ``ask`` (one elicitation), ``must`` (task required), ``crash`` (plain: the process exits)."""
    rt = Runtime("tasks-test", "1.0", versions=["2026-07-28", "2025-11-25"])

    @rt.tool(task="optional", input_schema=SECONDS)
    def quick(args: dict[str, Any], ctx: Context) -> str:
        """Answers at once"""
        return "quick done"

    @rt.tool(task="optional", input_schema=SECONDS)
    def slow(args: dict[str, Any], ctx: Context) -> str:
        """Works ``seconds`` seconds, or until cancelled"""
        stop = threading.Event()
        deadline = float(args.get("seconds", 30))
        waited = 0.0
        while waited < deadline and not ctx.cancelled:
            stop.wait(0.02)  # the tool's own work, checking for cancellation
            waited += 0.02
        return "slow cancelled" if ctx.cancelled else "slow done"

    @rt.tool(task="optional")
    def fails(args: dict[str, Any], ctx: Context) -> str:
        """Fails with a protocol-level error: the task ends failed"""
        raise McpError(INTERNAL_ERROR, "fails: the job broke")

    @rt.tool(task="optional")
    def tool_error(args: dict[str, Any], ctx: Context) -> str:
        """Reports a tool error: the task completes with isError"""
        raise RuntimeError("the tool reported an error")

    @rt.tool(task="optional")
    def ask(args: dict[str, Any], ctx: Context) -> str:
        """Asks for confirmation, then answers"""
        answer = ctx.elicit("Go ahead?", CONFIRM)
        ok = answer.get("action") == "accept" and answer.get("content", {}).get("ok")
        return "confirmed" if ok else "declined"

    @rt.tool(task="required")
    def must(args: dict[str, Any], ctx: Context) -> str:
        """Runs only as a task"""
        return "must done"

    @rt.tool()
    def crash(args: dict[str, Any], ctx: Context) -> str:
        """Ends the server process at once (stdio restart tests)"""
        os._exit(3)

    rt.enable_tasks(ttl=ttl, poll_interval=poll_interval)
    return rt


runtime = build()
short_ttl = build(ttl=0.4)
slow_poll = build(poll_interval=1.5)
