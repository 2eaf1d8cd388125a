"""Interop: snodo over Streamable HTTP against the official Python SDK's server (``mcp`` 2.3.0).

The server is a real subprocess, tests/servers/sdk_http_server.py: the MCPServer of
tests/servers/sdk_server.py (the stdio interop suite's server) behind the SDK's own Starlette
app on uvicorn, 127.0.0.1, a port the OS chose. The SDK serves both eras on one endpoint and
routes by the ``MCP-Protocol-Version`` header: 2026-07-28 requests are single exchanges (no
session; ``input_required`` rounds for the interactive tools), anything else the session era
(``Mcp-Session-Id``, answers as event streams, server requests on the POST's stream answered by
POST, DELETE ends the session). ``--legacy`` runs the same server as a pre-2026 one: the
2026-07-28 header is hidden from the SDK, so the ``server/discover`` probe is refused and a
probing client falls back to ``initialize``. ``--json`` asks for JSON answers instead of event
streams.

This file mirrors tests/test_interop_sdk_stdio.py: every connection case (each version pinned,
and negotiated with the probe against both servers) runs every check. The server records each
request it gets (tagged per client with an ``X-Interop-Tag`` header); tests read the record to
see the probe, the session id and protocol version on every later request, the answers POSTed
to server requests, and the DELETE that close() sends. Every message snodo sent is validated
against its version's schema.json after each test.

The three server processes are started once for the module and ended at its end, by pid. Every
test checks that no child process or file descriptor outlives it (the idle keep-alive sockets of
snodo's shared HTTP pool aside).
"""

from __future__ import annotations

import base64
import http.client
import json
import subprocess
import sys
import threading
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import snodo
from snodo.supervision import green_mode
from tests.support import stdio_support as support
from tests.support.started_processes import announced_port, stop
from tests.support.stdio_support import check_response, wait_until
from tests.support.wire_schema import check_client_message

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "servers" / "sdk_http_server.py"
SERVER_NAME = "snodo-interop-sdk"
STATELESS_VERSION = "2026-07-28"
TAG = "X-Interop-Tag"

MISSING_CLIENT_CAPABILITY = -32021

#: server kind -> extra command-line arguments
KINDS = {"dual": [], "session": ["--legacy"], "json": ["--json"]}


@dataclass(frozen=True)
class Case:
    """One way to connect: which server, what ``protocol=`` allows, what must be negotiated."""

    id: str
    server: str
    protocol: str | Sequence[str] | None
    expected: str

    @property
    def stateless(self) -> bool:
        return self.expected == STATELESS_VERSION

    @property
    def probes(self) -> bool:
        return self.protocol is None or not isinstance(self.protocol, str)


CASES = [
    Case("pinned-2026-07-28", "dual", "2026-07-28", "2026-07-28"),
    Case("pinned-2025-11-25", "dual", "2025-11-25", "2025-11-25"),
    Case("pinned-2025-06-18", "dual", "2025-06-18", "2025-06-18"),
    Case("negotiated-probe-wins-2026-07-28", "dual", None, "2026-07-28"),
    Case("negotiated-session-era-server-falls-back-to-2025-11-25", "session", None, "2025-11-25"),
    Case(
        "negotiated-list-session-era-server-falls-back-to-2025-06-18",
        "session",
        ["2026-07-28", "2025-06-18"],
        "2025-06-18",
    ),
]


# -- the server processes -------------------------------------------------------------------


@dataclass
class Server:
    """One running sdk_http_server.py."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def requests(self, tag: str) -> list[dict[str, Any]]:
        """What the server recorded for one client tag, in arrival order."""
        address = f"http://127.0.0.1:{self.port}/_requests?tag={tag}"
        with urllib.request.urlopen(address, timeout=10.0) as answer:
            recorded: list[dict[str, Any]] = json.loads(answer.read())
        return recorded

    def post(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, bytes]:
        """A raw POST to the MCP endpoint (outside snodo), for checks after close()."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10.0)
        try:
            connection.request(
                "POST",
                "/mcp",
                body=json.dumps(body).encode(),
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                    **headers,
                },
            )
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    """The dual-era, session-era and JSON-answer servers, started once for this module."""
    logs = tmp_path_factory.mktemp("sdk-http")
    started: dict[str, Server] = {}
    try:
        for kind, extra in KINDS.items():
            log = logs / f"{kind}.log"
            with open(log, "wb") as stderr:
                process = subprocess.Popen(
                    [sys.executable, str(SERVER), "0", *extra],
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    cwd=str(ROOT),
                )
            try:
                port = announced_port(process, log, "sdk_http_server.py")
            except BaseException:
                stop(process)
                raise
            started[kind] = Server(process, port, log)
        yield started
    finally:
        for server in started.values():
            stop(server.process)
        for server in started.values():
            assert server.process.returncode is not None


