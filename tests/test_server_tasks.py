"""The Runtime's Tasks extension (snodo.server.tasks): tools declared ``task=`` run as tasks for
clients that opt in, over direct dispatch, stdio (``python -m snodo.server``) and HTTP.

One server per transport for the module; every task test polls ``tasks/get`` against a deadline.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from snodo import McpError
from snodo.protocol import tasks as wire
from snodo.server import Context, Peer, Runtime, ServerSession, dispatch
from snodo.server.http_server import serve_http

ROOT = Path(__file__).resolve().parents[1]
V = "2026-07-28"
TASKS = {"extensions": {wire.EXTENSION: {}}, "elicitation": {}}
PLAIN: dict[str, Any] = {"elicitation": {}}
DEADLINE = 10.0
_ids = itertools.count(1)
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def build(ttl: float | None = 30.0, max_tasks: int = 50) -> Runtime:
    """The tasks fixture runtime (also served over stdio: ``tests.test_server_tasks:build``)."""
    rt = Runtime("tasks-test", "1.0.0", versions=[V, "2025-11-25"])
    rt.enable_tasks(ttl=ttl, max_tasks=max_tasks, poll_interval=0.05)
    release = threading.Event()

    @rt.tool(task="optional")
    def quick(args: dict[str, Any], ctx: Context) -> str:
        """Answers at once."""
        return f"quick {args.get('n', 0)}"

    @rt.tool(task="optional")
    def wait(args: dict[str, Any], ctx: Context) -> str:
        """Runs until cancelled or `seconds` pass."""
        end = time.monotonic() + float(args.get("seconds", 30))
        while time.monotonic() < end and not ctx.cancelled:
            release.wait(0.02)
        return "cancelled" if ctx.cancelled else "waited"

    @rt.tool(task="required")
    def broken(args: dict[str, Any], ctx: Context) -> str:
        """A tool error (completed with isError)."""
        raise RuntimeError("it broke")

    @rt.tool(task="optional")
    def protocol(args: dict[str, Any], ctx: Context) -> str:
        """A protocol error (failed)."""
        raise McpError(-32603, "no luck")

    @rt.tool(task="optional")
    def ask(args: dict[str, Any], ctx: Context) -> str:
        """Two rounds of input inside the task."""
        first = ctx.elicit("First?", CONFIRM)
        second = ctx.elicit("Second?", CONFIRM)
        return f"answers {first['content']['ok']} {second['content']['ok']}"

    tries: list[int] = []

    @rt.tool(task="optional")
    def confirm_once(args: dict[str, Any], ctx: Context) -> str:
        """One question."""
        return f"ok={ctx.elicit('Sure?', CONFIRM)['content']['ok']}"

    @rt.tool(task="optional")
    def busy(args: dict[str, Any], ctx: Context) -> str:
        """Sheds load once (retry_later), then answers."""
        tries.append(ctx.round)
        if len(tries) == 1:
            ctx.retry_later()
        return f"after {len(tries)} runs"

    @rt.tool(task="required", prelude=True)
    def gather(args: dict[str, Any], ctx: Any) -> str:
        """Asks on the request, then goes on as a task."""
        answer = ctx.elicit("Name?", {"type": "object", "properties": {"n": {"type": "string"}}})
        ctx.start_task()
        return f"hello {answer['content']['n']} in {ctx.task_id is not None}"

    return rt


# -- transports ----------------------------------------------------------------------------


class Direct:
    """Requests through dispatch on one peer."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.peer = Peer("direct", session=ServerSession())

    def send(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = dispatch(self.rt, message, self.peer)
        assert reply is not None
        return reply

    def close(self) -> None:
        self.rt.close_tasks()


class Http:
    """Requests POSTed to a real HTTP server on 127.0.0.1."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.server = serve_http(rt)

    def send(self, message: dict[str, Any]) -> dict[str, Any]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": V,
            "Mcp-Method": message["method"],
        }
        params = message.get("params", {})
        name = params.get("taskId", params.get("name"))
        if isinstance(name, str):
            headers["Mcp-Name"] = name
        request = urllib.request.Request(
            self.server.url, json.dumps(message).encode(), headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=DEADLINE) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:  # errors come as JSON-RPC bodies with 4xx
            body = exc.read()
        text = body.decode()
        if text.startswith("event:") or text.startswith("data:") or "\ndata:" in text:
            datas = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
            text = datas[-1]
        reply: dict[str, Any] = json.loads(text)
        return reply

    def close(self) -> None:
        self.server.close()
        self.rt.close_tasks()


class Stdio:
    """Requests as lines to ``python -m snodo.server tests.test_server_tasks:build``."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "snodo.server", "tests.test_server_tasks:build"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self.lock:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
            while True:
                line = self.proc.stdout.readline()
                assert line, "the stdio server ended"
                reply: dict[str, Any] = json.loads(line)
                if reply.get("id") == message["id"]:
                    return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(DEADLINE) == 0
        assert self.proc.stdout is not None
        self.proc.stdout.close()


class Client:
    """A 2026-07-28 caller on one transport."""

    def __init__(self, transport: Any) -> None:
        self.t = transport

    def meta(self, caps: Any = None) -> dict[str, Any]:
        return {
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": TASKS if caps is None else caps,
        }

    def send(self, method: str, params: dict[str, Any] | None = None, caps: Any = None) -> Any:
        params = dict(params or {})
        params["_meta"] = self.meta(caps)
        message = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
        return self.t.send(message)

    def ok(self, method: str, params: dict[str, Any] | None = None, caps: Any = None) -> Any:
        reply = self.send(method, params, caps)
        assert "result" in reply, reply
        return reply["result"]

    def err(self, method: str, params: dict[str, Any] | None = None, caps: Any = None) -> Any:
        reply = self.send(method, params, caps)
        assert "error" in reply, reply
        return reply["error"]

    def call(self, tool: str, args: dict[str, Any] | None = None, **kw: Any) -> Any:
        return self.ok("tools/call", {"name": tool, "arguments": args or {}, **kw})

    def until(self, task_id: str, statuses: set[str]) -> dict[str, Any]:
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            task: dict[str, Any] = self.ok("tasks/get", {"taskId": task_id})
            if task["status"] in statuses:
                return task
            time.sleep(0.02)
        raise AssertionError(f"task {task_id} did not reach {statuses}")


@pytest.fixture(scope="module", params=["direct", "stdio", "http"])
def client(request: pytest.FixtureRequest) -> Iterator[Client]:
    kind = request.param
    transport: Any = (
        Direct(build()) if kind == "direct" else Stdio() if kind == "stdio" else Http(build())
    )
    yield Client(transport)
    transport.close()


# -- over every transport ----------------------------------------------------------------------


def test_a_task_completes_with_its_result_inlined(client: Client) -> None:
    created = client.call("quick", {"n": 7})
    assert created["resultType"] == "task" and created["status"] == "working"
    assert {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= set(created)
    assert created["ttlMs"] == 30_000 and created["pollIntervalMs"] == 50
    assert "result" not in created and "requestState" not in created
    done = client.until(created["taskId"], wire.TERMINAL)
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "quick 7"}]
    assert done["resultType"] == "complete"


