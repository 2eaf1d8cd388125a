"""Interop: snodo against ``@modelcontextprotocol/server-everything`` (npm), a server written by
others on the TypeScript SDK, over stdio and over Streamable HTTP.

The package is pinned by tests/interop/package-lock.json and installed by ``npm ci`` once per
session when missing (tests/support/everything_support.py); without node and npm these tests fail with a
message saying so. server-everything speaks the session era only (its SDK's newest version is
2025-11-25): every case pins 2025-11-25 or 2025-06-18, or negotiates — the ``server/discover``
probe is refused and snodo falls back to ``initialize`` (on stdio by starting the server again).
A 2026-07-28 pin is refused over HTTP; the stdio server answers it without initialize.

Every case runs every check: lists, tools (echo, sum, structured content, an image, embedded
resources, links, annotations), progress, text and binary resources, prompts with arguments,
completion, and the interactive tools the server registers once the client declares the matching
capability (form and URL elicitation, sampling, roots), answered by snodo's input handlers; and
every message snodo sends is validated against its version's schema (a tee on stdio, a recording
proxy on HTTP). The checks that only use a connection share one client per case (see
docs/decisions/0016). The HTTP server runs once for the module under a preload that binds it to
127.0.0.1 (tests/interop/bind-localhost.cjs), which a test checks. Besides the conftest's
thread/actor check, every test checks that no child process (zombies included) or file
descriptor outlives it (the idle keep-alive sockets of snodo's shared HTTP pool aside); the close
tests check that close() itself ends the server (also under npx, two processes down) or its HTTP
session.
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import snodo
from tests.support import everything_support as everything
from tests.support import stdio_support as support
from tests.support.http_fault_server import TeeProxy
from tests.support.wire_schema import check_client_message

SERVER_NAME = "mcp-servers/everything"
STATELESS_VERSION = "2026-07-28"
DOCS = [
    "architecture.md",
    "extension.md",
    "features.md",
    "how-it-works.md",
    "instructions.md",
    "startup.md",
    "structure.md",
]
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"
BLOB_TEMPLATE = "demo://resource/dynamic/blob/{resourceId}"
#: Tools registered for every initialized client.
BASE_TOOLS = {
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
    "simulate-research-query",
}
#: Tools registered after initialize because the client declared roots, elicitation (form, url)
#: and sampling (snodo declares them for the input handlers it has).
INTERACTIVE_TOOLS = {
    "get-roots-list",
    "trigger-elicitation-request",
    "trigger-url-elicitation",
    "trigger-sampling-request",
}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Case:
    """One way to connect: transport, what ``protocol=`` allows, what must be negotiated."""

    id: str
    transport: str
    protocol: str | Sequence[str] | None
    expected: str

    @property
    def probes(self) -> bool:
        """Allowed versions from both eras: snodo probes with server/discover first."""
        return not isinstance(self.protocol, str)


CASES = [
    Case("stdio-pinned-2025-11-25", "stdio", "2025-11-25", "2025-11-25"),
    Case("stdio-pinned-2025-06-18", "stdio", "2025-06-18", "2025-06-18"),
    Case("stdio-negotiated-falls-back-to-2025-11-25", "stdio", None, "2025-11-25"),
    Case("http-pinned-2025-11-25", "http", "2025-11-25", "2025-11-25"),
    Case("http-pinned-2025-06-18", "http", "2025-06-18", "2025-06-18"),
    Case("http-negotiated-falls-back-to-2025-11-25", "http", None, "2025-11-25"),
    Case(
        "http-negotiated-list-falls-back-to-2025-06-18",
        "http",
        ["2026-07-28", "2025-06-18"],
        "2025-06-18",
    ),
]
STDIO_CASES = [c for c in CASES if c.transport == "stdio"]
HTTP_CASES = [c for c in CASES if c.transport == "http"]


# -- the server ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def node() -> str:
    """node, with the pinned server-everything installed (npm ci, once)."""
    return everything.ensure_installed()


@pytest.fixture(scope="module")
def http_server(
    node: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[everything.HttpServer]:
    """``server-everything streamableHttp`` on 127.0.0.1, once for this module."""
    with everything.http_server(node, tmp_path_factory.mktemp("everything-http")) as server:
        yield server


@pytest.fixture(scope="session", autouse=True)
def _warm() -> None:
    """Start the process-wide parts (supervision root, I/O hub) before any test's baseline."""
    support.warm_up()


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """No child process (zombies included) or file descriptor outlives a test (except the idle
    keep-alive sockets of snodo's process-wide HTTP pool, see docs/decisions/0013)."""
    with support.no_leaks(pooled=True):
        yield


