"""snodo.protocol.tasks: the Tasks extension's pure rules (SEP-2663, 2026-07-28), as the
conformance suite's server scenarios (0.2.0-alpha.12, tasks-*) check the wire: the flat
CreateTaskResult, the DetailedTask of tasks/get, ttlMs/pollIntervalMs in integer
milliseconds, -32021 with requiredCapabilities for a task-only tool."""

from __future__ import annotations

from typing import Any

import pytest

from snodo.protocol import tasks as wire
from snodo.protocol.errors import McpError
from snodo.protocol.meta import CLIENT_CAPABILITIES_KEY

TASKS = {"extensions": {wire.EXTENSION: {}}}


def _task(**fields: Any) -> dict[str, Any]:
    return {"taskId": "t1", "status": "working", **fields}


def test_opt_in_meta_declares_the_extension_per_request() -> None:
    """SEP-2575 per-request opt-in: the extension under
    _meta.io.modelcontextprotocol/clientCapabilities.extensions; the client's own capabilities
    and the caller's meta kept, neither mutated."""
    caps = {"elicitation": {"form": {}}, "extensions": {"x.y/z": {"a": 1}}}
    meta = {"k": "v"}
    out = wire.opt_in_meta(caps, meta)
    assert out["k"] == "v"
    sent = out[CLIENT_CAPABILITIES_KEY]
    assert sent["elicitation"] == {"form": {}}
    assert sent["extensions"] == {"x.y/z": {"a": 1}, wire.EXTENSION: {}}
    assert caps == {"elicitation": {"form": {}}, "extensions": {"x.y/z": {"a": 1}}}
    assert meta == {"k": "v"}
    assert wire.declares_tasks(sent) and not wire.declares_tasks(caps)


def test_opt_in_meta_keeps_capabilities_the_caller_put_in_meta() -> None:
    given = {CLIENT_CAPABILITIES_KEY: {"sampling": {}}}
    sent = wire.opt_in_meta({"roots": {}}, given)[CLIENT_CAPABILITIES_KEY]
    assert sent == {"sampling": {}, "extensions": {wire.EXTENSION: {}}}


def test_params_of_the_three_methods() -> None:
    assert wire.task_params("t1") == {"taskId": "t1"}
    assert wire.update_params("t1", {"k": {"action": "accept"}}) == {
        "taskId": "t1",
        "inputResponses": {"k": {"action": "accept"}},
    }
    assert wire.listen_filter(["a", "b"]) == {"taskIds": ["a", "b"]}


def test_a_create_task_result_is_flat_and_read_in_seconds() -> None:
    """CreateTaskResult: resultType "task", taskId/status/ttlMs/pollIntervalMs at the top."""
    created = {
        "resultType": "task",
        "taskId": "t1",
        "status": "working",
        "createdAt": "2026-07-28T10:00:00Z",
        "lastUpdatedAt": "2026-07-28T10:00:00Z",
        "ttlMs": 60000,
        "pollIntervalMs": 250,
        "statusMessage": "queued",
    }
    assert wire.is_created(created)
    assert not wire.is_created({"resultType": "complete", "content": []})
    record = wire.parse_task(created)
    assert (record.task_id, record.status, record.status_message) == ("t1", "working", "queued")
    assert record.ttl == 60.0 and record.poll_interval == 0.25
    assert record.created_at == "2026-07-28T10:00:00Z"
    assert not record.terminal


@pytest.mark.parametrize("ttl", [None, 0, -5, 1.5e400, "60000", True])
def test_unusable_durations_are_not_given(ttl: Any) -> None:
    """ttlMs null means no expiry; a non-positive or non-number one is read as not given."""
    record = wire.parse_task(_task(ttlMs=ttl, pollIntervalMs=ttl))
    assert record.poll_interval is None and record.ttl is None


@pytest.mark.parametrize(
    "value",
    [
        [],
        {"status": "working"},
        {"taskId": "", "status": "working"},
        {"taskId": 1, "status": "working"},
        {"taskId": "t1"},
        _task(result=[1]),
        _task(error="boom"),
        _task(inputRequests=[]),
    ],
)
def test_what_cannot_be_a_task_is_32000(value: Any) -> None:
    with pytest.raises(McpError) as caught:
        wire.parse_task(value)
    assert caught.value.code == -32000 and caught.value.kind == "transport"