def test_a_tool_error_completes_and_a_protocol_error_fails(client: Client) -> None:
    broken = client.until(client.call("broken")["taskId"], wire.TERMINAL)
    assert broken["status"] == "completed" and broken["result"]["isError"] is True
    failed = client.until(client.call("protocol")["taskId"], wire.TERMINAL)
    assert failed["status"] == "failed" and "result" not in failed
    assert failed["error"]["code"] == -32603 and failed["error"]["message"] == "no luck"


def test_cancel_ends_a_running_task_and_is_idempotent(client: Client) -> None:
    task_id = client.call("wait", {"seconds": 30})["taskId"]
    assert client.ok("tasks/get", {"taskId": task_id})["status"] == "working"
    ack = client.ok("tasks/cancel", {"taskId": task_id})
    assert {k for k in ack if k != "_meta"} == {"resultType"} and ack["resultType"] == "complete"
    assert client.ok("tasks/get", {"taskId": task_id})["status"] == "cancelled"
    assert client.ok("tasks/cancel", {"taskId": task_id})["resultType"] == "complete"


def test_input_inside_a_task_takes_rounds_of_tasks_update(client: Client) -> None:
    task_id = client.call("ask")["taskId"]
    first = client.until(task_id, {"input_required"})
    (key,) = first["inputRequests"]
    assert first["inputRequests"][key]["method"] == "elicitation/create"
    assert (
        client.ok("tasks/update", {"taskId": task_id, "inputResponses": {"nope": {}}})["resultType"]
        == "complete"
    )
    assert client.ok("tasks/get", {"taskId": task_id})["status"] == "input_required"
    answer = {"action": "accept", "content": {"ok": True}}
    client.ok("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}})
    second = client.until(task_id, {"input_required", *wire.TERMINAL})
    (key2,) = second["inputRequests"]
    assert key2 != key
    client.ok("tasks/update", {"taskId": task_id, "inputResponses": {key2: answer}})
    done = client.until(task_id, wire.TERMINAL)
    assert done["result"]["content"][0]["text"] == "answers True True"


def test_a_prelude_gathers_input_before_the_task(client: Client) -> None:
    first = client.call("gather")
    assert first["resultType"] == "input_required" and "taskId" not in first
    (key,) = first["inputRequests"]
    answer = {"action": "accept", "content": {"n": "Ada"}}
    created = client.call(
        "gather", inputResponses={key: answer}, requestState=first["requestState"]
    )
    assert created["resultType"] == "task" and "requestState" not in created
    done = client.until(created["taskId"], wire.TERMINAL)
    assert done["result"]["content"][0]["text"] == "hello Ada in True"


def test_without_the_extension(client: Client) -> None:
    plain = client.ok("tools/call", {"name": "quick", "arguments": {"n": 1}}, caps=PLAIN)
    assert plain["resultType"] == "complete" and "taskId" not in plain
    assert plain["content"][0]["text"] == "quick 1"
    error = client.err("tools/call", {"name": "broken", "arguments": {}}, caps=PLAIN)
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"extensions": {wire.EXTENSION: {}}}
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        assert client.err(method, {"taskId": "x"}, caps=PLAIN)["code"] == -32021