@pytest.fixture(autouse=True)
def _no_task_dies() -> Iterator[None]:
    """No thread (or greenlet, under gevent) dies of an unhandled exception during a test: a
    transport's reader must end quietly, also when close() ends it."""
    died: list[str] = []
    lock = threading.Lock()
    previous = threading.excepthook

    def hook(args: Any) -> None:
        name = args.thread.name if args.thread is not None else "?"
        with lock:
            died.append(f"{name}: {args.exc_type.__name__}: {args.exc_value}")
        previous(args)

    threading.excepthook = hook
    hub: Any = None
    original: Any = None
    if green_mode():
        import gevent

        hub = gevent.get_hub()
        original = hub.handle_error

        def handle_error(context: Any, kind: Any, value: Any, tb: Any) -> Any:
            if kind is not None and not issubclass(kind, gevent.GreenletExit):
                with lock:
                    died.append(f"{context!r}: {kind.__name__}: {value}")
            return original(context, kind, value, tb)

        hub.handle_error = handle_error
    try:
        yield
    finally:
        threading.excepthook = previous
        if hub is not None:
            hub.handle_error = original
    assert not died, f"a task died of an unhandled exception: {died}"


# -- handlers and connections ---------------------------------------------------------------


@dataclass
class Handlers:
    """Input handlers that answer like a user and a model would, and record what they got."""

    form_action: str = "accept"
    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _record(self, kind: str, params: dict[str, Any]) -> None:
        with self.lock:
            self.seen.append((kind, params))

    def form(self, params: dict[str, Any]) -> dict[str, Any]:
        self._record("form", params)
        if self.form_action != "accept":
            return {"action": self.form_action}
        return {"action": "accept", "content": {"approved": True, "reason": "tested"}}

    def sampling(self, params: dict[str, Any]) -> dict[str, Any]:
        self._record("sampling", params)
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "short"},
            "model": "test-model",
        }

    def roots(self, params: dict[str, Any]) -> dict[str, Any]:
        self._record("roots", params)
        return {
            "roots": [
                {"uri": "file:///home/me/project", "name": "project"},
                {"uri": "file:///tmp/scratch"},
            ]
        }

    def as_option(self) -> dict[str, Any]:
        return {"form": self.form, "sampling": self.sampling, "roots": self.roots}

    def kinds(self) -> list[str]:
        with self.lock:
            return [kind for kind, _ in self.seen]


@pytest.fixture(scope="session", autouse=True)
def _warm() -> None:
    """Start the process-wide parts (supervision root, I/O hub) before any test's baseline."""
    support.warm_up()


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """No child process or file descriptor outlives a test, except the idle keep-alive
    sockets of snodo's process-wide HTTP pool (docs/decisions/0013)."""
    with support.no_leaks(pooled=True):
        yield


@dataclass
class Opened:
    """A client and what identifies its requests in the server's record."""

    client: snodo.Client
    server: Server
    tag: str

    def requests(self) -> list[dict[str, Any]]:
        return self.server.requests(self.tag)


def open_client(
    server: Server,
    protocol: str | Sequence[str] | None,
    handlers: Handlers | None = None,
    **options: Any,
) -> Opened:
    """``snodo.connect`` to ``server``, tagging every request so the record can be filtered."""
    tag = uuid.uuid4().hex
    client = snodo.connect(
        snodo.Http(server.url),
        protocol=protocol,
        headers={TAG: tag},
        input_handlers=handlers.as_option() if handlers is not None else None,
        timeout=30.0,
        **options,
    )
    return Opened(client, server, tag)


