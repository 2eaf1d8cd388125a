"""``snodo.Task``: the handle of a request the server runs as a task (the Tasks extension).

``Client.call_tool_task`` (and ``Client.request_task`` for any task-capable request) sends the
request opted into the extension and returns a :class:`Task`: ``id``, ``status`` (asked of the
server), ``wait(timeout=)``, ``result(timeout=)``, ``cancel()``, and ``answer()`` for input
answered by hand. A server that answered at once (it made no task) gives a handle that is
already ``completed``.

What a handle does is steps (``snodo.calls.Steps``), the same for both drivers: :class:`TaskSteps`
reads the task with ``tasks/get``, waits between reads as the server's ``pollIntervalMs`` asks
(``snodo.protocol.tasks.poll_delay``), answers ``input_required`` rounds through the client's
input handlers (``tasks/update``) or hands them to the caller as an ``InputRequired``, and turns
the task's end into its result or ``McpError``. The sync :class:`Task` drives them in the calling
thread, and while it waits it follows the server's ``notifications/tasks`` on a
``subscriptions/listen`` stream (``{"taskIds": [id]}``) when the server acknowledges that
filter: a notification wakes the wait at once, and the poll becomes a slow safety net. The
stream lives only inside ``wait()``: no thread or timer outlives a call. ``snodo.aio`` drives the
same steps on its loop (``AsyncTask``), following notifications on an ``AsyncSubscription``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from snodo.calls import Answer, Pause, Steps, drive
from snodo.protocol import errors, inputs
from snodo.protocol import tasks as wire
from snodo.protocol.errors import McpError
from snodo.protocol.results import InputRequired
from snodo.protocol.tasks import TaskRecord

if TYPE_CHECKING:
    from snodo.protocol.dialects import Dialect
    from snodo.subscription import Subscription

__all__ = [
    "AsyncTask",
    "RequestSteps",
    "Resend",
    "Task",
    "TaskConnection",
    "TaskSteps",
    "follow_pause",
]

T = TypeVar("T")


class TaskConnection(Protocol):
    """What a :class:`Task` needs of its ``Client``: the era, whether it is closed, and
    ``listen`` for the task's status notifications."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def closed(self) -> bool: ...

    def listen(
        self,
        notifications: Mapping[str, Any],
        *,
        timeout: float | None = None,
        max_buffer: int = 100,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
    ) -> Subscription: ...


class RequestSteps(Protocol):
    """``ClientSteps.request``: a request as steps (what a handle sends ``tasks/*`` with)."""

    def __call__(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
    ) -> Steps[dict[str, Any] | InputRequired]: ...


class Resend(Protocol):
    """Sends the task's request again with answers (its own rounds, before a task exists)."""

    def __call__(
        self, input_responses: Mapping[str, Any], request_state: str | None
    ) -> Steps[dict[str, Any] | InputRequired]: ...