def test_an_answer_for_another_task_is_32000() -> None:
    with pytest.raises(McpError, match="not 't2'"):
        wire.parse_task(_task(), expected_id="t2")


def test_terminal_states() -> None:
    assert {"completed", "failed", "cancelled"} == wire.TERMINAL
    assert {"working", "input_required"} == wire.ACTIVE
    for status in wire.STATUSES:
        assert wire.is_terminal(status) == (status in wire.TERMINAL)
        assert wire.parse_task(_task(status=status)).terminal == wire.is_terminal(status)


def test_a_completed_task_is_its_inlined_result() -> None:
    """A tool error is a completed task whose result has isError (not failed)."""
    result = {"content": [{"type": "text", "text": "x"}], "isError": True}
    assert wire.outcome(wire.parse_task(_task(status="completed", result=result))) is result
    with pytest.raises(McpError) as caught:
        wire.outcome(wire.parse_task(_task(status="completed")))
    assert caught.value.code == -32000


def test_a_failed_task_raises_its_inlined_error() -> None:
    error = {"code": -32603, "message": "boom", "data": {"x": 1}}
    with pytest.raises(McpError) as caught:
        wire.outcome(wire.parse_task(_task(status="failed", error=error)))
    assert (caught.value.code, caught.value.message, caught.value.data) == (
        -32603,
        "boom",
        {"x": 1},
    )
    assert caught.value.cause == ("task_failed", "t1")
    with pytest.raises(McpError) as bare:
        wire.outcome(wire.parse_task(_task(status="failed")))
    assert bare.value.code == -32603 and bare.value.data == {"taskId": "t1"}


def test_a_cancelled_task_is_32800() -> None:
    with pytest.raises(McpError) as caught:
        wire.outcome(wire.parse_task(_task(status="cancelled", statusMessage="by the user")))
    assert caught.value.code == wire.TASK_CANCELLED == -32800
    assert "by the user" in caught.value.message and caught.value.data == {"taskId": "t1"}


def test_outcome_of_a_running_task_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        wire.outcome(wire.parse_task(_task()))


def test_poll_delay_obeys_the_hint_and_the_deadline() -> None:
    assert wire.poll_delay(None, None) == wire.DEFAULT_POLL_INTERVAL
    assert wire.poll_delay(2.0, None) == 2.0  # never sooner than the server asked
    assert wire.poll_delay(0.0001, None) == wire.MIN_POLL_INTERVAL
    assert wire.poll_delay(2.0, 0.5) == 0.5  # never past the caller's deadline
    assert wire.poll_delay(2.0, -1.0) == 0.0
    assert wire.poll_delay(0.1, None, following=True) == wire.FOLLOWING_POLL_INTERVAL
    assert wire.poll_delay(60.0, None, following=True) == 60.0
    assert wire.poll_delay(0.1, 1.0, following=True) == 1.0
    # an expiry is not notified: the safety poll looks just after it, never sooner than the hint
    assert wire.poll_delay(0.1, None, following=True, expires_in=0.5) == 0.5 + wire.EXPIRY_MARGIN
    assert wire.poll_delay(0.1, None, following=True, expires_in=-3.0) == 0.1
    assert wire.poll_delay(0.1, None, expires_in=0.01) == 0.1  # not following: the hint


def test_listen_honoured_only_when_the_ack_keeps_the_task() -> None:
    assert wire.listen_honoured({"taskIds": ["t1"]}, "t1")
    assert not wire.listen_honoured({"toolsListChanged": True}, "t1")
    assert not wire.listen_honoured({"taskIds": ["t2"]}, "t1")
    assert not wire.listen_honoured(None, "t1")