def check_sent(opened: Opened, expected: str) -> None:
    """Every message the client POSTed is valid for the version it was sent on: the probe as
    2026-07-28, initialize as the version it names, everything else as the negotiated one."""
    requested: dict[Any, str] = {}
    for entry in opened.requests():
        message = entry["message"]
        if entry["method"] != "POST" or not isinstance(message, dict):
            continue
        method = message.get("method")
        if method == "initialize":
            check_client_message(message["params"]["protocolVersion"], message)
        elif method == "server/discover":
            check_client_message(STATELESS_VERSION, message)
        elif method is not None:
            check_client_message(expected, message)
        else:
            check_response(expected, message, requested.get(message.get("id")))
        if method is not None and "id" in message:
            requested[message["id"]] = method


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def case(request: pytest.FixtureRequest) -> Case:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def handlers() -> Handlers:
    return Handlers()


@pytest.fixture
def opened(case: Case, handlers: Handlers, servers: dict[str, Server]) -> Iterator[Opened]:
    connection = open_client(servers[case.server], case.protocol, handlers)
    try:
        yield connection
    finally:
        connection.client.close()
    check_sent(connection, case.expected)


@pytest.fixture
def client(opened: Opened) -> snodo.Client:
    return opened.client


def text_of(result: dict[str, Any]) -> str:
    """The text of a tools/call result's single text block."""
    (block,) = result["content"]
    assert block["type"] == "text"
    return str(block["text"])


# -- connecting -----------------------------------------------------------------------------


def test_connect_negotiates_the_expected_version(case: Case, opened: Opened) -> None:
    """Protocol versions: a pin is spoken as is; negotiation probes with server/discover and
    takes 2026-07-28 from the dual-era SDK server, or falls back to initialize (highest allowed
    session-era version) when the handshake-only server refuses the probe."""
    client = opened.client
    assert client.version == case.expected
    recorded = [entry for entry in opened.requests() if entry["method"] == "POST"]
    connecting = [entry["rpc"] for entry in recorded]
    if case.probes:  # the probe comes first; the session-era server refuses it (HTTP 400)
        assert connecting[0] == "server/discover"
        assert recorded[0]["status"] == (200 if case.stateless else 400)
    else:
        assert "server/discover" not in connecting
    if not case.stateless:
        assert connecting[-2:] == ["initialize", "notifications/initialized"]
    else:
        assert "initialize" not in connecting
    if case.stateless:
        assert client.session is None
        discovered = client.discover()
        assert STATELESS_VERSION in discovered["supportedVersions"]
        assert "tools" in discovered["capabilities"]
        assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == SERVER_NAME
    else:
        session = client.session
        assert session is not None
        assert session.version == case.expected
        assert session.server_info is not None
        assert session.server_info["name"] == SERVER_NAME
        assert session.instructions == "An SDK server for snodo."
        assert {"tools", "resources", "prompts", "completions"} <= set(session.capabilities)
        with pytest.raises(snodo.McpError) as refused:
            client.discover()
        assert refused.value.code == -32601


def test_session_era_session_id_is_captured_and_sent_on_every_later_request(
    case: Case, opened: Opened
) -> None:
    """Session era over HTTP: the Mcp-Session-Id the SDK issues on the initialize response
    is captured (client.session.session_id) and sent, with MCP-Protocol-Version, on every later
    request (the standalone GET stream's too); notifications/initialized is answered 202. On
    2026-07-28 there is no session id and every request carries MCP-Protocol-Version:
    2026-07-28."""
    opened.client.list_tools()
    recorded = opened.requests()
    if case.stateless:
        assert opened.client.session is None
        assert {entry["method"] for entry in recorded} == {"POST"}  # no GET stream either
        assert all(entry["session"] is None for entry in recorded)
        assert all(entry["version"] == STATELESS_VERSION for entry in recorded)
        return
    session = opened.client.session
    assert session is not None
    assert session.session_id is not None
    assert len(session.session_id) == 32 and int(session.session_id, 16) >= 0  # the SDK's uuid4
    rpcs = [entry["rpc"] for entry in recorded]
    start = rpcs.index("initialize")
    assert recorded[start]["session"] is None
    after = recorded[start + 1 :]  # POSTs, and the GET of the standalone stream
    posts = [e for e in after if e["method"] == "POST"]
    assert [e["rpc"] for e in posts[:2]] == ["notifications/initialized", "tools/list"]
    assert posts[0]["status"] == 202
    assert all(e["session"] == session.session_id for e in after)
    assert all(e["version"] == case.expected for e in after)


