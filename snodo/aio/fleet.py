"""``snodo.Fleet`` for asyncio: ``await AsyncFleet.open(config, ...)``.

The fleet itself (its supervisor, starts, states, catalog, reloads) is the sync ``snodo.Fleet``;
what blocks there (starting, listing, reloading, closing) runs on the worker pool. A routed call
is the server's :class:`AsyncClient` call, driven on the event loop like any other: no thread
per call in flight. Each server's ``AsyncClient`` wraps the fleet's current ``Client`` for it
and is made again when the fleet replaced that connection (an idle stop, a reload, a restart).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any, TypeVar

from snodo.aio.client import AsyncClient
from snodo.aio.workers import WorkerPool, workers
from snodo.fleet import Fleet, FleetStatus
from snodo.protocol.results import InputRequired
from snodo.supervision import current_owner

__all__ = ["AsyncFleet"]

T = TypeVar("T")


class AsyncFleet:
    """Many servers for asyncio code (see the module docstring and "Fleets" in the API tour)."""

    def __init__(self, fleet: Fleet, loop: asyncio.AbstractEventLoop, pool: WorkerPool) -> None:
        #: The sync fleet underneath: its states, catalog and supervision.
        self.fleet = fleet
        self._loop = loop
        self._pool = pool
        self._clients: dict[str, AsyncClient] = {}
        self._closing: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, config: Mapping[str, Any], **options: Any) -> AsyncFleet:
        """``snodo.Fleet(config, **options)``, started on the worker pool; the connections'
        owner is the thread running the event loop unless ``owner=`` is given."""
        options.setdefault("owner", current_owner())
        return await cls._start(partial(Fleet, config, **options))

    @classmethod
    async def from_file(cls, path: str | os.PathLike[str], **options: Any) -> AsyncFleet:
        """``snodo.Fleet.from_file(path, **options)`` for asyncio."""
        options.setdefault("owner", current_owner())
        return await cls._start(partial(Fleet.from_file, path, **options))

    @classmethod
    async def _start(cls, opener: Any) -> AsyncFleet:
        pool = workers()
        pool.hold()
        future = pool.run(opener)
        try:
            fleet = await asyncio.wrap_future(future)
        except BaseException:
            future.add_done_callback(_close_opened)
            pool.release()
            raise
        return cls(fleet, asyncio.get_running_loop(), pool)

    # -- the servers ------------------------------------------------------------------------

    async def client(self, name: str) -> AsyncClient:
        """The server's ``AsyncClient`` (a lazy or idle server is started first)."""
        client = self.fleet.ready_client(name)
        if client is None:
            client = await self._blocking(partial(self.fleet.__getitem__, name))
        old = self._clients.get(name)
        if old is not None and old.client is client:
            return old
        self._pool.hold()
        fresh = self._clients[name] = AsyncClient(client, self._loop, self._pool)
        if old is not None:  # the fleet replaced that connection: release what wrapped it
            await old.aclose()
        return fresh

    def status(self) -> FleetStatus:
        """``Fleet.status()`` (cheap: no wait)."""
        return self.fleet.status()

    def __contains__(self, name: object) -> bool:
        return name in self.fleet

    def __iter__(self) -> Iterator[str]:
        return iter(self.fleet)

    def __len__(self) -> int:
        return len(self.fleet)

    # -- the catalog --------------------------------------------------------------------------

    async def list_tools(self) -> list[dict[str, Any]]:
        return await self._blocking(self.fleet.list_tools)

    async def list_prompts(self) -> list[dict[str, Any]]:
        return await self._blocking(self.fleet.list_prompts)

    async def list_resources(self) -> list[dict[str, Any]]:
        return await self._blocking(self.fleet.list_resources)

    async def list_resource_templates(self) -> list[dict[str, Any]]:
        return await self._blocking(self.fleet.list_resource_templates)

    async def call_tool(
        self,
        tool: str | Mapping[str, Any],
        arguments: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> dict[str, Any] | InputRequired:
        """``Fleet.call_tool`` as a coroutine, on the server's ``AsyncClient``."""
        route = self.fleet.route("tools", tool)
        client = await self.client(route.server)
        target = route.name if route.definition is None else route.definition
        result = await client.call_tool(target, arguments, **options)
        self.fleet.succeeded(route.server)
        return result

    async def get_prompt(
        self,
        prompt: str | Mapping[str, Any],
        arguments: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> dict[str, Any] | InputRequired:
        route = self.fleet.route("prompts", prompt)
        client = await self.client(route.server)
        result = await client.get_prompt(route.name, arguments, **options)
        self.fleet.succeeded(route.server)
        return result

    async def read_resource(
        self, uri: str, *, server: str | None = None, **options: Any
    ) -> dict[str, Any] | InputRequired:
        if server is None:
            route = await self._blocking(partial(self.fleet.route, "resources", uri))
            server = route.server
        client = await self.client(server)
        result = await client.read_resource(uri, **options)
        self.fleet.succeeded(server)
        return result

    # -- reload and close ---------------------------------------------------------------------

    async def reload(self, config: Mapping[str, Any]) -> dict[str, list[str]]:
        return await self._blocking(partial(self.fleet.reload, config))

    async def restart(self, name: str) -> None:
        await self._blocking(partial(self.fleet.restart, name))

    async def aclose(self, timeout: float = 10.0) -> None:
        """``Fleet.close`` on the worker pool, then the servers' ``AsyncClient``s. Idempotent."""
        if self._closing is not None:
            await asyncio.shield(self._closing)
            return
        self._closing = self._loop.create_future()
        try:
            await asyncio.wrap_future(self._pool.run(partial(self.fleet.close, timeout)))
            clients, self._clients = list(self._clients.values()), {}
            for client in clients:
                await client.aclose()
        finally:
            self._pool.release()
            self._closing.set_result(None)

    async def __aenter__(self) -> AsyncFleet:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<snodo.aio.AsyncFleet {self.fleet!r}>"

    async def _blocking(self, job: Callable[[], T]) -> T:
        result: T = await asyncio.wrap_future(self._pool.run(job))
        return result


def _close_opened(future: Any) -> None:
    if future.cancelled() or future.exception() is not None:
        return
    future.result().close()
