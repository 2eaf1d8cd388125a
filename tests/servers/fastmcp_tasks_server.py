"""A FastMCP server with the Tasks extension (``fastmcp-tasks``, pinned in
tests/interop/fastmcp-tasks.txt), over stdio, for tests/test_interop_fastmcp_tasks.py:
``crunch(seconds)`` may run as a task, ``must(text)`` must, ``hello(name)`` never does."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from fastmcp import FastMCP
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension

POLL = timedelta(milliseconds=100)

mcp = FastMCP("fastmcp-tasks-interop")
mcp.add_extension(TasksExtension(url="memory://"))


@mcp.tool(task=TaskConfig(mode="optional", poll_interval=POLL))
async def crunch(seconds: float = 0.2) -> str:
    """Sleep ``seconds``, then say so."""
    await asyncio.sleep(seconds)
    return f"crunched {seconds}"


@mcp.tool(task=TaskConfig(mode="required", poll_interval=POLL))
async def must(text: str) -> str:
    """Only as a task: echo ``text``."""
    return f"must {text}"


@mcp.tool
def hello(name: str) -> str:
    """Never a task."""
    return f"hello {name}"


if __name__ == "__main__":
    mcp.run(show_banner=False)
