"""Protocol 2024-11-05 (session era, opt in): 2025-03-26 without batches (and, on the server's
side, without tool annotations, audio content or the completions capability)."""

from snodo.protocol.dialects.session import (
    COMMON_CLIENT_NOTIFICATIONS,
    COMMON_CLIENT_REQUESTS,
    COMMON_SERVER_NOTIFICATIONS,
    LEGACY_CLIENT_CAPABILITIES,
    LEGACY_SERVER_REQUESTS,
    session_dialect,
)

DIALECT = session_dialect(
    "2024-11-05",
    client_requests=COMMON_CLIENT_REQUESTS,
    server_requests=LEGACY_SERVER_REQUESTS,
    client_notifications=COMMON_CLIENT_NOTIFICATIONS,
    server_notifications=COMMON_SERVER_NOTIFICATIONS,
    protocol_version_header=False,
    client_capabilities=LEGACY_CLIENT_CAPABILITIES,
)


__all__ = ["DIALECT"]
