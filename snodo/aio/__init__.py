"""snodo for asyncio: ``await snodo.aio.connect(target, ...)`` and ``snodo.aio.direct(runtime)``
return an :class:`AsyncClient` whose calls are coroutines (see ``snodo.aio.client``);
``await snodo.aio.AsyncFleet.open(config)`` is ``snodo.Fleet`` for asyncio.

Loaded only when imported: ``import snodo`` does not load asyncio.
"""

from typing import TYPE_CHECKING, Any

from snodo.aio.client import AsyncClient, connect, direct
from snodo.aio.subscription import AsyncSubscription

if TYPE_CHECKING:
    from snodo.aio.fleet import AsyncFleet as AsyncFleet

__all__ = ["AsyncClient", "AsyncFleet", "AsyncSubscription", "connect", "direct"]


def __getattr__(name: str) -> Any:
    if name == "AsyncFleet":  # the fleet (its supervision, stdio and config rules) on first use
        from snodo.aio.fleet import AsyncFleet

        return AsyncFleet
    raise AttributeError(f"module 'snodo.aio' has no attribute {name!r}")
