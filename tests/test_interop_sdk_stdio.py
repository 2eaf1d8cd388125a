"""Interop: snodo over stdio against servers built with the official Python SDK (``mcp`` 2.3.0).

The servers are real subprocesses (tests/servers/sdk_server.py and sdk_legacy_server.py). The
SDK's stdio server serves both protocol eras and lets the client's first request decide:
``server/discover`` (or any request carrying the 2026-07-28 ``_meta`` envelope) opens a stateless
2026-07-28 connection, ``initialize`` a session-era one (2024-11-05 .. 2025-11-25). The
session-era variant (sdk_legacy_server.py) runs the same server through the SDK's
handshake-only loop, which answers ``server/discover`` with -32601, so a probing client has to
fall back to ``initialize``.

Every connection case runs every check: each of the three versions pinned, and negotiated
(``protocol=None`` or a list, with the ``server/discover`` probe) against both servers. The
interactive tools use the SDK's resolvers: on 2026-07-28 they answer ``input_required`` and snodo's
input handlers answer the rounds; on the session era the SDK sends ``elicitation/create``,
``sampling/createMessage`` and ``roots/list`` mid-call and the same handlers answer them.

The checks that only use a connection share one client per case for the module (a server start
per test dominated the run time); the tests about opening, closing or handlers of their own open
their own. Besides the conftest's thread/actor leak check, every test here checks that no child
process (zombies included) or file descriptor outlives it, and test_close_ends_the_server_process
checks that close() itself ends and reaps the server.
"""

from __future__ import annotations

import base64
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import snodo
from tests.support import stdio_support as support

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers"
DUAL = SERVERS / "sdk_server.py"
SESSION_ERA_SERVER = SERVERS / "sdk_legacy_server.py"
SERVER_NAME = "snodo-interop-sdk"
STATELESS_VERSION = "2026-07-28"

MISSING_CLIENT_CAPABILITY = -32021


@dataclass(frozen=True)
class Case:
    """One way to connect: which server, what ``protocol=`` allows, what must be negotiated."""

    id: str
    server: Path
    protocol: str | Sequence[str] | None
    expected: str

    @property
    def stateless(self) -> bool:
        return self.expected == STATELESS_VERSION


CASES = [
    Case("pinned-2026-07-28", DUAL, "2026-07-28", "2026-07-28"),
    Case("pinned-2025-11-25", DUAL, "2025-11-25", "2025-11-25"),
    Case("pinned-2025-06-18", DUAL, "2025-06-18", "2025-06-18"),
    Case("negotiated-probe-wins-2026-07-28", DUAL, None, "2026-07-28"),
    Case(
        "negotiated-session-era-server-falls-back-to-2025-11-25",
        SESSION_ERA_SERVER,
        None,
        "2025-11-25",
    ),
    Case(
        "negotiated-list-session-era-server-falls-back-to-2025-06-18",
        SESSION_ERA_SERVER,
        ["2026-07-28", "2025-06-18"],
        "2025-06-18",
    ),
]


# -- processes ------------------------------------------------------------------------------


def _state(pid: int) -> str | None:
    """The process state letter from /proc (``Z`` for a zombie), or None once it is reaped."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


@pytest.fixture(scope="session", autouse=True)
def _warm() -> None:
    """Start the process-wide parts (supervision root, I/O hub) before any test's baseline."""
    support.warm_up()


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """No child process (zombies included) or file descriptor outlives a test."""
    with support.no_leaks():
        yield


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


def open_client(
    case: Case,
    handlers: Handlers | None = None,
    **options: Any,
) -> snodo.Client:
    """``snodo.connect`` to the case's server with this interpreter, from the repository root."""
    return snodo.connect(
        snodo.Stdio(sys.executable, [str(case.server)]),
        protocol=case.protocol,
        cwd=str(ROOT),
        input_handlers=handlers.as_option() if handlers is not None else None,
        timeout=30.0,
        **options,
    )


@pytest.fixture(scope="module", params=CASES, ids=[c.id for c in CASES])
def case(request: pytest.FixtureRequest) -> Case:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def connection(case: Case) -> Iterator[tuple[snodo.Client, Handlers]]:
    """One client per case, shared by the tests that only use it (a server start per test
    would dominate the run time); the tests about opening and closing open their own."""
    handlers = Handlers()
    opened = open_client(case, handlers)
    try:
        yield opened, handlers
    finally:
        opened.close()


@pytest.fixture
def handlers(connection: tuple[snodo.Client, Handlers]) -> Handlers:
    """The shared client's handlers, with what they saw before this test forgotten."""
    shared = connection[1]
    with shared.lock:
        shared.seen.clear()
    return shared


@pytest.fixture
def client(connection: tuple[snodo.Client, Handlers], handlers: Handlers) -> snodo.Client:
    return connection[0]


def text_of(result: dict[str, Any]) -> str:
    """The text of a tools/call result's single text block."""
    (block,) = result["content"]
    assert block["type"] == "text"
    return str(block["text"])


# -- connecting -----------------------------------------------------------------------------


