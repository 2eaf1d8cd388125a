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

Everything here is pure and shared by both ends: for the server (``snodo.server.tasks``) the
task shapes it sends (:class:`TaskView`, :func:`create_task_result`, :func:`detailed_task`,
:func:`status_notification`) and its refusals; for the client (``snodo.tasks``) the request
params, reading task records, the poll-interval rule, the terminal states and the errors a
task's end or loss becomes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Final, Literal

from snodo.protocol.errors import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    McpError,
    connection_error,
    invalid_params,
)
from snodo.protocol.meta import CLIENT_CAPABILITIES_KEY

#: The extension's identifier (a key of ``capabilities.extensions``).
EXTENSION: Final = "io.modelcontextprotocol/tasks"

#: Every status a task can have; the last three are terminal (a terminal task never changes).
STATUSES: Final = ("working", "input_required", "completed", "failed", "cancelled")
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
#: The statuses of a task still running (it may still change).
ACTIVE: Final = frozenset({"working", "input_required"})

#: A task's status.
Status = Literal["working", "input_required", "completed", "failed", "cancelled"]

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

#: How long after a followed task's expiry the safety poll looks (seconds).
EXPIRY_MARGIN: Final = 0.05

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


# -- the server's side: what a Runtime sends ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskView:
    """A task as the server shows it: times are epoch seconds, durations seconds (``None``:
    no expiry, no poll hint); ``result``/``error`` once ended, ``input_requests`` while
    ``input_required``."""

    task_id: str
    status: Status
    created_at: float
    updated_at: float
    ttl: float | None
    poll_interval: float | None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None
    status_message: str | None = None


def is_terminal(status: str) -> bool:
    """Whether ``status`` is one a task ends in (it never changes afterwards)."""
    return status in TERMINAL


def opted_in(client_capabilities: Any) -> bool:
    """Whether a request's client capabilities declare the extension (per client or per
    request: the server reads the request's own)."""
    return declares_tasks(client_capabilities)


def timestamp(epoch: float) -> str:
    """An epoch time as the RFC 3339 UTC timestamp ``createdAt``/``lastUpdatedAt`` carry."""
    moment = datetime.fromtimestamp(epoch, timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _milliseconds(seconds: float) -> int:
    """Seconds as the positive integer milliseconds of ``ttlMs``/``pollIntervalMs``."""
    return max(1, round(seconds * 1000))


def _task_fields(view: TaskView) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "taskId": view.task_id,
        "status": view.status,
        "createdAt": timestamp(view.created_at),
        "lastUpdatedAt": timestamp(view.updated_at),
        "ttlMs": None if view.ttl is None else _milliseconds(view.ttl),
    }
    if view.poll_interval is not None:
        fields["pollIntervalMs"] = _milliseconds(view.poll_interval)
    if view.status_message is not None:
        fields["statusMessage"] = view.status_message
    return fields


def _detail(view: TaskView, fields: dict[str, Any]) -> dict[str, Any]:
    if view.status == "completed" and view.result is not None:
        fields["result"] = view.result
    elif view.status == "failed" and view.error is not None:
        fields["error"] = view.error
    elif view.status == "input_required" and view.input_requests:
        fields["inputRequests"] = view.input_requests
    return fields


def create_task_result(view: TaskView) -> dict[str, Any]:
    """The flat ``CreateTaskResult`` (``resultType: "task"``, no ``result``/``error``, no
    ``requestState``, no nested ``task``)."""
    return {"resultType": TASK_RESULT_TYPE, **_task_fields(view)}


def detailed_task(view: TaskView) -> dict[str, Any]:
    """The ``tasks/get`` result (a ``DetailedTask``, ``resultType: "complete"``): the result or
    error inlined once ended, the pending ``inputRequests`` while ``input_required``."""
    return _detail(view, {"resultType": "complete", **_task_fields(view)})


def status_notification(view: TaskView) -> dict[str, Any]:
    """The params of ``notifications/tasks``: the task's fields (``taskId``, ``status``...),
    with the result or error inlined once it ended."""
    return _detail(view, _task_fields(view))


