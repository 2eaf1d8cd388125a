"""The client over direct: the reference's "The client", "Calls", "Protocol versions" (direct),
"Lists and paging", "Options" — each test names the rule it checks.

Every message the client sends here is recorded and validated against its version's schema.json
by the ``wire`` fixture.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import snodo
from snodo.protocol.dialects import SUPPORTED_VERSIONS
from tests.support import client_runtime
from tests.support.client_calls import check_calls, check_errors
from tests.support.client_support import Wire

ALL = list(SUPPORTED_VERSIONS)
SESSION_ERA = ["2025-11-25", "2025-06-18"]


@pytest.fixture
def runtime() -> Any:
    return client_runtime.build()


@pytest.fixture(params=ALL)
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- The client / Calls --------------------------------------------------------------------


def test_calls_work_over_direct_on_every_version(runtime: Any, version: str, wire: Wire) -> None:
    """Calls: the same functions work over direct, on each of the three versions."""
    with snodo.direct(runtime, protocol=version) as client:
        assert client.version == version
        check_calls(client)
        check_errors(client)
    assert wire.sent, "messages were recorded and schema-checked"


def test_discover_on_2026(runtime: Any, wire: Wire) -> None:
    """Calls: discover returns the server/discover result on 2026-07-28."""
    with snodo.direct(runtime, protocol="2026-07-28") as client:
        discovery = client.discover()
    assert "2026-07-28" in discovery["supportedVersions"]
    assert "tools" in discovery["capabilities"]
    assert discovery["instructions"] == "Use the tools."
    assert wire.methods() == ["server/discover"]


def test_decoded_errors_keep_code_message_data(runtime: Any, version: str) -> None:
    """Calls: decoded JSON-RPC errors keep the server's code, message, and data."""
    with snodo.direct(runtime, protocol=version) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("refuse", {})
    assert caught.value.code == -32099
    assert caught.value.message == "refused on purpose"
    assert caught.value.data == {"why": "test"}
    assert caught.value.kind == "protocol"


def test_unknown_tool_is_invalid_params(runtime: Any, version: str) -> None:
    """Calls: a server's -32602 for an unknown tool reaches the caller as McpError -32602."""
    with snodo.direct(runtime, protocol=version) as client, pytest.raises(snodo.McpError) as caught:
        client.call_tool("no-such-tool", {})
    assert caught.value.code == -32602


def test_tool_error_result_is_a_success(runtime: Any) -> None:
    """A tools/call result with isError true is a success, not an exception."""
    with snodo.direct(runtime) as client:
        result = client.call_tool("broken", {})
    assert result["isError"] is True
    assert "the tool broke" in result["content"][0]["text"]


def test_closed_client_fails_with_connection_error(runtime: Any) -> None:
    """Connection failures have kind transport: -32000 for a closed connection."""
    client = snodo.direct(runtime)
    client.close()
    client.close()  # idempotent
    with pytest.raises(snodo.McpError) as caught:
        client.list_tools()
    assert caught.value.code == -32000
    assert caught.value.kind == "transport"


def test_request_ids_are_fresh_integers_and_client_is_shared(runtime: Any, wire: Wire) -> None:
    """Request IDs are fresh integers, so one client can be shared by many threads."""
    client = snodo.direct(runtime)
    failures: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(25):
                text = f"{n}-{i}"
                assert client.call_tool("echo", {"text": text})["content"][0]["text"] == text
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failures
    ids = [m["id"] for m in wire.requests("tools/call")]
    assert len(ids) == 200
    assert len(set(ids)) == 200
    assert all(isinstance(i, int) and not isinstance(i, bool) for i in ids)


# -- Protocol versions (direct) ------------------------------------------------------------


def test_without_protocol_the_newest_enabled_version_wins(runtime: Any) -> None:
    """Protocol versions: without :protocol the client allows every version, newest first."""
    with snodo.direct(runtime) as client:
        assert client.version == "2026-07-28"
        assert client.session is None


def test_direct_picks_highest_allowed_among_enabled() -> None:
    """direct/2: the highest allowed version among the runtime's enabled ones is used."""
    rt = client_runtime.build(versions=["2025-11-25", "2025-06-18"])
    with snodo.direct(rt, protocol=["2026-07-28", "2025-06-18", "2025-11-25"]) as client:
        assert client.version == "2025-11-25"
    with snodo.direct(rt, protocol=["2026-07-28", "2025-06-18"]) as client:
        assert client.version == "2025-06-18"


