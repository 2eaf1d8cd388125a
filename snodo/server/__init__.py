"""The server side: a :class:`Runtime` (configuration) and :func:`dispatch`, which serves one
decoded JSON-RPC message for any of the three protocol versions.

Names load on first use, as in :mod:`snodo`: a program that only configures a Runtime does not
pay for dispatch until the first request is served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "CacheHint": "snodo.server.catalog",
    "Context": "snodo.server.context",
    "Peer": "snodo.server.context",
    "Runtime": "snodo.server.runtime",
    "ServerSession": "snodo.server.context",
    "dispatch": "snodo.server.dispatcher",
}

__all__ = ["CacheHint", "Context", "Peer", "Runtime", "ServerSession", "dispatch"]

if TYPE_CHECKING:
    from snodo.server.catalog import CacheHint as CacheHint
    from snodo.server.context import Context as Context
    from snodo.server.context import Peer as Peer
    from snodo.server.context import ServerSession as ServerSession
    from snodo.server.dispatcher import dispatch as dispatch
    from snodo.server.runtime import Runtime as Runtime


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'snodo.server' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