# -- handlers and connections ----------------------------------------------------------------


@dataclass
class Handlers:
    """Input handlers that answer like a user and a model would, and record what they got."""

    form_action: str = "accept"
    kinds: tuple[str, ...] = ("form", "url", "sampling", "roots")
    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    answered: dict[str, int] = field(default_factory=dict)  # never cleared
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _record(self, kind: str, params: dict[str, Any]) -> None:
        with self.lock:
            self.seen.append((kind, params))
            self.answered[kind] = self.answered.get(kind, 0) + 1

    def form(self, params: dict[str, Any]) -> dict[str, Any]:
        self._record("form", params)
        if self.form_action != "accept":
            return {"action": self.form_action}
        return {
            "action": "accept",
            "content": {"name": "Ada Lovelace", "check": True, "integer": 7},
        }

    def url(self, params: dict[str, Any]) -> dict[str, Any]:
        self._record("url", params)
        return {"action": "accept"}

    def sampling(self, params: dict[str, Any]) -> dict[str, Any]:
        self._record("sampling", params)
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "an old silent pond"},
            "model": "test-model",
            "stopReason": "endTurn",
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
        every = {"form": self.form, "url": self.url, "sampling": self.sampling, "roots": self.roots}
        return {kind: every[kind] for kind in self.kinds}

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self.lock:
            return [params for seen, params in self.seen if seen == kind]


def target(case: Case, node: str, http_server: everything.HttpServer) -> Any:
    if case.transport == "stdio":
        return snodo.Stdio(node, [str(everything.ENTRY), "stdio"])
    return snodo.Http(http_server.url)


def open_client(
    case: Case,
    node: str,
    http_server: everything.HttpServer,
    handlers: Handlers | None = None,
    **options: Any,
) -> snodo.Client:
    """``snodo.connect`` to server-everything as the case says."""
    return snodo.connect(
        target(case, node, http_server),
        protocol=case.protocol,
        input_handlers=handlers.as_option() if handlers is not None else None,
        timeout=30.0,
        **options,
    )


@dataclass
class Connection:
    """One case's client, shared by the tests of this module, and its input handlers."""

    case: Case
    client: snodo.Client
    handlers: Handlers


@pytest.fixture(scope="module", params=CASES, ids=[c.id for c in CASES])
def connection(
    request: pytest.FixtureRequest, node: str, http_server: everything.HttpServer
) -> Iterator[Connection]:
    """One client per case for the whole module (a node server start per test would dominate
    the run time); the tests that are about opening or closing open their own."""
    case: Case = request.param
    handlers = Handlers()
    client = open_client(case, node, http_server, handlers)
    try:
        yield Connection(case, client, handlers)
    finally:
        client.close()


@pytest.fixture
def case(connection: Connection) -> Case:
    return connection.case


@pytest.fixture
def client(connection: Connection) -> snodo.Client:
    return connection.client


@pytest.fixture
def handlers(connection: Connection) -> Handlers:
    """The connection's handlers, with what they saw before this test forgotten."""
    with connection.handlers.lock:
        connection.handlers.seen.clear()
    return connection.handlers


def texts(result: dict[str, Any] | snodo.InputRequired) -> list[str]:
    """The text blocks of a tools/call result."""
    assert isinstance(result, dict), result
    return [block["text"] for block in result["content"] if block["type"] == "text"]


# -- connecting and listing ------------------------------------------------------------------


def test_connect_negotiates_an_session_era_version(case: Case, client: snodo.Client) -> None:
    """Protocol versions: a pin is spoken as is; a negotiating client's server/discover probe is
    refused by server-everything, so it falls back to initialize with the highest allowed
    session-era version. The session holds the server's info, capabilities and
    instructions."""
    assert client.version == case.expected
    session = client.session
    assert session is not None
    assert session.version == case.expected
    assert session.server_info is not None
    assert session.server_info["name"] == SERVER_NAME
    assert {"tools", "resources", "prompts", "logging"} <= set(session.capabilities)
    assert session.capabilities["resources"]["subscribe"] is True
    assert session.instructions is not None
    assert session.instructions.startswith("# Everything Server")
    if case.transport == "http":
        assert session.session_id
    with pytest.raises(snodo.McpError) as refused:
        client.discover()
    assert refused.value.code == -32601


