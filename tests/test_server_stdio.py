"""``python -m snodo.server``: a Runtime served over stdio, for every protocol version.

Reference (e) "stdio transport": UTF-8 JSON-RPC, one message per line; nothing but MCP messages
on stdout; the client closes stdin to end the server. (d) the initialize lifecycle; (k) progress
before the response and cancellation with ``notifications/cancelled``; (m) server-to-client
requests on the session era, ``input_required`` on 2026-07-28.

Every test starts real server processes (``python -m snodo.server``, or the gevent runner in
``tests/servers/server_stdio_gevent.py``) and talks raw JSON lines to them through the small
client below; every response is checked against the version's schema. Every wait has a
deadline; every process is reaped.
"""

from __future__ import annotations

import io
import itertools
import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from snodo.server.stdio_server import serve_stdio
from tests.support.server_support import (
    CC,
    CI,
    PV,
    SESSION_VERSIONS,
    STATELESS,
    VERSIONS,
    check_response,
    example_runtime,
    validate,
)

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers"
EXAMPLE = "examples.example_runtime:runtime"
TOOLS = "tests.servers.server_stdio_tools:runtime"
DEADLINE = 10.0
#: How soon a server must exit once its stdin is closed and nothing is running.
PROMPT_EXIT = 3.0
CAPS: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
CLIENT_INFO = {"name": "stdio-test", "version": "1.0.0"}
MODES = ("threads", "gevent")

Message = dict[str, Any]


# -- a raw line client ---------------------------------------------------------------------------


