"""What the session-era versions (2025-11-25, 2025-06-18) share."""

from __future__ import annotations

from snodo.protocol.dialects.base import Dialect


def session_dialect(
    version: str,
    *,
    client_requests: frozenset[str],
    server_requests: frozenset[str],
    client_notifications: frozenset[str],
    server_notifications: frozenset[str],
) -> Dialect:
    """A session-era dialect: no ``_meta`` requirements, no cache hints, no MRTR."""
    return Dialect(
        version=version,
        era="session",
        client_requests=client_requests,
        server_requests=server_requests,
        client_notifications=client_notifications,
        server_notifications=server_notifications,
    )


#: Methods every session-era version defines for client → server requests.
COMMON_CLIENT_REQUESTS: frozenset[str] = frozenset(
    {
        "initialize",
        "ping",
        "completion/complete",
        "logging/setLevel",
        "prompts/get",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "tools/call",
        "tools/list",
    }
)

COMMON_SERVER_REQUESTS: frozenset[str] = frozenset(
    {"ping", "sampling/createMessage", "roots/list", "elicitation/create"}
)

COMMON_CLIENT_NOTIFICATIONS: frozenset[str] = frozenset(
    {
        "notifications/cancelled",
        "notifications/initialized",
        "notifications/progress",
        "notifications/roots/list_changed",
    }
)

COMMON_SERVER_NOTIFICATIONS: frozenset[str] = frozenset(
    {
        "notifications/cancelled",
        "notifications/progress",
        "notifications/message",
        "notifications/resources/updated",
        "notifications/resources/list_changed",
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
    }
)


__all__ = [
    "COMMON_CLIENT_NOTIFICATIONS",
    "COMMON_CLIENT_REQUESTS",
    "COMMON_SERVER_NOTIFICATIONS",
    "COMMON_SERVER_REQUESTS",
    "session_dialect",
]