class TaskSteps:
    """One task's state and its calls as steps (what :class:`Task` and ``AsyncTask`` drive)."""

    __slots__ = (
        "_made",
        "_request",
        "_resend",
        "_rounds",
        "_state",
        "handlers",
        "meta",
        "record",
        "trace_context",
    )

    def __init__(
        self,
        request: RequestSteps,
        record: TaskRecord,
        *,
        handlers: Mapping[str, Callable[[dict[str, Any]], Any]],
        max_input_rounds: int,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        resend: Resend | None = None,
    ) -> None:
        self._request = request
        #: Sends the request again with answers, while no task exists yet (its own input rounds).
        self._resend = resend
        #: The ``requestState`` of those rounds.
        self._state: str | None = None
        #: The last read of the task (a terminal one is final: it never changes).
        self.record = record
        self.handlers = handlers
        self.meta = meta
        self.trace_context = trace_context
        self._rounds = inputs.start_rounds(max_input_rounds, handlers)
        #: When the task was made here (monotonic): its age tells an expiry from a loss.
        self._made = time.monotonic()

    @property
    def task_id(self) -> str:
        return self.record.task_id

    def adopt(self, outcome: dict[str, Any] | InputRequired) -> None:
        """Take in the request's own outcome: a ``CreateTaskResult``, a result given at once, or
        its input rounds for the caller (no task yet: ``answer`` sends the request again)."""
        if isinstance(outcome, InputRequired):
            self._state = outcome.request_state
            self.record = wire.pre_task(outcome.input_requests, outcome.result)
        elif wire.is_created(outcome):
            self._state = None
            self.record = wire.parse_task(outcome)
        else:
            self._state = None
            self.record = wire.immediate(outcome)

    def _send(
        self, method: str, params: dict[str, Any], deadline: float | None
    ) -> Steps[dict[str, Any]]:
        """One ``tasks/*`` request; a refusal or a lost connection names the task."""
        timeout = None
        if deadline is not None:
            timeout = max(deadline - time.monotonic(), wire.MIN_POLL_INTERVAL)
        try:
            reply = yield from self._request(
                method, params, timeout=timeout, meta=self.meta, trace_context=self.trace_context
            )
        except McpError as error:
            record = self.record
            age = time.monotonic() - self._made
            error = wire.lost_task_error(record.task_id, error, age=age, ttl=record.ttl)
            raise wire.connection_lost_error(record.task_id, error) from None
        if isinstance(reply, InputRequired):
            raise errors.connection_error(
                f"The server answered {method} with input_required", cause=("invalid_task", reply)
            )
        return reply

    def refresh(self, deadline: float | None = None) -> Steps[TaskRecord]:
        """Read the task (``tasks/get``) unless it has ended (or does not exist yet); the fresh
        record."""
        record = self.record
        if record.terminal or not record.task_id:
            return record
        reply = yield from self._send(wire.GET, wire.task_params(record.task_id), deadline)
        record = wire.parse_task(reply, expected_id=record.task_id)
        self.record = record
        return record

    def answer(
        self, input_responses: Mapping[str, Any], deadline: float | None = None
    ) -> Steps[None]:
        """Send answers to the task's input requests (``tasks/update``), keyed like them."""
        if not isinstance(input_responses, Mapping):
            raise TypeError("input_responses must be a mapping")
        if not self.record.task_id:
            if self._resend is None or self.record.terminal:
                raise ValueError("this task has no input requests to answer")
            self.adopt((yield from self._resend(input_responses, self._state)))
            return
        params = wire.update_params(self.record.task_id, input_responses)
        yield from self._send(wire.UPDATE, params, deadline)

    def cancel(self, deadline: float | None = None) -> Steps[None]:
        """Ask the server to cancel the task (``tasks/cancel``; a no-op once it has ended, or
        before it exists)."""
        if self.record.terminal or not self.record.task_id:
            return
        yield from self._send(wire.CANCEL, wire.task_params(self.record.task_id), deadline)

    def wait(
        self, timeout: float | None, *, following: bool = False, fresh: bool = False
    ) -> Steps[TaskRecord]:
        """Wait until the task ends, or needs input no handler gives; the last record.

        Reads the task at once when ``fresh`` (after a listen stream opened: nothing it missed
        is lost), else first after the poll delay. Input rounds go through the handlers as a
        multi round-trip call's do (``protocol.inputs``: at most ``max_input_rounds``, a kind
        without a handler is -32602); without handlers the ``input_required`` record is
        returned. -32001 (``kind="transport"``) when ``timeout`` seconds pass first: the task
        goes on (``cancel()`` stops it).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        record = self.record
        if fresh:
            record = yield from self.refresh(deadline)
        while True:
            if record.terminal or not record.task_id:
                return record  # ended, or the request's own rounds are for the caller
            if record.status == "input_required" and record.input_requests:
                pending = InputRequired(record.input_requests, None, record.raw)
                step = inputs.next_round(self._rounds, pending)
                if isinstance(step, inputs.Done):
                    return record  # no handlers: the caller answers (Task.answer)
                self._rounds = step.state
                if step.tasks:
                    answers = yield Answer(step.tasks, self.handlers, pending)
                    yield from self.answer(answers, deadline)
                    record = yield from self.refresh(deadline)
                    continue
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                assert timeout is not None
                raise errors.timeout_error(timeout, cause=("task_wait", record.task_id))
            expires_in = None
            if record.ttl is not None:
                expires_in = record.ttl - (time.monotonic() - self._made)
            delay = wire.poll_delay(
                record.poll_interval, remaining, following=following, expires_in=expires_in
            )
            yield Pause(delay)
            record = yield from self.refresh(deadline)

    def outcome(self, record: TaskRecord) -> dict[str, Any] | InputRequired:
        """What ``result()`` returns for a record ``wait`` returned: the result, the input
        requests for the caller, or the task's end as an ``McpError``."""
        if not record.terminal:
            state = None if record.task_id else self._state
            return InputRequired(record.input_requests or {}, state, record.raw)
        return wire.outcome(record)


