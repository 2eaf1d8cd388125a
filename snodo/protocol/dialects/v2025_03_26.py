"""Protocol 2025-03-26 (session era, opt in): no elicitation, no structured tool output, no
``MCP-Protocol-Version`` header; the one version with JSON-RPC batches."""

from snodo.protocol.dialects.session import (
    COMMON_CLIENT_NOTIFICATIONS,
    COMMON_CLIENT_REQUESTS,
    COMMON_SERVER_NOTIFICATIONS,
    LEGACY_CLIENT_CAPABILITIES,
    LEGACY_SERVER_REQUESTS,
    session_dialect,
)

DIALECT = session_dialect(
    "2025-03-26",
    client_requests=COMMON_CLIENT_REQUESTS,
    server_requests=LEGACY_SERVER_REQUESTS,
    client_notifications=COMMON_CLIENT_NOTIFICATIONS,
    server_notifications=COMMON_SERVER_NOTIFICATIONS,
    batches=True,
    protocol_version_header=False,
    client_capabilities=LEGACY_CLIENT_CAPABILITIES,
)


__all__ = ["DIALECT"]