def test_every_list_call_returns_the_servers_definitions(client: snodo.Client) -> None:
    """Lists: tools/list (with the tools registered for the client's declared capabilities),
    resources/list, resources/templates/list and prompts/list; one page each, since
    server-everything does not page (list_page says it is the last)."""
    tools = {tool["name"]: tool for tool in client.list_tools()}
    assert set(tools) == BASE_TOOLS | INTERACTIVE_TOOLS
    assert tools["echo"]["inputSchema"]["required"] == ["message"]
    assert tools["get-sum"]["annotations"]["readOnlyHint"] is True
    assert set(tools["get-structured-content"]["outputSchema"]["properties"]) == {
        "temperature",
        "conditions",
        "humidity",
    }
    page = client.list_page("tools")
    assert page.next_cursor is None
    assert [t["name"] for t in page.items] == list(tools)

    resources = client.list_resources()
    assert [r["uri"] for r in resources] == [
        f"demo://resource/static/document/{name}" for name in DOCS
    ]
    assert {r["mimeType"] for r in resources} == {"text/markdown"}
    templates = {t["uriTemplate"]: t for t in client.list_resource_templates()}
    assert set(templates) == {TEXT_TEMPLATE, BLOB_TEMPLATE}
    assert templates[BLOB_TEMPLATE]["mimeType"] == "application/octet-stream"
    assert client.list_page("resource_templates").next_cursor is None

    prompts = {p["name"]: p for p in client.list_prompts()}
    assert set(prompts) == {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"}
    assert {a["name"]: a.get("required", False) for a in prompts["args-prompt"]["arguments"]} == {
        "city": True,
        "state": False,
    }
    assert "arguments" not in prompts["simple-prompt"] or not prompts["simple-prompt"]["arguments"]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_without_handlers_the_interactive_tools_are_not_offered(
    case: Case, node: str, http_server: everything.HttpServer
) -> None:
    """Input handlers: capabilities follow the handlers; a client without any declares no
    roots, elicitation or sampling, so server-everything registers none of its interactive
    tools, and calling one is an error result."""
    with open_client(case, node, http_server) as client:
        assert {tool["name"] for tool in client.list_tools()} == BASE_TOOLS
        missing = client.call_tool("trigger-elicitation-request", {})
        assert isinstance(missing, dict)
        assert missing["isError"] is True
        assert texts(missing) == ["MCP error -32602: Tool trigger-elicitation-request not found"]


# -- tools -------------------------------------------------------------------------------------


def test_tools_return_text_structured_and_image_content(client: snodo.Client) -> None:
    """Calls: echo echoes, get-sum adds, get-structured-content returns structuredContent
    matching its text, get-tiny-image returns a base64 PNG between two text blocks."""
    assert texts(client.call_tool("echo", {"message": "hello everything"})) == [
        "Echo: hello everything"
    ]
    assert texts(client.call_tool("get-sum", {"a": 2, "b": 40.5})) == [
        "The sum of 2 and 40.5 is 42.5."
    ]
    weather = client.call_tool("get-structured-content", {"location": "Chicago"})
    assert isinstance(weather, dict)
    assert weather["structuredContent"] == {
        "temperature": 36,
        "conditions": "Light rain / drizzle",
        "humidity": 82,
    }
    assert json.loads(texts(weather)[0]) == weather["structuredContent"]
    image = client.call_tool("get-tiny-image", {})
    assert isinstance(image, dict)
    assert [block["type"] for block in image["content"]] == ["text", "image", "text"]
    block = image["content"][1]
    assert block["mimeType"] == "image/png"
    assert base64.b64decode(block["data"]).startswith(PNG_SIGNATURE)


def test_tools_return_embedded_resources_links_and_annotations(client: snodo.Client) -> None:
    """Calls: content blocks other than text pass through as the server sent them: an
    embedded resource, resource links (readable with read_resource), annotations."""
    reference = client.call_tool(
        "get-resource-reference", {"resourceType": "Text", "resourceId": 4}
    )
    assert isinstance(reference, dict)
    embedded = reference["content"][1]
    assert embedded["type"] == "resource"
    assert embedded["resource"]["uri"] == "demo://resource/dynamic/text/4"
    assert embedded["resource"]["text"].startswith("Resource 4: ")
    links = client.call_tool("get-resource-links", {"count": 2})
    assert isinstance(links, dict)
    linked = [block for block in links["content"] if block["type"] == "resource_link"]
    assert [block["uri"] for block in linked] == [
        "demo://resource/dynamic/blob/1",
        "demo://resource/dynamic/text/2",
    ]
    read = client.read_resource(linked[1]["uri"])
    assert isinstance(read, dict)
    assert read["contents"][0]["text"].startswith("Resource 2: ")
    annotated = client.call_tool("get-annotated-message", {"messageType": "error"})
    assert isinstance(annotated, dict)
    (block,) = annotated["content"]
    assert block["text"] == "Error: Operation failed"
    assert block["annotations"] == {"audience": ["user", "assistant"], "priority": 1}


def test_tool_errors_are_results_not_exceptions(client: snodo.Client) -> None:
    """Calls: the TypeScript SDK reports an unknown tool and invalid arguments as results with
    isError true; snodo returns them as results (not McpError) and the connection stays up."""
    unknown = client.call_tool("no-such-tool", {})
    assert isinstance(unknown, dict)
    assert unknown["isError"] is True
    assert texts(unknown) == ["MCP error -32602: Tool no-such-tool not found"]
    invalid = client.call_tool("get-sum", {"a": "two", "b": 1})
    assert isinstance(invalid, dict)
    assert invalid["isError"] is True
    assert "Input validation error" in texts(invalid)[0]
    assert texts(client.call_tool("echo", {"message": "still here"})) == ["Echo: still here"]


def test_progress_reports_arrive_in_order_before_the_result(client: snodo.Client) -> None:
    """Progress: the long-running tool's notifications/progress reach progress= in order, in
    the calling thread, all before the result, with one token and the total."""
    caller = threading.get_ident()
    events: list[tuple[str, int, dict[str, Any]]] = []
    result = client.call_tool(
        "trigger-long-running-operation",
        {"duration": 0.2, "steps": 4},
        progress=lambda p: events.append(("progress", threading.get_ident(), p)),
    )
    events.append(("result", threading.get_ident(), {}))
    assert texts(result) == ["Long running operation completed. Duration: 0.2 seconds, Steps: 4."]
    assert [kind for kind, _, _ in events] == ["progress"] * 4 + ["result"]
    reports = [p for _, _, p in events[:-1]]
    assert [p["progress"] for p in reports] == [1, 2, 3, 4]
    assert {p["total"] for p in reports} == {4}
    assert len({p["progressToken"] for p in reports}) == 1
    assert {thread for _, thread, _ in events} == {caller}


def test_concurrent_calls_from_eight_threads_share_one_client(client: snodo.Client) -> None:
    """The client: one connection serves many threads at once; every answer goes to its caller."""
    failures: list[BaseException] = []
    done: list[int] = []
    lock = threading.Lock()

    def caller(index: int) -> None:
        try:
            for round_ in range(5):
                got = texts(client.call_tool("get-sum", {"a": index, "b": round_}))
                assert got == [f"The sum of {index} and {round_} is {index + round_}."], got
            with lock:
                done.append(index)
        except BaseException as error:  # reported below
            with lock:
                failures.append(error)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60.0)
    assert not failures, failures
    assert sorted(done) == list(range(8))


