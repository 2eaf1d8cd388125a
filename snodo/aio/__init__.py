"""snodo for asyncio: ``await snodo.aio.connect(target, ...)`` and ``snodo.aio.direct(runtime)``
return an :class:`AsyncClient` whose calls are coroutines (see ``snodo.aio.client``).

Loaded only when imported: ``import snodo`` does not load asyncio.
"""

from snodo.aio.client import AsyncClient, connect, direct
from snodo.aio.subscription import AsyncSubscription

__all__ = ["AsyncClient", "AsyncSubscription", "connect", "direct"]
