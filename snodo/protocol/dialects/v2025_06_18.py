"""Protocol 2025-06-18 (session era)."""

from snodo.protocol.dialects.session import (
    COMMON_CLIENT_NOTIFICATIONS,
    COMMON_CLIENT_REQUESTS,
    COMMON_SERVER_NOTIFICATIONS,
    COMMON_SERVER_REQUESTS,
    session_dialect,
)

DIALECT = session_dialect(
    "2025-06-18",
    client_requests=COMMON_CLIENT_REQUESTS,
    server_requests=COMMON_SERVER_REQUESTS,
    client_notifications=COMMON_CLIENT_NOTIFICATIONS,
    server_notifications=COMMON_SERVER_NOTIFICATIONS,
)


__all__ = ["DIALECT"]