def test_every_list_call_returns_the_sdk_servers_definitions(client: snodo.Client) -> None:
    """Lists: tools/list, resources/list, resources/templates/list and prompts/list return
    everything the SDK server registered, with its schemas."""
    tools = {tool["name"]: tool for tool in client.list_tools()}
    assert set(tools) == {
        "echo",
        "add",
        "fail",
        "count",
        "deploy",
        "summarize",
        "roots",
        "pid",
        "announce",
    }
    assert tools["echo"]["inputSchema"]["required"] == ["text"]
    assert tools["echo"]["description"] == "Echo the text back."
    assert "approval" not in tools["deploy"]["inputSchema"]["properties"]
    assert [r["uri"] for r in client.list_resources()] == ["info://server", "bytes://all"]
    templates = client.list_resource_templates()
    assert [t["uriTemplate"] for t in templates] == ["weather://{city}"]
    (prompt,) = client.list_prompts()
    assert prompt["name"] == "review"
    assert {a["name"]: a.get("required", False) for a in prompt["arguments"]} == {
        "code": True,
        "language": False,
    }


def test_one_page_per_list_call(client: snodo.Client) -> None:
    """Paging: list_page returns one page; the SDK server sends no nextCursor, so it is the last."""
    page = client.list_page("tools")
    assert len(page.items) == 9
    assert page.next_cursor is None


# -- tools ------------------------------------------------------------------------------------


def test_call_tool_returns_content_and_structured_content(client: snodo.Client) -> None:
    """Calls: tools/call returns the SDK's text content and its structured output."""
    echoed = client.call_tool("echo", {"text": "json"})
    assert isinstance(echoed, dict)
    assert text_of(echoed) == "json"
    assert echoed["structuredContent"] == {"result": "json"}
    assert not echoed.get("isError", False)
    added = client.call_tool("add", {"a": 2, "b": 40})
    assert isinstance(added, dict)
    assert added["structuredContent"] == {"result": 42}


def test_tool_errors_are_results_not_exceptions(client: snodo.Client) -> None:
    """Calls: a tool that fails is a result with isError true (not an McpError)."""
    failed = client.call_tool("fail", {"reason": "boom"})
    assert isinstance(failed, dict)
    assert failed["isError"] is True
    assert "failed: boom" in text_of(failed)


def test_unknown_tool_is_an_error_result(client: snodo.Client) -> None:
    """Calls: the SDK reports an unknown tool as a result with isError true; snodo returns it."""
    outcome = client.call_tool("no-such-tool", {})
    assert isinstance(outcome, dict)
    assert outcome["isError"] is True
    assert text_of(outcome) == "Unknown tool: no-such-tool"


def test_progress_reports_reach_the_caller_before_the_result(client: snodo.Client) -> None:
    """Progress over HTTP: notifications/progress from the SDK's ctx.report_progress arrive on
    the POST's event stream and reach progress= in order, in the calling thread, with progress,
    total and message."""
    caller = threading.get_ident()
    seen: list[tuple[int, dict[str, Any]]] = []
    result = client.call_tool(
        "count", {"steps": 3}, progress=lambda p: seen.append((threading.get_ident(), p))
    )
    assert isinstance(result, dict)
    assert text_of(result) == "counted 3"
    assert [p["progress"] for _, p in seen] == [1, 2, 3]
    assert {p["total"] for _, p in seen} == {3}
    assert [p["message"] for _, p in seen] == ["step 1", "step 2", "step 3"]
    assert {thread for thread, _ in seen} == {caller}
    tokens = {p["progressToken"] for _, p in seen}
    assert len(tokens) == 1


def test_concurrent_calls_from_sixteen_threads_share_one_client(client: snodo.Client) -> None:
    """The client: one client serves many threads at once (one POST each); every answer goes
    to its caller."""
    answers: dict[int, str] = {}
    failures: list[BaseException] = []
    lock = threading.Lock()

    def caller(index: int) -> None:
        try:
            for round_ in range(10):
                result = client.call_tool("echo", {"text": f"{index}-{round_}"})
                assert isinstance(result, dict)
                got = text_of(result)
                assert got == f"{index}-{round_}", got
            with lock:
                answers[index] = got
        except BaseException as error:  # reported below
            with lock:
                failures.append(error)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60.0)
    assert not failures, failures
    assert answers == {i: f"{i}-9" for i in range(16)}