# -- resources, prompts, completion ------------------------------------------------------------


def test_read_text_and_binary_resources(client: snodo.Client) -> None:
    """Resources: a static markdown document (the instructions document is the text the
    session's instructions carry), a text resource from a template, and a binary one whose
    base64 blob decodes to the server's bytes."""
    session = client.session
    assert session is not None
    uri = "demo://resource/static/document/instructions.md"
    static = client.read_resource(uri)
    assert isinstance(static, dict)
    (document,) = static["contents"]
    assert document["uri"] == uri
    assert document["mimeType"] == "text/markdown"
    assert document["text"] == session.instructions

    text = client.read_resource("demo://resource/dynamic/text/7")
    assert isinstance(text, dict)
    (contents,) = text["contents"]
    assert contents["uri"] == "demo://resource/dynamic/text/7"
    assert contents["text"].startswith("Resource 7: This is a plaintext resource created at ")
    assert "blob" not in contents

    blob = client.read_resource("demo://resource/dynamic/blob/3")
    assert isinstance(blob, dict)
    (contents,) = blob["contents"]
    assert contents["uri"] == "demo://resource/dynamic/blob/3"
    assert "text" not in contents
    assert base64.b64decode(contents["blob"]).startswith(
        b"Resource 3: This is a base64 blob created at "
    )