def test_unknown_tasks_and_removed_methods(client: Client) -> None:
    assert client.err("tasks/get", {"taskId": "no-such-task"})["code"] == -32602
    assert client.err("tasks/cancel", {"taskId": "no-such-task"})["code"] == -32602
    assert client.err("tasks/result", {"taskId": "no-such-task"})["code"] == -32601
    assert client.err("tasks/list", {})["code"] == -32601


def test_the_extension_is_advertised(client: Client) -> None:
    caps = client.ok("server/discover")["capabilities"]
    assert caps["extensions"] == {wire.EXTENSION: {}} and "tasks" not in caps


def test_http_mcp_name_must_match_the_task_id(client: Client) -> None:
    if not isinstance(client.t, Http):
        pytest.skip("an HTTP header rule")
    task_id = client.call("quick")["taskId"]
    body = {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": "tasks/get",
        "params": {"taskId": task_id, "_meta": Client(client.t).meta()},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": "tasks/get",
        "Mcp-Name": "another-task",
    }
    request = urllib.request.Request(
        client.t.server.url, json.dumps(body).encode(), headers, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=DEADLINE)
    assert raised.value.code == 400
    assert json.loads(raised.value.read())["error"]["code"] == -32020
    raised.value.close()


# -- the store (direct) ------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_result_expires_with_its_ttl() -> None:
    rt = build(ttl=5.0)
    store = rt.enable_tasks()
    clock = Clock()
    store._clock = clock
    c = Client(Direct(rt))
    task_id = c.call("quick")["taskId"]
    assert c.until(task_id, wire.TERMINAL)["status"] == "completed"
    clock.now += 4.9
    assert c.ok("tasks/get", {"taskId": task_id})["status"] == "completed"
    clock.now += 0.2
    assert c.err("tasks/get", {"taskId": task_id})["code"] == -32602
    assert len(store) == 0
    rt.close_tasks()


def test_the_store_is_bounded() -> None:
    rt = build(max_tasks=2)
    c = Client(Direct(rt))
    first = c.call("quick")["taskId"]
    c.until(first, wire.TERMINAL)
    running = [c.call("wait")["taskId"]]
    running.append(c.call("wait")["taskId"])  # the ended first task made room
    assert c.err("tasks/get", {"taskId": first})["code"] == -32602
    error = c.err("tools/call", {"name": "wait", "arguments": {}})
    assert error["code"] == -32603 and "Too many tasks" in error["message"]
    rt.close_tasks()
    assert all(rt.tasks is not None and rt.tasks.status(t) == "cancelled" for t in running)


