"""``AsyncClient.listen``: a subscription read with ``async for``.

The stream is the sync one (``snodo.subscription``: the ``SubscriptionStream`` actor keeps the
buffer, the demand and the overflow policy); its events come to the event loop through the
client's mailbox, and each ``__anext__`` demands one, as ``Subscription.next`` does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from functools import partial
from typing import Any

from snodo.aio.bridge import CallInbox, LoopMailbox
from snodo.aio.workers import WorkerPool
from snodo.protocol import errors
from snodo.protocol.subscriptions import Closed, Event, Notification
from snodo.subscription import ListenContext, Subscription, open_subscription

__all__ = ["AsyncSubscription", "open_async_subscription"]


async def open_async_subscription(
    context: ListenContext,
    pool: WorkerPool,
    mailbox: LoopMailbox,
    notifications: Mapping[str, Any],
    **options: Any,
) -> AsyncSubscription:
    """Open the listen on a worker (it waits for the acknowledgement) and return its handle."""
    inbox = CallInbox(mailbox)

    def into(event: Event) -> None:
        inbox.put(("event", event))

    opened = pool.run(partial(open_subscription, context, notifications, into=into, **options))
    try:
        subscription = await asyncio.wrap_future(opened)
    except asyncio.CancelledError:
        opened.add_done_callback(_close_opened)
        raise
    return AsyncSubscription(subscription, inbox, pool)


def _close_opened(future: Any) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().close()


class AsyncSubscription:
    """An open subscription for asyncio: ``async for event in sub`` (every event, ending with
    ``Closed``), or ``await sub.next(timeout)``."""

    def __init__(self, subscription: Subscription, inbox: CallInbox, pool: WorkerPool) -> None:
        self.subscription = subscription
        self._inbox = inbox
        self._pool = pool
        self._owed = False
        self._ended = False

    @property
    def accepted(self) -> dict[str, Any]:
        return self.subscription.accepted

    @property
    def closed(self) -> bool:
        return self._ended

    def __repr__(self) -> str:
        return f"<snodo.aio.AsyncSubscription {self.subscription!r}>"

    def demand(self, n: int = 1) -> None:
        """Ask for ``n`` more events."""
        self.subscription.demand(n)

    async def next(self, timeout: float | None = None) -> Event:
        """One event (``Subscription.next``): -32001 when none arrives within ``timeout``;
        ``Closed`` at once on an ended stream."""
        if self._ended:
            return _ended()
        if not self._owed:
            self.subscription.demand(1)
            self._owed = True
        item = await self._inbox.get(timeout)
        if item is None:
            raise errors.timeout_error(timeout or 0.0, cause=("subscription",))
        event: Event = item[1]
        if isinstance(event, Notification):
            self._owed = False
        elif isinstance(event, Closed):
            self._ended = True
            self.subscription.ended_elsewhere()  # its owner watch ends here, as next()'s does
        return event

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def __anext__(self) -> Event:
        if self._ended:
            raise StopAsyncIteration
        return await self.next()

    async def aclose(self) -> None:
        """End the stream (``Subscription.close``); nothing is delivered after it returns."""
        self._ended = True
        await asyncio.wrap_future(self._pool.run(self.subscription.close))

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _ended() -> Closed:
    return Closed(errors.connection_error("Subscription closed", cause=("subscription_closed",)))
