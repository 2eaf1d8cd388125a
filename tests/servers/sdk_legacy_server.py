"""The SDK interop server (sdk_server.py) serving the session era only, over stdio.

``MCPServer.run("stdio")`` always serves both eras. The SDK's handshake-only loop is
``mcp.server.runner.serve_loop`` (what its Streamable HTTP manager drives); this script runs the
same ``MCPServer`` through it on stdio. ``server/discover`` before ``initialize`` is then an
error, so a client that probes must fall back to ``initialize`` (2024-11-05 .. 2025-11-25).
"""

from __future__ import annotations

import anyio
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from sdk_server import build  # this directory is sys.path[0] when run as a script


async def main() -> None:
    lowlevel = build()._lowlevel_server  # the SDK offers no public handle for serve_loop
    async with stdio_server() as (read_stream, write_stream):
        async with lowlevel.lifespan(lowlevel) as state:
            await serve_loop(
                lowlevel,
                read_stream,
                write_stream,
                lifespan_state=state,
                init_options=lowlevel.create_initialization_options(),
            )


if __name__ == "__main__":
    anyio.run(main)
