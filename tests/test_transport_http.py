"""The client over Streamable HTTP: against snodo's own HTTP server (``serve_http`` serving
tests/support/client_runtime.py's Runtime, behind a recording ``TeeProxy``) and, where exact headers
or a scripted answer are needed, against the raw-socket fault server.

Rules: the reference's "Protocol versions" (probe with server/discover, fall back to
initialize on any other answer, pins), "Calls", "Progress", the session-era bullets (session
id and protocol version on every later request, notifications/initialized answered 202, server
requests answered on their own POST in the calling thread, DELETE on close, an expired session
reported as the server's error) and "Transport behavior • HTTP" (headers from the dialect's
policy: MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*; x-mcp-header filtering and the
-32020 retry; progress read from the event stream as it arrives). Every message the client
sends is recorded on the wire and checked against its version's schema.json.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest

import snodo
from snodo.server import Context, Runtime
from snodo.server.http_server import HttpServer, serve_http
from tests.support import client_runtime
from tests.support.http_fault_server import (
    ALL_VERSIONS,
    ELICIT_FORM,
    LATEST,
    SESSION_ERA,
    Exchange,
    FaultServer,
    McpResponder,
    Request,
    TeeProxy,
    ask_on_stream,
    b64_sentinel,
    check_wire,
    error,
    event,
    fault_server,
    result,
)
from tests.support.stdio_support import check_response, wait_until

ALL = list(ALL_VERSIONS)


@dataclass
class Served:
    """Our runtime over HTTP, reached through a recording proxy."""

    server: HttpServer
    proxy: TeeProxy
    runtime: Runtime
    observed: client_runtime.Observed
    gate: threading.Event

    @property
    def url(self) -> str:
        return self.proxy.url

    def methods(self) -> list[str]:
        return self.proxy.rpc_methods()


def _search(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return {"region": args.get("region"), "query": args.get("query")}


SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "query": {"type": "string"},
    },
    "required": ["query"],
}


def build_runtime(
    versions: Any = ALL, observed: client_runtime.Observed | None = None, **kw: Any
) -> tuple[Runtime, threading.Event]:
    """client_runtime's Runtime plus ``gate`` (progress, then waits for the client to open the
    gate) and ``search`` (an x-mcp-header argument)."""
    runtime = client_runtime.build(versions, observed=observed, **kw)
    gate = threading.Event()

    def gated(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        ctx.progress(1, 2, "waiting for the client")
        opened = gate.wait(10.0)
        ctx.progress(2, 2)
        return {"opened": opened}

    runtime.add_tool("gate", gated, description="Waits until the client saw its progress")
    runtime.add_tool("search", _search, description="Search", input_schema=SEARCH_SCHEMA)
    return runtime, gate


@contextmanager
def served(versions: Any = ALL, **server_options: Any) -> Iterator[Served]:
    """``build_runtime(versions)`` served by ``serve_http`` behind a recording ``TeeProxy``
    (``page_size`` and ``tools`` go to the runtime, the rest to ``serve_http``)."""
    observed = client_runtime.Observed()
    runtime, gate = build_runtime(
        versions,
        observed,
        page_size=server_options.pop("page_size", 100),
        tools=server_options.pop("tools", 0),
    )
    with serve_http(runtime, **server_options) as server:
        parts = urlsplit(server.url)
        assert parts.hostname is not None and parts.port is not None
        with TeeProxy((parts.hostname, parts.port), parts.path) as proxy:
            yield Served(server, proxy, runtime, observed, gate)


@pytest.fixture
def own() -> Iterator[Served]:
    with served() as s:
        yield s


@pytest.fixture
def fake() -> Iterator[FaultServer]:
    with fault_server() as s:
        yield s


def http(url: str, **options: Any) -> snodo.Client:
    options.setdefault("timeout", 10.0)
    return snodo.connect(snodo.Http(url), **options)


def accept(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"approved": True}}


def sampler(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "a summary"}, "model": "m"}


def rooter(params: dict[str, Any]) -> dict[str, Any]:
    return {"roots": [{"uri": "file:///home/me/project", "name": "project"}]}


def text_of(got: Any) -> str:
    return str(got["content"][0]["text"])


# -- Protocol versions and calls, on every version ----------------------------------------


CASES = [
    pytest.param(LATEST, "pinned", id="2026-07-28-pinned"),
    pytest.param(LATEST, "negotiated", id="2026-07-28-negotiated"),
    *[pytest.param(v, "pinned", id=f"{v}-pinned") for v in SESSION_ERA],
    *[pytest.param(v, "negotiated", id=f"{v}-negotiated") for v in SESSION_ERA],
]


@pytest.mark.parametrize(("version", "how"), CASES)
def test_every_call_kind_works_over_http(version: str, how: str) -> None:
    """Calls over HTTP on each version, pinned or negotiated (2026-07-28 through the probe; an
    session-era version through the probe's fallback against a server without 2026-07-28):
    every list, tools (text, structured, tool error, JSON-RPC error), resources, templates,
    prompts, completion; discover on 2026-07-28, ping on the session era. Every message
    the client sent validates against the version's schema."""
    versions = ALL if version == LATEST else SESSION_ERA
    protocol: Any = (
        version if how == "pinned" else (None if version != "2025-06-18" else [LATEST, version])
    )
    with served(versions) as own, http(own.url, protocol=protocol) as client:
        assert client.version == version
        names = {t["name"] for t in client.list_tools()}
        assert {"echo", "broken", "refuse", "count", "deploy", "gate", "search"} <= names
        assert client.call_tool("echo", {"text": "json"})["content"] == [
            {"type": "text", "text": "json"}
        ]
        assert client.call_tool("count", {"n": 2})["structuredContent"] == {"counted": 2}
        broken = client.call_tool("broken", {})
        assert broken["isError"] is True
        with pytest.raises(snodo.McpError) as refused:
            client.call_tool("refuse", {})
        assert (refused.value.code, refused.value.message, refused.value.data) == (
            -32099,
            "refused on purpose",
            {"why": "test"},
        )
        assert refused.value.kind == "protocol"
        with pytest.raises(snodo.McpError) as unknown:
            client.call_tool("no-such-tool", {})
        assert unknown.value.code == -32602
        assert client.read_resource("note://readme")["contents"][0]["text"] == (
            "hello from the readme"
        )
        assert client.read_resource("note://pages/intro")["contents"][0]["text"] == "page intro"
        prompt = client.get_prompt("review", {"name": "todo"})
        assert "Please review todo" in prompt["messages"][0]["content"]["text"]
        completion = client.request(
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "review"},
                "argument": {"name": "name", "value": "j"},
            },
        )
        assert completion["completion"]["values"] == ["jason", "jq", "json"]
        assert [r["uri"] for r in client.list_resources()] == ["note://readme"]
        assert [t["uriTemplate"] for t in client.list_resource_templates()] == [
            "note://pages/{name}"
        ]
        assert [p["name"] for p in client.list_prompts()] == ["review"]
        if version == LATEST:
            assert version in client.discover()["supportedVersions"]
            pending = client.call_tool("busy", {})
            assert isinstance(pending, snodo.InputRequired)
        else:
            assert client.ping() == {}
            with pytest.raises(snodo.McpError) as no_discover:
                client.discover()
            assert no_discover.value.code == -32601
    methods = own.methods()
    check_wire(own.proxy.received(), version)
    if how == "negotiated":
        assert methods[0] == "server/discover"
    if version == LATEST:
        assert "initialize" not in methods
        assert methods.count("server/discover") == (2 if how == "negotiated" else 1)
    else:
        start = 1 if how == "negotiated" else 0
        assert methods[start : start + 3] == [
            "initialize",
            "notifications/initialized",
            "tools/list",
        ]
        assert methods[-1] == "DELETE"
        assert "server/discover" not in methods[start:]


