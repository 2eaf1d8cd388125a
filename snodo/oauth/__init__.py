"""OAuth 2.1 for MCP servers over HTTP: :class:`OAuthClient` is a token provider.

    oauth = snodo.oauth.OAuthClient(resource=url, authorize=webbrowser.open)
    client = snodo.connect(snodo.Http(url), token_provider=oauth)

Names load on first use (pyjwt only when a JWT is signed; redis only with ``RedisStore``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "OAuthClient": "snodo.oauth.client",
    "MemoryStore": "snodo.oauth.stores",
    "Store": "snodo.oauth.stores",
    "LoopbackListener": "snodo.oauth.loopback",
    "SharedRefresh": "snodo.oauth.stores",
    "RedisStore": "snodo.oauth.redis_stores",
    "redis_oauth_stores": "snodo.oauth.redis_stores",
}

__all__ = [
    "LoopbackListener",
    "MemoryStore",
    "OAuthClient",
    "RedisStore",
    "SharedRefresh",
    "Store",
    "redis_oauth_stores",
]

if TYPE_CHECKING:
    from snodo.oauth.client import OAuthClient as OAuthClient
    from snodo.oauth.loopback import LoopbackListener as LoopbackListener
    from snodo.oauth.redis_stores import RedisStore as RedisStore
    from snodo.oauth.redis_stores import redis_oauth_stores as redis_oauth_stores
    from snodo.oauth.stores import MemoryStore as MemoryStore
    from snodo.oauth.stores import SharedRefresh as SharedRefresh
    from snodo.oauth.stores import Store as Store


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'snodo.oauth' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
