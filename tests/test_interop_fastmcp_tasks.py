"""snodo's Tasks client (issue 21) against a Tasks server written by others: FastMCP with
``fastmcp-tasks`` 4.1.4 (pinned whole in tests/interop/fastmcp-tasks.txt, its own venv), over
stdio on 2026-07-28. A task that completes, one cancelled, a wait that times out, a task-only
tool refused to a plain call with the hint, and a tool that is never a task."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import snodo
from snodo.protocol import tasks as wire
from tests.support.pinned_venvs import INTEROP, ensure_venv
from tests.support.stdio_support import ROOT

SERVER = ROOT / "tests" / "servers" / "fastmcp_tasks_server.py"
REQUIREMENTS = INTEROP / "fastmcp-tasks.txt"
WAIT = 30.0


def text_of(result: Any) -> str:
    assert isinstance(result, dict), result
    return str(result["content"][0]["text"])


@pytest.fixture(scope="module")
def client() -> Iterator[snodo.Client]:
    python = ensure_venv(REQUIREMENTS)
    with snodo.connect(
        snodo.Stdio(str(python), [str(SERVER)]),
        protocol="2026-07-28",
        timeout=WAIT,
        stderr="discard",
    ) as opened:
        yield opened


def test_the_server_advertises_the_extension(client: snodo.Client) -> None:
    capabilities = client.discover()["capabilities"]
    assert wire.EXTENSION in capabilities.get("extensions", {}), capabilities


def test_a_task_that_completes(client: snodo.Client) -> None:
    task = client.call_tool_task("crunch", {"seconds": 0.2})
    assert isinstance(task, snodo.Task) and task.id
    assert task.record.poll_interval == pytest.approx(0.1)  # the server's pollIntervalMs
    started = time.monotonic()
    assert text_of(task.result(timeout=WAIT)) == "crunched 0.2"
    assert time.monotonic() - started < 5.0  # polled at the server's 100 ms, not a default
    assert task.done and task.status == "completed"


def test_a_task_cancelled_by_the_client(client: snodo.Client) -> None:
    task = client.call_tool_task("crunch", {"seconds": 60})
    assert task.status == "working"
    task.cancel()
    assert task.wait(timeout=WAIT) == "cancelled"
    with pytest.raises(snodo.McpError) as caught:
        task.result(timeout=WAIT)
    assert caught.value.code == wire.TASK_CANCELLED
    assert caught.value.data == {"taskId": task.id}


def test_a_wait_that_times_out(client: snodo.Client) -> None:
    task = client.call_tool_task("crunch", {"seconds": 60})
    started = time.monotonic()
    with pytest.raises(snodo.McpError) as caught:
        task.wait(timeout=0.3)
    assert caught.value.code == -32001 and caught.value.cause == ("task_wait", task.id)
    assert time.monotonic() - started < 5.0
    assert task.status == "working"
    task.cancel()
    assert task.wait(timeout=WAIT) == "cancelled"


def test_a_task_only_tool_refuses_a_plain_call_with_the_hint(client: snodo.Client) -> None:
    with pytest.raises(snodo.McpError) as caught:
        client.call_tool("must", {"text": "x"})
    assert caught.value.code == -32021
    assert "call_tool_task" in caught.value.message
    assert text_of(client.call_tool_task("must", {"text": "x"}).result(timeout=WAIT)) == "must x"


def test_a_tool_that_is_never_a_task_answers_at_once(client: snodo.Client) -> None:
    assert text_of(client.call_tool("hello", {"name": "a"})) == "hello a"
    task = client.call_tool_task("hello", {"name": "b"})
    assert task.id == "" and task.done and text_of(task.result()) == "hello b"