def task_id_param(params: Any) -> str:
    """The ``taskId`` of a ``tasks/*`` request; -32602 when it is missing or not a string."""
    task_id = params.get("taskId") if isinstance(params, Mapping) else None
    if not isinstance(task_id, str) or not task_id:
        raise invalid_params("taskId must be a non-empty string", {"param": "taskId"})
    return task_id


def missing_extension_error(what: str) -> McpError:
    """-32021 (Missing Required Client Capability) for ``what`` (a method, or "Tool x") asked
    by a client that did not declare the extension; ``data.requiredCapabilities`` names it."""
    return McpError(
        MISSING_CLIENT_CAPABILITY,
        f"{what} requires the {EXTENSION} extension: declare it in the client capabilities",
        {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


# -- the client's side: what it sends and how it reads the answers -----------------------------


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
    """A wire duration (positive, finite milliseconds) in seconds; anything else is not given."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    if not math.isfinite(value):
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
        raise _broken(
            f"The server sent task {task_id!r} with a result that is not an object", value
        )
    if error is not None and not isinstance(error, dict):
        raise _broken(
            f"The server sent task {task_id!r} with an error that is not an object", value
        )
    if requests is not None and not isinstance(requests, dict):
        raise _broken(
            f"The server sent task {task_id!r} whose inputRequests is not an object", value
        )
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


def pre_task(input_requests: dict[str, Any], result: dict[str, Any]) -> TaskRecord:
    """The record of a request that asks for input before any task exists (a multi round-trip
    round the caller answers, after which the server may make the task): ``input_required``,
    ``task_id`` ``""``."""
    return TaskRecord(
        "", "input_required", None, None, None, None, None, None, None, input_requests, result
    )


def poll_delay(
    hint: float | None,
    remaining: float | None,
    *,
    following: bool = False,
    expires_in: float | None = None,
) -> float:
    """Seconds to wait before the next ``tasks/get``.

    The server's ``pollIntervalMs`` (``hint``, seconds) is obeyed: never sooner, and at least
    :data:`MIN_POLL_INTERVAL`; without one, :data:`DEFAULT_POLL_INTERVAL`. While notifications
    are followed the poll is only a safety net: at least :data:`FOLLOWING_POLL_INTERVAL`, but
    not past the task's expiry (``expires_in``: its ttl less its age; an expiry is not
    notified), nor ever sooner than the hint. The wait never runs past the caller's deadline
    (``remaining``; ``None``: no deadline).
    """
    delay = hint if hint is not None else DEFAULT_POLL_INTERVAL
    delay = max(delay, MIN_POLL_INTERVAL)
    if following:
        slow = FOLLOWING_POLL_INTERVAL
        if expires_in is not None:
            slow = min(slow, expires_in + EXPIRY_MARGIN)
        delay = max(delay, slow)
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
            raise _broken(
                f"The server sent completed task {task_id!r} without its result", record.raw
            )
        return record.result
    if record.status == "failed":
        cause = ("task_failed", task_id)
        if record.error is None:
            return _raise(
                McpError(-32603, f"Task {task_id!r} failed", {"taskId": task_id}, cause=cause)
            )
        return _raise(McpError.from_wire(record.error, cause=cause))
    if record.status == "cancelled":
        message = f"Task {task_id!r} was cancelled"
        if record.status_message:
            message += f": {record.status_message}"
        return _raise(
            McpError(
                TASK_CANCELLED, message, {"taskId": task_id}, cause=("task_cancelled", task_id)
            )
        )
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
    "ACTIVE",
    "CANCEL",
    "DEFAULT_POLL_INTERVAL",
    "EXPIRY_MARGIN",
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
    "Status",
    "TaskRecord",
    "TaskView",
    "connection_lost_error",
    "create_task_result",
    "declares_tasks",
    "detailed_task",
    "immediate",
    "is_created",
    "is_terminal",
    "listen_filter",
    "listen_honoured",
    "lost_task_error",
    "missing_extension_error",
    "opt_in_meta",
    "opted_in",
    "opted_in_capabilities",
    "outcome",
    "parse_task",
    "poll_delay",
    "pre_task",
    "required_task_error",
    "requires_task",
    "status_notification",
    "task_id_param",
    "task_params",
    "timestamp",
    "update_params",
]
