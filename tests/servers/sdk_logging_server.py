"""The SDK interop server (sdk_server.py) plus a tool that logs, served over stdio (both eras).

    python tests/servers/sdk_logging_server.py
    python tests/servers/sdk_http_server.py --logging     # the same over Streamable HTTP

- ``chatter``: one log message at each of debug, info, warning and error (logger ``chatter``,
  data ``"at <level>"``), then returns ``"chattered"``.

A module of its own so that sdk_server.py's tool list, which the interop tests check, stays
as it is.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from sdk_server import NAME, build


def build_logging(name: str = NAME) -> MCPServer:
    server = build(name)

    @server.tool(description="Send a log message at debug, info, warning and error.")
    async def chatter(ctx: Context) -> str:
        for level in ("debug", "info", "warning", "error"):
            await ctx.log(level, f"at {level}", logger_name="chatter")
        return "chattered"

    return server


if __name__ == "__main__":
    build_logging().run("stdio")
