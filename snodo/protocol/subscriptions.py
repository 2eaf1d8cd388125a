"""Subscriptions, sans-IO: filters, what a message on a listen stream means, and the events.

2026-07-28 (client digest (i)): ``subscriptions/listen`` carries a ``SubscriptionFilter`` in
``params.notifications``; the server answers ``notifications/subscriptions/acknowledged`` with
the subset it honours, then the notifications the filter asked for. Every message of one
subscription carries ``_meta["io.modelcontextprotocol/subscriptionId"]`` = the listen request's
id. The stream ends gracefully with a result for the listen id or ``notifications/cancelled``
for it; a transport close is an abrupt end.

Session era (docs/decisions/0017): the same filter maps onto ``resources/subscribe`` for
``resourceSubscriptions`` and the session's unsolicited list-changed notifications, filtered
here (:func:`matches`) to what was asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from snodo.protocol.errors import McpError, invalid_params
from snodo.protocol.meta import SUBSCRIPTION_ID_KEY

ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
CANCELLED: Final = "notifications/cancelled"
RESOURCE_UPDATED: Final = "notifications/resources/updated"
RESOURCES_KEY: Final = "resourceSubscriptions"

#: Filter flag -> the notification it asks for; and the list kind it follows.
LIST_FLAGS: Final[dict[str, str]] = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
FLAG_KINDS: Final[dict[str, str]] = {
    "toolsListChanged": "tools",
    "promptsListChanged": "prompts",
    "resourcesListChanged": "resources",
}
METHOD_FLAGS: Final[dict[str, str]] = {method: flag for flag, method in LIST_FLAGS.items()}
#: The tasks extension's status notification and its filter key (snodo.protocol.tasks).
TASK_STATUS: Final = "notifications/tasks"
TASK_IDS_KEY: Final = "taskIds"

OVERFLOW_POLICIES: Final = ("drop_oldest", "drop_newest")

SubscriptionId = str | int


# -- the events an owner receives ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Notification:
    """A notification the subscription asked for: its method and params."""

    method: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Dropped:
    """``n`` events were discarded by the overflow policy (takes no demand)."""

    n: int


@dataclass(frozen=True, slots=True)
class Gap:
    """The connection was restarted and the subscription opened again with the same filter:
    events between the two streams are lost, so resync (takes no demand). ``reason`` is the
    error that ended the old connection."""

    reason: McpError | None = None


@dataclass(frozen=True, slots=True)
class Closed:
    """The stream ended: ``reason`` is None for a graceful end, else the ``McpError``."""

    reason: McpError | None = None

    @property
    def error(self) -> McpError | None:
        return self.reason


Event = Notification | Dropped | Gap | Closed


@dataclass(frozen=True, slots=True)
class SubscriptionEvent:
    """What an actor owner receives: the subscription's ``ref`` and one event."""

    ref: Any
    event: Event


# -- what a message on a listen stream means ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Acknowledged:
    accepted: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Ended:
    """The server ended the stream: ``error`` None when it ended it gracefully."""

    error: McpError | None


Verdict = Acknowledged | Notification | Ended


def subscription_id(params: object) -> SubscriptionId | None:
    """The subscription id in ``params._meta`` (None when absent or not an id)."""
    if type(params) is not dict:
        return None
    meta = params.get("_meta")
    if type(meta) is not dict:
        return None
    sid = meta.get(SUBSCRIPTION_ID_KEY)
    return sid if type(sid) is str or type(sid) is int else None


def read_notification(method: str, params: dict[str, Any] | None) -> Verdict:
    """What a notification that belongs to a subscription means for it."""
    body = params if params is not None else {}
    if method == ACKNOWLEDGED:
        accepted = body.get("notifications")
        return Acknowledged(dict(accepted) if isinstance(accepted, dict) else {})
    if method == CANCELLED:
        return Ended(None)
    return Notification(method, body)


def read_response(message: Mapping[str, Any]) -> Ended:
    """What the listen request's response means: a result ends it gracefully."""
    error = message.get("error")
    if isinstance(error, dict):
        return Ended(McpError.from_wire(error))
    return Ended(None)


def cancelled_id(params: object) -> SubscriptionId | None:
    """The ``requestId`` a ``notifications/cancelled`` names (it may carry no subscription id)."""
    if type(params) is not dict:
        return None
    rid = params.get("requestId")
    return rid if type(rid) is str or type(rid) is int else None


# -- filters ------------------------------------------------------------------------------


def client_filter(value: object) -> dict[str, Any]:
    """The filter to send, as given (core keys and any extension key); a mapping is required."""
    if not isinstance(value, Mapping):
        raise TypeError(f"a subscription filter is a mapping, got: {value!r}")
    if not all(isinstance(key, str) for key in value):
        raise TypeError("subscription filter keys must be strings")
    return dict(value)


