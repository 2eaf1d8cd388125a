"""``AsyncClient``: the sync client's calls as coroutines, with no thread per call in flight.

An ``AsyncClient`` holds a :class:`snodo.Client` (made by ``snodo.connect`` on a worker thread:
connecting blocks) and drives that client's calls as steps (``Client.steps``,
``snodo.calls.Steps``) on the event loop, so options, checks, the cache, restarts, paging and
results are the sync client's own. Requests go through an :class:`~snodo.aio.seam.AsyncRequester`
per transport: stdio completes them from its reading side, HTTP on asyncio connections
(``snodo.aio.streamable_http``), other transports on the bounded worker pool. Input handlers
and progress callbacks may be coroutine functions: the loop runs them. Cancelling the task of a
call cancels the request.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from snodo import telemetry
from snodo.aio.bridge import Deadlines, LoopMailbox
from snodo.aio.requesters import SubmittedRequester, ThreadedRequester
from snodo.aio.seam import AsyncCallbacks, AsyncRequester, settle
from snodo.aio.workers import WorkerPool, workers
from snodo.calls import (
    Answer,
    AwaitReady,
    Handlers,
    Pause,
    Send,
    Steps,
    checked_round_answer,
    checked_server_answer,
    round_handler_failed,
    server_handler_failed,
)
from snodo.client import Client
from snodo.options import ProgressTarget, check_timeout
from snodo.protocol import errors, inputs
from snodo.protocol.errors import HandlerError, McpError
from snodo.protocol.results import InputRequired, Page
from snodo.supervision import current_owner
from snodo.transports.base import SubmittingTransport, Transport

if TYPE_CHECKING:
    from snodo.aio.subscription import AsyncSubscription
    from snodo.protocol.dialects import Dialect
    from snodo.protocol.negotiation import Session
    from snodo.tasks import AsyncTask

__all__ = ["AsyncClient", "LoopHandler", "connect", "direct"]

T = TypeVar("T")

#: The longest a coroutine input handler may run for a transport thread that waits on it.
HANDLER_WAIT = 600.0

#: Requesters kept per client: the current transport's and the one before a restart.
_REQUESTERS_KEPT = 2


class LoopHandler:
    """An input handler as the sync transports call it: a coroutine function's coroutine runs
    on the client's loop while the transport's thread waits (bounded); a plain function runs
    where it is called."""

    __slots__ = ("handler", "loop")

    def __init__(self, handler: Callable[[dict[str, Any]], Any], loop: asyncio.AbstractEventLoop):
        self.handler = handler
        self.loop = loop

    def __call__(self, params: dict[str, Any]) -> Any:
        result = self.handler(params)
        if not inspect.isawaitable(result):
            return result
        if _running_loop() is self.loop:
            result.close() if inspect.iscoroutine(result) else None
            raise HandlerError("a coroutine input handler was called on its own event loop")
        return asyncio.run_coroutine_threadsafe(_awaited(result), self.loop).result(HANDLER_WAIT)


async def _awaited(value: Any) -> Any:
    return await value


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _original(handler: Any) -> Any:
    return handler.handler if isinstance(handler, LoopHandler) else handler


def _loop_handlers(options: dict[str, Any], loop: asyncio.AbstractEventLoop) -> dict[str, Any]:
    handlers = options.get("input_handlers")
    if isinstance(handlers, Mapping):
        options = dict(options)
        options["input_handlers"] = {
            kind: LoopHandler(h, loop) if callable(h) else h for kind, h in handlers.items()
        }
    return options


async def connect(target: Any, **options: Any) -> AsyncClient:
    """``snodo.connect(target, **options)`` for asyncio: the same options, errors and client.

    The connection's owner is the thread running the event loop unless ``owner=`` is given.
    """
    import snodo

    return await _open(partial(snodo.connect, target), options)


async def direct(runtime: Any, **options: Any) -> AsyncClient:
    """``snodo.direct(runtime, **options)`` for asyncio. The runtime's handlers run on the
    worker pool (they are blocking functions)."""
    import snodo

    return await _open(partial(snodo.direct, runtime), options)


async def _open(opener: Callable[..., Client], options: dict[str, Any]) -> AsyncClient:
    loop = asyncio.get_running_loop()
    options = _loop_handlers(options, loop)
    options.setdefault("owner", current_owner())
    pool = workers()
    pool.hold()
    future = pool.run(partial(opener, **options))
    try:
        client = await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        # The connect runs on; whatever it opens is closed when it is done.
        future.add_done_callback(_close_opened)
        pool.release()
        raise
    except BaseException:
        pool.release()
        raise
    return AsyncClient(client, loop, pool)


def _close_opened(future: Any) -> None:
    if future.cancelled() or future.exception() is not None:
        return
    future.result().close()


class AsyncClient:
    """A connection to one MCP server for asyncio code (see the module docstring)."""

    def __init__(self, client: Client, loop: asyncio.AbstractEventLoop, pool: WorkerPool) -> None:
        #: The sync client underneath: its state, restarts and close.
        self.client = client
        self._steps = client.steps
        self._loop = loop
        self._pool = pool
        self._mailbox = LoopMailbox(loop)
        self._deadlines = Deadlines(loop)
        self._requesters: dict[Transport, AsyncRequester] = {}
        self._closing: asyncio.Future[None] | None = None
        self._callbacks = AsyncCallbacks(None, self._answer_server_request)
        self._handlers = client.options.input_handlers

    # -- what the connection is -------------------------------------------------------------

    @property
    def version(self) -> str:
        """The negotiated protocol version."""
        return self.client.version

    @property
    def name(self) -> str:
        """The server's name in logs (``name=`` of ``connect``/``direct``, or derived)."""
        return self.client.name

    @property
    def dialect(self) -> Dialect:
        return self.client.dialect

    @property
    def session(self) -> Session | None:
        return self.client.session

    @property
    def state(self) -> str:
        """``"connecting"``, ``"ready"``, ``"restarting"`` or ``"closed"``."""
        return self.client.state

    @property
    def closed(self) -> bool:
        return self.client.closed

    @property
    def options(self) -> Any:
        return self.client.options

    def __repr__(self) -> str:
        return f"<snodo.aio.AsyncClient {self.client!r}>"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- calls (the sync client's steps, driven here) -----------------------------------------

    async def discover(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> dict[str, Any]:
        """``server/discover`` (2026-07-28)."""
        steps = self._steps.discover(
            timeout=timeout, meta=meta, trace_context=trace_context, bypass_cache=bypass_cache
        )
        return await self._drive(steps)

    async def ping(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``ping`` (session era)."""
        return await self._drive(
            self._steps.ping(timeout=timeout, meta=meta, trace_context=trace_context)
        )

    async def list_tools(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> list[dict[str, Any]]:
        """Every tool, following ``nextCursor`` to the end."""
        steps = self._steps.list_tools(
            timeout=timeout, meta=meta, trace_context=trace_context, bypass_cache=bypass_cache
        )
        return await self._drive(steps)

    async def list_resources(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> list[dict[str, Any]]:
        """Every resource, following ``nextCursor`` to the end."""
        steps = self._steps.list_resources(
            timeout=timeout, meta=meta, trace_context=trace_context, bypass_cache=bypass_cache
        )
        return await self._drive(steps)

    async def list_resource_templates(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> list[dict[str, Any]]:
        """Every resource template, following ``nextCursor`` to the end."""
        steps = self._steps.list_resource_templates(
            timeout=timeout, meta=meta, trace_context=trace_context, bypass_cache=bypass_cache
        )
        return await self._drive(steps)

    async def list_prompts(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> list[dict[str, Any]]:
        """Every prompt, following ``nextCursor`` to the end."""
        steps = self._steps.list_prompts(
            timeout=timeout, meta=meta, trace_context=trace_context, bypass_cache=bypass_cache
        )
        return await self._drive(steps)

    async def list_page(
        self,
        kind: str,
        cursor: str | None = None,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> Page:
        """One page of ``kind`` ("tools", "resources", "resource_templates", "prompts")."""
        steps = self._steps.list_page(
            kind,
            cursor,
            timeout=timeout,
            meta=meta,
            trace_context=trace_context,
            bypass_cache=bypass_cache,
        )
        return await self._drive(steps)

    async def call_tool(
        self,
        tool: str | Mapping[str, Any],
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        max_input_rounds: int | None = None,
        reset_timeout_on_progress: bool | None = None,
        max_total_timeout: float | None = None,
        log_level: str | None = None,
        validate_output: bool | None = None,
    ) -> dict[str, Any] | InputRequired:
        """``tools/call`` by name, or with the definition from ``list_tools``."""
        steps = self._steps.call_tool(
            tool,
            arguments,
            timeout=timeout,
            progress=progress,
            meta=meta,
            trace_context=trace_context,
            input_responses=input_responses,
            request_state=request_state,
            max_input_rounds=max_input_rounds,
            reset_timeout_on_progress=reset_timeout_on_progress,
            max_total_timeout=max_total_timeout,
            log_level=log_level,
            validate_output=validate_output,
        )
        return await self._drive(steps)

    async def call_tool_task(
        self,
        tool: str | Mapping[str, Any],
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        max_input_rounds: int | None = None,
        log_level: str | None = None,
    ) -> AsyncTask:
        """``Client.call_tool_task``: an ``AsyncTask`` (``snodo.tasks``) driven on this loop."""
        from snodo.tasks import AsyncTask

        steps = self._steps.call_tool_task(
            tool,
            arguments,
            timeout=timeout,
            progress=progress,
            meta=meta,
            trace_context=trace_context,
            max_input_rounds=max_input_rounds,
            log_level=log_level,
        )
        return AsyncTask((await self._drive(steps)).steps, self._drive, self._task_listen())

    async def request_task(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        max_input_rounds: int | None = None,
        log_level: str | None = None,
    ) -> AsyncTask:
        """``Client.request_task``: any task-capable request, an ``AsyncTask``."""
        from snodo.tasks import AsyncTask

        steps = self._steps.request_task(
            method,
            params,
            timeout=timeout,
            progress=progress,
            meta=meta,
            trace_context=trace_context,
            max_input_rounds=max_input_rounds,
            log_level=log_level,
        )
        return AsyncTask((await self._drive(steps)).steps, self._drive, self._task_listen())

    def task(
        self,
        task_id: str,
        *,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
    ) -> AsyncTask:
        """``Client.task``: a handle on a task made earlier (nothing is sent yet)."""
        from snodo.tasks import AsyncTask

        made = self.client.task(task_id, meta=meta, trace_context=trace_context)
        return AsyncTask(made.steps, self._drive, self._task_listen())

    def _task_listen(self) -> Callable[..., Any] | None:
        """What a task handle follows notifications with (2026-07-28 only)."""
        return self.listen if self.client.dialect.stateless else None

    async def read_resource(
        self,
        uri: str,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        max_input_rounds: int | None = None,
        bypass_cache: bool = False,
        log_level: str | None = None,
    ) -> dict[str, Any] | InputRequired:
        """``resources/read``."""
        steps = self._steps.read_resource(
            uri,
            timeout=timeout,
            progress=progress,
            meta=meta,
            trace_context=trace_context,
            input_responses=input_responses,
            request_state=request_state,
            max_input_rounds=max_input_rounds,
            bypass_cache=bypass_cache,
            log_level=log_level,
        )
        return await self._drive(steps)

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        max_input_rounds: int | None = None,
        log_level: str | None = None,
    ) -> dict[str, Any] | InputRequired:
        """``prompts/get``."""
        steps = self._steps.get_prompt(
            name,
            arguments,
            timeout=timeout,
            progress=progress,
            meta=meta,
            trace_context=trace_context,
            input_responses=input_responses,
            request_state=request_state,
            max_input_rounds=max_input_rounds,
            log_level=log_level,
        )
        return await self._drive(steps)

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        max_input_rounds: int | None = None,
        reset_timeout_on_progress: bool | None = None,
        max_total_timeout: float | None = None,
        bypass_cache: bool = False,
        log_level: str | None = None,
    ) -> dict[str, Any] | InputRequired:
        """Any request the negotiated dialect lets a client send."""
        steps = self._steps.request(
            method,
            params,
            timeout=timeout,
            progress=progress,
            meta=meta,
            trace_context=trace_context,
            input_responses=input_responses,
            request_state=request_state,
            max_input_rounds=max_input_rounds,
            reset_timeout_on_progress=reset_timeout_on_progress,
            max_total_timeout=max_total_timeout,
            bypass_cache=bypass_cache,
            log_level=log_level,
        )
        return await self._drive(steps)

    async def notify(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
    ) -> None:
        """``Client.notify``: the same rules and errors; it runs on the worker pool (a write
        to a server that does not read, or an HTTP POST, blocks)."""
        notify = partial(
            self.client.notify,
            method,
            params,
            timeout=timeout,
            meta=meta,
            trace_context=trace_context,
        )
        await asyncio.wrap_future(self._pool.run(notify))

    async def roots_changed(self, *, timeout: float | None = None) -> None:
        """``Client.roots_changed``: ``notifications/roots/list_changed``, when declared."""
        await asyncio.wrap_future(
            self._pool.run(partial(self.client.roots_changed, timeout=timeout))
        )

    async def listen(
        self,
        notifications: Mapping[str, Any],
        *,
        timeout: float | None = None,
        max_buffer: int = 100,
        overflow: str = "drop_oldest",
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
    ) -> AsyncSubscription:
        """``Client.listen`` for asyncio: ``async for event in sub`` (ends with ``Closed``)."""
        from snodo.aio.subscription import open_async_subscription

        check_timeout("timeout", timeout)
        client = self.client
        return await open_async_subscription(
            self._steps.listen_context(),
            self._pool,
            self._mailbox,
            notifications,
            timeout=timeout if timeout is not None else client.options.timeout,
            max_buffer=max_buffer,
            overflow=overflow,
            owner=current_owner(),
            meta=meta,
            trace_context=trace_context,
        )

    def stats(self) -> dict[str, Any]:
        """``Client.stats()``: the connection's counters."""
        return self.client.stats()

    async def aclose(self) -> None:
        """Close the connection (``Client.close``); calls in flight fail with -32000.
        Idempotent: every caller returns once it is closed."""
        if self._closing is not None:
            await asyncio.shield(self._closing)
            return
        self._closing = self._loop.create_future()
        try:
            requesters, self._requesters = list(self._requesters.values()), {}
            for requester in requesters:
                await requester.aclose()
            await asyncio.wrap_future(self._pool.run(self.client.close))
        finally:
            self._pool.release()
            self._closing.set_result(None)

    # -- the async driver ----------------------------------------------------------------------

    async def _drive(self, steps: Steps[T]) -> T:
        """Carry ``steps`` out on the loop (the sync driver is ``snodo.calls.drive``)."""
        try:
            step = next(steps)
            while True:
                kind = type(step)
                if kind is Send:
                    assert isinstance(step, Send)
                    requester = self._requester(step.transport)
                    options = step.options
                    callbacks = self._callbacks
                    if options.on_progress is not None:
                        callbacks = AsyncCallbacks(options.on_progress, self._answer_server_request)
                    try:
                        reply: Any = await requester.request(step.message, options, callbacks)
                    except McpError as error:
                        step = steps.throw(error)
                        continue
                elif kind is Answer:
                    assert isinstance(step, Answer)
                    try:
                        reply = await self._answer_round(step)
                    except McpError as error:
                        step = steps.throw(error)  # the call fails with it (and counts it)
                        continue
                elif kind is Pause:
                    assert isinstance(step, Pause)
                    await asyncio.sleep(step.seconds)
                    reply = None
                else:
                    assert isinstance(step, AwaitReady)
                    try:
                        reply = await self._await_ready(step)
                    except McpError as error:
                        step = steps.throw(error)
                        continue
                step = steps.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result
        except BaseException:
            steps.close()  # cancelled here (not by the steps): they end now, and count it
            raise

    def _requester(self, transport: Transport) -> AsyncRequester:
        requester = self._requesters.get(transport)
        if requester is not None:
            return requester
        if isinstance(transport, SubmittingTransport):
            requester = SubmittedRequester(transport, self._mailbox, self._deadlines)
        elif _is_http(transport):
            from snodo.aio.streamable_http import AsyncHttp

            requester = AsyncHttp(transport)  # type: ignore[arg-type]
        else:
            requester = ThreadedRequester(transport, self._pool, self._mailbox)
        if telemetry.available():  # CLIENT spans around this connection's requests
            requester = telemetry.TracedRequester(requester, transport)
        if len(self._requesters) >= _REQUESTERS_KEPT:  # a restart replaced the oldest
            old = next(iter(self._requesters))
            stale = self._requesters.pop(old)
            self._loop.create_task(stale.aclose())
        self._requesters[transport] = requester
        return requester

    async def _answer_round(self, step: Answer) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        for task in step.tasks:
            handler = _original(step.handlers[task.kind])
            try:
                response = await settle(handler(task.params))
            except HandlerError as failure:
                raise round_handler_failed(task, failure, step.pending) from None
            answers[task.key] = checked_round_answer(task, response, step.pending)
        return answers

    async def _answer_server_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        handlers: Handlers = self._handlers
        checked = inputs.check_server_request(method, params, handlers)
        if checked is None:
            return {}
        kind, handler_params = checked
        try:
            response = await settle(_original(handlers[kind])(handler_params))
        except HandlerError as failure:
            raise server_handler_failed(method, failure) from None
        return checked_server_answer(method, kind, response)

    async def _await_ready(self, step: AwaitReady) -> Any:
        source = step.source
        while True:
            ready = source.ready_now(step.after)
            if ready is not None:
                return ready
            remaining = step.deadline - time.monotonic()
            if remaining <= 0:
                from snodo.lifecycle import RESTART_WAIT

                timeout = step.timeout if step.timeout is not None else RESTART_WAIT
                raise errors.timeout_error(timeout, cause=("restarting",))
            changed: asyncio.Future[None] = self._loop.create_future()
            cancel = source.on_change(partial(self._mailbox.post, _settle_future, changed))
            try:
                if source.ready_now(step.after) is None:
                    await asyncio.wait({changed}, timeout=remaining)
            finally:
                cancel()


def _settle_future(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _is_http(transport: Transport) -> bool:
    # Not loaded: no transport is an HttpTransport (and a stdio program never loads HTTP).
    module = sys.modules.get("snodo.transports.streamable_http")
    return module is not None and isinstance(transport, module.HttpTransport)
