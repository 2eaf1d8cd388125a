"""What the session-era versions (2025-11-25 down to 2024-11-05) share."""

from __future__ import annotations

from snodo.protocol.dialects.base import Dialect


def session_dialect(
    version: str,
    *,
    client_requests: frozenset[str],
    server_requests: frozenset[str],
    client_notifications: frozenset[str],
    server_notifications: frozenset[str],
    batches: bool = False,
    protocol_version_header: bool = True,
    client_capabilities: frozenset[str] | None = None,
) -> Dialect:
    """A session-era dialect: no ``_meta`` requirements, no cache hints, no MRTR."""
    return Dialect(
        version=version,
        era="session",
        client_requests=client_requests,
        server_requests=server_requests,
        client_notifications=client_notifications,
        server_notifications=server_notifications,
        batches=batches,
        protocol_version_header=protocol_version_header,
        client_capabilities=client_capabilities,
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

#: What a server may ask of the client before 2025-06-18 (no elicitation yet).
LEGACY_SERVER_REQUESTS: frozenset[str] = frozenset({"ping", "sampling/createMessage", "roots/list"})

COMMON_SERVER_REQUESTS: frozenset[str] = LEGACY_SERVER_REQUESTS | {"elicitation/create"}

#: The ``ClientCapabilities`` keys of 2024-11-05 and 2025-03-26.
LEGACY_CLIENT_CAPABILITIES: frozenset[str] = frozenset({"experimental", "roots", "sampling"})

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
    "LEGACY_CLIENT_CAPABILITIES",
    "LEGACY_SERVER_REQUESTS",
    "session_dialect",
]
