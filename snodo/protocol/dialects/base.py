"""The :class:`Dialect` record: what one protocol version defines, as pure data and checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from snodo.protocol.errors import McpError, method_not_found

Era = Literal["stateless", "session"]

#: Requests that may answer with an ``input_required`` result (2026-07-28 multi round-trip).
MRTR_METHODS: frozenset[str] = frozenset({"tools/call", "resources/read", "prompts/get"})

#: Paginated list methods and the result key that holds their items.
LIST_METHODS: dict[str, str] = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}

#: The name a caller uses for a list kind in ``list_page`` and the method behind it.
LIST_KINDS: dict[str, str] = {
    "tools": "tools/list",
    "resources": "resources/list",
    "resource_templates": "resources/templates/list",
    "resourceTemplates": "resources/templates/list",
    "prompts": "prompts/list",
}

#: The server requests the client answers on any connection (the reference's "server requests").
INPUT_METHODS: frozenset[str] = frozenset(
    {"elicitation/create", "sampling/createMessage", "roots/list"}
)

#: Notifications snodo sends itself, and why ``Client.notify`` refuses them on every version.
MANAGED_NOTIFICATIONS: dict[str, str] = {
    "notifications/initialized": "snodo sends it once, right after initialize",
    "notifications/cancelled": (
        "snodo sends it when a call times out or its caller stops waiting; "
        "give the call a timeout= or cancel its task instead"
    ),
}


@dataclass(frozen=True, slots=True)
class Dialect:
    """One protocol version's catalog, derived from that version's ``schema.ts`` unions.

    ``server_requests`` holds what the server may ask of the client: real JSON-RPC requests on
    session-era versions, and the input requests embedded in ``input_required`` results on
    2026-07-28 (which has no ``ServerRequest`` union).
    """

    version: str
    era: Era
    client_requests: frozenset[str]
    server_requests: frozenset[str]
    client_notifications: frozenset[str]
    server_notifications: frozenset[str]
    #: Requests whose results carry ``ttlMs``/``cacheScope`` (2026-07-28 only).
    cacheable_methods: frozenset[str] = frozenset()
    #: Requests that may answer ``input_required`` (2026-07-28 only).
    mrtr_methods: frozenset[str] = frozenset()
    #: Whether a JSON array of messages (a JSON-RPC batch) is part of the version (2025-03-26).
    batches: bool = False
    #: Whether HTTP requests after ``initialize`` carry ``MCP-Protocol-Version`` (2025-06-18 on).
    protocol_version_header: bool = True
    #: The ``ClientCapabilities`` keys the version defines; the client declares only those.
    #: ``None``: every key the caller gives is declared (the versions snodo speaks by default).
    client_capabilities: frozenset[str] | None = None

    @property
    def stateless(self) -> bool:
        return self.era == "stateless"

    @property
    def all_methods(self) -> frozenset[str]:
        return (
            self.client_requests
            | self.server_requests
            | self.client_notifications
            | self.server_notifications
        )

    def declared_capabilities(self, capabilities: Mapping[str, Any]) -> dict[str, Any]:
        """The client capabilities to declare in ``initialize`` on this version: without the
        keys it does not define (no ``elicitation`` before 2025-06-18)."""
        if self.client_capabilities is None:
            return dict(capabilities)
        return {k: v for k, v in capabilities.items() if k in self.client_capabilities}

    def check_client_request(self, method: str) -> None:
        """Refuse, before anything is sent, a method this dialect does not let a client request.

        Session-era: anything that is not a client request is refused with -32601.
        2026-07-28: a method listed only as a server request or a notification is refused the
        same way; an unlisted method is allowed, because negotiated extensions add methods.
        """
        if method in self.client_requests:
            return
        if self.era == "session" or method in self.all_methods:
            raise self._refusal(method)

    def check_client_notification(self, method: str) -> None:
        """Refuse, before anything is sent, a notification this dialect does not let a client send.

        The notifications snodo sends itself (:data:`MANAGED_NOTIFICATIONS`) are a ValueError on
        every version. Otherwise the rule of :meth:`check_client_request`, for notifications:
        session-era, anything that is not a client notification is -32601; 2026-07-28, a method
        the catalog lists as a request or a server notification is -32601 and an unlisted one
        (an extension's) is allowed.
        """
        reason = MANAGED_NOTIFICATIONS.get(method)
        if reason is not None:
            raise ValueError(f"{method} cannot be sent with notify(): {reason}")
        if method in self.client_notifications:
            return
        if self.era == "session" or method in self.all_methods:
            raise self._refusal(method)

    def _refusal(self, method: str) -> McpError:
        return method_not_found(method, protocolVersion=self.version)


__all__ = [
    "INPUT_METHODS",
    "LIST_KINDS",
    "LIST_METHODS",
    "MANAGED_NOTIFICATIONS",
    "MRTR_METHODS",
    "Dialect",
    "Era",
]