def follow_pause(steps: Steps[T], pause: Callable[[float], None]) -> Steps[T]:
    """``steps`` with each ``Pause`` carried out by ``pause`` (a wait a notification can end
    early) instead of the driver's sleep; every other step passes through."""
    reply: Any = None
    thrown: BaseException | None = None
    try:
        while True:
            try:
                step = steps.send(reply) if thrown is None else steps.throw(thrown)
            except StopIteration as stop:
                value: T = stop.value
                return value
            thrown, reply = None, None
            if type(step) is Pause:
                pause(step.seconds)
                continue
            try:
                reply = yield step
            except McpError as error:
                thrown = error
    finally:
        steps.close()


class Task:
    """A request the server runs as a task (``Client.call_tool_task``): see the module docstring.

    ``id`` is ``""`` while no task exists: the server answered at once (``completed``), or the
    request itself asks for input first (``input_required``; ``answer()`` sends it again).
    """

    __slots__ = ("_client", "_steps")

    def __init__(self, client: TaskConnection, steps: TaskSteps) -> None:
        self._client = client
        self._steps = steps

    def __repr__(self) -> str:
        record = self._steps.record
        return f"<snodo.Task {record.task_id!r} {record.status}>"

    @property
    def id(self) -> str:
        """The server's task id (``""``: no task, see the class docstring)."""
        return self._steps.record.task_id

    @property
    def record(self) -> TaskRecord:
        """The last read of the task (no request: ``status`` asks the server)."""
        return self._steps.record

    @property
    def steps(self) -> TaskSteps:
        """The handle's calls as steps (what ``snodo.aio``'s ``AsyncTask`` drives)."""
        return self._steps

    @property
    def status(self) -> str:
        """The task's status, asked of the server (``tasks/get``) unless it has ended."""
        return drive(self._steps.refresh()).status

    @property
    def done(self) -> bool:
        """Whether the task is known to have ended (no request)."""
        return self._steps.record.terminal

    def wait(self, timeout: float | None = None, *, follow: bool = True) -> str:
        """Wait until the task ends (or needs input no handler gives); its status.

        ``timeout`` seconds (None: until the task ends or the server forgets it at its ttl)
        then -32001; the task goes on. ``follow``: listen for the server's status
        notifications when it sends them, polling only as a safety net.
        """
        return self._wait(timeout, follow).status

    def result(
        self, timeout: float | None = None, *, follow: bool = True
    ) -> dict[str, Any] | InputRequired:
        """Wait, then the task's result: a ``completed`` task's result dict (a tool error is
        a result with ``isError``); ``InputRequired`` when it needs input the client has no
        handler for (answer with ``answer()``, then call again); a ``failed`` task raises its
        ``McpError``, a ``cancelled`` one -32800."""
        return self._steps.outcome(self._wait(timeout, follow))

    def answer(self, input_responses: Mapping[str, Any], *, timeout: float | None = None) -> None:
        """Answer the task's pending input requests by hand (``tasks/update``), keyed like the
        ``input_requests`` of the ``InputRequired`` that ``result()`` returned."""
        drive(self._steps.answer(input_responses, _deadline(timeout)))

    def cancel(self, *, timeout: float | None = None) -> None:
        """Ask the server to cancel the task (``tasks/cancel``); ``status`` then reads
        ``cancelled``. Nothing is sent for a task that has ended."""
        drive(self._steps.cancel(_deadline(timeout)))

    def _wait(self, timeout: float | None, follow: bool) -> TaskRecord:
        steps = self._steps
        if timeout is not None:
            _check_timeout(timeout)
        if steps.record.terminal or not steps.record.task_id:
            return steps.record
        subscription = self._listen(timeout) if follow else None
        if subscription is None:
            return drive(steps.wait(timeout))
        try:
            waiting = steps.wait(timeout, following=True, fresh=True)
            return drive(follow_pause(waiting, _wake_on_notification(subscription, steps.task_id)))
        finally:
            subscription.close()

    def _listen(self, timeout: float | None) -> Any:
        """A ``subscriptions/listen`` stream for this task's notifications, or None when the
        connection has none or the server does not acknowledge ``taskIds``."""
        client = self._client
        if not client.dialect.stateless or client.closed:
            return None
        task_id = self._steps.task_id
        try:
            subscription = client.listen(
                wire.listen_filter([task_id]),
                timeout=timeout,
                max_buffer=8,
                meta=self._steps.meta,
                trace_context=self._steps.trace_context,
            )
        except McpError:
            return None  # no listen here: poll
        if not wire.listen_honoured(subscription.accepted, task_id):
            subscription.close()
            return None
        return subscription


