"""Protocol 2025-11-25 (session era): 2025-06-18 plus core tasks and URL elicitation."""

from snodo.protocol.dialects.session import (
    COMMON_CLIENT_NOTIFICATIONS,
    COMMON_CLIENT_REQUESTS,
    COMMON_SERVER_NOTIFICATIONS,
    COMMON_SERVER_REQUESTS,
    session_dialect,
)

_TASKS = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})

DIALECT = session_dialect(
    "2025-11-25",
    client_requests=COMMON_CLIENT_REQUESTS | _TASKS,
    server_requests=COMMON_SERVER_REQUESTS | _TASKS,
    client_notifications=COMMON_CLIENT_NOTIFICATIONS | {"notifications/tasks/status"},
    server_notifications=COMMON_SERVER_NOTIFICATIONS
    | {"notifications/tasks/status", "notifications/elicitation/complete"},
)


__all__ = ["DIALECT"]
