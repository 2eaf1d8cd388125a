"""The Runtime's task store (the Tasks extension, SEP-2663): tools declared with
``task="optional"|"required"`` run as tasks for clients that opt in.

A task is created by ``tools/call`` (the flat ``CreateTaskResult``) and runs its tool on a
thread of its own; the client polls ``tasks/get`` (the result or error is inlined once the task
ends, until it expires), answers input with ``tasks/update`` and stops it with
``tasks/cancel``. Input inside a task works like a multi round-trip request: a run that asks
for input ends, the task shows ``input_required`` with the pending ``inputRequests``, and once
every pending request is answered the tool runs again from the start with all answers known
(the same tool serves plain calls, multi round-trip calls and tasks).

The store is bounded (``max_tasks``: the oldest ended task makes room, or -32603 when every
task is still active) and every task expires ``ttl`` seconds after its creation (checked on
each access; no timer). Status changes go to ``subscriptions/listen`` streams whose filter
names the task in ``taskIds`` (``notifications/tasks/status``). :meth:`TaskStore.close`
cancels what still runs and waits for its threads.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from snodo.log import get_logger
from snodo.protocol import tasks as wire
from snodo.protocol.errors import INTERNAL_ERROR, McpError, invalid_params
from snodo.server.context import Context, InputRequiredSignal, RetryLaterSignal
from snodo.server.rounds import Rounds
from snodo.server.tool_runs import run_tool

if TYPE_CHECKING:
    from snodo.server.catalog import ToolDef
    from snodo.server.subscriptions import SubscriptionSource

__all__ = ["TaskContext", "TaskHost", "TaskStore", "TaskSupport", "ToolTasking"]

_log = get_logger("snodo.server.tasks")


class TaskHost(Protocol):
    """What a :class:`TaskStore` needs of its Runtime: where listen streams are fed."""

    subscription_source: SubscriptionSource | None


TaskSupport = Literal["optional", "required"]
TASK_SUPPORT: Final = ("optional", "required")

#: How long :meth:`TaskStore.close` waits for each running tool to return.
CLOSE_WAIT: Final = 2.0
#: How long a run that called ``ctx.retry_later()`` waits before the tool runs again (the
#: client's wait after a bare ``input_required``, too).
RETRY_DELAY: Final = 0.25


@dataclass(frozen=True, slots=True)
class ToolTasking:
    """How one tool runs as a task: ``support`` and whether it has a prelude (it runs on the
    request until it calls :meth:`TaskContext.start_task`)."""

    support: TaskSupport
    prelude: bool = False


class StartTaskSignal(BaseException):
    """Raised by :meth:`TaskContext.start_task` on the request: create the task now."""


class TaskContext(Context):
    """The Context of a task-capable tool: :attr:`task_id` inside a task, and
    :meth:`start_task` for a tool with a prelude."""

    __slots__ = ("_starts", "task_id")

    _starts: bool
    task_id: str | None

    def set_task(self, starts: bool, task_id: str | None) -> None:
        """Whether :meth:`start_task` leaves the request, and the task served (None: none)."""
        self._starts = starts
        self.task_id = task_id

    def start_task(self) -> None:
        """Leave the request and go on as a task (a tool declared with ``prelude=True``).

        On the request of a client that opted in, this ends the run: the task is created and
        the tool runs again from the start inside it, with the input gathered so far known.
        Inside the task, and on a plain call (no task possible), it returns at once.
        """
        if self._starts:
            raise StartTaskSignal()


def _task_context(ctx: Context, starts: bool, task_id: str | None = None) -> TaskContext:
    """A TaskContext serving the same request as ``ctx``."""
    out = TaskContext(
        ctx.version,
        ctx.request_id,
        ctx.method,
        ctx.client_capabilities,
        ctx.client_info,
        ctx.meta,
        ctx.stateless,
        ctx.rounds,
        ctx.peer,
    )
    # The request's ways back (progress, logging) stay the same; Context keeps them private.
    out._sink = ctx._sink  # noqa: SLF001
    out._token = ctx._token  # noqa: SLF001
    out._notify = ctx._notify  # noqa: SLF001
    out._log_level = ctx._log_level  # noqa: SLF001
    out.set_task(starts, task_id)
    return out


@dataclass(eq=False)
class _Task:
    """One task's state (the store's lock guards every field)."""

    task_id: str
    tool: ToolDef
    arguments: dict[str, Any]
    version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    meta: dict[str, Any]
    created: float
    updated: float
    status: wire.Status = "working"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    #: The answers gathered so far (prelude and earlier rounds), by input-request key.
    answers: dict[str, Any] = field(default_factory=dict)
    #: The input requests still unanswered, by key (``input_required``).
    pending: dict[str, Any] = field(default_factory=dict)
    rounds: int = 0
    #: Bumped by every run and by cancellation: a run whose generation is stale is ignored.
    generation: int = 0
    ctx: Context | None = None


class TaskStore:
    """The tasks of one Runtime (created by :meth:`Runtime.enable_tasks`)."""

    def __init__(
        self,
        runtime: TaskHost,
        *,
        max_tasks: int = 1000,
        ttl: float | None = 3600.0,
        poll_interval: float | None = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(max_tasks, int) or isinstance(max_tasks, bool) or max_tasks < 1:
            raise ValueError("max_tasks must be a positive integer")
        if ttl is not None and not ttl > 0:
            raise ValueError("ttl must be positive seconds (or None: no expiry)")
        if poll_interval is not None and not poll_interval > 0:
            raise ValueError("poll_interval must be positive seconds (or None)")
        self._runtime = runtime
        self.max_tasks = max_tasks
        self.ttl = ttl
        self.poll_interval = poll_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._tasks: OrderedDict[str, _Task] = OrderedDict()
        self._closed = False
        self._stopping = threading.Event()  # set by close: a run waiting to retry gives up
        #: Every tool thread still running (a cancelled or expired task's too), for close.
        self._threads: set[threading.Thread] = set()
        #: How each task-capable tool runs, by tool name.
        self.modes: dict[str, ToolTasking] = {}

    # -- the handlers ----------------------------------------------------------------------

    def call(self, ctx: Context, tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
        """``tools/call`` of a task-capable tool: a ``CreateTaskResult`` for a client that opted
        in, the plain result for one that did not (-32021 when the tool requires a task)."""
        mode = self.modes[tool.name]
        if not wire.opted_in(ctx.client_capabilities):
            if mode.support == "required":
                raise wire.missing_extension_error(f"Tool {tool.name}")
            plain = _task_context(ctx, False) if mode.prelude else ctx
            return run_tool(tool, arguments, plain)
        if mode.prelude:  # on the request until ctx.start_task() (or to its end: no task)
            try:
                return run_tool(tool, arguments, _task_context(ctx, True))
            except StartTaskSignal:
                pass
        rounds = ctx.rounds
        answers = dict(rounds.answers) if rounds is not None else {}
        count = rounds.round if rounds is not None else 0
        return self._create(ctx, tool, arguments, answers, count)

    def get(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        """``tasks/get``: the DetailedTask."""
        self._gate(ctx)
        with self._lock:
            task = self._find(wire.task_id_param(params))
            return wire.detailed_task(self._view(task))

    def update(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        """``tasks/update``: answers for pending input requests (other keys are ignored); the
        tool runs again once none is pending. An empty acknowledgement."""
        self._gate(ctx)
        responses = params.get("inputResponses")
        if responses is not None and type(responses) is not dict:
            raise invalid_params("inputResponses must be an object")
        with self._lock:
            task = self._find(wire.task_id_param(params))
            if task.status != "input_required" or not responses:
                return {}
            answered = [key for key in task.pending if key in responses]
            if not answered:
                return {}
            for key in answered:
                task.answers[key] = responses[key]
                del task.pending[key]
            task.updated = self._clock()
            if task.pending:
                view = self._view(task)
            else:
                task.status = "working"
                task.rounds += 1
                view = self._view(task)
                self._start(task)
        self._notify(view)
        return {}

    def cancel(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        """``tasks/cancel``: an active task ends ``cancelled`` (its tool sees
        ``ctx.cancelled``); an ended one is left as it is. An empty acknowledgement."""
        self._gate(ctx)
        with self._lock:
            task = self._find(wire.task_id_param(params))
            if wire.is_terminal(task.status):
                return {}
            view = self._end(task, "cancelled")
        self._notify(view)
        return {}

    # -- lifecycle -------------------------------------------------------------------------

    def close(self, wait: float = CLOSE_WAIT) -> None:
        """Cancel every active task and wait (up to ``wait`` seconds each) for the tool threads;
        the store takes no new task afterwards."""
        with self._lock:
            self._closed = True
            self._stopping.set()
            views = [
                self._end(t, "cancelled") for t in self._tasks.values() if t.status in wire.ACTIVE
            ]
            threads = list(self._threads)
        for view in views:
            self._notify(view)
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(wait)

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._tasks)

    def status(self, task_id: str) -> str | None:
        """The status of a task (None when unknown or expired)."""
        with self._lock:
            self._expire()
            task = self._tasks.get(task_id)
            return None if task is None else task.status

    # -- inside ----------------------------------------------------------------------------

    def _gate(self, ctx: Context) -> None:
        if not wire.opted_in(ctx.client_capabilities):
            raise wire.missing_extension_error(ctx.method)

    def _find(self, task_id: str) -> _Task:
        self._expire()
        task = self._tasks.get(task_id)
        if task is None:
            raise invalid_params(f"Unknown task: {task_id}", {"taskId": task_id})
        return task

    def _expire(self) -> None:
        """Drop the tasks whose ttl has passed (the oldest come first)."""
        ttl = self.ttl
        if ttl is None or not self._tasks:
            return
        limit = self._clock() - ttl
        while self._tasks:
            task_id, task = next(iter(self._tasks.items()))
            if task.created > limit:
                return
            del self._tasks[task_id]
            if task.status in wire.ACTIVE:
                task.generation += 1
                if task.ctx is not None:
                    task.ctx.cancel()

    def _make_room(self) -> None:
        self._expire()
        if len(self._tasks) < self.max_tasks:
            return
        for task_id, task in self._tasks.items():
            if wire.is_terminal(task.status):
                del self._tasks[task_id]
                return
        raise McpError(
            INTERNAL_ERROR,
            f"Too many tasks: all {self.max_tasks} are still running; try again later",
        )

    def _create(
        self,
        ctx: Context,
        tool: ToolDef,
        arguments: dict[str, Any],
        answers: dict[str, Any],
        count: int,
    ) -> dict[str, Any]:
        now = self._clock()
        caps = dict(ctx.client_capabilities)
        task = _Task(
            task_id=secrets.token_urlsafe(16),
            tool=tool,
            arguments=arguments,
            version=ctx.version,
            client_capabilities=caps,
            client_info=ctx.client_info,
            meta=dict(ctx.meta),
            created=now,
            updated=now,
            answers=answers,
            rounds=count,
        )
        with self._lock:
            if self._closed:
                raise McpError(INTERNAL_ERROR, "The server is shutting down")
            self._make_room()
            self._tasks[task.task_id] = task  # durable before the CreateTaskResult goes out
            view = self._view(task)
            self._start(task)
        return wire.create_task_result(view)

    def _start(self, task: _Task, delay: float = 0.0) -> None:
        """Run the tool once more on a thread of its own, after ``delay`` seconds (the lock is
        held)."""
        task.generation += 1
        thread = threading.Thread(
            target=self._execute,
            args=(task, task.generation, delay),
            name=f"snodo-task-{task.task_id[:8]}",
            daemon=True,
        )
        self._threads.add(thread)
        thread.start()

    def _execute(self, task: _Task, generation: int, delay: float) -> None:
        try:
            if not (delay and self._stopping.wait(delay)):
                self._run_once(task, generation)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _run_once(self, task: _Task, generation: int) -> None:
        rounds = Rounds("tools/call")
        rounds.binding = (task.tool.name, task.arguments)
        rounds.answers = dict(task.answers)
        rounds.round = task.rounds
        ctx = TaskContext(
            task.version,
            task.task_id,
            "tools/call",
            task.client_capabilities,
            task.client_info,
            task.meta,
            True,
            rounds,
        )
        ctx.set_task(False, task.task_id)
        with self._lock:
            if task.generation != generation:
                return
            task.ctx = ctx
        outcome: tuple[wire.Status, Any]  # the status, and its result, error or requests
        try:
            outcome = ("completed", run_tool(task.tool, task.arguments, ctx))
        except InputRequiredSignal as signal:
            outcome = ("input_required", signal.requests)
        except RetryLaterSignal:
            outcome = ("working", None)
        except McpError as exc:
            outcome = ("failed", exc.to_wire())
        except BaseException as exc:  # a tool that broke the protocol: the task failed
            _log.info("a task's tool raised", task=task.task_id, error=repr(exc))
            outcome = ("failed", McpError(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}").to_wire())
        with self._lock:
            if task.generation != generation or task.status not in wire.ACTIVE:
                return  # cancelled, expired or superseded meanwhile
            status, value = outcome
            task.updated = self._clock()
            if status == "input_required":
                task.status = "input_required"
                task.pending = dict(value or {})
            elif status == "working":  # retry_later: run again a little later
                task.rounds += 1
                self._start(task, RETRY_DELAY)
                return
            elif status == "completed":
                task.status, task.result = "completed", value
            else:
                task.status, task.error = "failed", value
            task.ctx = None
            view = self._view(task)
        self._notify(view)

    def _end(self, task: _Task, status: wire.Status) -> wire.TaskView:
        """End an active task (the lock is held)."""
        task.status = status
        task.pending = {}
        task.updated = self._clock()
        task.generation += 1
        if task.ctx is not None:
            task.ctx.cancel()
            task.ctx = None
        return self._view(task)

    def _view(self, task: _Task) -> wire.TaskView:
        return wire.TaskView(
            task_id=task.task_id,
            status=task.status,
            created_at=task.created,
            updated_at=task.updated,
            ttl=self.ttl,
            poll_interval=self.poll_interval,
            result=task.result,
            error=task.error,
            input_requests=dict(task.pending) if task.pending else None,
        )

    def _notify(self, view: wire.TaskView) -> None:
        source = self._runtime.subscription_source
        if source is not None:
            source.publish(wire.NOTIFICATION, wire.status_notification(view))


def declared(support: object, prelude: bool) -> ToolTasking | None:
    """The tasking of a tool declared with ``task=support`` (None: not task-capable)."""
    if support is None:
        if prelude:
            raise ValueError("prelude=True needs task='optional' or 'required'")
        return None
    if support not in TASK_SUPPORT:
        raise ValueError(f"task must be 'optional', 'required' or None, not {support!r}")
    mode: TaskSupport = "optional" if support == "optional" else "required"
    return ToolTasking(mode, bool(prelude))


def methods(
    store: TaskStore,
) -> dict[str, Callable[[Any, Context, dict[str, Any]], dict[str, Any]]]:
    """The extension's request handlers, by method (shaped like the core handlers)."""
    return {
        wire.GET: lambda rt, ctx, params: store.get(ctx, params),
        wire.UPDATE: lambda rt, ctx, params: store.update(ctx, params),
        wire.CANCEL: lambda rt, ctx, params: store.cancel(ctx, params),
    }