def test_connect_negotiates_the_expected_version(case: Case, client: snodo.Client) -> None:
    """Protocol versions: a pin is spoken as is; negotiation probes with server/discover and
    takes 2026-07-28 from the dual-era SDK server, or falls back to initialize (highest allowed
    session-era version) when the SDK's handshake-only server refuses the probe."""
    assert client.version == case.expected
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
    # The resolver-filled parameters are not part of the tools' input schemas.
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
    """Progress: notifications/progress from the SDK's ctx.report_progress reach progress= in
    order, in the calling thread, with progress, total and message."""
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
    """The client: one connection serves many threads at once; every answer goes to its caller."""
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


def test_unknown_resource_is_an_mcp_error(client: snodo.Client) -> None:
    """Resources: reading an unknown URI is an McpError with the SDK's code, message and data."""
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


def test_form_elicitation_is_answered_by_the_form_handler(
    client: snodo.Client, handlers: Handlers
) -> None:
    """Input handlers: the SDK's Elicit resolver (input_required on 2026-07-28, an
    elicitation/create request on the session era) is answered by the form handler."""
    result = client.call_tool("deploy", {"target": "prod"})
    assert isinstance(result, dict)
    assert text_of(result) == "prod: approved (tested)"
    assert handlers.kinds() == ["form"]
    (_, params) = handlers.seen[0]
    assert params["message"] == "Deploy to prod?"
    assert params["requestedSchema"]["required"] == ["approved"]


def test_declined_form_fails_the_tool(case: Case) -> None:
    """Input handlers: a declined form reaches the SDK, whose tool then fails (isError)."""
    handlers = Handlers(form_action="decline")
    with open_client(case, handlers) as client:
        result = client.call_tool("deploy", {"target": "prod"})
    assert isinstance(result, dict)
    assert result["isError"] is True
    assert "decline" in text_of(result)
    assert handlers.kinds() == ["form"]


def test_sampling_is_answered_by_the_sampling_handler(
    client: snodo.Client, handlers: Handlers
) -> None:
    """Input handlers: the SDK's Sample resolver is answered by the sampling handler."""
    result = client.call_tool("summarize", {"text": "a long story"})
    assert isinstance(result, dict)
    assert text_of(result) == "test-model: short"
    assert handlers.kinds() == ["sampling"]
    (_, params) = handlers.seen[0]
    assert params["maxTokens"] == 50
    assert params["messages"][0]["content"]["text"] == "Summarize: a long story"


def test_roots_are_answered_by_the_roots_handler(client: snodo.Client, handlers: Handlers) -> None:
    """Input handlers: the SDK's ListRoots resolver is answered by the roots handler."""
    result = client.call_tool("roots", {})
    assert isinstance(result, dict)
    assert text_of(result) == "file:///home/me/project,file:///tmp/scratch"
    assert handlers.kinds() == ["roots"]


def test_without_handlers_no_capability_is_declared_and_the_sdk_refuses(case: Case) -> None:
    """Input handlers: capabilities follow the handlers, so a client without a form handler
    declares no elicitation and the SDK refuses with -32021 (missing client capability)."""
    with open_client(case) as client:
        with pytest.raises(snodo.McpError) as refused:
            client.call_tool("deploy", {"target": "prod"})
        assert refused.value.code == MISSING_CLIENT_CAPABILITY
        # The connection stays usable.
        echoed = client.call_tool("echo", {"text": "still here"})
        assert isinstance(echoed, dict)
        assert text_of(echoed) == "still here"


@pytest.mark.parametrize("server", [DUAL], ids=["dual-era-server"])
def test_2026_input_required_rounds_by_hand(server: Path) -> None:
    """Multi round-trip requests: without handlers (but declaring form elicitation) a 2026-07-28
    call returns snodo.InputRequired from the SDK; the retry with inputResponses and the SDK's
    requestState completes the call."""
    case = Case("manual", server, STATELESS_VERSION, STATELESS_VERSION)
    with open_client(case, client_capabilities={"elicitation": {"form": {}}}) as client:
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


# -- closing ------------------------------------------------------------------------------------


def test_close_ends_the_server_process(case: Case) -> None:
    """The client: close() returns once the server process has exited and been reaped
    (docs/decisions/0008), and later calls fail with -32000."""
    client = open_client(case)
    result = client.call_tool("pid", {})
    assert isinstance(result, dict)
    pid = int(result["structuredContent"]["result"])
    assert pid in support.children()
    client.close()
    assert _state(pid) is None, f"server {pid} not reaped when close() returned: {_state(pid)}"
    with pytest.raises(snodo.McpError) as closed:
        client.call_tool("echo", {"text": "late"})
    assert closed.value.code == -32000
    client.close()  # idempotent


def test_pinned_2026_against_the_handshake_only_server_fails_cleanly() -> None:
    """Protocol versions: a 2026-07-28 pin sends no probe; the SDK's handshake-only server
    refuses the first request, which surfaces as an McpError, and close() still ends it."""
    case = Case(
        "pinned-2026-session-era-server", SESSION_ERA_SERVER, STATELESS_VERSION, STATELESS_VERSION
    )
    with open_client(case) as client:
        assert client.version == STATELESS_VERSION
        with pytest.raises(snodo.McpError) as refused:
            client.list_tools()
        assert refused.value.code in (-32600, -32601, -32602)
