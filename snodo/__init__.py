"""snodo: an MCP client for long-running Python programs.

    client = snodo.direct(runtime)          # a server Runtime in this process
    client.list_tools(); client.call_tool("search", {"query": "json"})

Names are loaded on first use so that ``import snodo`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
"""snodo's version: what the client sends in ``clientInfo`` unless ``client_info=`` says
otherwise, and what ``snodo --version`` prints."""

_EXPORTS = {
    "Client": "snodo.client",
    "Progress": "snodo.calls",
    "direct": "snodo.connections",
    "connect": "snodo.connections",
    "Stdio": "snodo.transports.targets",
    "Http": "snodo.transports.targets",
    "Sse": "snodo.transports.targets",
    "McpError": "snodo.protocol.errors",
    "HandlerError": "snodo.protocol.errors",
    "InputRequired": "snodo.protocol.results",
    "Page": "snodo.protocol.results",
    "Session": "snodo.protocol.negotiation",
    "SUPPORTED_VERSIONS": "snodo.protocol.dialects",
    "ALL_VERSIONS": "snodo.protocol.dialects",
    "Transport": "snodo.transports.base",
    "RequestOptions": "snodo.transports.base",
    "Notification": "snodo.protocol.subscriptions",
    "Backoff": "snodo.supervision.restarts",
    "StateChange": "snodo.actors.connection_owner",
    "Dropped": "snodo.protocol.subscriptions",
    "Gap": "snodo.protocol.subscriptions",
    "Closed": "snodo.protocol.subscriptions",
    "SubscriptionEvent": "snodo.protocol.subscriptions",
    "Subscription": "snodo.subscription",
    "ConnectOptions": "snodo.transports.base",
    "LogMessage": "snodo.server_logs",
    "Fleet": "snodo.fleet",
    "FleetStatus": "snodo.fleet",
    "Task": "snodo.tasks",
    "RedisCache": "snodo.redis_cache",
}

__all__ = [
    "ALL_VERSIONS",
    "SUPPORTED_VERSIONS",
    "Backoff",
    "Client",
    "Closed",
    "ConnectOptions",
    "Dropped",
    "Fleet",
    "FleetStatus",
    "Gap",
    "HandlerError",
    "Http",
    "InputRequired",
    "LogMessage",
    "McpError",
    "Notification",
    "Page",
    "Progress",
    "RedisCache",
    "RequestOptions",
    "Session",
    "Sse",
    "StateChange",
    "Stdio",
    "Subscription",
    "SubscriptionEvent",
    "Task",
    "Transport",
    "__version__",
    "connect",
    "direct",
]

if TYPE_CHECKING:
    from snodo.actors.connection_owner import StateChange as StateChange
    from snodo.calls import Progress as Progress
    from snodo.client import Client as Client
    from snodo.connections import connect as connect
    from snodo.connections import direct as direct
    from snodo.fleet import Fleet as Fleet
    from snodo.fleet import FleetStatus as FleetStatus
    from snodo.protocol.dialects import ALL_VERSIONS as ALL_VERSIONS
    from snodo.protocol.dialects import SUPPORTED_VERSIONS as SUPPORTED_VERSIONS
    from snodo.protocol.errors import HandlerError as HandlerError
    from snodo.protocol.errors import McpError as McpError
    from snodo.protocol.negotiation import Session as Session
    from snodo.protocol.results import InputRequired as InputRequired
    from snodo.protocol.results import Page as Page
    from snodo.protocol.subscriptions import Closed as Closed
    from snodo.protocol.subscriptions import Dropped as Dropped
    from snodo.protocol.subscriptions import Gap as Gap
    from snodo.protocol.subscriptions import Notification as Notification
    from snodo.protocol.subscriptions import SubscriptionEvent as SubscriptionEvent
    from snodo.redis_cache import RedisCache as RedisCache
    from snodo.server_logs import LogMessage as LogMessage
    from snodo.subscription import Subscription as Subscription
    from snodo.supervision.restarts import Backoff as Backoff
    from snodo.tasks import Task as Task
    from snodo.transports.base import ConnectOptions as ConnectOptions
    from snodo.transports.base import RequestOptions as RequestOptions
    from snodo.transports.base import Transport as Transport
    from snodo.transports.targets import Http as Http
    from snodo.transports.targets import Sse as Sse
    from snodo.transports.targets import Stdio as Stdio


def __getattr__(name: str) -> Any:
    if name == "oauth":  # the subpackage, loaded on first use
        import importlib

        return importlib.import_module("snodo.oauth")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'snodo' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