# -- resources, prompts, completion ----------------------------------------------------------


def test_read_resource_static_binary_and_from_a_template(client: snodo.Client) -> None:
    """Resources: resources/read serves a static text resource, a binary one (a base64 blob of
    bytes that are not UTF-8) and a URI matched by the template."""
    static = client.read_resource("info://server")
    assert isinstance(static, dict)
    (contents,) = static["contents"]
    assert contents == {
        "uri": "info://server",
        "mimeType": "text/plain",
        "text": f"{SERVER_NAME} on mcp 2.3.0",
    }
    templated = client.read_resource("weather://paris")
    assert isinstance(templated, dict)
    assert templated["contents"][0]["text"] == "sunny in paris"
    assert templated["contents"][0]["uri"] == "weather://paris"
    binary = client.read_resource("bytes://all")
    assert isinstance(binary, dict)
    (blob,) = binary["contents"]
    assert blob["uri"] == "bytes://all"
    assert blob["mimeType"] == "application/octet-stream"
    assert "text" not in blob
    assert base64.b64decode(blob["blob"]) == bytes(range(256))


def test_unknown_resource_is_an_mcp_error(case: Case, client: snodo.Client) -> None:
    """Resources: reading an unknown URI is an McpError with the SDK's code, message and data
    (2026-07-28: from a JSON answer with HTTP 4xx; session era: from the event stream)."""
    with pytest.raises(snodo.McpError) as failure:
        client.read_resource("nothing://here")
    assert failure.value.code == -32602
    assert failure.value.message == "Unknown resource: nothing://here"
    assert failure.value.data == {"uri": "nothing://here"}


def test_get_prompt_renders_the_arguments(client: snodo.Client) -> None:
    """Prompts: prompts/get returns the SDK's rendered messages for the given arguments."""
    prompt = client.get_prompt("review", {"code": "print(1)", "language": "rust"})
    assert isinstance(prompt, dict)
    (message,) = prompt["messages"]
    assert message["role"] == "user"
    assert message["content"] == {"type": "text", "text": "Review this rust code:\nprint(1)"}


def test_completion_for_a_prompt_argument_and_a_template_variable(client: snodo.Client) -> None:
    """Completion: completion/complete through request() for a prompt and a resource template."""
    languages = client.request(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "review"},
            "argument": {"name": "language", "value": "p"},
        },
    )
    assert isinstance(languages, dict)
    assert languages["completion"]["values"] == ["python", "pypy", "perl"]
    assert languages["completion"]["total"] == 3
    cities = client.request(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "weather://{city}"},
            "argument": {"name": "city", "value": "be"},
        },
    )
    assert isinstance(cities, dict)
    assert cities["completion"]["values"] == ["berlin", "bern"]


# -- interactive tools -------------------------------------------------------------------------


def _check_interaction_on_the_wire(case: Case, opened: Opened, tool: str) -> None:
    """2026-07-28: two tools/call POSTs (the input_required round and its retry) and no other
    POST; session era: one tools/call whose event stream carried the server request, and the
    answer POSTed back on the session (202)."""
    recorded = [e for e in opened.requests() if e["rpc"] in ("tools/call", "response")]
    calls = [e for e in recorded if e["rpc"] == "tools/call"]
    assert all(e["message"]["params"]["name"] == tool for e in calls)
    if case.stateless:
        assert [e["rpc"] for e in recorded] == ["tools/call", "tools/call"]
        retry = calls[1]["message"]["params"]
        assert retry["inputResponses"] and retry["requestState"]
    else:
        assert [e["rpc"] for e in recorded] == ["tools/call", "response"]
        answer = recorded[1]
        assert answer["status"] == 202
        session = opened.client.session
        assert session is not None and answer["session"] == session.session_id
        assert "result" in answer["message"]