def test_a_stateless_pin_sends_nothing_at_connect(fake: FaultServer) -> None:
    """A stateless pin sends nothing at connect time (and nothing at close)."""
    client = http(fake.url, protocol=LATEST)
    assert fake.received() == []
    client.call_tool("echo", {"text": "x"})
    client.close()
    assert fake.rpc_methods() == ["tools/call"]


@pytest.mark.parametrize("version", SESSION_ERA)
def test_a_session_era_pin_sends_initialize_at_once(fake: FaultServer, version: str) -> None:
    """A session-era pin sends initialize at once (no probe), without MCP headers, then
    notifications/initialized (POSTed, answered 202)."""
    with http(fake.url, protocol=version, client_info={"name": "t", "version": "1"}) as client:
        assert client.version == version
    init, initialized, *_ = fake.received()
    assert init.rpc == "initialize"
    assert init.message["params"]["protocolVersion"] == version
    assert init.message["params"]["clientInfo"] == {"name": "t", "version": "1"}
    assert not {"mcp-protocol-version", "mcp-method", "mcp-name", "mcp-session-id"} & (
        init.header_names()
    )
    assert initialized.rpc == "notifications/initialized" and initialized.kind == "notification"
    assert initialized.header("MCP-Protocol-Version") == version
    check_wire(fake.received(), version)


def _answer(kind: str) -> Any:
    """How a server that does not speak 2026-07-28 answers the probe."""

    def handler(request: Request, ex: Exchange) -> None:
        rid = request.message["id"]
        if kind == "404-method-not-found":
            ex.json(error(rid, -32601, "Method not found"), status=404)
        elif kind == "200-method-not-found":
            ex.json(error(rid, -32601, "Method not found"))
        elif kind == "400-unsupported-version":
            ex.json(error(rid, -32022, "Unsupported", {"supported": list(SESSION_ERA)}), status=400)
        elif kind == "400-not-initialized":
            ex.json(error(None, -32600, "Bad Request: Server not initialized"), status=400)
        elif kind == "400-not-json":
            ex.respond(400, b"Bad Request", [("Content-Type", "text/plain")])
        elif kind == "405":
            ex.respond(405, b"", [("Allow", "GET")])
        elif kind == "502-html":
            ex.respond(502, b"<html>bad gateway</html>", [("Content-Type", "text/html")])
        elif kind == "garbage":
            ex.json(b"this is not JSON")
        elif kind == "no-versions":
            ex.json(result(rid, {"capabilities": {}}))
        elif kind == "timeout":
            ex.wait_client_gone(10.0)
            ex.close()
        else:
            raise AssertionError(kind)

    return handler


@pytest.mark.parametrize(
    "answer",
    [
        "404-method-not-found",
        "200-method-not-found",
        "400-unsupported-version",
        "400-not-initialized",
        "400-not-json",
        "405",
        "502-html",
        "garbage",
        "no-versions",
        "timeout",
    ],
)
def test_any_answer_but_a_discovery_result_falls_back_to_initialize(answer: str) -> None:
    """Negotiation over HTTP as on stdio: any answer to the probe but a result with
    supportedVersions (whatever the status, error code or shape) and a timeout
    (probe_timeout) mean the server does not speak a stateless version: the client reopens the
    transport and sends initialize with the highest allowed session-era version."""
    with fault_server(McpResponder(SESSION_ERA, session_id="s-1")) as fake:
        fake.responder.discover_answer = _answer(answer)
        started = time.monotonic()
        with http(fake.url, probe_timeout=0.5) as client:
            assert time.monotonic() - started < 5.0
            assert client.version == "2025-11-25"
            assert text_of(client.call_tool("echo", {"text": "after"})) == "after"
        assert fake.rpc_methods() == [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call",
            "DELETE",
        ]
        probe, init = fake.received()[:2]
        assert init.message["params"]["protocolVersion"] == "2025-11-25"
        if answer == "timeout":  # the timed-out probe's connection is not reused
            assert init.connection != probe.connection
        check_wire(fake.received(), "2025-11-25")