def test_unknown_resources_are_mcp_errors(client: snodo.Client) -> None:
    """Resources: an unknown URI is an McpError with the server's code and message (-32602 from
    the SDK; -32603 when the template's handler itself throws)."""
    with pytest.raises(snodo.McpError) as unknown:
        client.read_resource("demo://nothing")
    assert unknown.value.code == -32602
    assert "demo://nothing not found" in unknown.value.message
    with pytest.raises(snodo.McpError) as rejected:
        client.read_resource("demo://resource/dynamic/text/0")
    assert rejected.value.code == -32603
    assert rejected.value.message == "Unknown resource: demo://resource/dynamic/text/0"


def test_prompts_render_their_arguments(client: snodo.Client) -> None:
    """Prompts: prompts/get without arguments, with a required and an optional argument, and
    with an embedded binary resource; a missing required argument is an McpError -32602."""
    simple = client.get_prompt("simple-prompt")
    assert isinstance(simple, dict)
    assert [m["content"]["text"] for m in simple["messages"]] == [
        "This is a simple prompt without arguments."
    ]
    weather = client.get_prompt("args-prompt", {"city": "Paris", "state": "Texas"})
    assert isinstance(weather, dict)
    (message,) = weather["messages"]
    assert message["role"] == "user"
    assert message["content"] == {"type": "text", "text": "What's weather in Paris, Texas?"}
    embedded = client.get_prompt("resource-prompt", {"resourceType": "Blob", "resourceId": "5"})
    assert isinstance(embedded, dict)
    intro, resource = embedded["messages"]
    assert "Blob resource with id: 5" in intro["content"]["text"]
    assert resource["content"]["type"] == "resource"
    inner = resource["content"]["resource"]
    assert inner["uri"] == "demo://resource/dynamic/blob/5"
    assert base64.b64decode(inner["blob"]).startswith(b"Resource 5: ")
    with pytest.raises(snodo.McpError) as missing:
        client.get_prompt("args-prompt", {})
    assert missing.value.code == -32602
    assert "city" in missing.value.message


def test_completion_for_prompt_arguments_and_template_variables(client: snodo.Client) -> None:
    """Completion: completion/complete through request() for a prompt argument, for one that
    depends on an earlier argument (context.arguments), and for a template variable."""

    def complete(ref: dict[str, Any], name: str, value: str, **extra: Any) -> dict[str, Any]:
        params = {"ref": ref, "argument": {"name": name, "value": value}, **extra}
        answer = client.request("completion/complete", params)
        assert isinstance(answer, dict)
        completion: dict[str, Any] = answer["completion"]
        return completion

    prompt = {"type": "ref/prompt", "name": "completable-prompt"}
    departments = complete(prompt, "department", "S")
    assert departments["values"] == ["Sales", "Support"]
    assert departments["total"] == 2
    assert departments["hasMore"] is False
    engineers = complete(prompt, "name", "", context={"arguments": {"department": "Engineering"}})
    assert engineers["values"] == ["Alice", "Bob", "Charlie"]
    kinds = complete({"type": "ref/prompt", "name": "resource-prompt"}, "resourceType", "B")
    assert kinds["values"] == ["Blob"]
    template = {"type": "ref/resource", "uri": TEXT_TEMPLATE}
    assert complete(template, "resourceId", "12")["values"] == ["12"]
    assert complete(template, "resourceId", "x")["values"] == []


# -- interactive tools -------------------------------------------------------------------------


def test_form_elicitation_is_answered_by_the_form_handler(
    client: snodo.Client, handlers: Handlers
) -> None:
    """Input handlers: server-everything's elicitation/create (form mode, a schema with every
    field kind) mid-call is answered by the form handler, whose content reaches the tool."""
    result = texts(client.call_tool("trigger-elicitation-request", {}))
    assert result[0] == "✅ User provided the requested information!"
    assert result[1].splitlines() == [
        "User inputs:",
        "- Name: Ada Lovelace",
        "- Agreed to terms: true",
        "- Favorite Integer: 7",
    ]
    (params,) = handlers.of("form")
    assert params["message"] == "Please provide inputs for the following fields:"
    assert params["requestedSchema"]["required"] == ["name"]
    assert params["requestedSchema"]["properties"]["integer"]["default"] == 42


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_declined_form_reaches_the_tool(
    case: Case, node: str, http_server: everything.HttpServer
) -> None:
    """Input handlers: a declined form is sent back as such, and the tool reports it."""
    # No roots handler: server-everything asks for roots 350 ms after initialize and, when
    # stdin closes before the answer, keeps running until its request times out.
    handlers = Handlers(form_action="decline", kinds=("form",))
    with open_client(case, node, http_server, handlers) as client:
        result = texts(client.call_tool("trigger-elicitation-request", {}))
    assert result[0] == "❌ User declined to provide the requested information."
    assert json.loads(result[1].split("Raw result: ", 1)[1]) == {"action": "decline"}
    assert len(handlers.of("form")) == 1