def test_close_leaves_no_thread_behind() -> None:
    before = {t.name for t in threading.enumerate()}
    rt = build()
    c = Client(Direct(rt))
    clock = Clock()
    rt.enable_tasks()._clock = clock
    expired = c.call("wait", {"seconds": 30})["taskId"]
    clock.now += 31  # past its ttl: dropped from the store, its tool told to stop
    ids = [c.call("wait", {"seconds": 30})["taskId"] for _ in range(3)]
    assert c.err("tasks/get", {"taskId": expired})["code"] == -32602
    assert any(t.name.startswith("snodo-task-") for t in threading.enumerate())
    rt.close_tasks()
    left = [t for t in threading.enumerate() if t.name.startswith("snodo-task-")]
    assert left == [], left
    assert {t.name for t in threading.enumerate()} <= before | {"MainThread"}
    assert {rt.tasks.status(i) for i in ids} == {"cancelled"}  # type: ignore[union-attr]
    assert c.err("tools/call", {"name": "wait", "arguments": {}})["code"] == -32603


def test_status_notifications_reach_a_listen_stream_naming_the_task() -> None:
    rt = build()
    c = Client(Direct(rt))
    received: list[dict[str, Any]] = []
    arrived = threading.Event()
    source = rt.subscription_source
    assert source is not None
    task_id = c.call("wait", {"seconds": 30})["taskId"]
    other = c.call("wait", {"seconds": 30})["taskId"]
    sub = source.open("sub-1", {"taskIds": [task_id]})

    def emit(message: dict[str, Any]) -> None:
        received.append(message)
        if message.get("method") == wire.NOTIFICATION:
            arrived.set()

    sub.start(emit)
    c.ok("tasks/cancel", {"taskId": other})
    c.ok("tasks/cancel", {"taskId": task_id})
    assert arrived.wait(DEADLINE)
    notes = [m["params"] for m in received if m.get("method") == wire.NOTIFICATION]
    assert [(n["taskId"], n["status"]) for n in notes] == [(task_id, "cancelled")]
    sub.close()
    rt.close_tasks()


def test_listen_acknowledges_task_ids() -> None:
    rt = build()
    acks: list[dict[str, Any]] = []

    def listen(sub: Any) -> None:
        sub.start(acks.append)

    peer = Peer("direct", session=ServerSession(), listen=listen)
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": TASKS,
    }
    request = {
        "jsonrpc": "2.0",
        "id": "L1",
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": ["a", "b"]}, "_meta": meta},
    }
    assert dispatch(rt, request, peer) is None
    assert acks[0]["params"]["notifications"] == {"taskIds": ["a", "b"]}
    rt.close_subscriptions()
    rt.close_tasks()


def test_retry_later_runs_the_tool_again() -> None:
    rt = build()
    c = Client(Direct(rt))
    started = time.monotonic()
    done = c.until(c.call("busy")["taskId"], wire.TERMINAL)
    assert done["result"]["content"][0]["text"] == "after 2 runs"
    assert time.monotonic() - started >= 0.2  # the retry waited
    rt.close_tasks()


