"""The Transport protocol: what the client needs from a connection, and the per-request options.

A transport moves one JSON-RPC message dict out and brings its response dict back. It decides
nothing the protocol layer could decide: it raises ``McpError(kind="transport")`` for -32000
(closed, unreachable, unusable) and -32001 (timeout) and returns every other answer as is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from snodo.protocol.dialects import Dialect

#: Receives each ``notifications/progress`` params dict of the request, in the calling thread.
ProgressSink = Callable[[dict[str, Any]], None]

#: Answers a server-to-client request: ``(method, params) -> result``; raises McpError to refuse.
ServerRequestHandler = Callable[[str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """Per-request options the client hands to a transport."""

    dialect: Dialect
    timeout: float | None = 30.0
    on_progress: ProgressSink | None = None
    on_server_request: ServerRequestHandler | None = None
    reset_timeout_on_progress: bool = False
    max_total_timeout: float | None = 600.0
    #: The tool definition when ``call_tool`` was given one (HTTP derives Mcp-Param-* from it).
    tool: Mapping[str, Any] | None = None


@runtime_checkable
class Transport(Protocol):
    """A connection to one MCP server. ``notify`` is optional (see ``supports_notify``)."""

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        """Send a request and return its JSON-RPC response dict (``result`` or ``error``)."""
        ...

    def close(self) -> None:
        """Release everything the connection holds; idempotent."""
        ...


def supports_notify(transport: object) -> bool:
    """True when the transport can send notifications (needed for initialize-era sessions)."""
    return callable(getattr(transport, "notify", None))