def test_a_client_that_fell_back_sends_the_standard_headers_on_every_post() -> None:
    """A client that also speaks 2026-07-28 announces SEP-2243's Mcp-Method (and Mcp-Name) on
    every POST after a fallback too, initialize included; a client pinned to a session-era
    version sends neither (test_the_session_id_goes_on_every_later_request)."""
    with fault_server(McpResponder(SESSION_ERA, session_id="s-1")) as fake:
        fake.responder.discover_answer = _answer("404-method-not-found")
        with http(fake.url) as client:
            assert client.version == "2025-11-25"
            assert text_of(client.call_tool("echo", {"text": "x"})) == "x"
        posts = [r for r in fake.received() if r.method == "POST"]
        assert [r.rpc for r in posts] == [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call",
        ]
        for request in posts:
            assert request.header("Mcp-Method") == request.rpc
        init, initialized, call = posts[1:]
        assert "mcp-protocol-version" not in init.header_names()
        assert initialized.header("MCP-Protocol-Version") == "2025-11-25"
        assert call.header("Mcp-Name") == "echo"
        assert "mcp-name" not in initialized.header_names()
        check_wire(fake.received(), "2025-11-25")


def test_the_probe_picks_the_highest_allowed_version_the_server_lists(fake: FaultServer) -> None:
    """A result with supportedVersions is a 2026-07-28 server's answer; the highest allowed
    version it lists wins (here a session-era one, which is then initialized)."""
    fake.once(
        "server/discover",
        lambda r, ex: ex.json(
            result(r.message["id"], {"resultType": "complete", "supportedVersions": ["2025-06-18"]})
        ),
    )
    with http(fake.url, protocol=[LATEST, "2025-06-18"]) as client:
        assert client.version == "2025-06-18"
    assert fake.rpc_methods()[:2] == ["server/discover", "initialize"]


def test_a_discovery_without_a_common_version_is_invalid_params(fake: FaultServer) -> None:
    """A server that supports none of the allowed versions: -32602 with requested and
    supported in data."""
    fake.once(
        "server/discover",
        lambda r, ex: ex.json(
            result(r.message["id"], {"resultType": "complete", "supportedVersions": ["2099-01-01"]})
        ),
    )
    with pytest.raises(snodo.McpError) as caught:
        http(fake.url, protocol=[LATEST, "2025-06-18"])
    assert caught.value.code == -32602
    assert caught.value.data == {"requested": [LATEST, "2025-06-18"], "supported": ["2099-01-01"]}


def test_an_initialize_result_with_a_version_not_allowed_closes_the_session() -> None:
    """The server's protocolVersion must be one the client allows; otherwise the client closes
    the connection (on HTTP: DELETE for the session it was issued) and returns -32602 with
    negotiated and requested in data."""
    with fault_server(McpResponder(session_id="s-9")) as fake:
        fake.once(
            "initialize",
            lambda r, ex: ex.json(
                result(
                    r.message["id"],
                    {
                        "protocolVersion": "2024-11-05",
                        "capabilities": {},
                        "serverInfo": {"name": "old", "version": "0"},
                    },
                ),
                headers=[("Mcp-Session-Id", "s-9")],
            ),
        )
        with pytest.raises(snodo.McpError) as caught:
            http(fake.url, protocol="2025-11-25")
        assert caught.value.code == -32602
        assert caught.value.data == {"negotiated": "2024-11-05", "requested": ["2025-11-25"]}
        assert "tools/call" not in fake.rpc_methods()
        deletes = fake.received("DELETE")
        assert [d.header("Mcp-Session-Id") for d in deletes] == ["s-9"]


# -- Progress ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ALL)
def test_progress_is_delivered_from_the_event_stream_before_the_call_returns(
    own: Served, version: str
) -> None:
    """Progress: an event stream is read as it arrives; each notification is delivered to the
    progress function, in the calling thread, while the request runs (the tool waits until
    the client has seen its first report before it finishes). The request ID is the token."""
    seen: list[tuple[int, dict[str, Any]]] = []

    def on_progress(params: dict[str, Any]) -> None:
        seen.append((threading.get_ident(), params))
        own.gate.set()

    with http(own.url, protocol=version) as client:
        got = client.call_tool("gate", {}, progress=on_progress)
    assert got["structuredContent"] == {"opened": True}
    assert [p["progress"] for _, p in seen] == [1, 2]
    assert {ident for ident, _ in seen} == {threading.get_ident()}
    (call,) = [r for r in own.proxy.received("tools/call")]
    assert all(p["progressToken"] == call.message["id"] for _, p in seen)
    assert call.message["params"]["_meta"]["progressToken"] == call.message["id"]
    check_wire(own.proxy.received(), version)


def test_a_timeout_closes_the_stream_and_cancels_the_request(own: Served) -> None:
    """-32001 within the timeout; on 2026-07-28 closing the response stream is the
    cancellation, so the server's handler sees it."""
    with http(own.url, protocol=LATEST) as client:
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("forever", {}, timeout=0.5)
        took = time.monotonic() - started
        assert caught.value.code == -32001 and caught.value.data == {"timeoutMs": 500}
        assert 0.45 <= took < 2.0
        assert own.observed.cancelled.wait(5.0)
        assert text_of(client.call_tool("echo", {"text": "next"})) == "next"