def test_form_elicitation_is_answered_by_the_form_handler(
    case: Case, opened: Opened, handlers: Handlers
) -> None:
    """Input handlers: the SDK's Elicit resolver (input_required on 2026-07-28, an
    elicitation/create request on the POST's event stream on the session era) is answered by
    the form handler."""
    result = opened.client.call_tool("deploy", {"target": "prod"})
    assert isinstance(result, dict)
    assert text_of(result) == "prod: approved (tested)"
    assert handlers.kinds() == ["form"]
    (_, params) = handlers.seen[0]
    assert params["message"] == "Deploy to prod?"
    assert params["requestedSchema"]["required"] == ["approved"]
    _check_interaction_on_the_wire(case, opened, "deploy")


def test_declined_form_fails_the_tool(case: Case, servers: dict[str, Server]) -> None:
    """Input handlers: a declined form reaches the SDK, whose tool then fails (isError)."""
    handlers = Handlers(form_action="decline")
    opened = open_client(servers[case.server], case.protocol, handlers)
    with opened.client as client:
        result = client.call_tool("deploy", {"target": "prod"})
    assert isinstance(result, dict)
    assert result["isError"] is True
    assert "decline" in text_of(result)
    assert handlers.kinds() == ["form"]
    check_sent(opened, case.expected)


def test_sampling_is_answered_by_the_sampling_handler(
    case: Case, opened: Opened, handlers: Handlers
) -> None:
    """Input handlers: the SDK's Sample resolver is answered by the sampling handler."""
    result = opened.client.call_tool("summarize", {"text": "a long story"})
    assert isinstance(result, dict)
    assert text_of(result) == "test-model: short"
    assert handlers.kinds() == ["sampling"]
    (_, params) = handlers.seen[0]
    assert params["maxTokens"] == 50
    assert params["messages"][0]["content"]["text"] == "Summarize: a long story"
    _check_interaction_on_the_wire(case, opened, "summarize")


def test_roots_are_answered_by_the_roots_handler(
    case: Case, opened: Opened, handlers: Handlers
) -> None:
    """Input handlers: the SDK's ListRoots resolver is answered by the roots handler."""
    result = opened.client.call_tool("roots", {})
    assert isinstance(result, dict)
    assert text_of(result) == "file:///home/me/project,file:///tmp/scratch"
    assert handlers.kinds() == ["roots"]
    _check_interaction_on_the_wire(case, opened, "roots")


def test_without_handlers_no_capability_is_declared_and_the_sdk_refuses(
    case: Case, servers: dict[str, Server]
) -> None:
    """Input handlers: capabilities follow the handlers, so a client without a form handler
    declares no elicitation and the SDK refuses with -32021 (missing client capability)."""
    opened = open_client(servers[case.server], case.protocol)
    with opened.client as client:
        with pytest.raises(snodo.McpError) as refused:
            client.call_tool("deploy", {"target": "prod"})
        assert refused.value.code == MISSING_CLIENT_CAPABILITY
        echoed = client.call_tool("echo", {"text": "still here"})
        assert isinstance(echoed, dict)
        assert text_of(echoed) == "still here"


@pytest.mark.parametrize("kind", ["dual", "json"], ids=["event-stream-server", "json-server"])
def test_2026_input_required_rounds_by_hand(kind: str, servers: dict[str, Server]) -> None:
    """Multi round-trip requests: without handlers (but declaring form elicitation) a 2026-07-28
    call returns snodo.InputRequired from the SDK; the retry with inputResponses and the SDK's
    requestState completes the call."""
    opened = open_client(
        servers[kind], STATELESS_VERSION, client_capabilities={"elicitation": {"form": {}}}
    )
    with opened.client as client:
        pending = client.call_tool("deploy", {"target": "stage"})
        assert isinstance(pending, snodo.InputRequired)
        ((key, request),) = pending.input_requests.items()
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Deploy to stage?"
        assert pending.request_state
        answers = {key: {"action": "accept", "content": {"approved": False, "reason": "friday"}}}
        result = client.call_tool(
            "deploy",
            {"target": "stage"},
            input_responses=answers,
            request_state=pending.request_state,
        )
    assert isinstance(result, dict)
    assert text_of(result) == "stage: refused (friday)"
    check_sent(opened, STATELESS_VERSION)