@pytest.mark.parametrize("session_version", SESSION_ERA)
def test_session_era_is_negotiated_through_the_runtime(session_version: str, wire: Wire) -> None:
    """A session-era version is negotiated through the runtime: initialize, then initialized."""
    rt = client_runtime.build()
    with snodo.direct(
        rt, protocol=session_version, client_info={"name": "t", "version": "9"}
    ) as client:
        session = client.session
        assert isinstance(session, snodo.Session)
        assert session.version == session_version
        assert session.server_info is not None and session.server_info["name"] == "client-test"
        assert "tools" in session.capabilities
        assert session.instructions == "Use the tools."
        assert session.session_id is None
    assert wire.methods()[:2] == ["initialize", "notifications/initialized"]
    init = wire.sent[0]["params"]
    assert init["protocolVersion"] == session_version
    assert init["clientInfo"] == {"name": "t", "version": "9"}


def test_session_era_only_runtime_gets_a_working_direct_client() -> None:
    """A runtime that enables only the session-era dialects gets a working direct client."""
    rt = client_runtime.build(versions=["2025-06-18"])
    with snodo.direct(rt) as client:
        assert client.version == "2025-06-18"
        assert client.call_tool("echo", {"text": "x"})["content"][0]["text"] == "x"


def test_no_common_version_is_invalid_params_with_requested_and_supported() -> None:
    """A server that supports none of the allowed versions: -32602 with requested and supported."""
    rt = client_runtime.build(versions=["2025-06-18"])
    with pytest.raises(snodo.McpError) as caught:
        snodo.direct(rt, protocol="2026-07-28")
    assert caught.value.code == -32602
    assert caught.value.data == {"requested": ["2026-07-28"], "supported": ["2025-06-18"]}


def test_unspoken_version_is_refused_before_connecting(wire: Wire) -> None:
    """A version the client does not speak at all is refused before connecting."""
    rt = client_runtime.build()
    with pytest.raises(snodo.McpError) as caught:
        snodo.direct(rt, protocol="2023-01-01")
    assert caught.value.code == -32602
    assert caught.value.data["requested"] == "2023-01-01"
    assert caught.value.data["supported"] == list(snodo.ALL_VERSIONS)
    assert wire.sent == []


