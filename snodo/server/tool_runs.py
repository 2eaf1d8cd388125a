"""Running a tool's function into a ``CallToolResult``: one way, for plain calls and for tasks
(``snodo.server.handlers`` and ``snodo.server.tasks``)."""

from __future__ import annotations

from typing import Any

import orjson

from snodo.protocol.errors import McpError
from snodo.protocol.serving.shaping import ANY_STRUCTURED_CONTENT
from snodo.server.catalog import ToolDef
from snodo.server.context import Context

__all__ = ["run_tool"]

Result = dict[str, Any]


def run_tool(tool: ToolDef, arguments: dict[str, Any], ctx: Context) -> Result:
    """Run a tool's function into a ``CallToolResult`` (an exception other than ``McpError``
    becomes a tool error result)."""
    try:
        value = tool.fn(arguments, ctx)
        if type(value) is str:
            return {"content": [{"type": "text", "text": value}]}
        if isinstance(value, dict) and "content" in value:
            return dict(value)
        if value is None:
            return {"content": []}
        result: Result = {"content": [{"type": "text", "text": orjson.dumps(value).decode()}]}
        if isinstance(value, dict) or ctx.version in ANY_STRUCTURED_CONTENT:
            result["structuredContent"] = value
        return result
    except McpError:
        raise
    except Exception as exc:
        return {
            "content": [{"type": "text", "text": f"{type(exc).__name__}: {exc}"}],
            "isError": True,
        }