def test_url_elicitation_request_and_error_paths(client: snodo.Client, handlers: Handlers) -> None:
    """Input handlers: a URL-mode elicitation/create is answered by the url handler; the
    tool's error path is an McpError -32042 whose data lists the URL elicitations to
    complete (snodo hands it to the caller), and the retry then goes through."""
    arguments = {"url": "https://example.com/authorize", "elicitationId": "e-42"}
    result = texts(client.call_tool("trigger-url-elicitation", arguments))
    assert result[0].splitlines() == [
        "✅ User completed the URL elicitation flow.",
        "Elicitation ID: e-42",
        "URL: https://example.com/authorize",
    ]
    (params,) = handlers.of("url")
    assert params == {
        "mode": "url",
        "url": "https://example.com/authorize",
        "message": "Please open the link to complete this action.",
        "elicitationId": "e-42",
    }
    retried = {**arguments, "errorPath": True}
    with pytest.raises(snodo.McpError) as required:
        client.call_tool("trigger-url-elicitation", retried)
    assert required.value.code == -32042
    (wanted,) = required.value.data["elicitations"]
    assert wanted["mode"] == "url"
    assert wanted["url"] == "https://modelcontextprotocol.io"
    assert texts(client.call_tool("trigger-url-elicitation", retried))[0].startswith("✅")
    assert len(handlers.of("url")) == 2


def test_sampling_is_answered_by_the_sampling_handler(
    client: snodo.Client, handlers: Handlers
) -> None:
    """Input handlers: server-everything's sampling/createMessage is answered by the sampling
    handler; the tool returns the handler's message."""
    (text,) = texts(
        client.call_tool("trigger-sampling-request", {"prompt": "haiku", "maxTokens": 20})
    )
    header, _, raw = text.partition("\n")
    assert header == "LLM sampling result: "
    assert json.loads(raw) == {
        "model": "test-model",
        "role": "assistant",
        "stopReason": "endTurn",
        "content": {"type": "text", "text": "an old silent pond"},
    }
    (params,) = handlers.of("sampling")
    assert params["maxTokens"] == 20
    assert params["systemPrompt"] == "You are a helpful test server."
    assert params["messages"] == [
        {
            "role": "user",
            "content": {"type": "text", "text": "Resource trigger-sampling-request context: haiku"},
        }
    ]


def test_roots_are_answered_by_the_roots_handler(client: snodo.Client, handlers: Handlers) -> None:
    """Input handlers: server-everything asks roots/list (after initialize, and from its tool if
    not yet answered); the roots handler's roots reach the tool."""
    (text, *_) = texts(client.call_tool("get-roots-list", {}))
    assert text.startswith("Current MCP Roots (2 total):")
    assert "1. project\n   URI: file:///home/me/project" in text
    assert "2. Unnamed Root\n   URI: file:///tmp/scratch" in text
    assert handlers.answered["roots"] >= 1  # asked once per connection, maybe in an earlier test


# -- what snodo sends ---------------------------------------------------------------------------


def exercise(client: snodo.Client, handlers: Handlers) -> None:
    """One of everything: lists, a call with progress, resources, a prompt, completion and the
    four interactive tools (so the answers to server requests are on the wire too)."""
    client.list_tools()
    client.list_resources()
    client.list_resource_templates()
    client.list_prompts()
    seen: list[dict[str, Any]] = []
    client.call_tool(
        "trigger-long-running-operation", {"duration": 0.1, "steps": 2}, progress=seen.append
    )
    assert [p["progress"] for p in seen] == [1, 2]
    client.read_resource("demo://resource/dynamic/blob/1")
    client.get_prompt("args-prompt", {"city": "Oslo"})
    client.request(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "completable-prompt"},
            "argument": {"name": "department", "value": "E"},
        },
    )
    client.call_tool("trigger-elicitation-request", {})
    client.call_tool("trigger-url-elicitation", {"url": "https://example.com/x"})
    client.call_tool("trigger-sampling-request", {"prompt": "p"})
    assert texts(client.call_tool("get-roots-list", {}))[0].startswith("Current MCP Roots (2")
    assert {kind for kind, _ in handlers.seen} == {"form", "url", "sampling", "roots"}