class Server:
    """A server process and its lines: write raw bytes or messages, wait for messages."""

    def __init__(self, target: str = EXAMPLE, *options: str, mode: str = "threads") -> None:
        if mode == "gevent":
            command = [sys.executable, str(SERVERS / "server_stdio_gevent.py")]
        else:
            command = [sys.executable, "-m", "snodo.server"]
        self.proc = subprocess.Popen(
            [*command, target, *options],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: list[bytes] = []  # every stdout line, as written
        self.backlog: list[Message] = []  # received, not yet asked for
        self._inbox: queue.Queue[bytes] = queue.Queue(maxsize=100_000)
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()
        self._eof = False
        self._pumps = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    def _pump_stdout(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        for line in iter(stdout.readline, b""):
            self._inbox.put(line, timeout=DEADLINE)
        self._inbox.put(b"", timeout=DEADLINE)

    def _pump_stderr(self) -> None:
        stderr: Any = self.proc.stderr  # a BufferedReader (read1: what is there, up to n)
        assert stderr is not None
        for chunk in iter(lambda: stderr.read1(65536), b""):
            with self._stderr_lock:
                self._stderr += chunk

    # -- writing

    def write(self, data: bytes) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        stdin.write(data)
        stdin.flush()

    def send(self, message: Message) -> None:
        self.write(json.dumps(message).encode() + b"\n")

    def close_stdin(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        stdin.close()

    # -- reading

    def _next(self, deadline: float) -> Message | None:
        """The next message on stdout, or None at end of output."""
        if self._eof:
            return None
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise queue.Empty
            line = self._inbox.get(timeout=remaining)
        except queue.Empty:
            raise AssertionError(
                f"no message before the deadline; backlog {self.backlog}; stderr {self.stderr()}"
            ) from None
        if not line:
            self._eof = True
            return None
        self.lines.append(line)
        assert line.endswith(b"\n"), line
        message = json.loads(line)  # every stdout line is a JSON message
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line
        return message

    def expect(self, match: Callable[[Message], bool], timeout: float = DEADLINE) -> Message:
        """The first message (backlog first) that ``match`` accepts; the rest stay queued."""
        for i, message in enumerate(self.backlog):
            if match(message):
                return self.backlog.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            received = self._next(deadline)
            if received is None:
                raise AssertionError(
                    f"stdout ended first; backlog {self.backlog}; stderr {self.stderr()}"
                )
            if match(received):
                return received
            self.backlog.append(received)

    def response(self, rid: Any, timeout: float = DEADLINE) -> Message:
        return self.expect(
            lambda m: "method" not in m and m.get("id") == rid and type(m.get("id")) is type(rid),
            timeout,
        )

    def rest(self, timeout: float = DEADLINE) -> list[Message]:
        """Every message still to come, up to the end of stdout (backlog included)."""
        deadline = time.monotonic() + timeout
        out = self.backlog
        self.backlog = []
        while (message := self._next(deadline)) is not None:
            out.append(message)
        return out

    def stderr(self) -> str:
        with self._stderr_lock:
            return self._stderr.decode("utf-8", "replace")

    # -- ending

    def wait(self, timeout: float = DEADLINE) -> int:
        """The exit status (within ``timeout``); the output pumps have finished too."""
        code = self.proc.wait(timeout)
        for pump in self._pumps:
            pump.join(timeout)
        return code

    def finish(self, timeout: float = DEADLINE) -> tuple[int, float]:
        """Close stdin; the exit status and how long the exit took."""
        start = time.monotonic()
        self.close_stdin()
        code = self.wait(timeout)
        return code, time.monotonic() - start

    def __enter__(self) -> Server:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(DEADLINE)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        for pump in self._pumps:
            pump.join(DEADLINE)


_ids = itertools.count(1)


class Client:
    """One protocol version spoken over a :class:`Server`; responses are schema-checked."""

    def __init__(self, server: Server, version: str, caps: dict[str, Any] | None = None) -> None:
        self.server = server
        self.version = version
        self.caps = CAPS if caps is None else caps
        self.methods: dict[int | str, str] = {}
        if version == STATELESS:
            discovered = self.ok("server/discover")
            assert set(VERSIONS) <= set(discovered["supportedVersions"])
        else:
            result = self.ok(
                "initialize",
                {"protocolVersion": version, "capabilities": self.caps, "clientInfo": CLIENT_INFO},
            )
            assert result["protocolVersion"] == version
            assert result["serverInfo"]["name"] == "snodo-example"
            self.notify("notifications/initialized")

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        meta: dict[str, Any] | None = None,
    ) -> int:
        rid = next(_ids)
        params = dict(params or {})
        full_meta = dict(meta or {})
        if self.version == STATELESS:
            full_meta.update({PV: self.version, CC: self.caps, CI: CLIENT_INFO})
        if full_meta and method != "initialize":
            params["_meta"] = full_meta
        self.methods[rid] = method
        self.server.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: Message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.server.send(message)

    def response(self, rid: int | str, timeout: float = DEADLINE) -> Message:
        response = self.server.response(rid, timeout)
        check_response(self.version, self.methods.get(rid), response)
        return response

    def result(self, rid: int) -> dict[str, Any]:
        response = self.response(rid)
        assert "error" not in response, response
        result: dict[str, Any] = response["result"]
        return result

    def error(self, rid: int) -> dict[str, Any]:
        response = self.response(rid)
        assert "result" not in response, response
        error: dict[str, Any] = response["error"]
        return error

    def ok(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        return self.result(self.request(method, params, **kw))

    def call(self, tool: str, arguments: dict[str, Any] | None = None, **kw: Any) -> int:
        return self.request("tools/call", {"name": tool, "arguments": arguments or {}}, **kw)

    def progress(self, token: str | int) -> Message:
        note = self.server.expect(
            lambda m: (
                m.get("method") == "notifications/progress"
                and m["params"].get("progressToken") == token
            )
        )
        validate(self.version, "JSONRPCNotification", note)
        validate(self.version, "ProgressNotification", note)
        return note

    def server_request(self, method: str) -> Message:
        """The next server-to-client request (session era), schema-checked."""
        request = self.server.expect(lambda m: m.get("method") == method and "id" in m)
        validate(self.version, "JSONRPCRequest", request)
        assert isinstance(request["id"], str) and request["id"].startswith("srv-"), request
        return request

    def cancelled_notice(self, request_id: str) -> Message:
        note = self.server.expect(
            lambda m: (
                m.get("method") == "notifications/cancelled"
                and m["params"].get("requestId") == request_id
            )
        )
        validate(self.version, "JSONRPCNotification", note)
        validate(self.version, "CancelledNotification", note)
        return note


def text_of(result: dict[str, Any]) -> str:
    content = result["content"]
    assert content and content[0]["type"] == "text", result
    text: str = content[0]["text"]
    return text


def check_unattributed_error(version: str, response: Message, code: int) -> None:
    """An error nobody can be told about by id: ``"id": null`` (JSON-RPC 2.0 §5).

    The MCP schemas type ``id`` as an optional RequestId (2025-06-18: a required one), so the
    rest of the envelope is checked with the id left out (a placeholder on 2025-06-18).
    """
    assert "id" in response and response["id"] is None, response
    assert response["error"]["code"] == code, response
    body = {k: v for k, v in response.items() if k != "id"}
    if version == "2025-06-18":
        validate(version, "JSONRPCError", {**body, "id": 0})
    else:
        validate(version, "JSONRPCErrorResponse", body)


@pytest.fixture
def servers() -> Iterator[Callable[..., Server]]:
    """Start servers; every one is killed (if still running) and reaped after the test."""
    started: list[Server] = []

    def start(target: str = EXAMPLE, *options: str, mode: str = "threads") -> Server:
        server = Server(target, *options, mode=mode)
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


all_versions = pytest.mark.parametrize("version", VERSIONS)
session_versions = pytest.mark.parametrize("version", SESSION_VERSIONS)
both_modes = pytest.mark.parametrize("mode", MODES)


# -- lifecycle, lists, calls ---------------------------------------------------------------------


@both_modes
@all_versions
def test_handshake_list_and_call(servers: Callable[..., Server], version: str, mode: str) -> None:
    """(d)/(c): initialize + initialized (or server/discover on 2026-07-28), then tools/list and
    tools/call answered over stdio; closing stdin ends the server with status 0 (e)."""
    server = servers(EXAMPLE, mode=mode)
    client = Client(server, version)
    tools = client.ok("tools/list")["tools"]
    assert {"echo", "add", "slow_count", "deploy"} <= {t["name"] for t in tools}
    assert text_of(client.ok("tools/call", {"name": "echo", "arguments": {"text": "hi"}})) == "hi"
    added = client.ok("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
    assert added["structuredContent"] == {"sum": 5}
    code, took = server.finish()
    assert code == 0
    assert took < PROMPT_EXIT
    assert server.rest() == []


@both_modes
@all_versions
def test_progress_arrives_before_the_response(
    servers: Callable[..., Server], version: str, mode: str
) -> None:
    """(k) progress: notifications/progress for the request's token come before its response."""
    server = servers(EXAMPLE, mode=mode)
    client = Client(server, version)
    rid = client.call("slow_count", {"n": 3}, meta={"progressToken": "tok-1"})
    notes = [client.progress("tok-1") for _ in range(3)]
    assert [n["params"]["progress"] for n in notes] == [1, 2, 3]
    assert all(n["params"]["total"] == 3 for n in notes)
    assert server.backlog == []  # nothing (no response) arrived ahead of the progress
    assert text_of(client.result(rid)) == "counted to 3"
    order = [json.loads(line).get("id") for line in server.lines[-4:]]
    assert order == [None, None, None, rid]


# -- interactive tools ---------------------------------------------------------------------------


@both_modes
@all_versions
def test_interactive_tool(servers: Callable[..., Server], version: str, mode: str) -> None:
    """(m)/(h): 2026-07-28 answers input_required and completes on the retry with
    inputResponses; the session era sends elicitation/create on stdout, the client answers
    it, and the tool's result follows."""
    server = servers(EXAMPLE, mode=mode)
    client = Client(server, version)
    if version == STATELESS:
        first = client.result(client.call("deploy", {"env": "prod"}))
        assert first["resultType"] == "input_required"
        (key, embedded), *_ = first["inputRequests"].items()
        assert embedded["method"] == "elicitation/create"
        done = client.ok(
            "tools/call",
            {
                "name": "deploy",
                "arguments": {"env": "prod"},
                "inputResponses": {key: {"action": "accept", "content": {"approved": True}}},
                "requestState": first["requestState"],
            },
        )
        assert done["resultType"] == "complete"
    else:
        rid = client.call("deploy", {"env": "prod"})
        ask = client.server_request("elicitation/create")
        validate(version, "ElicitRequest", ask)
        assert ask["params"]["message"] == "Deploy to prod?"
        server.send(
            {
                "jsonrpc": "2.0",
                "id": ask["id"],
                "result": {"action": "accept", "content": {"approved": True}},
            }
        )
        done = client.result(rid)
    assert done["structuredContent"] == {"env": "prod", "status": "deployed"}
    assert server.finish()[0] == 0


@session_versions
def test_sampling_and_roots_requests(servers: Callable[..., Server], version: str) -> None:
    """(m): sampling/createMessage and roots/list go out as server requests with fresh string
    ids, and their answers reach the tools."""
    server = servers(EXAMPLE)
    client = Client(server, version)
    summarize = client.call("summarize", {"text": "a long text"})
    roots = client.call("roots")
    asks = [client.server_request("sampling/createMessage"), client.server_request("roots/list")]
    assert asks[0]["id"] != asks[1]["id"]
    validate(version, "CreateMessageRequest", asks[0])
    validate(version, "ListRootsRequest", asks[1])
    server.send(
        {
            "jsonrpc": "2.0",
            "id": asks[1]["id"],
            "result": {"roots": [{"uri": "file:///work", "name": "work"}]},
        }
    )
    server.send(
        {
            "jsonrpc": "2.0",
            "id": asks[0]["id"],
            "result": {
                "role": "assistant",
                "content": {"type": "text", "text": "short"},
                "model": "test-model",
            },
        }
    )
    assert client.result(roots)["structuredContent"] == {"roots": ["file:///work"]}
    assert text_of(client.result(summarize)) == "short"


@session_versions
def test_an_error_answer_fails_the_tool(servers: Callable[..., Server], version: str) -> None:
    """An error response to elicitation/create becomes the tool call's error (McpError.from_wire)."""
    server = servers(EXAMPLE)
    client = Client(server, version)
    rid = client.call("deploy")
    ask = client.server_request("elicitation/create")
    server.send(
        {"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -32601, "message": "no forms here"}}
    )
    error = client.error(rid)
    assert (error["code"], error["message"]) == (-32601, "no forms here")


@session_versions
def test_a_malformed_answer_fails_the_tool(servers: Callable[..., Server], version: str) -> None:
    """A response to a server request that is neither result nor error fails the waiting tool
    (-32603) instead of being answered back."""
    server = servers(EXAMPLE)
    client = Client(server, version)
    rid = client.call("deploy")
    ask = client.server_request("elicitation/create")
    server.send({"jsonrpc": "2.0", "id": ask["id"]})
    error = client.error(rid)
    assert error["code"] == -32603
    assert "malformed" in error["message"]
    assert server.finish()[0] == 0
    assert server.rest() == []


@session_versions
def test_an_unanswered_server_request_times_out(
    servers: Callable[..., Server], version: str
) -> None:
    """server_request_timeout: the tool call fails -32001, the client is told the request is
    cancelled, and a late answer is dropped (logged on stderr)."""
    server = servers(EXAMPLE, "--server-request-timeout", "0.3")
    client = Client(server, version)
    rid = client.call("deploy")
    ask = client.server_request("elicitation/create")
    assert client.cancelled_notice(ask["id"])["params"]["reason"] == "timed out"
    error = client.error(rid)
    assert error["code"] == -32001
    assert error["data"] == {"timeoutMs": 300}
    server.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}})
    assert text_of(client.ok("tools/call", {"name": "echo", "arguments": {"text": "on"}})) == "on"
    assert server.finish()[0] == 0
    assert server.rest() == []
    assert ask["id"] in server.stderr()


@session_versions
def test_end_of_stdin_fails_a_waiting_server_request(
    servers: Callable[..., Server], version: str
) -> None:
    """stdin EOF while a tool waits for the client: the call fails -32000, then exit 0."""
    server = servers(EXAMPLE)
    client = Client(server, version)
    rid = client.call("deploy")
    client.server_request("elicitation/create")
    code, took = server.finish()
    assert code == 0
    assert took < PROMPT_EXIT
    (response,) = server.rest()
    check_response(version, "tools/call", response)
    assert response["id"] == rid
    assert response["error"]["code"] == -32000


# -- concurrency and cancellation ----------------------------------------------------------------


@both_modes
@all_versions
def test_requests_are_answered_out_of_order(
    servers: Callable[..., Server], version: str, mode: str
) -> None:
    """Each request runs on its own worker: a fast call is answered while a slow one blocks."""
    server = servers(TOOLS, mode=mode)
    client = Client(server, version)
    slow = client.call("gate")
    fast = client.call("echo", {"text": "fast"})
    assert text_of(client.result(fast)) == "fast"
    assert server.backlog == []  # the slow call has not been answered
    release = client.call("release")
    assert text_of(client.result(release)) == "open"
    assert text_of(client.result(slow)) == "released"
    assert server.finish()[0] == 0


@both_modes
@all_versions
def test_cancelled_request_stops_and_is_not_answered(
    servers: Callable[..., Server], version: str, mode: str
) -> None:
    """(k) cancellation: notifications/cancelled reaches the running tool (ctx.cancelled) and the
    request's response is suppressed; the server keeps serving."""
    server = servers(TOOLS, mode=mode)
    client = Client(server, version)
    rid = client.call("gate", meta={"progressToken": "g"})
    client.progress("g")  # the tool is running
    client.notify("notifications/cancelled", {"requestId": rid, "reason": "user gave up"})
    assert text_of(client.ok("tools/call", {"name": "echo", "arguments": {"text": "x"}})) == "x"
    code, took = server.finish()
    assert code == 0
    assert took < PROMPT_EXIT  # the gate returned: nothing was left running
    assert [m for m in server.rest() if m.get("id") == rid] == []
    assert f"gate {rid} saw cancel" in server.stderr()


@session_versions
def test_cancelling_a_request_cancels_its_server_request(
    servers: Callable[..., Server], version: str
) -> None:
    """A request cancelled while it waits for the client's answer: the server cancels its own
    elicitation/create (notifications/cancelled with the server's id) and answers nothing."""
    server = servers(EXAMPLE)
    client = Client(server, version)
    rid = client.call("deploy")
    ask = client.server_request("elicitation/create")
    client.notify("notifications/cancelled", {"requestId": rid})
    client.cancelled_notice(ask["id"])
    assert server.finish()[0] == 0
    assert [m for m in server.rest() if m.get("id") == rid] == []


@all_versions
def test_over_the_concurrency_limit_is_server_busy(
    servers: Callable[..., Server], version: str
) -> None:
    """max_concurrency: a request over the limit is answered -32603 "Server busy" at once; once a
    worker is free requests are served again."""
    server = servers(TOOLS, "--max-concurrency", "1")
    client = Client(server, version)
    blocker = client.call("gate", meta={"progressToken": "b"})
    client.progress("b")
    error = client.error(client.call("echo", {"text": "no room"}))
    assert (error["code"], error["message"]) == (-32603, "Server busy")
    client.notify("notifications/cancelled", {"requestId": blocker})
    deadline = time.monotonic() + DEADLINE
    while True:  # the gate notices its cancellation within ~10 ms; retry until it has
        response = client.response(client.call("echo", {"text": "room"}))
        if "result" in response:
            break
        assert response["error"]["message"] == "Server busy"
        assert time.monotonic() < deadline, "the worker was never freed"
    assert text_of(response["result"]) == "room"


@all_versions
def test_a_sequential_client_never_sees_busy(servers: Callable[..., Server], version: str) -> None:
    """A worker frees its slot before it writes its response: with max_concurrency 1, a client
    that sends each request once the previous response arrived is always served."""
    server = servers(EXAMPLE, "--max-concurrency", "1")
    client = Client(server, version)
    for i in range(200):
        response = client.response(client.call("echo", {"text": str(i)}))
        assert "error" not in response, (i, response)


@all_versions
def test_concurrent_responses_never_interleave(
    servers: Callable[..., Server], version: str
) -> None:
    """One write per message under a lock: many large concurrent responses arrive as whole
    lines (every stdout line parses as one message)."""
    server = servers(EXAMPLE)
    client = Client(server, version)
    texts = {
        client.call("echo", {"text": f"{i:02d}" * 50_000}): f"{i:02d}" * 50_000 for i in range(24)
    }
    for rid, text in texts.items():
        assert text_of(client.result(rid)) == text


# -- framing and bad input -----------------------------------------------------------------------


@all_versions
def test_invalid_json_is_a_parse_error(servers: Callable[..., Server], version: str) -> None:
    """Invalid JSON (and a lone surrogate, NaN) is answered -32700 with id null; serving goes on."""
    server = servers(EXAMPLE)
    client = Client(server, version)
    for bad in (b'{"jsonrpc": "2.0", "id": 1, "method": \n', b"\xff\xfe\n", b"[NaN]\n"):
        server.write(bad)
        check_unattributed_error(version, server.response(None), -32700)
    assert text_of(client.ok("tools/call", {"name": "echo", "arguments": {"text": "ok"}})) == "ok"


@all_versions
def test_invalid_envelope_is_invalid_request(servers: Callable[..., Server], version: str) -> None:
    """An invalid JSON-RPC envelope is answered -32600, with its id when it carried a valid one."""
    server = servers(EXAMPLE)
    client = Client(server, version)
    server.send({"jsonrpc": "1.0", "id": 4242, "method": "tools/list"})
    response = client.response(4242)
    assert response["error"]["code"] == -32600
    server.send({"jsonrpc": "2.0", "id": "abc", "method": 7})
    assert client.response("abc")["error"]["code"] == -32600
    for no_id in (
        {"jsonrpc": "2.0", "id": [1], "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "tools/list", "params": [1]},
        [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
        "just a string",
    ):
        server.write(json.dumps(no_id).encode() + b"\n")
        check_unattributed_error(version, server.response(None), -32600)
    assert client.ok("tools/list")["tools"]


@all_versions
def test_oversized_line_is_refused_and_serving_goes_on(
    servers: Callable[..., Server], version: str
) -> None:
    """A line over max_line_bytes is discarded (never buffered whole) and answered -32700 with
    id null; a line of exactly the limit is served, and so is the next request."""
    limit = 4096
    server = servers(EXAMPLE, "--max-line-bytes", str(limit))
    client = Client(server, version)

    def echo_line(rid: int, size: int) -> bytes:
        message: Message = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": ""}},
        }
        if version == STATELESS:
            message["params"]["_meta"] = {PV: version, CC: CAPS, CI: CLIENT_INFO}
        client.methods[rid] = "tools/call"
        bare = len(json.dumps(message).encode())
        message["params"]["arguments"]["text"] = "x" * (size - bare)
        line = json.dumps(message).encode()
        assert len(line) == size
        return line + b"\n"

    too_long = next(_ids)
    server.write(echo_line(too_long, 50 * limit))
    check_unattributed_error(version, server.response(None), -32700)
    exact = next(_ids)
    server.write(echo_line(exact, limit))
    assert len(text_of(client.result(exact))) > limit // 2
    server.write(echo_line(next(_ids), limit + 1))
    check_unattributed_error(version, server.response(None), -32700)
    assert (
        text_of(client.ok("tools/call", {"name": "echo", "arguments": {"text": "next"}})) == "next"
    )
    assert server.finish()[0] == 0
    assert [m for m in server.rest() if m.get("id") == too_long] == []
    assert "oversized" in server.stderr()


@all_versions
def test_blank_lines_bom_and_crlf_are_tolerated(
    servers: Callable[..., Server], version: str
) -> None:
    """(e) framing: blank lines are skipped, a UTF-8 BOM and a trailing CR are stripped, and a
    message may arrive in pieces."""
    server = servers(EXAMPLE)
    client = Client(server, version)
    rid = next(_ids)
    client.methods[rid] = "tools/list"
    params: dict[str, Any] = {}
    if version == STATELESS:
        params["_meta"] = {PV: version, CC: CAPS, CI: CLIENT_INFO}
    line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/list", "params": params})
    data = b"\n\r\n   \n\xef\xbb\xbf" + line.encode() + b"\r\n"
    server.write(data[:7])
    server.write(data[7:20])
    server.write(data[20:])
    assert client.result(rid)["tools"]


@all_versions
def test_responses_to_unknown_ids_are_dropped(servers: Callable[..., Server], version: str) -> None:
    """A response for an id the server is not waiting on is logged on stderr and dropped."""
    server = servers(EXAMPLE)
    client = Client(server, version)
    server.send({"jsonrpc": "2.0", "id": "srv-404", "result": {}})
    server.send({"jsonrpc": "2.0", "id": 77, "error": {"code": -1, "message": "stray"}})
    assert text_of(client.ok("tools/call", {"name": "echo", "arguments": {"text": "ok"}})) == "ok"
    assert server.finish()[0] == 0
    assert server.rest() == []
    assert "srv-404" in server.stderr()


# -- stdout hygiene and shutdown -----------------------------------------------------------------


@both_modes
@all_versions
def test_stray_output_never_reaches_stdout(
    servers: Callable[..., Server], version: str, mode: str
) -> None:
    """(e) the server writes nothing but MCP messages to stdout: print() at import and in a tool,
    a write to fd 1, and a child process's output all go to stderr; the child reads EOF, not the
    protocol stream."""
    server = servers(TOOLS, mode=mode)
    client = Client(server, version)
    assert text_of(client.ok("tools/call", {"name": "shout"})) == "shouted"
    assert server.finish()[0] == 0
    server.rest()
    assert all(b"STRAY" not in line for line in server.lines)
    stderr = server.stderr()
    for marker in (
        "STRAY-IMPORT",
        "STRAY-PRINT from a tool",
        "STRAY-FD1 from a tool",
        "STRAY-CHILD stdin=0",
    ):
        assert marker in stderr


@all_versions
def test_end_of_stdin_waits_for_running_requests(
    servers: Callable[..., Server], version: str
) -> None:
    """(e) shutdown: after stdin closes, a running request still completes and is answered, then
    the server exits 0."""
    server = servers(TOOLS)
    client = Client(server, version)
    rid = client.call("nap", {"seconds": 0.3})
    code, took = server.finish()
    assert code == 0
    assert took < PROMPT_EXIT
    (response,) = server.rest()
    check_response(version, "tools/call", response)
    assert response["id"] == rid
    assert text_of(response["result"]) == "rested"


def test_end_of_stdin_does_not_wait_forever(servers: Callable[..., Server]) -> None:
    """The wait for running requests after stdin ends is bounded (--shutdown-grace)."""
    server = servers(TOOLS, "--shutdown-grace", "0.2")
    client = Client(server, STATELESS)
    client.call("gate", meta={"progressToken": "stuck"})
    client.progress("stuck")
    code, took = server.finish()
    assert code == 0
    assert took < PROMPT_EXIT
    assert "still running" in server.stderr()


def test_sigterm_ends_the_server_promptly(servers: Callable[..., Server]) -> None:
    """(d)8 shutdown: SIGTERM (the client's next step after closing stdin) ends the server at
    once, even with a request running."""
    server = servers(TOOLS)
    client = Client(server, SESSION_VERSIONS[0])
    client.call("gate", meta={"progressToken": "t"})
    client.progress("t")
    start = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait() == -signal.SIGTERM
    assert time.monotonic() - start < PROMPT_EXIT


@all_versions
def test_serve_stdio_on_given_streams(version: str) -> None:
    """serve_stdio(runtime, stdin=..., stdout=...) serves any binary streams in process and
    returns 0 at the end of its input."""
    rid = next(_ids)
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": "in process"}}
    lines = []
    if version == STATELESS:
        params["_meta"] = {PV: version, CC: CAPS, CI: CLIENT_INFO}
    else:
        init = {"protocolVersion": version, "capabilities": CAPS, "clientInfo": CLIENT_INFO}
        lines.append({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        lines.append({"jsonrpc": "2.0", "method": "notifications/initialized"})
    lines.append({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
    stdin = io.BytesIO(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    stdout = io.BytesIO()
    assert serve_stdio(example_runtime(), stdin=stdin, stdout=stdout) == 0
    responses = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert [r["id"] for r in responses] == [r["id"] for r in lines if "id" in r]
    check_response(version, "tools/call", responses[-1])
    assert text_of(responses[-1]["result"]) == "in process"


# -- the command line ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("examples.example_runtime", "expected MODULE:ATTR"),
        ("no_such_module_xyz:runtime", "no module named 'no_such_module_xyz'"),
        ("examples.no_such_module:runtime", "no module named 'examples.no_such_module'"),
        ("examples.example_runtime:no_such_attr", "has no attribute 'no_such_attr'"),
        ("examples.example_runtime:NOTES", "not a Runtime"),
        ("tests.servers.server_stdio_tools:not_a_factory", "returned str, not a Runtime"),
        ("tests.servers.server_stdio_tools:broken_factory", "the factory is broken"),
    ],
)
def test_a_bad_target_exits_2(servers: Callable[..., Server], target: str, message: str) -> None:
    """A bad MODULE:ATTR: exit status 2, a clear message on stderr, nothing on stdout."""
    server = servers(target)
    assert server.wait() == 2
    assert server.rest() == []
    assert message in server.stderr()
    assert "snodo.server: error:" in server.stderr()


@pytest.mark.parametrize(
    "options", [("--max-concurrency", "0"), ("--server-request-timeout", "soon"), ("--nope",)]
)
def test_usage_errors_exit_2(servers: Callable[..., Server], options: tuple[str, ...]) -> None:
    """A bad option or option value: argparse's usage message on stderr and status 2."""
    server = servers(EXAMPLE, *options)
    assert server.wait() == 2
    assert server.rest() == []
    assert options[0] in server.stderr()


def test_a_factory_target_is_called(servers: Callable[..., Server]) -> None:
    """ATTR may be a zero-argument callable returning the Runtime (examples' build)."""
    server = servers("examples.example_runtime:build")
    client = Client(server, STATELESS)
    assert client.ok("tools/list")["tools"]
    assert server.finish()[0] == 0
