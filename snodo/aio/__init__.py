"""snodo for asyncio: ``await snodo.aio.connect(target, ...)`` and ``snodo.aio.direct(runtime)``
return an :class:`AsyncClient` whose calls are coroutines (see ``snodo.aio.client``);
``await snodo.aio.AsyncFleet.open(config)`` is ``snodo.Fleet`` for asyncio.

Loaded only when imported: ``import snodo`` does not load asyncio.
"""

from snodo.aio.client import AsyncClient, connect, direct
from snodo.aio.fleet import AsyncFleet
from snodo.aio.subscription import AsyncSubscription

__all__ = ["AsyncClient", "AsyncFleet", "AsyncSubscription", "connect", "direct"]