def test_2026_requests_carry_meta_and_client_info(runtime: Any, wire: Wire) -> None:
    """2026-07-28: every request carries _meta with protocolVersion, capabilities and clientInfo."""
    info = {"name": "meta-test", "version": "1"}
    with snodo.direct(runtime, client_info=info, client_capabilities={"roots": {}}) as client:
        client.call_tool("echo", {"text": "a"})
        client.list_tools()
    for message in wire.sent:
        meta = message["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert meta["io.modelcontextprotocol/clientInfo"] == info
        assert meta["io.modelcontextprotocol/clientCapabilities"] == {"roots": {}}


@pytest.mark.parametrize("session_version", SESSION_ERA)
def test_session_era_requests_carry_no_meta(session_version: str, runtime: Any, wire: Wire) -> None:
    """Session era: requests carry no _meta metadata and no client info."""
    with snodo.direct(runtime, protocol=session_version) as client:
        client.call_tool("echo", {"text": "a"})
        client.list_tools()
        client.ping()
    after_init = [m for m in wire.sent if m["method"] not in ("initialize",)]
    assert after_init
    for message in after_init:
        assert "_meta" not in message.get("params", {})


@pytest.mark.parametrize("session_version", SESSION_ERA)
def test_ping_works_and_discover_is_refused_on_session_era(
    session_version: str, runtime: Any, wire: Wire
) -> None:
    """Session era: ping works; discover is refused with -32601 before anything is sent."""
    with snodo.direct(runtime, protocol=session_version) as client:
        assert client.ping() == {}
        sent_before = len(wire.sent)
        with pytest.raises(snodo.McpError) as caught:
            client.discover()
        assert len(wire.sent) == sent_before
    assert caught.value.code == -32601
    assert caught.value.data == {"method": "server/discover", "protocolVersion": session_version}


@pytest.mark.parametrize("session_version", SESSION_ERA)
@pytest.mark.parametrize("method", ["server/discover", "subscriptions/unknown", "x/extension"])
def test_session_era_request_refuses_methods_outside_the_catalog(
    session_version: str, method: str, runtime: Any, wire: Wire
) -> None:
    """Session era: request refuses a method the catalog does not define, before sending."""
    with snodo.direct(runtime, protocol=session_version) as client:
        sent_before = len(wire.sent)
        with pytest.raises(snodo.McpError) as caught:
            client.request(method, {})
        assert len(wire.sent) == sent_before
    assert caught.value.code == -32601
    assert caught.value.data == {"method": method, "protocolVersion": session_version}


@pytest.mark.parametrize(
    "method",
    ["elicitation/create", "sampling/createMessage", "roots/list", "notifications/cancelled"],
)
def test_2026_request_refuses_server_requests_and_notifications(
    method: str, runtime: Any, wire: Wire
) -> None:
    """2026-07-28: a method listed only as a server request or notification is refused locally."""
    with snodo.direct(runtime) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.request(method, {})
    assert caught.value.code == -32601
    assert caught.value.data == {"method": method, "protocolVersion": "2026-07-28"}
    assert wire.sent == []


def test_2026_request_sends_unlisted_methods_as_they_are(runtime: Any, wire: Wire) -> None:
    """2026-07-28: an unlisted method is sent as it is (extensions add methods)."""
    with snodo.direct(runtime) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.request("x-ext/hello", {"a": 1})
    assert [m["method"] for m in wire.sent] == ["x-ext/hello"]
    assert wire.sent[0]["params"]["a"] == 1
    assert caught.value.code == -32601  # the runtime's own answer


def test_request_refuses_subscriptions_listen(runtime: Any) -> None:
    """request/4 raises for subscriptions/listen."""
    with snodo.direct(runtime) as client, pytest.raises(ValueError):
        client.request("subscriptions/listen", {"notifications": {}})


# -- Lists and paging -----------------------------------------------------------------------


def test_list_calls_follow_next_cursor_to_the_end(version: str, wire: Wire) -> None:
    """Lists: list_tools follows nextCursor to the end and returns every item."""
    rt = client_runtime.build(page_size=3, tools=10)
    with snodo.direct(rt, protocol=version) as client:
        tools = client.list_tools()
    names = [t["name"] for t in tools]
    assert len(names) == len(set(names))
    assert {f"filler-{i:03}" for i in range(10)} <= set(names)
    pages = wire.requests("tools/list")
    assert len(pages) == -(-len(names) // 3)
    assert "cursor" not in pages[0].get("params", {})
    assert all("cursor" in p["params"] for p in pages[1:])


def test_max_pages_stops_with_connection_error() -> None:
    """Lists: the last of :max_pages pages still has a nextCursor -> -32000."""
    rt = client_runtime.build(page_size=2, tools=10)
    with snodo.direct(rt, max_pages=3) as client, pytest.raises(snodo.McpError) as caught:
        client.list_tools()
    assert caught.value.code == -32000
    assert caught.value.cause == {"kind": "tools/list", "max_pages": 3}


def test_list_page_for_manual_paging(wire: Wire) -> None:
    """list_page returns one Page (items, next_cursor, result) for manual paging."""
    rt = client_runtime.build(page_size=4, tools=5)
    with snodo.direct(rt) as client:
        first = client.list_page("tools")
        assert isinstance(first, snodo.Page)
        assert len(first.items) == 4
        assert first.next_cursor is not None
        assert first.result["ttlMs"] == 60_000
        collected = list(first.items)
        cursor = first.next_cursor
        while cursor is not None:
            page = client.list_page("tools", cursor)
            collected.extend(page.items)
            cursor = page.next_cursor
    assert [t["name"] for t in collected] == [t["name"] for t in snodo.direct(rt).list_tools()]
    with pytest.raises(ValueError):
        snodo.direct(rt).list_page("widgets")


# -- Options --------------------------------------------------------------------------------


def test_meta_option_adds_entries(runtime: Any) -> None:
    """Options: :meta adds extra _meta entries."""
    with snodo.direct(runtime) as client:
        result = client.call_tool("show_meta", {}, meta={"example.com/tag": "t1"})
    assert result["structuredContent"]["meta"]["example.com/tag"] == "t1"


def test_trace_context_is_sent_and_wins_over_meta(runtime: Any) -> None:
    """Options: trace_context goes into _meta; the named option wins over duplicate :meta keys."""
    parent = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
    with snodo.direct(runtime) as client:
        result = client.call_tool(
            "show_meta",
            {},
            meta={
                "traceparent": "00-11111111111111111111111111111111-1111111111111111-00",
                "x/y": 1,
            },
            trace_context={"traceparent": parent, "tracestate": "congo=t61rcWkgMzE"},
        )
    meta = result["structuredContent"]["meta"]
    assert meta["traceparent"] == parent
    assert meta["tracestate"] == "congo=t61rcWkgMzE"
    assert meta["x/y"] == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"traceparent": "ff-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"},
        {"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
        {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"},
        {"traceparent": "not a traceparent"},
        {"tracestate": "a=b"},
    ],
)
def test_malformed_trace_context_is_rejected(bad: dict[str, str], runtime: Any, wire: Wire) -> None:
    """Options: the client checks trace values and rejects malformed ones (ArgumentError)."""
    with snodo.direct(runtime) as client, pytest.raises(ValueError):
        client.call_tool("echo", {"text": "x"}, trace_context=bad)
    assert wire.sent == []