def test_reset_timeout_on_progress_is_bounded_by_max_total_timeout(own: Served) -> None:
    """With reset_timeout_on_progress each notification restarts the timeout, and
    max_total_timeout bounds the whole request: -32001 "Maximum total timeout exceeded" with
    maxTotalTimeoutMs."""
    with http(own.url, protocol=LATEST) as client:
        reports: list[Any] = []
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool(
                "forever",
                {},
                timeout=0.3,
                progress=reports.append,
                reset_timeout_on_progress=True,
                max_total_timeout=1.2,
            )
        took = time.monotonic() - started
        assert caught.value.code == -32001
        assert caught.value.message == "Maximum total timeout exceeded"
        assert caught.value.data == {"maxTotalTimeoutMs": 1200}
        assert 1.1 <= took < 3.0
        assert len(reports) > 10


# -- Headers (exact, on the fault server) --------------------------------------------------


def test_2026_requests_carry_the_policy_headers(fake: FaultServer) -> None:
    """Every 2026-07-28 POST carries MCP-Protocol-Version (equal to the _meta version) and
    Mcp-Method; tools/call and prompts/get carry Mcp-Name from params.name, resources/read
    from params.uri; Accept lists both JSON and event streams; Accept-Encoding is identity;
    the body is application/json; no session id."""
    with http(fake.url, protocol=LATEST) as client:
        client.list_tools()
        client.call_tool("echo", {"text": "x"})
        client.read_resource("note://readme")
        client.get_prompt("review", {"name": "n"})
    listed, called, read, prompted = fake.received()
    for request in (listed, called, read, prompted):
        assert request.method == "POST"
        assert request.header("MCP-Protocol-Version") == LATEST
        meta = request.message["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == LATEST
        assert request.header("Mcp-Method") == request.rpc
        accept_types = {
            t.strip().split(";")[0] for t in (request.header("Accept") or "").split(",")
        }
        assert {"application/json", "text/event-stream"} <= accept_types
        assert request.header("Accept-Encoding") == "identity"
        assert request.header("Content-Type") == "application/json"
        assert "mcp-session-id" not in request.header_names()
    assert listed.header("Mcp-Name") is None
    assert called.header("Mcp-Name") == "echo"
    assert read.header("Mcp-Name") == "note://readme"
    assert prompted.header("Mcp-Name") == "review"
    check_wire(fake.received(), LATEST)


@pytest.mark.parametrize(
    ("name", "sent"),
    [
        ("plain-name_1.2", "plain-name_1.2"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("tab\there", b64_sentinel("tab\there")),
        ("line\r\nbreak", b64_sentinel("line\r\nbreak")),
        ("=?base64?abc?=", b64_sentinel("=?base64?abc?=")),
    ],
)
def test_mcp_name_uses_the_base64_sentinel_when_the_value_is_not_plain(
    fake: FaultServer, name: str, sent: str
) -> None:
    """Value encoding: Mcp-Name is sent as is when plain printable ASCII, else as
    =?base64?<standard base64 of the UTF-8>?= (non-ASCII, control characters and tab,
    leading or trailing whitespace, a value that looks like the sentinel)."""
    with http(fake.url, protocol=LATEST) as client:
        client.call_tool(name, {})
    (call,) = fake.received()
    assert call.header("Mcp-Name") == sent
    assert call.message["params"]["name"] == name


PARAM_TOOL: dict[str, Any] = {
    "name": "search",
    "inputSchema": {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "x-mcp-header": "Limit"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
            "filter": {
                "type": "object",
                "properties": {"owner": {"type": "string", "x-mcp-header": "Owner"}},
            },
            "note": {"type": "string", "x-mcp-header": "Note"},
            "query": {"type": "string"},
        },
    },
}


def test_mcp_param_headers_mirror_annotated_arguments(fake: FaultServer) -> None:
    """x-mcp-header: with the definition from list_tools, call_tool sends one Mcp-Param-<Name>
    per annotated argument that has a value (false, 0 and "" included; nested objects through
    properties), encoded like Mcp-Name; a null or absent argument sends no header."""
    fake.responder.tools = [PARAM_TOOL]
    with http(fake.url, protocol=LATEST) as client:
        (tool,) = client.list_tools()
        client.call_tool(
            tool,
            {
                "region": "eu",
                "limit": 0,
                "dry": False,
                "filter": {"owner": "Zoë"},
                "note": None,
                "query": "q",
            },
        )
        client.call_tool(tool, {"region": "", "limit": -7, "dry": True, "query": "q"})
        client.call_tool(tool, {"region": " padded ", "query": "q"})
    _, first, second, third = fake.received()
    assert first.header("Mcp-Param-Region") == "eu"
    assert first.header("Mcp-Param-Limit") == "0"
    assert first.header("Mcp-Param-Dry-Run") == "false"
    assert first.header("Mcp-Param-Owner") == b64_sentinel("Zoë")
    assert "mcp-param-note" not in first.header_names()
    assert first.header("Mcp-Name") == "search"
    assert second.header("Mcp-Param-Region") == ""
    assert second.header("Mcp-Param-Limit") == "-7"
    assert second.header("Mcp-Param-Dry-Run") == "true"
    assert "mcp-param-owner" not in second.header_names()
    assert third.header("Mcp-Param-Region") == "=?base64?IHBhZGRlZCA=?="
    assert {n for n in third.header_names() if n.startswith("mcp-param-")} == {"mcp-param-region"}
    check_wire(fake.received(), LATEST)


def test_list_tools_leaves_out_tools_with_invalid_annotations_and_warns(
    fake: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    """x-mcp-header: an HTTP client leaves out of tools/list every tool with an invalid
    annotation (number type, names repeated ignoring case, not a token, empty, under items or
    anyOf) and logs a warning naming each; valid tools are unaffected."""

    def tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "inputSchema": {"type": "object", "properties": properties}}

    fake.responder.tools = [
        tool("plain", {"q": {"type": "string"}}),
        PARAM_TOOL,
        tool("bad-number", {"n": {"type": "number", "x-mcp-header": "N"}}),
        tool(
            "bad-duplicate",
            {
                "a": {"type": "string", "x-mcp-header": "Same"},
                "b": {"type": "string", "x-mcp-header": "same"},
            },
        ),
        tool("bad-token", {"a": {"type": "string", "x-mcp-header": "has space"}}),
        tool("bad-empty", {"a": {"type": "string", "x-mcp-header": ""}}),
        tool(
            "bad-items", {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}
        ),
        tool("bad-anyof", {"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}]}}),
    ]
    bad = ["bad-number", "bad-duplicate", "bad-token", "bad-empty", "bad-items", "bad-anyof"]
    with caplog.at_level(logging.WARNING), http(fake.url, protocol=LATEST) as client:
        assert [t["name"] for t in client.list_tools()] == ["plain", "search"]
        page = client.list_page("tools")
        assert [t["name"] for t in page.items] == ["plain", "search"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for name in bad:
        assert sum(name in w for w in warnings) == 2, (name, warnings)  # list_tools + list_page
    assert not any("plain" in w or "'search'" in w for w in warnings)


def _header_mismatch(request: Request, ex: Exchange) -> None:
    ex.json(error(request.message["id"], -32020, "Header mismatch: Mcp-Param-Region"), status=400)


def test_a_tool_called_by_name_is_retried_once_with_its_definition_after_32020(
    fake: FaultServer,
) -> None:
    """Called by name, a tool that needs Mcp-Param-* headers is refused with -32020; the
    client then lists the tools and retries once with the definition (headers included)."""
    fake.responder.tools = [PARAM_TOOL]
    fake.once("tools/call", _header_mismatch)
    with http(fake.url, protocol=LATEST) as client:
        got = client.call_tool("search", {"region": "eu", "query": "q"})
        assert got["content"][0]["text"] == "ok"
    assert fake.rpc_methods() == ["tools/call", "tools/list", "tools/call"]
    first, _, retry = fake.received()
    assert "mcp-param-region" not in first.header_names()
    assert retry.header("Mcp-Param-Region") == "eu"
    assert retry.message["id"] != first.message["id"]
    check_wire(fake.received(), LATEST)


def test_the_32020_retry_happens_only_once_and_not_for_a_definition(fake: FaultServer) -> None:
    """The -32020 retry is made once: a second -32020 is returned to the caller. A call made
    with the definition is not retried at all."""
    fake.responder.tools = [PARAM_TOOL]
    fake.always("tools/call", _header_mismatch)
    with http(fake.url, protocol=LATEST) as client:
        with pytest.raises(snodo.McpError) as twice:
            client.call_tool("search", {"region": "eu"})
        assert twice.value.code == -32020
        assert fake.rpc_methods() == ["tools/call", "tools/list", "tools/call"]
        with pytest.raises(snodo.McpError) as defined:
            client.call_tool(PARAM_TOOL, {"region": "eu"})
        assert defined.value.code == -32020
        assert fake.rpc_methods() == ["tools/call", "tools/list", "tools/call", "tools/call"]


def test_the_32020_retry_against_our_server(own: Served) -> None:
    """Against snodo's server, which checks Mcp-Param-* against the tool's schema: by name the
    call is refused (-32020, missing header), listed, and retried with the definition; with
    the definition it succeeds at once."""
    with http(own.url, protocol=LATEST) as client:
        got = client.call_tool("search", {"region": "eu", "query": "q"})
        assert got["structuredContent"] == {"region": "eu", "query": "q"}
        methods = own.methods()
        assert methods == ["tools/call", "tools/list", "tools/call"]
        search = next(t for t in client.list_tools() if t["name"] == "search")
        got = client.call_tool(search, {"region": "Zoë", "query": "q"})
        assert got["structuredContent"]["region"] == "Zoë"
    last = own.proxy.received("tools/call")[-1]
    assert last.header("Mcp-Param-Region") == b64_sentinel("Zoë")
    check_wire(own.proxy.received(), LATEST)


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\x00b"])
@pytest.mark.parametrize("protocol", [None, LATEST, "2025-11-25"])
def test_header_values_with_cr_lf_or_nul_are_refused_before_anything_is_sent(
    fake: FaultServer, value: str, protocol: str | None
) -> None:
    """A header value containing CR, LF or NUL is refused with -32000 before anything is sent
    (no probe, no initialize, nothing at all reaches the server)."""
    with pytest.raises(snodo.McpError) as caught:
        http(fake.url, protocol=protocol, headers={"x-api": value})
    assert caught.value.code == -32000 and caught.value.kind == "transport"
    assert value not in str(caught.value)
    assert fake.received() == []


@pytest.mark.parametrize(
    "name",
    [
        "Host",
        "content-type",
        "Content-Length",
        "transfer-encoding",
        "Connection",
        "Accept",
        "accept-encoding",
        "MCP-Protocol-Version",
        "mcp-session-id",
        "Mcp-Method",
        "mcp-name",
        "Mcp-Param-Region",
    ],
)
def test_transport_owned_headers_cannot_be_set(fake: FaultServer, name: str) -> None:
    """The headers the transport owns (framing, content negotiation and the MCP headers) are
    refused in headers= (-32000, before anything is sent)."""
    with pytest.raises(snodo.McpError) as caught:
        http(fake.url, headers={name: "v"})
    assert caught.value.code == -32000 and caught.value.kind == "transport"
    assert fake.received() == []


def test_user_headers_go_on_every_request(fake: FaultServer) -> None:
    """headers= (a token the application already holds included) go on every request of the
    connection: the probe, initialize, notifications/initialized, calls and the DELETE."""
    fake.responder.versions = list(SESSION_ERA)
    fake.responder.session_id = "s-h"
    headers = {"x-api": "k", "Authorization": "Bearer held-token"}
    with http(fake.url, headers=headers) as client:
        client.call_tool("echo", {"text": "x"})
    requests = fake.received()
    assert [r.rpc or r.method for r in requests if r.method != "GET"] == [
        "server/discover",
        "initialize",
        "notifications/initialized",
        "tools/call",
        "DELETE",
    ]
    for request in requests:
        assert request.header("x-api") == "k"
        assert request.header_values("Authorization") == ["Bearer held-token"]


# -- The session era over HTTP ----------------------------------------------------------


@pytest.mark.parametrize("version", SESSION_ERA)
def test_the_session_id_goes_on_every_later_request(version: str) -> None:
    """Session era: the Mcp-Session-Id the server issued is captured (transport and
    Session), and every later request — notifications/initialized, calls, answers, the
    DELETE on close — carries it with MCP-Protocol-Version; initialize itself carries
    neither, and no request carries Mcp-Method or Mcp-Name."""
    with fault_server(McpResponder(session_id="sess-abc")) as fake:
        with http(fake.url, protocol=version) as client:
            assert client.transport.session_id == "sess-abc"  # type: ignore[attr-defined]
            client.list_tools()
            client.call_tool("echo", {"text": "x"})
            client.ping()
        init, *later = fake.received()
        assert init.rpc == "initialize"
        assert "mcp-session-id" not in init.header_names()
        assert [r.rpc or r.method for r in later if r.method != "GET"] == [
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "ping",
            "DELETE",
        ]
        for request in later:
            if request.method == "POST":
                accepted = (request.header("Accept") or "").replace(" ", "").split(",")
                assert {"application/json", "text/event-stream"} <= set(accepted)
                assert request.header("Accept-Encoding") == "identity"
            assert request.header_values("Mcp-Session-Id") == ["sess-abc"]
            assert request.header("MCP-Protocol-Version") == version
            assert not {"mcp-method", "mcp-name"} & request.header_names()
        check_wire(fake.received(), version)


@pytest.mark.parametrize("version", SESSION_ERA)
def test_the_session_carries_the_issued_session_id(version: str) -> None:
    """Session era: the client's session is a Session with the negotiated version, the
    Mcp-Session-Id the server issued, and the serverInfo and capabilities of the result."""
    with fault_server(McpResponder(session_id="sess-xyz")) as fake:
        with http(fake.url, protocol=version) as client:
            session = client.session
            assert isinstance(session, snodo.Session)
            assert session.version == version
            assert session.server_info == {"name": "fault-server", "version": "1.0.0"}
            assert session.capabilities == {"tools": {}}
            assert session.session_id == "sess-xyz"


@pytest.mark.parametrize("version", SESSION_ERA)
def test_our_server_sessions_over_http(version: str) -> None:
    """Against snodo's server: the session id it issues is echoed on every later request and
    ended with DELETE on close (the server no longer has it)."""
    with served() as own:
        with http(own.url, protocol=version) as client:
            sid = client.transport.session_id  # type: ignore[attr-defined]
            assert sid and own.server.session_ids == [sid]
            client.call_tool("echo", {"text": "x"})
        assert own.server.session_ids == []
        requests = own.proxy.received()
        assert [r.rpc or r.method for r in requests if r.method != "GET"] == [
            "initialize",
            "notifications/initialized",
            "tools/call",
            "DELETE",
        ]
        assert all(r.header("Mcp-Session-Id") == sid for r in requests[1:])
        check_wire(requests, version)


@pytest.mark.parametrize("version", SESSION_ERA)
def test_server_requests_on_the_stream_are_answered_in_the_calling_thread(version: str) -> None:
    """A server request (elicitation/create, sampling/createMessage, roots/list) arrives on the
    event stream of the request in flight; the input handler runs in the calling thread and
    the answer goes back as its own POST, with the session headers, before the call returns."""
    calls: list[tuple[str, int]] = []

    def record(kind: str, fn: Any) -> Any:
        def handler(params: dict[str, Any]) -> Any:
            calls.append((kind, threading.get_ident()))
            return fn(params)

        return handler

    handlers = {
        "form": record("form", accept),
        "sampling": record("sampling", sampler),
        "roots": record("roots", rooter),
    }
    with served() as own:
        with http(own.url, protocol=version, input_handlers=handlers) as client:
            deployed = client.call_tool("deploy", {})
            assert deployed["structuredContent"] == {
                "action": "accept",
                "given": {"approved": True},
            }
            summary = client.call_tool("summarize", {})
            assert summary["structuredContent"]["sampled"]["content"]["text"] == "a summary"
            roots = client.call_tool("roots", {})
            assert roots["structuredContent"]["roots"] == rooter({})["roots"]
            sid = client.transport.session_id  # type: ignore[attr-defined]
        assert [k for k, _ in calls] == ["form", "sampling", "roots"]
        assert {ident for _, ident in calls} == {threading.get_ident()}
        answers = own.proxy.received(lambda r: r.kind == "response")
        assert len(answers) == 3
        for answer, method in zip(
            answers, ["elicitation/create", "sampling/createMessage", "roots/list"], strict=True
        ):
            assert answer.header("Mcp-Session-Id") == sid
            assert answer.header("MCP-Protocol-Version") == version
            check_response(version, answer.message, method)
        check_wire(own.proxy.received(), version)


@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [
        ("ping", None, {"result": {}}),
        ("sampling/createMessage", {"messages": [], "maxTokens": 5}, {"code": -32601}),
        (
            "elicitation/create",
            {"mode": "url", "message": "m", "url": "https://x.test", "elicitationId": "e"},
            {"code": -32601},
        ),
        (
            "elicitation/create",
            {"mode": "form", "requestedSchema": {"type": "object"}},
            {"code": -32602},
        ),
        (
            "elicitation/create",
            {
                "mode": "form",
                "message": "fail",
                "requestedSchema": {"type": "object", "properties": {}},
            },
            {"code": -32603},
        ),
    ],
    ids=["ping", "no-sampling-handler", "no-url-handler", "missing-message", "handler-error"],
)
def test_server_requests_without_a_usable_handler_are_answered_with_errors(
    method: str, params: Any, expected: dict[str, Any]
) -> None:
    """A server ping is answered {} without a handler; a request of a kind with no handler is
    answered -32601, one whose params lack the kind's keys -32602, and a handler that fails
    (HandlerError) -32603; each answer is POSTed, and the call in flight still completes."""

    def form(params: dict[str, Any]) -> dict[str, Any]:
        if params.get("message") == "fail":
            raise snodo.HandlerError("the user walked away")
        return accept(params)

    with fault_server(McpResponder(session_id="s-e")) as fake:
        fake.once("tools/call", ask_on_stream("srv-7", method, params))
        with http(fake.url, protocol="2025-11-25", input_handlers={"form": form}) as client:
            got = client.call_tool("echo", {"text": "x"})
        answer = got["structuredContent"]["answer"]
        assert answer["id"] == "srv-7"
        if "result" in expected:
            assert answer["result"] == expected["result"]
        else:
            assert answer["error"]["code"] == expected["code"]
        (posted,) = fake.received(lambda r: r.kind == "response")
        check_response("2025-11-25", posted.message, method if "result" in expected else None)


def test_a_2026_connection_with_handlers_answers_server_requests_on_the_stream(
    fake: FaultServer,
) -> None:
    """On 2026-07-28 over HTTP with input handlers installed, a server ping is answered {} and
    an elicitation request goes to the handlers; each answer is its own POST carrying
    MCP-Protocol-Version."""
    fake.once("tools/call", ask_on_stream(41, "ping", None))
    fake.once("tools/call", ask_on_stream(42))
    seen: list[dict[str, Any]] = []

    def form(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return accept(params)

    with http(fake.url, protocol=LATEST, input_handlers={"form": form}) as client:
        pinged = client.call_tool("echo", {"text": "x"})
        asked = client.call_tool("echo", {"text": "y"})
    assert pinged["structuredContent"]["answer"] == {"jsonrpc": "2.0", "id": 41, "result": {}}
    assert asked["structuredContent"]["answer"]["result"] == accept({})
    assert len(seen) == 1 and seen[0]["message"] == "OK?"
    answers = fake.received(lambda r: r.kind == "response")
    assert len(answers) == 2
    for answer in answers:
        assert answer.header("MCP-Protocol-Version") == LATEST
    check_wire(fake.received(), LATEST)


def test_close_sends_delete_with_a_bounded_wait() -> None:
    """close() sends a DELETE for the session; against a server that never answers it, close
    still returns within about 5 seconds."""
    with fault_server(McpResponder(session_id="s-slow")) as fake:
        deleted = threading.Event()

        def never(request: Request, ex: Exchange) -> None:
            deleted.set()
            ex.wait_client_gone(10.0)
            ex.close()

        fake.once("DELETE", never)
        client = http(fake.url, protocol="2025-11-25")
        started = time.monotonic()
        client.close()
        took = time.monotonic() - started
        assert deleted.is_set()
        assert took < 6.5, took
        (delete,) = fake.received("DELETE")
        assert delete.header("Mcp-Session-Id") == "s-slow"
        assert delete.body == b""


def test_a_delete_refused_with_405_is_fine() -> None:
    """The DELETE's outcome is ignored: a 405 still closes the client cleanly."""
    with fault_server(McpResponder(session_id="s-405")) as fake:
        fake.once("DELETE", lambda r, ex: ex.respond(405))
        client = http(fake.url, protocol="2025-06-18")
        client.close()
        assert client.closed
        assert len(fake.received("DELETE")) == 1


def test_an_expired_session_is_reported_as_the_servers_error() -> None:
    """A session the server expires (404 with a JSON-RPC error body) is reported as the
    server's error, not re-initialized: no second initialize is sent."""
    with fault_server(McpResponder(session_id="s-old")) as fake:
        fake.once(
            "tools/call",
            lambda r, ex: ex.json(error(None, -32600, "Session not found"), status=404),
        )
        with http(fake.url, protocol="2025-11-25") as client:
            with pytest.raises(snodo.McpError) as caught:
                client.call_tool("echo", {"text": "x"})
            assert (caught.value.code, caught.value.message) == (-32600, "Session not found")
            assert caught.value.kind == "protocol"
        assert fake.rpc_methods().count("initialize") == 1


def test_our_server_expiring_the_session_is_reported_as_its_error() -> None:
    """The same against snodo's server with a short session_idle_timeout: once the session has
    expired, a call fails with the server's error (404, -32600) and nothing re-initializes. (The
    server offers no GET stream here: an attached stream keeps a session alive.)"""
    with served(session_idle_timeout=0.3, enable_get_stream=False) as own:
        with http(own.url, protocol="2025-11-25") as client:
            wait_until(lambda: not own.server.session_ids, 10.0)
            with pytest.raises(snodo.McpError) as caught:
                client.call_tool("echo", {"text": "x"})
            assert caught.value.code == -32600
            assert "Session not found" in caught.value.message
        assert own.methods().count("initialize") == 1


# -- Multi round-trip and concurrency over HTTP ---------------------------------------------


def test_input_required_rounds_over_http(own: Served) -> None:
    """2026-07-28 input requests over HTTP: the handlers answer in the calling thread, the call
    is sent again with inputResponses and the requestState, progress is delivered in every
    round."""
    reports: list[Any] = []
    with http(own.url, protocol=LATEST, input_handlers={"form": accept}) as client:
        got = client.call_tool("two_rounds", {}, progress=reports.append)
    assert got["structuredContent"] == {"first": "accept", "second": "accept", "round": 2}
    calls = own.proxy.received("tools/call")
    assert len(calls) == 3
    assert "inputResponses" in calls[1].message["params"]
    assert len(reports) >= 3
    check_wire(own.proxy.received(), LATEST)


@pytest.mark.parametrize("version", [LATEST, "2025-11-25"])
def test_threads_share_one_http_client(version: str) -> None:
    """Request IDs are fresh integers, so one client can be shared: 8 threads x 15 calls, some
    with progress, on one HTTP client."""
    failures: list[BaseException] = []
    with served() as own, http(own.url, protocol=version) as client:

        def work(n: int) -> None:
            try:
                for i in range(15):
                    if i % 5 == 0:
                        got: list[Any] = []
                        client.call_tool("count", {"n": 2}, progress=got.append)
                        assert [p["progress"] for p in got] == [1, 2]
                    else:
                        assert text_of(client.call_tool("echo", {"text": f"{n}/{i}"})) == f"{n}/{i}"
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
    assert not failures, failures[:3]
    ids = [r.message["id"] for r in own.proxy.received("tools/call")]
    assert len(ids) == 120 and len(set(ids)) == 120


def test_lists_follow_next_cursor_over_http() -> None:
    """Lists and paging: list_tools follows nextCursor to the end over HTTP."""
    with served(page_size=10, tools=35) as own, http(own.url, protocol=LATEST) as client:
        tools = client.list_tools()
        assert len([t for t in tools if t["name"].startswith("filler-")]) == 35
        assert own.methods().count("tools/list") == len(tools) // 10 + (len(tools) % 10 > 0)


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_the_standalone_get_stream_delivers_server_requests(version: str) -> None:
    """Beyond the reference (docs/decisions/0013): a session-era client opens the session's
    standalone GET stream (with the session headers), so a request the server sends only there
    is answered by the input handlers and POSTed back; close() ends the stream."""
    with fault_server(McpResponder(session_id="s-get")) as server:
        _standalone_get_stream(server, version)


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_connect_returns_once_the_standalone_get_stream_is_open(version: str) -> None:
    """Beyond the reference (docs/decisions/0013), regression: connect() returns only once the
    server has answered the standalone GET, so a request the server sends there right after
    (the TypeScript SDK sends roots/list from a tool there, and drops it while no stream is open:
    found by tests/test_interop_everything.py) is not lost. Here the GET is answered late."""
    answering = threading.Event()

    def slow_stream(request: Request, ex: Exchange) -> None:
        ex.pause(0.5)
        answering.set()
        ex.start_chunked()
        ex.wait_client_gone(10.0)
        ex.close()

    with fault_server(McpResponder(session_id="s-slow-get")) as server:
        server.once(lambda r: r.method == "GET", slow_stream)
        client = http(server.url, protocol=version)
        try:
            assert answering.is_set(), "connect() returned before the GET stream was answered"
        finally:
            client.close()


def _standalone_get_stream(fault_server: FaultServer, version: str) -> None:
    stream_open = threading.Event()

    def standalone(request: Request, ex: Exchange) -> None:
        ex.start_chunked()
        ex.chunk(
            event(
                {
                    "jsonrpc": "2.0",
                    "id": "get-1",
                    "method": "elicitation/create",
                    "params": ELICIT_FORM,
                }
            )
        )
        stream_open.set()
        fault_server.wait_for(lambda r: r.kind == "response", 1, timeout=10.0)
        ex.wait_client_gone(10.0)
        ex.close()

    fault_server.once(lambda r: r.method == "GET", standalone)
    client = http(fault_server.url, protocol=version, input_handlers={"form": accept})
    try:
        assert stream_open.wait(10.0)
        (answer,) = fault_server.wait_for(lambda r: r.kind == "response", 1, timeout=10.0)
        assert answer.message == {
            "jsonrpc": "2.0",
            "id": "get-1",
            "result": {"action": "accept", "content": {"approved": True}},
        }
        (get,) = fault_server.received(lambda r: r.method == "GET")
        assert get.header("mcp-session-id") == client.transport.session_id  # type: ignore[attr-defined]
        assert get.header("mcp-protocol-version") == version
        assert "text/event-stream" in (get.header("accept") or "")
    finally:
        client.close()
    assert "DELETE" in fault_server.rpc_methods()


def test_a_broken_2025_11_25_stream_is_resumed_with_last_event_id() -> None:
    """Beyond the reference (docs/decisions/0013): a server that sends only a priming event and a
    `retry` on a POST's stream, then closes it, gets a GET with Last-Event-ID after the retry
    delay, and the call returns the response from the resumed stream (2025-11-25 resumption)."""
    with served(sse_retry_ms=50) as own:
        with http(own.url, protocol="2025-11-25") as client:
            result = client.call_tool("echo", {"text": "resumed"})
            assert result["content"][0]["text"] == "resumed"
        gets = own.proxy.received(lambda r: r.method == "GET" and r.header("last-event-id"))
        assert gets, "no GET carried Last-Event-ID"