@pytest.mark.parametrize("case", STDIO_CASES, ids=[c.id for c in STDIO_CASES])
def test_every_message_sent_over_stdio_is_valid_for_its_version(
    case: Case, node: str, tmp_path: Path
) -> None:
    """Wire: every line snodo writes to server-everything (logged by a tee in front of it) is
    valid against the schema.json of the version it was sent on, the probe included."""
    log = tmp_path / "wire.jsonl"
    handlers = Handlers()
    tee = support.SERVERS / "scripted_tee.py"
    with snodo.connect(
        snodo.Stdio(support.PYTHON, [str(tee), str(log), node, str(everything.ENTRY), "stdio"]),
        protocol=case.protocol,
        input_handlers=handlers.as_option(),
        timeout=30.0,
    ) as client:
        assert client.version == case.expected
        exercise(client, handlers)
    methods = [m.get("method", "response") for m in support.check_wire(log, case.expected)]
    assert methods.count("initialize") == 1
    assert ("server/discover" in methods) == case.probes
    assert "response" in methods


@pytest.mark.parametrize("case", HTTP_CASES, ids=[c.id for c in HTTP_CASES])
def test_every_message_sent_over_http_is_valid_for_its_version(
    case: Case, http_server: everything.HttpServer
) -> None:
    """Wire: every JSON-RPC message snodo POSTs to server-everything (seen by a recording proxy
    in front of it) is valid against its version's schema.json, and every request after
    initialize carries the session id and the negotiated MCP-Protocol-Version."""
    handlers = Handlers()
    with TeeProxy(("127.0.0.1", http_server.port)) as proxy:
        with snodo.connect(
            snodo.Http(proxy.url),
            protocol=case.protocol,
            input_handlers=handlers.as_option(),
            timeout=30.0,
        ) as client:
            exercise(client, handlers)
            session = client.session
            assert session is not None
    posts = [r for r in proxy.requests if r.method == "POST"]  # the proxy's threads have ended
    kinds: list[str] = []
    for request in posts:
        message = request.message
        assert isinstance(message, dict), request
        method = message.get("method")
        kinds.append(method or "response")
        if method == "initialize":
            check_client_message(message["params"]["protocolVersion"], message)
            continue
        if method == "server/discover":
            check_client_message(STATELESS_VERSION, message)
            continue
        if method is None:
            support.check_response(case.expected, message)
        else:
            check_client_message(case.expected, message)
        assert request.header("mcp-session-id") == session.session_id
        assert request.header("mcp-protocol-version") == case.expected
    assert kinds.count("initialize") == 1
    assert ("server/discover" in kinds) == case.probes
    assert kinds.count("response") >= 3  # form, url, sampling (roots may come on the GET stream)


