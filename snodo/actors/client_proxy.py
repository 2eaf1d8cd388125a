"""A connection held by a Pykka actor, whose proxy's calls return Pykka futures at once.

``start_client(target, ...)`` / ``start_direct(runtime, ...)`` start a :class:`ClientActor`
holding one ``snodo.aio.AsyncClient`` opened on the shared background loop
(``snodo.aio.background``) and return its :class:`ClientRef`. ``ref.proxy()`` is a
:class:`ClientProxy`: its Client calls (``call_tool``, ``list_tools``, ...) do not go through
the actor's mailbox; each runs as a coroutine on the background loop and completes the Pykka
future it returned, so many calls are in flight on one connection and the caller never blocks
(docs/decisions/0035-actor-proxy.md). Everything else (``state``, ``version``, ``closed``,
``listen``, ``close``) is an ordinary Pykka proxy call through the mailbox.

The actor owns its connection (``owner=`` the actor unless given): when the actor ends, for
any reason, the connection closes (explicitly in its stop/failure hooks, and by the
supervision of ``snodo.lifecycle``). The futures are ``pykka.ThreadingFuture``; under gevent's
monkey-patching they wait cooperatively (Pykka 4 has no gevent futures of its own).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Mapping
from functools import partial
from types import TracebackType
from typing import Any, cast

import pykka

from snodo.aio import background
from snodo.aio.client import AsyncClient, connect, direct
from snodo.log import get_logger
from snodo.protocol import errors
from snodo.subscription import Subscription
from snodo.supervision import Actor, stop
from snodo.tasks import AsyncTask

__all__ = [
    "CALLS",
    "CLOSE_WAIT",
    "OPEN_WAIT",
    "TASK_CALLS",
    "ClientActor",
    "ClientProxy",
    "ClientRef",
    "ProxyCalls",
    "ProxyTask",
    "start_client",
    "start_direct",
]

_log = get_logger("snodo.actors.client_proxy")

#: The Client calls a :class:`ClientProxy` runs off the mailbox.
CALLS = frozenset(
    {
        "call_tool",
        "call_tool_task",
        "discover",
        "get_prompt",
        "list_page",
        "list_prompts",
        "list_resource_templates",
        "list_resources",
        "list_tools",
        "notify",
        "ping",
        "read_resource",
        "request",
        "request_task",
        "roots_changed",
    }
)

#: The calls whose future's value is a :class:`ProxyTask` (the AsyncClient's task handle,
#: each of its calls a future too).
TASK_CALLS = frozenset({"call_tool_task", "request_task"})

#: Longest ``start_client`` waits for the connection to open (connect has its own timeouts).
OPEN_WAIT = 120.0
#: Longest the actor's end waits for its connection to close.
CLOSE_WAIT = 10.0
#: Longest ``start_client`` waits for the actor to stop after a failed connect.
_STOP_WAIT = 10.0

_ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def _exc_info(exc: BaseException) -> _ExcInfo:
    return type(exc), exc, exc.__traceback__


class ProxyCalls:
    """The calls of one proxied connection, run on the background loop (thread-safe).

    Holds a use of the background loop from construction until :meth:`close`; a call made
    once closing has begun fails at once with the connection's -32000.
    """

    __slots__ = ("_client", "_closing", "_lock", "_loop")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._client: AsyncClient | None = None
        self._closing = False
        self._loop = background.acquire()

    @property
    def client(self) -> AsyncClient | None:
        """The connection, once open."""
        return self._client

    def open(self, opening: Coroutine[Any, Any, AsyncClient], timeout: float) -> AsyncClient:
        """Run ``opening`` (``snodo.aio.connect(...)``) on the loop and keep its client; its
        McpError is raised here, and -32001 after ``timeout``."""
        if background.shared().thread is threading.current_thread():
            opening.close()
            msg = (
                "a ClientActor cannot be started from the snodo-aio loop (it would wait on itself)"
            )
            raise RuntimeError(msg)
        future = asyncio.run_coroutine_threadsafe(opening, self._loop)
        try:
            client = future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise errors.timeout_error(timeout, cause=("connecting",)) from None
        except concurrent.futures.CancelledError:
            raise errors.connection_error("Connection closed while opening") from None
        with self._lock:
            closing = self._closing
            if not closing:
                self._client = client
        if closing:  # the actor ended while the connection opened
            self._close_client(client, CLOSE_WAIT)
            raise errors.connection_error("Connection closed while opening")
        return client

    def submit(
        self, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> pykka.ThreadingFuture[Any]:
        """Start ``client.<name>(*args, **kwargs)`` on the loop; a future of its outcome."""
        future: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
        with self._lock:
            client = self._client
            if client is None or self._closing:
                future.set_exception(_exc_info(errors.connection_error("Connection closed")))
                return future
            try:
                coroutine = getattr(client, name)(*args, **kwargs)
            except Exception as exc:  # wrong arguments: the future says so, as Pykka's would
                future.set_exception(_exc_info(exc))
                return future
            if name in TASK_CALLS:
                coroutine = self._proxied_task(coroutine)
            running = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        running.add_done_callback(partial(_settle, future))
        return future

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> pykka.ThreadingFuture[Any]:
        """Run ``coroutine`` (a call of a task handle) on the loop; a future of its outcome
        (the connection's -32000 once it is closing)."""
        future: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
        with self._lock:
            if self._client is None or self._closing:
                coroutine.close()
                future.set_exception(_exc_info(errors.connection_error("Connection closed")))
                return future
            running = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        running.add_done_callback(partial(_settle, future))
        return future

    async def _proxied_task(self, making: Coroutine[Any, Any, AsyncTask]) -> ProxyTask:
        return ProxyTask(await making, self)

    def close(self, timeout: float = CLOSE_WAIT) -> None:
        """Close the connection (within ``timeout``) and give the loop back; idempotent."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            client = self._client
        try:
            if client is not None:
                self._close_client(client, timeout)
        finally:
            background.release()

    def _close_client(self, client: AsyncClient, timeout: float) -> None:
        closing = asyncio.run_coroutine_threadsafe(client.aclose(), self._loop)
        try:
            closing.result(timeout)
        except concurrent.futures.TimeoutError:
            closing.cancel()
            _log.warning("the proxied connection did not close in time", timeout=timeout)
        except Exception:
            _log.exception("closing the proxied connection failed")


class ProxyTask:
    """``snodo.Task`` for a :class:`ClientProxy` (``call_tool_task``'s future's value): each
    call runs the AsyncClient's task handle on the background loop and returns a Pykka future
    at once; ``id``, ``record`` and ``done`` read the last record without a request."""

    __slots__ = ("_calls", "_task")

    def __init__(self, task: AsyncTask, calls: ProxyCalls) -> None:
        self._task = task
        self._calls = calls

    def __repr__(self) -> str:
        return f"<snodo.actors.ProxyTask {self._task.id!r} {self._task.record.status}>"

    @property
    def id(self) -> str:
        return self._task.id

    @property
    def record(self) -> Any:
        return self._task.record

    @property
    def done(self) -> bool:
        return self._task.done

    def status(self) -> pykka.ThreadingFuture[Any]:
        """``Task.status``: a future of the status, asked of the server."""
        return self._calls.run(self._task.status())

    def wait(self, timeout: float | None = None) -> pykka.ThreadingFuture[Any]:
        """``Task.wait``: a future of the status once the task ended (or needs input)."""
        return self._calls.run(self._task.wait(timeout))

    def result(self, timeout: float | None = None) -> pykka.ThreadingFuture[Any]:
        """``Task.result``: a future of the result, the ``InputRequired``, or the error."""
        return self._calls.run(self._task.result(timeout))

    def answer(
        self, input_responses: Mapping[str, Any], *, timeout: float | None = None
    ) -> pykka.ThreadingFuture[Any]:
        """``Task.answer``: a future that is None once the answers were sent."""
        return self._calls.run(self._task.answer(input_responses, timeout=timeout))

    def cancel(self, *, timeout: float | None = None) -> pykka.ThreadingFuture[Any]:
        """``Task.cancel``: a future that is None once the server acknowledged it."""
        return self._calls.run(self._task.cancel(timeout=timeout))


def _settle(future: pykka.ThreadingFuture[Any], done: concurrent.futures.Future[Any]) -> None:
    """Complete the Pykka future from the call's concurrent future (on the loop)."""
    if done.cancelled():  # the loop ended under the call
        future.set_exception(_exc_info(errors.connection_error("Connection closed")))
        return
    exc = done.exception()
    if exc is None:
        future.set(done.result())
    elif isinstance(exc, asyncio.CancelledError):
        future.set_exception(_exc_info(errors.connection_error("Connection closed")))
    else:
        future.set_exception(_exc_info(exc))


class ClientRef(pykka.ActorRef["ClientActor"]):
    """The ref of a :class:`ClientActor`: ``proxy()`` is a :class:`ClientProxy`."""

    #: The connection's calls, shared with every proxy (set by the actor when it is made).
    calls: ProxyCalls

    def proxy(self) -> ClientProxy:
        """A proxy whose Client calls return futures at once (see the module docstring)."""
        return ClientProxy(actor_ref=self)


class ClientProxy(pykka.ActorProxy["ClientActor"]):
    """A Pykka proxy of a :class:`ClientActor` whose Client calls bypass the mailbox.

    Each call takes the arguments of the same ``snodo.Client`` method and returns a
    ``pykka.ThreadingFuture`` at once: its value is the call's result, its exception the
    call's McpError. Progress callbacks and input handlers run on the background loop (they
    may be coroutine functions); keep them short.
    """

    actor_ref: ClientRef

    def _submit(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> pykka.ThreadingFuture[Any]:
        return self.actor_ref.calls.submit(name, args, kwargs)

    def call_tool(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.call_tool``."""
        return self._submit("call_tool", args, kwargs)

    def list_tools(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.list_tools``."""
        return self._submit("list_tools", args, kwargs)

    def list_resources(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.list_resources``."""
        return self._submit("list_resources", args, kwargs)

    def list_resource_templates(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.list_resource_templates``."""
        return self._submit("list_resource_templates", args, kwargs)

    def list_prompts(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.list_prompts``."""
        return self._submit("list_prompts", args, kwargs)

    def list_page(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.list_page``."""
        return self._submit("list_page", args, kwargs)

    def read_resource(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.read_resource``."""
        return self._submit("read_resource", args, kwargs)

    def get_prompt(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.get_prompt``."""
        return self._submit("get_prompt", args, kwargs)

    def request(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.request``."""
        return self._submit("request", args, kwargs)

    def discover(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.discover``."""
        return self._submit("discover", args, kwargs)

    def ping(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.ping``."""
        return self._submit("ping", args, kwargs)

    def notify(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.notify``: the future's value is None once the notification is sent."""
        return self._submit("notify", args, kwargs)

    def call_tool_task(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.call_tool_task``: the future's value is a :class:`ProxyTask`."""
        return self._submit("call_tool_task", args, kwargs)

    def request_task(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.request_task``: the future's value is a :class:`ProxyTask`."""
        return self._submit("request_task", args, kwargs)

    def roots_changed(self, *args: Any, **kwargs: Any) -> pykka.ThreadingFuture[Any]:
        """``Client.roots_changed``."""
        return self._submit("roots_changed", args, kwargs)


class ClientActor(Actor):
    """Holds one proxied connection; ends it when the actor ends (see the module docstring).

    It takes no messages of its own: an unknown message is a bug and crashes the actor (which
    closes the connection).
    """

    def __init__(self) -> None:
        super().__init__()
        # An actor has exactly one ActorRef (snodo's supervision keeps its state on it), so the
        # ref Pykka made is retyped rather than replaced: its proxy() then builds a ClientProxy.
        self.actor_ref.__class__ = ClientRef
        self._calls = ProxyCalls()
        cast("ClientRef", self.actor_ref).calls = self._calls

    def _client(self) -> AsyncClient:
        client = self._calls.client
        if client is None:
            raise errors.connection_error("Connection not open")
        return client

    @property
    def state(self) -> str:
        """The connection's state ("ready", "restarting", "closed"; see ``Client.state``)."""
        return self._client().state

    @property
    def version(self) -> str:
        """The negotiated protocol version."""
        return self._client().version

    @property
    def closed(self) -> bool:
        """True once the connection is gone for any reason."""
        return self._client().closed

    def listen(
        self, notifications: Mapping[str, Any], *, owner: Any, **options: Any
    ) -> Subscription:
        """``Client.listen`` with an ``owner`` (a snodo actor receives ``SubscriptionEvent``
        messages; this actor cannot pull them, so there is no default)."""
        if owner is None:
            msg = "listen through a ClientProxy needs owner= (who receives the events)"
            raise TypeError(msg)
        return self._client().client.listen(notifications, owner=owner, **options)

    def close(self) -> None:
        """Close the connection and stop the actor."""
        self._calls.close()
        self.stop()

    def on_receive(self, message: Any) -> Any:
        msg = f"a ClientActor takes no messages, got {message!r}"
        raise TypeError(msg)

    def on_stop(self) -> None:
        self._calls.close()

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._calls.close()


def start_client(target: Any, **connect_options: Any) -> ClientRef:
    """Start a :class:`ClientActor` connected to ``target`` (as ``snodo.connect``: the same
    options, and its McpError when the connection cannot be opened, no actor left then).

    ``owner=`` defaults to the new actor; another owner (an actor ref or a greenlet) closes the
    connection when it ends too."""
    return _start(partial(connect, target), connect_options)


def start_direct(runtime: Any, **options: Any) -> ClientRef:
    """Start a :class:`ClientActor` on ``runtime`` in this process (as ``snodo.direct``)."""
    return _start(partial(direct, runtime), options)


def _start(
    open_with: Callable[..., Coroutine[Any, Any, AsyncClient]], options: dict[str, Any]
) -> ClientRef:
    ref = cast("ClientRef", ClientActor.start())
    owner = options.pop("owner", None)
    try:
        ref.calls.open(open_with(owner=ref if owner is None else owner, **options), OPEN_WAIT)
    except BaseException:
        stop(ref, timeout=_STOP_WAIT)
        raise
    return ref
