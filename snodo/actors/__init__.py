"""The MCP actors, on ``snodo.supervision``: one ``SubscriptionStream`` per subscription, one
``ConnectionOwner`` per connection, and the actor proxy (``start_client``, ``start_direct``:
a connection held by an actor whose proxy's calls return futures at once; ``client_proxy``).

The actor proxy is loaded on first use: it runs on ``snodo.aio``, which ``import snodo`` does
not load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["start_client", "start_direct"]

_EXPORTS = {
    "start_client": "snodo.actors.client_proxy",
    "start_direct": "snodo.actors.client_proxy",
}

if TYPE_CHECKING:
    from snodo.actors.client_proxy import start_client as start_client
    from snodo.actors.client_proxy import start_direct as start_direct


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'snodo.actors' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