def test_session_era_tasks() -> None:
    """2025-11-25: the opt-in is the initialize capabilities; input still goes through
    tasks/update (the task's tool never sends a server request)."""
    rt = build()
    peer = Peer("direct", session=ServerSession())

    def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
        reply = dispatch(rt, message, peer)
        assert reply is not None and "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    info = {"name": "t", "version": "1"}
    init = send(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": TASKS, "clientInfo": info}
    )
    assert init["capabilities"]["extensions"] == {wire.EXTENSION: {}}
    dispatch(rt, {"jsonrpc": "2.0", "method": "notifications/initialized"}, peer)
    created = send("tools/call", {"name": "confirm_once", "arguments": {}})
    assert created["resultType"] == "task"
    task_id = created["taskId"]
    end = time.monotonic() + DEADLINE
    task = send("tasks/get", {"taskId": task_id})
    while task["status"] != "input_required" and time.monotonic() < end:
        time.sleep(0.02)
        task = send("tasks/get", {"taskId": task_id})
    (key,) = task["inputRequests"]
    answer = {"action": "accept", "content": {"ok": False}}
    # an empty acknowledgement (the session era has no resultType)
    assert send("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}}) == {}
    while task["status"] not in wire.TERMINAL and time.monotonic() < end:
        time.sleep(0.02)
        task = send("tasks/get", {"taskId": task_id})
    assert task["result"]["content"][0]["text"] == "ok=False"
    rt.close_tasks()


def test_declaring_bad_task_support_fails() -> None:
    rt = Runtime()
    with pytest.raises(ValueError, match="task must be"):
        rt.add_tool("x", lambda a, c: "", task="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prelude"):
        rt.add_tool("y", lambda a, c: "", prelude=True)
    rt.add_tool("z", lambda a, c: "", task="optional")
    rt.add_tool("z", lambda a, c: "")  # replaced without task support
    assert rt.tasks is not None and "z" not in rt.tasks.modes


SHUTDOWN_RUNTIME = '''
import os, threading
from snodo.server import Runtime

runtime = Runtime("shutdown", "1.0.0")


@runtime.tool(task="required")
def crunch(args, ctx):
    """Works until cancelled, then says so in a file."""
    started = os.environ["SNODO_TEST_MARKER"] + ".started"
    open(started, "w").close()
    while not ctx.cancelled:
        threading.Event().wait(0.02)
    with open(os.environ["SNODO_TEST_MARKER"], "w") as marker:
        marker.write("cancelled")
    return "stopped"


runtime.enable_tasks(ttl=60.0)
'''


def test_a_stdio_server_cancels_its_running_tasks_when_stdin_ends(tmp_path: Path) -> None:
    """``python -m snodo.server`` ends its tasks when the client goes (the tool sees cancelled)."""
    import snodo

    (tmp_path / "shutdown_runtime.py").write_text(SHUTDOWN_RUNTIME)
    marker = tmp_path / "marker"
    target = snodo.Stdio(sys.executable, ["-m", "snodo.server", "shutdown_runtime:runtime"])
    client = snodo.connect(
        target,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "SNODO_TEST_MARKER": str(marker)},
        cwd=str(tmp_path),
        client_capabilities={"extensions": {wire.EXTENSION: {}}},
    )
    try:
        task = client.call_tool_task("crunch", {})
        deadline = time.monotonic() + DEADLINE
        while not Path(f"{marker}.started").exists():
            assert time.monotonic() < deadline, "the task's tool never started"
            time.sleep(0.01)  # the tool runs in another process: a file is all it can show
    finally:
        client.close()
    assert task.id
    deadline = time.monotonic() + DEADLINE
    while not marker.exists() or marker.read_text() != "cancelled":
        assert time.monotonic() < deadline, "the server ended without cancelling the task"
        time.sleep(0.01)


def test_an_http_server_cancels_its_running_tasks_on_sigterm(tmp_path: Path) -> None:
    """``python -m snodo.server --http`` ends its tasks when it is told to stop."""
    import selectors

    import snodo

    (tmp_path / "shutdown_runtime.py").write_text(SHUTDOWN_RUNTIME)
    marker = tmp_path / "marker"
    process = subprocess.Popen(
        [sys.executable, "-m", "snodo.server", "--http", "--port", "0", "shutdown_runtime:runtime"],
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": f"{tmp_path}:{ROOT}",
            "SNODO_TEST_MARKER": str(marker),
        },
        cwd=str(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        seen = b""
        deadline = time.monotonic() + DEADLINE
        with selectors.DefaultSelector() as selector:
            selector.register(process.stderr, selectors.EVENT_READ)
            while b"serving http" not in seen or not seen.endswith(b"\n"):
                remaining = deadline - time.monotonic()
                assert remaining > 0 and process.poll() is None, seen
                if selector.select(remaining):
                    seen += process.stderr.read1(4096)
        url = seen.split(b"serving ", 1)[1].split()[0].decode()
        with snodo.connect(
            snodo.Http(url), client_capabilities={"extensions": {wire.EXTENSION: {}}}
        ) as client:
            task = client.call_tool_task("crunch", {})
            assert task.id
            while not Path(f"{marker}.started").exists():
                assert time.monotonic() < deadline, "the task's tool never started"
                time.sleep(0.01)  # the tool runs in another process: a file is all it can show
            process.terminate()
            assert process.wait(DEADLINE) == 0
        assert marker.read_text() == "cancelled"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(DEADLINE)
        if process.stderr is not None:
            process.stderr.close()