class AsyncTask:
    """:class:`Task` for ``snodo.aio`` (``AsyncClient.call_tool_task``): the same steps, driven
    on the event loop; ``await task.status()``, ``wait``, ``result``, ``answer``, ``cancel``.
    Its waits follow the server's status notifications as the sync handle's do (``listen``:
    ``AsyncClient.listen``, None where the connection has none)."""

    __slots__ = ("_drive", "_listen", "_steps")

    def __init__(
        self,
        steps: TaskSteps,
        drive: Callable[[Steps[Any]], Awaitable[Any]],
        listen: Callable[..., Awaitable[Any]] | None = None,
    ) -> None:
        self._steps = steps
        self._drive = drive
        self._listen = listen

    def __repr__(self) -> str:
        record = self._steps.record
        return f"<snodo.aio.AsyncTask {record.task_id!r} {record.status}>"

    @property
    def id(self) -> str:
        """The server's task id (``""``: no task, see :class:`Task`)."""
        return self._steps.record.task_id

    @property
    def record(self) -> TaskRecord:
        """The last read of the task (no request)."""
        return self._steps.record

    @property
    def done(self) -> bool:
        """Whether the task is known to have ended (no request)."""
        return self._steps.record.terminal

    async def status(self) -> str:
        """The task's status, asked of the server (``tasks/get``) unless it has ended."""
        record: TaskRecord = await self._drive(self._steps.refresh())
        return record.status

    async def wait(self, timeout: float | None = None, *, follow: bool = True) -> str:
        """``Task.wait``: the status once ended (or needing input no handler gives)."""
        return (await self._wait(timeout, follow)).status

    async def result(
        self, timeout: float | None = None, *, follow: bool = True
    ) -> dict[str, Any] | InputRequired:
        """``Task.result``: the result, the input for the caller, or the task's error."""
        return self._steps.outcome(await self._wait(timeout, follow))

    async def answer(
        self, input_responses: Mapping[str, Any], *, timeout: float | None = None
    ) -> None:
        """``Task.answer``: the pending input requests answered by hand (``tasks/update``)."""
        await self._drive(self._steps.answer(input_responses, _deadline(timeout)))

    async def cancel(self, *, timeout: float | None = None) -> None:
        """``Task.cancel``: ask the server to cancel the task (``tasks/cancel``)."""
        await self._drive(self._steps.cancel(_deadline(timeout)))

    async def _wait(self, timeout: float | None, follow: bool) -> TaskRecord:
        steps = self._steps
        if timeout is not None:
            _check_timeout(timeout)
        if steps.record.terminal or not steps.record.task_id:
            return steps.record
        subscription = await self._subscribe(timeout) if follow else None
        if subscription is None:
            record: TaskRecord = await self._drive(steps.wait(timeout))
            return record
        try:
            waiting = steps.wait(timeout, following=True, fresh=True)
            wake = _async_wake_on_notification(subscription, steps.task_id)
            followed: TaskRecord = await _drive_pausing(waiting, self._drive, wake)
            return followed
        finally:
            await subscription.aclose()

    async def _subscribe(self, timeout: float | None) -> Any:
        listen = self._listen
        if listen is None:
            return None
        task_id = self._steps.task_id
        try:
            subscription = await listen(
                wire.listen_filter([task_id]),
                timeout=timeout,
                max_buffer=8,
                meta=self._steps.meta,
                trace_context=self._steps.trace_context,
            )
        except McpError:
            return None
        if not wire.listen_honoured(subscription.accepted, task_id):
            await subscription.aclose()
            return None
        return subscription


