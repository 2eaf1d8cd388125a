"""The :class:`~snodo.aio.seam.AsyncRequester` of each kind of transport but HTTP.

- stdio (``SubmittingTransport``): the request is written from the loop and its response put
  into a :class:`~snodo.aio.bridge.CallInbox` by the hub; no thread waits for it.
- every other transport (direct, custom ones): the blocking ``request`` runs on the shared
  :class:`~snodo.aio.workers.WorkerPool`; its progress comes back through the inbox.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from functools import partial
from typing import Any

from snodo.aio.bridge import CallInbox, Deadlines, LoopMailbox
from snodo.aio.seam import AsyncCallbacks, settle
from snodo.aio.workers import WorkerPool
from snodo.protocol import jsonrpc
from snodo.protocol.errors import McpError
from snodo.protocol.exchange import Deadline
from snodo.transports.base import (
    Inbox,
    LendingTransport,
    NotifyingTransport,
    RequestOptions,
    SubmittingTransport,
    Transport,
)

__all__ = ["KEEP_READING", "SubmittedRequester", "ThreadedRequester"]


#: How long a loop keeps stdio's reading role after its last call is answered (seconds): a
#: caller that sends one call after another keeps it, an idle client gives it back.
KEEP_READING = 0.05


class SubmittedRequester:
    """Requests written from the loop, answered through the transport's reading side. The
    requests made in one turn of the loop go out in one write; while calls are out, the loop
    reads the server's output itself when the transport lends it (``LendingTransport``)."""

    __slots__ = (
        "_batch",
        "_deadlines",
        "_inflight",
        "_keep",
        "_lender",
        "_loop",
        "_mailbox",
        "_reading",
        "_transport",
    )

    def __init__(
        self, transport: SubmittingTransport, mailbox: LoopMailbox, deadlines: Deadlines
    ) -> None:
        self._transport = transport
        self._mailbox = mailbox
        self._deadlines = deadlines
        self._batch: list[tuple[dict[str, Any], RequestOptions, Inbox]] | None = None
        self._loop = asyncio.get_running_loop()
        self._lender = transport if isinstance(transport, LendingTransport) else None
        self._reading: int | None = None  # the descriptor the loop reads, while lent
        self._inflight = 0
        self._keep: asyncio.TimerHandle | None = None

    async def request(
        self, message: dict[str, Any], options: RequestOptions, callbacks: AsyncCallbacks
    ) -> dict[str, Any]:
        inbox = CallInbox(self._mailbox, self._deadlines)
        batch = self._batch
        if batch is None:
            batch = self._batch = []
            self._loop.call_soon(self._flush)
        entry = (message, options, inbox)
        batch.append(entry)
        self._inflight += 1
        deadline = Deadline.start(options, time.monotonic())
        try:
            while True:
                remaining = deadline.remaining(time.monotonic())
                if remaining is not None and remaining <= 0:
                    self._stop(entry, "Request timed out")
                    raise deadline.error()
                item = await inbox.get(remaining)
                if item is None:
                    continue  # the loop turns the deadline into the timeout error
                kind, value = item
                if kind == "response":
                    response: dict[str, Any] = value
                    return response
                if kind == "error":
                    raise _copy(value) if isinstance(value, McpError) else value
                if callbacks.progress is not None:
                    await settle(callbacks.progress(value))
                deadline = deadline.after_progress(time.monotonic())
        except McpError:
            raise
        except BaseException:
            # Cancelled, or a progress callback raised: the server may stop working on it.
            self._stop(entry, "The client stopped waiting")
            raise
        finally:
            self._inflight -= 1
            if self._inflight == 0 and self._reading is not None and self._keep is None:
                self._keep = self._loop.call_later(KEEP_READING, self._idle)

    def _stop(self, entry: tuple[dict[str, Any], RequestOptions, Inbox], reason: str) -> None:
        """Stop waiting: a request still in the batch is never sent; one sent is withdrawn."""
        batch = self._batch
        if batch is not None:
            for i, queued in enumerate(batch):
                if queued is entry:
                    del batch[i]
                    return
        self._transport.withdraw(entry[0]["id"], reason)

    def _flush(self) -> None:
        batch, self._batch = self._batch, None
        if not batch:
            return
        if self._reading is None and self._lender is not None:
            fd = self._lender.lend_reading(partial(self._mailbox.post, self._lent_exit, None))
            if fd is not None:
                self._reading = fd
                self._loop.add_reader(fd, self._readable)
        self._transport.submit(batch)

    # -- the lent reading role -------------------------------------------------------------

    def _readable(self) -> None:
        lender = self._lender
        assert lender is not None
        if not lender.read_lent():
            self._give_back()

    def _lent_exit(self, _: Any) -> None:
        self._give_back()

    def _idle(self) -> None:
        self._keep = None
        if self._inflight == 0:
            self._give_back()

    def _give_back(self) -> None:
        fd, self._reading = self._reading, None
        if self._keep is not None:
            self._keep.cancel()
            self._keep = None
        if fd is None:
            return
        self._loop.remove_reader(fd)
        assert self._lender is not None
        self._lender.return_reading()

    async def aclose(self) -> None:
        """Give the reading role back; the transport closes with the client."""
        self._give_back()


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
