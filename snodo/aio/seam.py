"""What the asyncio driver needs from a connection: an awaitable request.

The sync transports are driven by blocking calls; ``snodo.aio`` drives them through an
:class:`AsyncRequester` made per transport (stdio: its reading side completes the call on the
event loop; HTTP: asyncio connections of its own; others: a bounded worker pool). Progress and
server requests come back through :class:`AsyncCallbacks`, whose callables may be coroutine
functions: a requester awaits what they return before it reads on.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from snodo.transports.base import RequestOptions

__all__ = ["AsyncCallbacks", "AsyncProgress", "AsyncRequester", "AsyncServerRequest", "settle"]

#: Receives each ``notifications/progress`` params of the request (may return an awaitable).
AsyncProgress = Callable[[dict[str, Any]], "Awaitable[None] | None"]

#: Answers a server-to-client request: ``(method, params) -> result`` (or an awaitable of it);
#: raises McpError to refuse.
AsyncServerRequest = Callable[[str, dict[str, Any]], "Awaitable[dict[str, Any]] | dict[str, Any]"]


@dataclass(frozen=True, slots=True)
class AsyncCallbacks:
    """Where an async request's progress goes and who answers the server's requests during it.

    The requester uses these, never ``options.on_progress`` / ``options.on_server_request``.
    """

    progress: AsyncProgress | None = None
    server_request: AsyncServerRequest | None = None


class AsyncRequester(Protocol):
    """Sends requests of one connection from the event loop."""

    async def request(
        self, message: dict[str, Any], options: RequestOptions, callbacks: AsyncCallbacks
    ) -> dict[str, Any]:
        """Send ``message`` and return its JSON-RPC response dict, as the sync ``request``
        would (same errors); cancelling the awaiting task cancels the request."""
        ...

    async def aclose(self) -> None:
        """Release what the requester holds of its own; requests in flight fail with -32000."""
        ...


async def settle(value: Any) -> Any:
    """``value``, awaited first when it is awaitable (a callback that may be a coroutine)."""
    if inspect.isawaitable(value):
        return await value
    return value