def validate_filter(value: object) -> dict[str, Any]:
    """Server side: check a received filter's core keys (-32602 for a wrong type)."""
    if type(value) is not dict:
        raise invalid_params("subscriptions/listen needs notifications (a SubscriptionFilter)")
    for flag in LIST_FLAGS:
        if flag in value and type(value[flag]) is not bool:
            raise invalid_params(f"notifications.{flag} must be a boolean")
    uris = value.get(RESOURCES_KEY)
    if uris is not None and (type(uris) is not list or not all(type(u) is str for u in uris)):
        raise invalid_params(f"notifications.{RESOURCES_KEY} must be a list of strings")
    return value


def honoured(requested: Mapping[str, Any], kinds: frozenset[str] | None = None) -> dict[str, Any]:
    """The subset of ``requested`` a server honours: true flags (of ``kinds`` it has, if given)
    and a non-empty ``resourceSubscriptions``; unknown keys are left out."""
    accepted: dict[str, Any] = {}
    for flag, kind in FLAG_KINDS.items():
        if requested.get(flag) is True and (kinds is None or kind in kinds):
            accepted[flag] = True
    uris = requested.get(RESOURCES_KEY)
    if uris and (kinds is None or "resources" in kinds):
        accepted[RESOURCES_KEY] = list(dict.fromkeys(uris))
    return accepted


def matches(accepted: Mapping[str, Any], method: str, params: Mapping[str, Any] | None) -> bool:
    """True when a notification is one the filter asked for."""
    flag = METHOD_FLAGS.get(method)
    if flag is not None:
        return accepted.get(flag) is True
    if method == RESOURCE_UPDATED:
        uri = params.get("uri") if params is not None else None
        uris = accepted.get(RESOURCES_KEY)
        return isinstance(uri, str) and isinstance(uris, list) and uri in uris
    if method == TASK_STATUS:  # the tasks extension: the tasks named in taskIds
        task_id = params.get("taskId") if params is not None else None
        ids = accepted.get(TASK_IDS_KEY)
        return isinstance(task_id, str) and isinstance(ids, list) and task_id in ids
    return False


def session_accepts(
    requested: Mapping[str, Any], capabilities: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """Session era: the flags the server's capabilities can honour, and the URIs to send
    ``resources/subscribe`` for (only when it declares ``resources.subscribe``)."""
    accepted: dict[str, Any] = {}
    for flag, kind in FLAG_KINDS.items():
        cap = capabilities.get(kind)
        if requested.get(flag) is True and isinstance(cap, dict) and cap.get("listChanged"):
            accepted[flag] = True
    uris: list[str] = []
    resources = capabilities.get("resources")
    wanted = requested.get(RESOURCES_KEY)
    if isinstance(resources, dict) and resources.get("subscribe") and isinstance(wanted, list):
        uris = [u for u in dict.fromkeys(wanted) if isinstance(u, str)]
    return accepted, uris


# -- the server's messages ----------------------------------------------------------------


def acknowledgement(sid: SubscriptionId, accepted: Mapping[str, Any]) -> dict[str, Any]:
    """``notifications/subscriptions/acknowledged`` for subscription ``sid``."""
    return {
        "jsonrpc": "2.0",
        "method": ACKNOWLEDGED,
        "params": {"notifications": dict(accepted), "_meta": {SUBSCRIPTION_ID_KEY: sid}},
    }


def stream_notification(
    sid: SubscriptionId | None, method: str, params: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A notification on subscription ``sid`` (None: a session-era session notification)."""
    body = dict(params) if params else {}
    if sid is not None:
        body["_meta"] = {**body.get("_meta", {}), SUBSCRIPTION_ID_KEY: sid}
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if body:
        message["params"] = body
    return message


def listen_result(sid: SubscriptionId) -> dict[str, Any]:
    """The graceful end: the listen request's result."""
    return {
        "jsonrpc": "2.0",
        "id": sid,
        "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID_KEY: sid}},
    }


def check_buffer(max_buffer: object, overflow: object) -> None:
    """Validate ``max_buffer`` (a positive integer) and ``overflow``."""
    if not isinstance(max_buffer, int) or isinstance(max_buffer, bool) or max_buffer < 1:
        raise ValueError("max_buffer must be a positive integer")
    if overflow not in OVERFLOW_POLICIES:
        raise ValueError(f"overflow must be one of {OVERFLOW_POLICIES}, got {overflow!r}")


__all__ = [
    "ACKNOWLEDGED",
    "CANCELLED",
    "FLAG_KINDS",
    "LIST_FLAGS",
    "METHOD_FLAGS",
    "OVERFLOW_POLICIES",
    "RESOURCES_KEY",
    "RESOURCE_UPDATED",
    "SUBSCRIPTION_ID_KEY",
    "Acknowledged",
    "Closed",
    "Dropped",
    "Ended",
    "Event",
    "Gap",
    "Notification",
    "SubscriptionEvent",
    "SubscriptionId",
    "Verdict",
    "acknowledgement",
    "cancelled_id",
    "check_buffer",
    "client_filter",
    "honoured",
    "listen_result",
    "matches",
    "read_notification",
    "read_response",
    "session_accepts",
    "stream_notification",
    "subscription_id",
    "validate_filter",
]
