"""The client side of the Tasks extension (SEP-2663, 2026-07-28; issue 21 item 1) against the
project's Runtime over direct, stdio and HTTP: ``Client.call_tool_task`` and its ``snodo.Task``
handle. A task that completes, one that fails, one cancelled by the client, one that needs
input (answered by an input handler, or by hand), one whose result expired, a server that
restarts mid-task, a wait that times out; the plain ``call_tool`` of a task-only tool gets the
hint. No thread, actor or timer outlives a test (the conftest leak check, and ``no_leaks``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import snodo
import snodo.aio
from snodo.protocol import tasks as wire
from snodo.protocol.meta import CLIENT_CAPABILITIES_KEY
from snodo.server import Runtime
from snodo.server.http_server import HttpServer, serve_http
from snodo.supervision import green_mode
from tests.servers.tasks_runtime import build
from tests.support.client_support import Wire
from tests.support.stdio_support import ROOT, no_leaks, snodo_server, warm_up

TASKS_RUNTIME = "tests.servers.tasks_runtime:runtime"
SHORT_TTL = "tests.servers.tasks_runtime:short_ttl"
SLOW_POLL = "tests.servers.tasks_runtime:slow_poll"
KINDS = ["direct", "stdio", "http"]
FORM = {"elicitation": {"form": {}}}
ACCEPT = {"action": "accept", "content": {"ok": True}}


@dataclass
class Server:
    """One server per kind and module: a Runtime in process (direct, HTTP) or a process."""

    kind: str
    runtime: Runtime | None
    http: HttpServer | None
    stdio_runtime: str

    def connect(self, **options: Any) -> snodo.Client:
        if self.kind == "direct":
            assert self.runtime is not None
            return snodo.direct(self.runtime, **options)
        if self.kind == "http":
            assert self.http is not None
            return snodo.connect(snodo.Http(self.http.url), **options)
        return snodo.connect(snodo_server(self.stdio_runtime), cwd=str(ROOT), **options)


def _server(
    kind: str,
    ttl: float | None = 60.0,
    stdio_runtime: str = TASKS_RUNTIME,
    poll_interval: float = 0.05,
) -> Server:
    runtime = build(ttl=ttl, poll_interval=poll_interval) if kind != "stdio" else None
    http = serve_http(runtime) if kind == "http" and runtime is not None else None
    return Server(kind, runtime, http, stdio_runtime)


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    warm_up()


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """No child process or file descriptor outlives a test (pooled HTTP sockets aside)."""
    with no_leaks(pooled=True):
        yield


@pytest.fixture(scope="module", params=KINDS)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    made = _server(request.param)
    try:
        yield made
    finally:
        if made.http is not None:
            made.http.close()
        if made.runtime is not None:
            made.runtime.close_tasks()


@pytest.fixture
def client(server: Server) -> Iterator[snodo.Client]:
    c = server.connect(client_capabilities=FORM)
    try:
        yield c
    finally:
        c.close()


def _text(result: Any) -> str:
    assert isinstance(result, dict), result
    return str(result["content"][0]["text"])


# -- the lifecycle -------------------------------------------------------------------------


def test_a_task_that_completes(client: snodo.Client) -> None:
    """call_tool_task makes a task (CreateTaskResult: an id, working); result() waits for its
    end and returns the inlined result; status is then completed and final."""
    task = client.call_tool_task("slow", {"seconds": 0.15})
    assert isinstance(task, snodo.Task)
    assert task.id and task.record.status in ("working", "completed")
    assert task.record.poll_interval == 0.05  # the server's pollIntervalMs, in seconds
    assert _text(task.result(timeout=10)) == "slow done"
    assert task.done and task.status == "completed"
    assert task.wait(timeout=1) == "completed"


def test_a_task_that_fails(client: snodo.Client) -> None:
    """A protocol-level error: the task ends failed and result() raises its inlined error; a
    tool error is a completed task whose result has isError."""
    task = client.call_tool_task("fails", {})
    with pytest.raises(snodo.McpError) as caught:
        task.result(timeout=10)
    assert caught.value.code == -32603 and "the job broke" in caught.value.message
    assert caught.value.cause == ("task_failed", task.id)
    assert task.status == "failed"
    reported = client.call_tool_task("tool_error", {}).result(timeout=10)
    assert isinstance(reported, dict) and reported["isError"] is True


def test_a_task_cancelled_by_the_client(server: Server, client: snodo.Client) -> None:
    """cancel() sends tasks/cancel; the task reads cancelled, result() is -32800, and the tool
    stopped (in process: the store has it cancelled, its thread ended)."""
    task = client.call_tool_task("slow", {"seconds": 30})
    assert task.status == "working"
    task.cancel()
    assert task.status == "cancelled"
    with pytest.raises(snodo.McpError) as caught:
        task.result(timeout=5)
    assert caught.value.code == wire.TASK_CANCELLED and caught.value.data == {"taskId": task.id}
    task.cancel()  # ended: nothing is sent, nothing fails
    if server.runtime is not None:
        assert server.runtime.tasks is not None
        assert server.runtime.tasks.status(task.id) == "cancelled"


def test_a_task_that_needs_input_answered_by_the_input_handler(server: Server) -> None:
    """input_required inside a task: the client's form handler answers (tasks/update) and the
    task goes on to its result."""
    asked: list[dict[str, Any]] = []

    def form(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return ACCEPT

    with server.connect(input_handlers={"form": form}) as client:
        result = client.call_tool_task("ask", {}).result(timeout=10)
    assert _text(result) == "confirmed"
    assert [p["message"] for p in asked] == ["Go ahead?"]


def test_a_task_that_needs_input_answered_by_hand(client: snodo.Client) -> None:
    """Without a handler, result() returns InputRequired (the task's inputRequests); answer()
    sends them with tasks/update and the task completes."""
    task = client.call_tool_task("ask", {})
    pending = task.result(timeout=10)
    assert isinstance(pending, snodo.InputRequired)
    assert task.record.status == "input_required" and not task.done
    (key,) = pending.input_requests
    assert pending.input_requests[key]["method"] == "elicitation/create"
    assert task.wait(timeout=5) == "input_required"  # still waiting for the caller
    task.answer({key: ACCEPT})
    assert _text(task.result(timeout=10)) == "confirmed"


def test_a_task_whose_result_expired(server: Server) -> None:
    """A task kept 0.4 s (ttlMs 400) is gone from the server after that: the handle says it
    expired (-32602, reason "expired"), not that the server lost it."""
    short = _server(server.kind, ttl=0.4, stdio_runtime=SHORT_TTL)
    try:
        with short.connect() as client:
            task = client.call_tool_task("slow", {"seconds": 30})
            assert task.record.ttl == 0.4
            with pytest.raises(snodo.McpError) as caught:
                task.wait(timeout=10)
            assert caught.value.code == -32602
            assert caught.value.data == {"taskId": task.id, "reason": "expired"}
            assert "expired" in caught.value.message
    finally:
        if short.http is not None:
            short.http.close()
        if short.runtime is not None:
            short.runtime.close_tasks()


def test_the_wait_follows_status_notifications(server: Server) -> None:
    """The server acknowledges taskIds on subscriptions/listen and sends notifications/tasks:
    the wait wakes on the notification, long before the server's 1.5 s poll hint; with
    follow=False it polls as hinted (the poll comes no sooner than 1.5 s)."""
    slow = _server(server.kind, stdio_runtime=SLOW_POLL, poll_interval=1.5)
    try:
        with slow.connect() as client:
            task = client.call_tool_task("slow", {"seconds": 0.1})
            assert task.record.poll_interval == 1.5
            started = time.monotonic()
            assert _text(task.result(timeout=10)) == "slow done"
            assert time.monotonic() - started < 1.2
            polled = client.call_tool_task("slow", {"seconds": 0.05})
            started = time.monotonic()
            assert polled.wait(timeout=10, follow=False) == "completed"
            assert time.monotonic() - started >= 1.5
    finally:
        if slow.http is not None:
            slow.http.close()
        if slow.runtime is not None:
            slow.runtime.close_tasks()


def test_a_wait_that_times_out(client: snodo.Client) -> None:
    """wait(timeout=) is -32001 once the time is up; the task goes on and can be cancelled."""
    task = client.call_tool_task("slow", {"seconds": 30})
    started = time.monotonic()
    with pytest.raises(snodo.McpError) as caught:
        task.wait(timeout=0.3)
    took = time.monotonic() - started
    assert caught.value.code == -32001 and caught.value.kind == "transport"
    assert caught.value.cause == ("task_wait", task.id)
    assert 0.25 <= took < 3.0
    assert task.status == "working"
    task.cancel()
    assert task.wait(timeout=5) == "cancelled"


def test_a_plain_call_of_a_task_only_tool_gets_the_hint(client: snodo.Client) -> None:
    """tasks-required-task-error: -32021 with requiredCapabilities naming the extension, and
    the message says to use call_tool_task; call_tool_task runs it."""
    with pytest.raises(snodo.McpError) as caught:
        client.call_tool("must", {})
    assert caught.value.code == -32021
    assert caught.value.data == {"requiredCapabilities": {"extensions": {wire.EXTENSION: {}}}}
    assert "call_tool_task" in caught.value.message
    assert _text(client.call_tool_task("must", {}).result(timeout=10)) == "must done"


def test_opting_in_per_client(server: Server) -> None:
    """Declared in the client capabilities, every call opts in: a plain call_tool of a
    task-capable tool returns the CreateTaskResult, and client.task(id) follows it."""
    caps = {"extensions": {wire.EXTENSION: {}}}
    with server.connect(client_capabilities=caps) as client:
        created = client.call_tool("slow", {"seconds": 0.05})
        assert isinstance(created, dict) and created["resultType"] == "task"
        task = client.task(created["taskId"])
        assert _text(task.result(timeout=10)) == "slow done"


def test_the_general_form(client: snodo.Client) -> None:
    """request_task: any task-capable request, opted in for that call."""
    task = client.request_task("tools/call", {"name": "slow", "arguments": {"seconds": 0.05}})
    assert task.id and _text(task.result(timeout=10)) == "slow done"


# -- restarts ------------------------------------------------------------------------------


def test_an_http_server_that_restarts_mid_task() -> None:
    """The server restarts with the task unfinished (a new Runtime on the same port): the
    handle reports that the server no longer knows the task (-32602, reason "unknown")."""
    first = build()
    http = serve_http(first)
    port = http.port
    second = build()
    again: HttpServer | None = None
    try:
        with snodo.connect(snodo.Http(http.url)) as client:
            task = client.call_tool_task("slow", {"seconds": 30})
            http.close()
            first.close_tasks()
            again = serve_http(second, port=port)
            with pytest.raises(snodo.McpError) as caught:
                task.wait(timeout=10)
            assert caught.value.code == -32602
            assert caught.value.data == {"taskId": task.id, "reason": "unknown"}
            assert "restarted" in caught.value.message
    finally:
        http.close()
        first.close_tasks()
        if again is not None:
            again.close()
        second.close_tasks()


def test_a_stdio_server_that_dies_mid_task() -> None:
    """The server process exits with the task unfinished: the wait fails -32000 naming the
    task; restarted (restart="permanent"), the new process does not know it (-32602)."""
    with snodo.connect(snodo_server(TASKS_RUNTIME), cwd=str(ROOT)) as client:
        task = client.call_tool_task("slow", {"seconds": 30})
        with pytest.raises(snodo.McpError):
            client.call_tool("crash", {})
        with pytest.raises(snodo.McpError) as caught:
            task.wait(timeout=10)
        assert caught.value.code == -32000 and repr(task.id) in caught.value.message
    with snodo.connect(snodo_server(TASKS_RUNTIME), cwd=str(ROOT), restart="permanent") as client:
        task = client.call_tool_task("slow", {"seconds": 30})
        with pytest.raises(snodo.McpError):
            client.call_tool("crash", {})
        with pytest.raises(snodo.McpError) as caught:
            task.wait(timeout=15)
        assert caught.value.code == -32602 and caught.value.data["reason"] == "unknown"


# -- the wire (direct: every message recorded) ---------------------------------------------


def test_polling_obeys_the_interval_and_opts_in_per_request(wire: Wire) -> None:
    """Every request of a task opts in per request (SEP-2575: the extension in
    _meta.clientCapabilities), tasks/get carries the taskId, and polls are spaced at least the
    server's pollIntervalMs apart (a 0.3 s task at 50 ms: a handful of polls, not hundreds)."""
    runtime = build()
    try:
        with snodo.direct(runtime) as client:
            task = client.call_tool_task("slow", {"seconds": 0.3})
            started = time.monotonic()
            assert _text(task.result(timeout=10, follow=False)) == "slow done"
            took = time.monotonic() - started
    finally:
        runtime.close_tasks()
    calls = wire.requests("tools/call")
    gets = wire.requests("tasks/get")
    for message in calls + gets:
        assert wire_declares(message)
    assert all(m["params"]["taskId"] == task.id for m in gets)
    assert 1 <= len(gets) <= took / 0.05 + 2


def wire_declares(message: dict[str, Any]) -> bool:
    caps = message["params"]["_meta"][CLIENT_CAPABILITIES_KEY]
    return wire.declares_tasks(caps)


def test_a_server_without_tasks_answers_at_once() -> None:
    """A server that makes no task (no extension) answers the call: the handle is completed at
    once, with no id, and nothing more is sent."""
    plain = Runtime("plain", "1.0", versions=["2026-07-28"])

    @plain.tool()
    def hello(args: dict[str, Any], ctx: Any) -> str:
        return "hello"

    with snodo.direct(plain) as client:
        task = client.call_tool_task("hello", {})
        assert task.id == "" and task.done and task.status == "completed"
        assert _text(task.result()) == "hello"
        task.cancel()


def test_the_session_era_opts_in_per_client_only(server: Server) -> None:
    """On a session-era connection the extension is declared at initialize (per client): then
    call_tool_task runs the task; without it, -32601 before anything is sent."""
    with server.connect(protocol="2025-11-25") as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool_task("slow", {"seconds": 0.05})
        assert caught.value.code == -32601 and "client_capabilities" in str(caught.value)
    caps = {"extensions": {wire.EXTENSION: {}}}
    with server.connect(protocol="2025-11-25", client_capabilities=caps) as client:
        task = client.call_tool_task("slow", {"seconds": 0.05})
        assert task.id and _text(task.result(timeout=10)) == "slow done"


# -- snodo.aio -----------------------------------------------------------------------------


@pytest.mark.skipif(green_mode(), reason="snodo.aio is for asyncio programs, not gevent")
@pytest.mark.parametrize("kind", ["direct", "http"])
def test_aio_tasks(kind: str) -> None:
    """AsyncClient.call_tool_task: an AsyncTask driven on the loop: completes, needs input
    (the handler answers), cancelled, a wait that times out."""
    runtime = build()
    http = serve_http(runtime) if kind == "http" else None

    async def main() -> None:
        handlers = {"form": lambda params: ACCEPT}
        if http is None:
            client = await snodo.aio.direct(runtime, input_handlers=handlers)
        else:
            client = await snodo.aio.connect(snodo.Http(http.url), input_handlers=handlers)
        async with client:
            done = await client.call_tool_task("slow", {"seconds": 0.1})
            assert done.id and _text(await done.result(timeout=10)) == "slow done"
            assert await done.status() == "completed"
            asked = await client.call_tool_task("ask", {})
            assert _text(await asked.result(timeout=10)) == "confirmed"
            slow = await client.call_tool_task("slow", {"seconds": 30})
            with pytest.raises(snodo.McpError) as caught:
                await slow.wait(timeout=0.2)
            assert caught.value.code == -32001
            await slow.cancel()
            assert await slow.status() == "cancelled"
            with pytest.raises(snodo.McpError) as cancelled:
                await slow.result()
            assert cancelled.value.code == wire.TASK_CANCELLED

    try:
        asyncio.run(main())
    finally:
        if http is not None:
            http.close()
        runtime.close_tasks()


# -- the actor proxy -----------------------------------------------------------------------


@pytest.mark.skipif(green_mode(), reason="the actor proxy runs on snodo.aio's asyncio loop")
def test_the_actor_proxy_mirrors_call_tool_task() -> None:
    """ClientProxy.call_tool_task: a future of a ProxyTask whose calls are futures too."""
    from snodo.actors import start_direct

    runtime = build()
    ref = start_direct(runtime, input_handlers={"form": lambda params: ACCEPT})
    try:
        proxy = ref.proxy()
        task = proxy.call_tool_task("slow", {"seconds": 0.05}).get(timeout=10)
        assert task.id and _text(task.result(timeout=10).get(timeout=10)) == "slow done"
        assert task.status().get(timeout=10) == "completed" and task.done
        asked = proxy.call_tool_task("ask", {}).get(timeout=10)
        assert _text(asked.result(timeout=10).get(timeout=10)) == "confirmed"
        job = proxy.request_task("tools/call", {"name": "slow", "arguments": {"seconds": 30}}).get(
            timeout=10
        )
        job.cancel().get(timeout=10)
        assert job.wait(timeout=10).get(timeout=10) == "cancelled"
    finally:
        ref.stop()
        runtime.close_tasks()


def test_follow_pause_hands_pauses_to_the_waker_and_passes_the_rest() -> None:
    """snodo.tasks.follow_pause: a Pause step goes to the given pause (the notification wait),
    every other step to the driver, an error thrown in reaches the steps, and closing the
    wrapper closes them."""
    from snodo.calls import Pause, Send
    from snodo.tasks import follow_pause

    seen: list[Any] = []
    closed: list[bool] = []

    def steps() -> Any:
        try:
            yield Pause(0.5)
            reply = yield Send(None, {"id": 1}, None)  # type: ignore[arg-type]
            seen.append(reply)
            try:
                yield Send(None, {"id": 2}, None)  # type: ignore[arg-type]
            except snodo.McpError as error:
                seen.append(error.code)
            yield Send(None, {"id": 3}, None)  # type: ignore[arg-type]
            return "end"
        finally:
            closed.append(True)

    paused: list[float] = []
    wrapped = follow_pause(steps(), paused.append)
    first = next(wrapped)
    assert paused == [0.5] and first.message == {"id": 1}
    second = wrapped.send("reply-1")
    assert second.message == {"id": 2} and seen == ["reply-1"]
    third = wrapped.throw(snodo.McpError(-32001, "late"))
    assert third.message == {"id": 3} and seen == ["reply-1", -32001]
    with pytest.raises(StopIteration) as stop:
        wrapped.send(None)
    assert stop.value.value == "end" and closed == [True]
    again = follow_pause(steps(), paused.append)
    next(again)
    again.close()
    assert closed == [True, True]


@pytest.mark.skipif(green_mode(), reason="snodo.aio is for asyncio programs, not gevent")
@pytest.mark.parametrize("kind", ["direct", "http"])
def test_aio_waits_follow_status_notifications(kind: str) -> None:
    """AsyncTask.result wakes on notifications/tasks well before the 1.5 s poll hint; with
    follow=False it polls as hinted."""
    runtime = build(poll_interval=1.5)
    http = serve_http(runtime) if kind == "http" else None

    async def main() -> None:
        if http is None:
            client = await snodo.aio.direct(runtime)
        else:
            client = await snodo.aio.connect(snodo.Http(http.url))
        async with client:
            task = await client.call_tool_task("slow", {"seconds": 0.1})
            started = time.monotonic()
            assert _text(await task.result(timeout=10)) == "slow done"
            assert time.monotonic() - started < 1.2
            polled = await client.call_tool_task("slow", {"seconds": 0.05})
            started = time.monotonic()
            assert await polled.wait(timeout=10, follow=False) == "completed"
            assert time.monotonic() - started >= 1.5

    try:
        asyncio.run(main())
    finally:
        if http is not None:
            http.close()
        runtime.close_tasks()