# -- closing -----------------------------------------------------------------------------------


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (children, grandchildren, ...), from /proc."""
    parents: dict[int, int] = {}
    for name in Path("/proc").iterdir():
        if name.name.isdigit():
            try:
                stat = (name / "stat").read_text()
            except OSError:
                continue
            parents[int(name.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@pytest.mark.parametrize("case", STDIO_CASES, ids=[c.id for c in STDIO_CASES])
def test_close_ends_the_stdio_server(
    case: Case, node: str, http_server: everything.HttpServer
) -> None:
    """The client: close() returns once the node server has exited and been reaped
    (docs/decisions/0009); later calls fail with -32000; close() is idempotent."""
    client = open_client(case, node, http_server)
    assert texts(client.call_tool("echo", {"message": "up"})) == ["Echo: up"]
    pid = client.transport.pid  # type: ignore[attr-defined]
    assert pid in support.children()
    client.close()
    assert not support.exists(pid), f"server {pid} not reaped when close() returned"
    with pytest.raises(snodo.McpError) as closed:
        client.call_tool("echo", {"message": "late"})
    assert closed.value.code == -32000
    client.close()


def test_close_under_npx_ends_every_process(node: str) -> None:
    """The client: a server started the usual way, ``npx mcp-server-everything stdio`` (npx, a
    shell, then node), works, and close() leaves none of the three behind."""
    npx = everything.tool("npx")
    client = snodo.connect(
        snodo.Stdio(npx, ["--no-install", "mcp-server-everything", "stdio"]),
        cwd=str(everything.INTEROP),
        protocol="2025-11-25",
        timeout=30.0,
    )
    try:
        assert texts(client.call_tool("get-sum", {"a": 1, "b": 2})) == ["The sum of 1 and 2 is 3."]
        pid = client.transport.pid  # type: ignore[attr-defined]
        below = descendants(pid)
        assert below, "npx started no server process"
    finally:
        client.close()
    assert not support.exists(pid)
    support.wait_until(lambda: not [p for p in below if support.running(p)], timeout=5.0)


@pytest.mark.parametrize("case", HTTP_CASES, ids=[c.id for c in HTTP_CASES])
def test_close_ends_the_http_session(
    case: Case, node: str, http_server: everything.HttpServer
) -> None:
    """The client: close() on an HTTP session sends DELETE with its Mcp-Session-Id, after which
    server-everything no longer knows the id (400); later calls fail with -32000."""
    client = open_client(case, node, http_server)
    assert texts(client.call_tool("echo", {"message": "up"})) == ["Echo: up"]
    session = client.session
    assert session is not None and session.session_id
    status, _ = raw_post(http_server, session.session_id, case.expected)
    assert status == 200
    client.close()
    status, body = raw_post(http_server, session.session_id, case.expected)
    assert status == 400
    assert b"No valid session ID" in body
    with pytest.raises(snodo.McpError) as closed:
        client.call_tool("echo", {"message": "late"})
    assert closed.value.code == -32000
    client.close()


def raw_post(server: everything.HttpServer, session_id: str, version: str) -> tuple[int, bytes]:
    """A tools/list POST outside snodo on an existing session: (status, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10.0)
    try:
        connection.request(
            "POST",
            "/mcp",
            body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "Mcp-Session-Id": session_id,
                "MCP-Protocol-Version": version,
            },
        )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_pinned_2026_over_http_is_refused_cleanly(
    node: str, http_server: everything.HttpServer
) -> None:
    """Protocol versions: a 2026-07-28 pin sends no probe and no initialize; server-everything's
    HTTP transport, which speaks only the session era, refuses the first request (400 with a
    JSON-RPC error), which surfaces as that McpError."""
    case = Case("http-pinned-2026", "http", STATELESS_VERSION, STATELESS_VERSION)
    with open_client(case, node, http_server) as client:
        assert client.version == STATELESS_VERSION
        assert client.session is None
        with pytest.raises(snodo.McpError) as refused:
            client.list_tools()
        assert refused.value.code == -32000
        assert refused.value.message == "Bad Request: Server not initialized"


def test_pinned_2026_over_stdio_is_served_without_initialize(
    node: str, http_server: everything.HttpServer
) -> None:
    """Protocol versions: the TypeScript SDK's stdio server does not insist on initialize, so a
    2026-07-28 pin gets answers (results without resultType are accepted, docs/decisions/0007):
    the tools it registers for every client, but none of those it registers at initialize;
    server/discover is unknown to it (-32601)."""
    case = Case("stdio-pinned-2026", "stdio", STATELESS_VERSION, STATELESS_VERSION)
    with open_client(case, node, http_server) as client:
        assert client.version == STATELESS_VERSION
        names = {tool["name"] for tool in client.list_tools()}
        assert names == BASE_TOOLS - {"simulate-research-query"}
        assert texts(client.call_tool("echo", {"message": "stateless"})) == ["Echo: stateless"]
        with pytest.raises(snodo.McpError) as unknown:
            client.discover()
        assert unknown.value.code == -32601


def test_http_server_listens_on_loopback_only(http_server: everything.HttpServer) -> None:
    """Test set-up: the preload binds server-everything's wildcard listen() to 127.0.0.1 (the
    only listening socket on its port), and it answers there."""
    assert http_server.address["address"] == "127.0.0.1"
    assert http_server.address["family"] == "IPv4"
    assert everything.tcp_listeners(http_server.port) == ["0100007F"]
    connection = http.client.HTTPConnection("127.0.0.1", http_server.port, timeout=10.0)
    try:
        connection.request("GET", "/mcp")
        response = connection.getresponse()
        assert response.status == 400
        assert b"No valid session ID" in response.read()
    finally:
        connection.close()
