"""The :class:`~snodo.aio.seam.AsyncRequester` of each kind of transport but HTTP.

- stdio (``SubmittingTransport``): the request is written from the loop and its response put
  into a :class:`~snodo.aio.bridge.CallInbox` by the hub; no thread waits for it.
- every other transport (direct, custom ones): the blocking ``request`` runs on the shared
  :class:`~snodo.aio.workers.WorkerPool`; its progress comes back through the inbox.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from snodo.aio.bridge import CallInbox, LoopMailbox
from snodo.aio.seam import AsyncCallbacks, settle
from snodo.aio.workers import WorkerPool
from snodo.protocol import jsonrpc
from snodo.protocol.errors import McpError
from snodo.protocol.exchange import Deadline
from snodo.transports.base import (
    NotifyingTransport,
    RequestOptions,
    SubmittingTransport,
    Transport,
)

__all__ = ["SubmittedRequester", "ThreadedRequester"]


class SubmittedRequester:
    """Requests written from the loop, answered through the transport's reading side."""

    __slots__ = ("_mailbox", "_transport")

    def __init__(self, transport: SubmittingTransport, mailbox: LoopMailbox) -> None:
        self._transport = transport
        self._mailbox = mailbox

    async def request(
        self, message: dict[str, Any], options: RequestOptions, callbacks: AsyncCallbacks
    ) -> dict[str, Any]:
        transport = self._transport
        inbox = CallInbox(self._mailbox)
        transport.submit(message, options, inbox)
        request_id = message["id"]
        deadline = Deadline.start(options, time.monotonic())
        try:
            while True:
                remaining = deadline.remaining(time.monotonic())
                if remaining is not None and remaining <= 0:
                    transport.withdraw(request_id, "Request timed out")
                    raise deadline.error()
                item = await inbox.get(remaining)
                if item is None:
                    continue  # the loop turns the deadline into the timeout error
                kind, value = item
                if kind == "response":
                    response: dict[str, Any] = value
                    return response
                if kind == "error":
                    raise _copy(value)
                if callbacks.progress is not None:
                    await settle(callbacks.progress(value))
                deadline = deadline.after_progress(time.monotonic())
        except McpError:
            raise
        except BaseException:
            # Cancelled, or a progress callback raised: the server may stop working on it.
            transport.withdraw(request_id, "The client stopped waiting")
            raise

    async def aclose(self) -> None:
        """Nothing of its own: the transport closes with the client."""


class ThreadedRequester:
    """A blocking transport's requests on the worker pool (direct, custom transports)."""

    __slots__ = ("_mailbox", "_pool", "_transport")

    def __init__(self, transport: Transport, pool: WorkerPool, mailbox: LoopMailbox) -> None:
        self._transport = transport
        self._pool = pool
        self._mailbox = mailbox

    async def request(
        self, message: dict[str, Any], options: RequestOptions, callbacks: AsyncCallbacks
    ) -> dict[str, Any]:
        inbox = CallInbox(self._mailbox)
        if callbacks.progress is not None:
            options = replace(options, on_progress=lambda params: inbox.put(("progress", params)))
        transport = self._transport

        def run() -> None:
            try:
                inbox.put(("response", transport.request(message, options)))
            except BaseException as exc:
                inbox.put(("error", exc))

        self._pool.run(run)
        try:
            while True:
                item = await inbox.get(None)
                assert item is not None
                kind, value = item
                if kind == "response":
                    response: dict[str, Any] = value
                    return response
                if kind == "error":
                    raise value
                if callbacks.progress is not None:
                    await settle(callbacks.progress(value))
        except McpError:
            raise
        except BaseException:
            if isinstance(transport, NotifyingTransport):
                note = jsonrpc.cancelled_notification(message["id"], "The client stopped waiting")
                try:
                    transport.notify(note, options)
                except McpError:
                    pass
            raise

    async def aclose(self) -> None:
        """Nothing of its own: the transport closes with the client."""


def _copy(error: McpError) -> McpError:
    """A fresh copy: one error object may fail many calls (a lost connection)."""
    return McpError(error.code, error.message, error.data, kind=error.kind, cause=error.cause)