def _one(step: Any) -> Steps[Any]:
    """A single step as steps (what a driver carries out for :func:`_drive_pausing`)."""
    reply = yield step
    return reply


async def _drive_pausing(
    steps: Steps[T],
    drive: Callable[[Steps[Any]], Awaitable[Any]],
    pause: Callable[[float], Awaitable[None]],
) -> T:
    """Drive ``steps`` with ``drive`` one step at a time, each ``Pause`` awaited with ``pause``
    (the async form of :func:`follow_pause`)."""
    reply: Any = None
    thrown: BaseException | None = None
    try:
        while True:
            try:
                step = steps.send(reply) if thrown is None else steps.throw(thrown)
            except StopIteration as stop:
                value: T = stop.value
                return value
            thrown, reply = None, None
            if type(step) is Pause:
                await pause(step.seconds)
                continue
            try:
                reply = await drive(_one(step))
            except McpError as error:
                thrown = error
    finally:
        steps.close()


def _async_wake_on_notification(
    subscription: Any, task_id: str
) -> Callable[[float], Awaitable[None]]:
    """The async form of :func:`_wake_on_notification`."""
    import asyncio

    from snodo.protocol.subscriptions import Closed, Notification

    stream_over = False

    async def pause(seconds: float) -> None:
        nonlocal stream_over
        if stream_over:
            await asyncio.sleep(seconds)
            return
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                event = await subscription.next(timeout=remaining)
            except McpError:
                return
            if isinstance(event, Notification):
                if event.method == wire.NOTIFICATION and event.params.get("taskId") != task_id:
                    continue
                return
            if isinstance(event, Closed):
                stream_over = True
            return

    return pause


def _wake_on_notification(subscription: Any, task_id: str) -> Callable[[float], None]:
    """A pause that ends early when a notification about ``task_id`` arrives on
    ``subscription`` (or events were dropped); once the stream ended it is a plain wait."""
    from snodo.protocol.subscriptions import Closed, Notification

    ended = threading.Event()  # never set: the plain wait's clock once the stream ended
    stream_over = False

    def pause(seconds: float) -> None:
        nonlocal stream_over
        if stream_over:
            ended.wait(seconds)
            return
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                event = subscription.next(timeout=remaining)
            except McpError:
                return  # nothing arrived in time
            if isinstance(event, Notification):
                if event.method == wire.NOTIFICATION and event.params.get("taskId") != task_id:
                    continue  # another task's
                return
            if isinstance(event, Closed):
                stream_over = True  # poll from now on
            return

    return pause


def _deadline(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    _check_timeout(timeout)
    return time.monotonic() + timeout


def _check_timeout(timeout: float) -> None:
    """Refuse a timeout that is not a positive number of seconds."""
    from snodo.options import check_timeout

    check_timeout("timeout", timeout)