def test_a_lost_task_is_expired_after_its_ttl_else_unknown() -> None:
    refused = McpError(-32602, "Unknown task: t1")
    expired = wire.lost_task_error("t1", refused, age=2.0, ttl=1.0)
    assert expired.code == -32602 and expired.data == {"taskId": "t1", "reason": "expired"}
    assert "expired" in expired.message
    unknown = wire.lost_task_error("t1", refused, age=0.5, ttl=1.0)
    assert unknown.data == {"taskId": "t1", "reason": "unknown"}
    assert "restarted" in unknown.message
    assert wire.lost_task_error("t1", refused, age=5.0, ttl=None).data["reason"] == "unknown"
    other = McpError(-32603, "x")
    assert wire.lost_task_error("t1", other, age=5.0, ttl=1.0) is other


def test_a_lost_connection_names_the_task() -> None:
    gone = McpError(-32000, "Server exited", {"outcome": "unknown"}, kind="transport")
    named = wire.connection_lost_error("t1", gone)
    assert named.code == -32000 and named.kind == "transport" and "'t1'" in named.message
    assert named.data == {"outcome": "unknown"}
    timeout = McpError(-32001, "Request timed out")
    assert wire.connection_lost_error("t1", timeout) is timeout


def test_the_required_task_error_gets_the_hint() -> None:
    """tasks-required-task-error: -32021 with data.requiredCapabilities.extensions[tasks]."""
    refusal = wire.missing_extension_error("Tool build")
    assert refusal.code == -32021
    assert refusal.data == {"requiredCapabilities": TASKS}
    assert wire.requires_task(refusal)
    hinted = wire.required_task_error(refusal, "build")
    assert hinted.code == -32021 and hinted.data == refusal.data
    assert "call_tool_task" in hinted.message and "'build'" in hinted.message
    other = McpError(-32021, "needs elicitation", {"requiredCapabilities": {"elicitation": {}}})
    assert not wire.requires_task(other)
    assert not wire.requires_task(McpError(-32602, "x", {"requiredCapabilities": TASKS}))


def test_the_server_shapes() -> None:
    """tasks-wire-fields and tasks-dispatch-and-envelope: CreateTaskResult flat, resultType
    "task", ttlMs/pollIntervalMs integers, no result; DetailedTask resultType "complete" with the
    result (or error, or inputRequests) inlined; the notification carries taskId and status."""
    view = wire.TaskView("t1", "working", 0.0, 0.25, 60.0, 0.05)
    created = wire.create_task_result(view)
    assert created == {
        "resultType": "task",
        "taskId": "t1",
        "status": "working",
        "createdAt": "1970-01-01T00:00:00.000Z",
        "lastUpdatedAt": "1970-01-01T00:00:00.250Z",
        "ttlMs": 60000,
        "pollIntervalMs": 50,
    }
    assert wire.parse_task(created).poll_interval == 0.05
    done = wire.TaskView("t1", "completed", 0.0, 1.0, None, None, result={"content": []})
    detailed = wire.detailed_task(done)
    assert detailed["resultType"] == "complete" and detailed["result"] == {"content": []}
    assert detailed["ttlMs"] is None and "pollIntervalMs" not in detailed
    asking = wire.TaskView("t1", "input_required", 0.0, 1.0, 1.0, None, input_requests={"k": {}})
    assert wire.detailed_task(asking)["inputRequests"] == {"k": {}}
    note = wire.status_notification(done)
    assert note["taskId"] == "t1" and note["status"] == "completed" and "resultType" not in note
    assert wire.parse_task(note).result == {"content": []}


def test_task_id_param() -> None:
    assert wire.task_id_param({"taskId": "t1"}) == "t1"
    for bad in ({}, {"taskId": ""}, {"taskId": 3}, None):
        with pytest.raises(McpError) as caught:
            wire.task_id_param(bad)
        assert caught.value.code == -32602


def test_immediate_and_pre_task_records() -> None:
    """A result given at once is a completed record without a task id; the request's own
    input rounds before any task are an input_required one."""
    done = wire.immediate({"content": []})
    assert done.terminal and done.task_id == "" and wire.outcome(done) == {"content": []}
    asking = wire.pre_task(
        {"k": {"method": "elicitation/create"}}, {"resultType": "input_required"}
    )
    assert asking.status == "input_required" and asking.task_id == "" and not asking.terminal
