"""The Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663, 2026-07-28): the pure rules.

A client opts in per client (``client_capabilities={"extensions": {EXTENSION: {}}}``) or per
call (:func:`opt_in_meta`: the extension in that request's
``_meta["io.modelcontextprotocol/clientCapabilities"]``). The server alone decides whether a
request becomes a task: it answers with a ``CreateTaskResult`` (``resultType: "task"``, the task
fields flat at the top level) or with the plain result. The task is then read with
``tasks/get`` (a ``DetailedTask``: the result or error inlined once terminal, ``inputRequests``
while ``input_required``), answered with ``tasks/update`` (``inputResponses``) and cancelled
with ``tasks/cancel``; both of those acknowledge with an empty complete result. A server may
send ``notifications/tasks`` on a ``subscriptions/listen`` stream whose filter names the task
(``taskIds``). Durations on the wire are integer milliseconds (``ttlMs``, ``pollIntervalMs``);
here they are seconds.

Everything here is pure: the request params, reading task records, the poll-interval rule,
the terminal states and the errors a task's end or loss becomes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from snodo.protocol.errors import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    McpError,
    connection_error,
)
from snodo.protocol.meta import CLIENT_CAPABILITIES_KEY

#: The extension's identifier (a key of ``capabilities.extensions``).
EXTENSION: Final = "io.modelcontextprotocol/tasks"

#: Every status a task can have; the last three are terminal (a terminal task never changes).
STATUSES: Final = ("working", "input_required", "completed", "failed", "cancelled")
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})

#: The methods of the extension.
GET: Final = "tasks/get"
UPDATE: Final = "tasks/update"
CANCEL: Final = "tasks/cancel"

#: The status notification, and the listen filter key that asks for it.
NOTIFICATION: Final = "notifications/tasks"
LISTEN_KEY: Final = "taskIds"

#: The ``resultType`` of a ``CreateTaskResult``.
TASK_RESULT_TYPE: Final = "task"

#: Seconds between two ``tasks/get`` when the server gave no ``pollIntervalMs``.
DEFAULT_POLL_INTERVAL: Final = 0.5
#: No poll comes sooner than this after the one before, whatever the hint.
MIN_POLL_INTERVAL: Final = 0.02
#: While status notifications are followed, a ``tasks/get`` still goes out at least this often
#: (a notification is optional and may be lost): seconds.
FOLLOWING_POLL_INTERVAL: Final = 5.0

#: The error code of a task cancelled before it ended (``Task.result()``): JSON-RPC has none;
#: -32800 is the "request cancelled" code LSP made common.
TASK_CANCELLED: Final = -32800


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One read of a task: a ``CreateTaskResult``, a ``tasks/get`` answer or a notification.

    Durations are seconds (``None``: not given; ``ttl`` ``None`` also when the server keeps it
    without a limit). ``result``/``error`` are there once the task is terminal and the server
    inlined them; ``input_requests`` while it is ``input_required``. ``raw`` is the dict read.
    """

    task_id: str
    status: str
    status_message: str | None
    created_at: str | None
    last_updated_at: str | None
    ttl: float | None
    poll_interval: float | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    input_requests: dict[str, Any] | None
    raw: dict[str, Any]

    @property
    def terminal(self) -> bool:
        """Whether the task has ended (completed, failed or cancelled)."""
        return self.status in TERMINAL


