"""Protocol 2026-07-28: stateless, ``_meta`` on every request, multi round-trip, cache hints."""

from snodo.protocol.dialects.base import MRTR_METHODS, Dialect

CACHEABLE = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)

DIALECT = Dialect(
    version="2026-07-28",
    era="stateless",
    client_requests=frozenset(
        {
            "server/discover",
            "completion/complete",
            "prompts/get",
            "prompts/list",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "subscriptions/listen",
            "tools/call",
            "tools/list",
        }
    ),
    # No ServerRequest union: these travel embedded in input_required results.
    server_requests=frozenset({"elicitation/create", "sampling/createMessage", "roots/list"}),
    client_notifications=frozenset({"notifications/cancelled"}),
    server_notifications=frozenset(
        {
            "notifications/cancelled",
            "notifications/progress",
            "notifications/message",
            "notifications/resources/updated",
            "notifications/resources/list_changed",
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed",
            "notifications/subscriptions/acknowledged",
        }
    ),
    cacheable_methods=CACHEABLE,
    mrtr_methods=MRTR_METHODS,
)


__all__ = ["CACHEABLE", "DIALECT"]