# -- JSON answers --------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25", "2025-06-18"])
def test_json_answers_instead_of_event_streams(protocol: str, servers: dict[str, Server]) -> None:
    """Transport behavior • HTTP: a server may answer a POST with one JSON body instead of an
    event stream (the SDK's json_response=True); lists, calls, errors and resources work the
    same, and progress= is simply never called (the SDK drops progress in JSON mode)."""
    seen: list[dict[str, Any]] = []
    opened = open_client(servers["json"], protocol, Handlers())
    with opened.client as client:
        assert client.version == protocol
        assert len(client.list_tools()) == 9
        counted = client.call_tool("count", {"steps": 2}, progress=seen.append)
        assert isinstance(counted, dict)
        assert text_of(counted) == "counted 2"
        failed = client.call_tool("fail", {"reason": "json"})
        assert isinstance(failed, dict) and failed["isError"] is True
        with pytest.raises(snodo.McpError) as unknown:
            client.read_resource("nothing://here")
        assert unknown.value.code == -32602
        if protocol == STATELESS_VERSION:  # input_required needs no back channel
            deployed = client.call_tool("deploy", {"target": "json"})
            assert isinstance(deployed, dict)
            assert text_of(deployed) == "json: approved (tested)"
    assert seen == []
    check_sent(opened, protocol)


# -- closing ------------------------------------------------------------------------------------


def test_close_sends_delete_and_the_session_is_gone(case: Case, servers: dict[str, Server]) -> None:
    """The client: close() on a session-era session sends DELETE with its Mcp-Session-Id
    (the SDK answers 200 and ends the session: the id then answers 404); a 2026-07-28 client has
    no session and sends no DELETE. Later calls fail with -32000; close() is idempotent."""
    server = servers[case.server]
    opened = open_client(server, case.protocol)
    client = opened.client
    session = client.session
    result = client.call_tool("echo", {"text": "before close"})
    assert isinstance(result, dict)
    client.close()
    deletes = [e for e in opened.requests() if e["method"] == "DELETE"]
    if case.stateless:
        assert deletes == []
    else:
        assert session is not None and session.session_id is not None
        ((delete,),) = (deletes,)
        assert delete["session"] == session.session_id
        assert delete["version"] == case.expected
        assert delete["status"] == 200
        status, _ = server.post(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"Mcp-Session-Id": session.session_id, "MCP-Protocol-Version": case.expected},
        )
        assert status == 404
    with pytest.raises(snodo.McpError) as closed:
        client.call_tool("echo", {"text": "late"})
    assert closed.value.code == -32000
    client.close()  # idempotent
    assert [e["method"] for e in opened.requests()].count("DELETE") == len(deletes)


def test_standalone_get_stream_opens_on_the_session_and_close_ends_it(
    case: Case, servers: dict[str, Server]
) -> None:
    """Session era over HTTP: after notifications/initialized the client opens the optional
    standalone GET stream with the session id and protocol version (the SDK answers 200 with an
    event stream); close() ends it quietly (its reader thread exits without an unhandled
    exception, see the autouse check) before the DELETE. 2026-07-28 opens no GET stream."""
    server = servers[case.server]
    opened = open_client(server, case.protocol)
    client = opened.client
    result = client.call_tool("echo", {"text": "listening"})
    assert isinstance(result, dict)
    if case.stateless:
        client.close()
        assert "GET" not in {e["method"] for e in opened.requests()}
        return
    session = client.session
    assert session is not None

    def stream_open() -> list[dict[str, Any]]:
        return [e for e in opened.requests() if e["method"] == "GET" and e["status"] == 200]

    (stream,) = wait_until(stream_open, timeout=10.0)
    assert stream["session"] == session.session_id
    assert stream["version"] == case.expected
    client.close()
    methods = [e["method"] for e in opened.requests()]
    assert methods.count("DELETE") == 1
    assert methods.index("DELETE") > methods.index("GET")


def test_pinned_2026_against_the_handshake_only_server_fails_cleanly(
    servers: dict[str, Server],
) -> None:
    """Protocol versions: a 2026-07-28 pin sends no probe; the handshake-only server refuses the
    first request (HTTP 400 with a JSON-RPC error), which surfaces as an McpError."""
    opened = open_client(servers["session"], STATELESS_VERSION)
    with opened.client as client:
        assert client.version == STATELESS_VERSION
        with pytest.raises(snodo.McpError) as refused:
            client.list_tools()
        assert refused.value.code in (-32600, -32601, -32602)
    recorded = opened.requests()
    assert [e["rpc"] for e in recorded] == ["tools/list"]
    assert recorded[0]["status"] == 400