def declares_tasks(capabilities: Any) -> bool:
    """Whether ``capabilities`` (a client's or a server's) declare the extension."""
    if not isinstance(capabilities, Mapping):
        return False
    extensions = capabilities.get("extensions")
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def opted_in_capabilities(client_capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The client capabilities with the extension declared (a new dict; the given one kept)."""
    capabilities = dict(client_capabilities)
    extensions = capabilities.get("extensions")
    merged = dict(extensions) if isinstance(extensions, Mapping) else {}
    merged.setdefault(EXTENSION, {})
    capabilities["extensions"] = merged
    return capabilities


def opt_in_meta(
    client_capabilities: Mapping[str, Any], meta: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The ``meta=`` of a call that opts into tasks by itself (SEP-2575 per-request opt-in):
    ``meta`` with the client capabilities (a capabilities entry already in ``meta`` wins over
    the client's) declaring the extension."""
    out = dict(meta) if meta is not None else {}
    given = out.get(CLIENT_CAPABILITIES_KEY)
    base = given if isinstance(given, Mapping) else client_capabilities
    out[CLIENT_CAPABILITIES_KEY] = opted_in_capabilities(base)
    return out


def task_params(task_id: str) -> dict[str, Any]:
    """The params of ``tasks/get`` and ``tasks/cancel``."""
    return {"taskId": task_id}


def update_params(task_id: str, input_responses: Mapping[str, Any]) -> dict[str, Any]:
    """The params of ``tasks/update``: the answers keyed like the task's ``inputRequests``."""
    return {"taskId": task_id, "inputResponses": dict(input_responses)}


def listen_filter(task_ids: list[str]) -> dict[str, Any]:
    """The ``subscriptions/listen`` filter that asks for these tasks' status notifications."""
    return {LISTEN_KEY: list(task_ids)}


def listen_honoured(accepted: Any, task_id: str) -> bool:
    """Whether the server's acknowledged filter keeps ``task_id`` under ``taskIds`` (a server
    that does not send task notifications leaves the key out of the acknowledgement)."""
    if not isinstance(accepted, Mapping):
        return False
    ids = accepted.get(LISTEN_KEY)
    return isinstance(ids, list) and task_id in ids


def is_created(outcome: Any) -> bool:
    """Whether a request's result is a ``CreateTaskResult`` (the server made a task)."""
    return isinstance(outcome, Mapping) and outcome.get("resultType") == TASK_RESULT_TYPE


def _broken(message: str, value: Any) -> McpError:
    return connection_error(message, cause=("invalid_task", value))


def _seconds(value: Any) -> float | None:
    """A wire duration (integer milliseconds) in seconds; anything else is not given."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return value / 1000.0


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_task(value: Any, *, expected_id: str | None = None) -> TaskRecord:
    """Read a ``CreateTaskResult``, a ``tasks/get`` result or a task notification's params.

    -32000 (``kind="transport"``) for what cannot be a task: not an object, no string
    ``taskId`` (or not ``expected_id``), no string ``status``, a ``completed`` task whose
    inlined ``result`` is not an object, a ``failed`` one whose ``error`` is not one, or
    ``inputRequests`` that is not an object. Unusable durations are read as not given.
    """
    if not isinstance(value, dict):
        raise _broken("The server sent a task that is not an object", value)
    task_id = value.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise _broken("The server sent a task without a taskId", value)
    if expected_id is not None and task_id != expected_id:
        raise _broken(f"The server answered for task {task_id!r}, not {expected_id!r}", value)
    status = value.get("status")
    if not isinstance(status, str) or not status:
        raise _broken(f"The server sent task {task_id!r} without a status", value)
    result = value.get("result")
    error = value.get("error")
    requests = value.get("inputRequests")
    if result is not None and not isinstance(result, dict):
        raise _broken(f"The server sent task {task_id!r} with a result that is not an object", value)
    if error is not None and not isinstance(error, dict):
        raise _broken(f"The server sent task {task_id!r} with an error that is not an object", value)
    if requests is not None and not isinstance(requests, dict):
        raise _broken(f"The server sent task {task_id!r} whose inputRequests is not an object", value)
    return TaskRecord(
        task_id=task_id,
        status=status,
        status_message=_text(value.get("statusMessage")),
        created_at=_text(value.get("createdAt")),
        last_updated_at=_text(value.get("lastUpdatedAt")),
        ttl=_seconds(value.get("ttlMs")),
        poll_interval=_seconds(value.get("pollIntervalMs")),
        result=result,
        error=error,
        input_requests=requests,
        raw=value,
    )


def immediate(result: dict[str, Any]) -> TaskRecord:
    """The record of a request the server answered at once (no task made): completed, with
    the result; its ``task_id`` is ``""``."""
    return TaskRecord("", "completed", None, None, None, None, None, result, None, None, result)


def poll_delay(
    hint: float | None, remaining: float | None, *, following: bool = False
) -> float:
    """Seconds to wait before the next ``tasks/get``.

    The server's ``pollIntervalMs`` (``hint``, seconds) is obeyed: never sooner, and at least
    :data:`MIN_POLL_INTERVAL`; without one, :data:`DEFAULT_POLL_INTERVAL`. While notifications
    are followed the poll is only a safety net: at least :data:`FOLLOWING_POLL_INTERVAL`. The
    wait never runs past the caller's deadline (``remaining``; ``None``: no deadline).
    """
    delay = hint if hint is not None else DEFAULT_POLL_INTERVAL
    delay = max(delay, MIN_POLL_INTERVAL)
    if following:
        delay = max(delay, FOLLOWING_POLL_INTERVAL)
    if remaining is not None:
        delay = min(delay, max(remaining, 0.0))
    return delay


def outcome(record: TaskRecord) -> dict[str, Any]:
    """The result of a terminal task, or the error it ended with.

    ``completed``: its inlined result (a tool that reported an error is a completed task whose
    result has ``isError``). ``failed``: the inlined JSON-RPC error as an ``McpError`` (-32603
    when the server inlined none). ``cancelled``: :data:`TASK_CANCELLED`. A completed task
    without its result is -32000. ``ValueError`` for a task that has not ended.
    """
    task_id = record.task_id
    if record.status == "completed":
        if record.result is None:
            raise _broken(f"The server sent completed task {task_id!r} without its result", record.raw)
        return record.result
    if record.status == "failed":
        cause = ("task_failed", task_id)
        if record.error is None:
            return _raise(McpError(-32603, f"Task {task_id!r} failed", {"taskId": task_id}, cause=cause))
        return _raise(McpError.from_wire(record.error, cause=cause))
    if record.status == "cancelled":
        message = f"Task {task_id!r} was cancelled"
        if record.status_message:
            message += f": {record.status_message}"
        return _raise(McpError(TASK_CANCELLED, message, {"taskId": task_id}, cause=("task_cancelled", task_id)))
    raise ValueError(f"task {task_id!r} has not ended (status {record.status!r})")


def _raise(error: McpError) -> dict[str, Any]:
    raise error


def lost_task_error(
    task_id: str, error: McpError, *, age: float | None, ttl: float | None
) -> McpError:
    """What a ``tasks/get`` (or update, cancel) refused with -32602 for a task this client made
    means: the task expired when its ``ttl`` has passed (``age``: seconds since it was made),
    else the server no longer knows it (restarted, or dropped it early). Other errors as they are.
    """
    if error.code != INVALID_PARAMS:
        return error
    data = {"taskId": task_id}
    if ttl is not None and age is not None and age >= ttl:
        return McpError(
            INVALID_PARAMS,
            f"Task {task_id!r} expired: the server keeps a task's result {ttl:g} s after it is made",
            {**data, "reason": "expired"},
            cause=("task_expired", task_id, error),
        )
    return McpError(
        INVALID_PARAMS,
        f"Task {task_id!r} is unknown to the server: it restarted or dropped the task"
        f" before its ttl ({error.message})",
        {**data, "reason": "unknown"},
        cause=("task_unknown", task_id, error),
    )


def connection_lost_error(task_id: str, error: McpError) -> McpError:
    """A -32000 met while following a task: the same error, saying which task it leaves
    unfinished (the task may still run on the server; ``Task.status`` asks again)."""
    if error.code != CONNECTION_CLOSED:
        return error
    return McpError(
        error.code,
        f"{error.message} (task {task_id!r} not finished here)",
        error.data,
        kind=error.kind,
        cause=error.cause,
    )


def requires_task(error: McpError) -> bool:
    """Whether ``error`` is the extension's refusal of a request that must run as a task:
    -32021 whose ``data.requiredCapabilities.extensions`` names the extension."""
    if error.code != MISSING_CLIENT_CAPABILITY or not isinstance(error.data, Mapping):
        return False
    return declares_tasks(error.data.get("requiredCapabilities"))


def required_task_error(error: McpError, tool: str) -> McpError:
    """The -32021 a plain ``call_tool`` gets for a tool the server runs only as a task, with
    the hint to use ``call_tool_task`` (code and data as the server sent them)."""
    return McpError(
        error.code,
        f"{error.message}: tool {tool!r} runs only as a task (io.modelcontextprotocol/tasks);"
        " call it with call_tool_task()",
        error.data,
        kind=error.kind,
        cause=("task_required", tool, error.cause),
    )


__all__ = [
    "CANCEL",
    "DEFAULT_POLL_INTERVAL",
    "EXTENSION",
    "FOLLOWING_POLL_INTERVAL",
    "GET",
    "LISTEN_KEY",
    "MIN_POLL_INTERVAL",
    "NOTIFICATION",
    "STATUSES",
    "TASK_CANCELLED",
    "TASK_RESULT_TYPE",
    "TERMINAL",
    "UPDATE",
    "TaskRecord",
    "connection_lost_error",
    "declares_tasks",
    "immediate",
    "is_created",
    "listen_filter",
    "listen_honoured",
    "lost_task_error",
    "opt_in_meta",
    "opted_in_capabilities",
    "outcome",
    "parse_task",
    "poll_delay",
    "required_task_error",
    "requires_task",
    "task_params",
    "update_params",
]
