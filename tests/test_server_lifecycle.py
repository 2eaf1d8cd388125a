"""Dialect selection, server/discover and the initialize lifecycle (client-digest (a)-(d), (g))."""

from __future__ import annotations

from typing import Any

import pytest

from snodo.server import CacheHint, Peer, Runtime, ServerSession, dispatch
from tests.support.server_support import (
    CC,
    PV,
    SESSION_VERSIONS,
    SI,
    STATELESS,
    VERSIONS,
    Conn,
    check_response,
    defined_fields_only,
    example_runtime,
    raw,
    validate,
)


def tools_only(**kw: Any) -> Runtime:
    rt = Runtime("t", "1", **kw)
    rt.add_tool("echo", lambda a, ctx: "x")
    return rt


def stateless_message(
    method: str, params: dict[str, Any] | None = None, version: str = STATELESS
) -> dict[str, Any]:
    params = dict(params or {})
    params["_meta"] = {PV: version, CC: {}}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


# -- server/discover -----------------------------------------------------------------------


def test_discover_result_has_versions_capabilities_cache_hints_and_server_info() -> None:
    """(c) DiscoverResult: supportedVersions, capabilities, instructions, ttlMs, cacheScope, _meta serverInfo."""
    result = Conn(example_runtime()).ok("server/discover")
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == list(VERSIONS)
    assert result["capabilities"] == {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "completions": {},
    }
    assert result["instructions"].startswith("Tools to echo")
    assert (result["ttlMs"], result["cacheScope"]) == (60_000, "public")
    assert result["_meta"] == {
        SI: {"name": "snodo-example", "version": "0.1.0", "title": "snodo example server"}
    }
    assert "serverInfo" not in result


def test_discover_defaults_to_private_zero_ttl_and_omits_absent_instructions() -> None:
    """(j) a runtime without cache hints answers ttlMs 0 / private; no instructions key when none."""
    result = Conn(tools_only()).ok("server/discover")
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")
    assert "instructions" not in result
    assert result["capabilities"] == {"tools": {"listChanged": True}}


def test_discover_lists_enabled_versions_in_preference_order() -> None:
    rt = tools_only(versions=["2026-07-28", "2025-06-18"])
    assert Conn(rt).ok("server/discover")["supportedVersions"] == ["2026-07-28", "2025-06-18"]


def test_discover_matches_the_spec_example_shape() -> None:
    """The spec's DiscoverResultResponse example and ours validate against the same definition."""
    rt = Runtime(
        "ExampleServer",
        "1.0.0",
        versions=[STATELESS],
        cache_hints={"discover": CacheHint(3_600_000, "public")},
    )
    rt.add_tool("get_weather", lambda a, ctx: "sunny")
    rt.add_resource("file:///x", lambda ctx: "x")
    result = Conn(rt).ok("server/discover")
    assert result == {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
        },
        "_meta": {SI: {"name": "ExampleServer", "version": "1.0.0"}},
        "ttlMs": 3_600_000,
        "cacheScope": "public",
    }


@pytest.mark.parametrize("version", SESSION_VERSIONS)
def test_discover_is_not_a_method_on_session_era_sessions(version: str) -> None:
    """(a) server/discover is not in the session-era catalogs: -32601 with data.method."""
    error = Conn(example_runtime(), version).err("server/discover")
    assert error["code"] == -32601
    assert error["data"]["method"] == "server/discover"


# -- initialize ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", SESSION_VERSIONS)
def test_initialize_echoes_an_enabled_session_era_version(version: str) -> None:
    """(d) 2: a supported requested version is echoed; result carries no 2026 fields."""
    conn = Conn(example_runtime(), version)
    assert conn.init_result is not None
    assert conn.init_result["protocolVersion"] == version
    assert set(conn.init_result) == {
        "protocolVersion",
        "capabilities",
        "serverInfo",
        "instructions",
    }
    assert conn.peer.session is not None
    assert conn.peer.session.version == version
    assert conn.peer.session.client_info == {"name": "test-client", "version": "1.0.0"}
    assert conn.peer.session.initialized is True


@pytest.mark.parametrize(
    ("versions", "requested", "offered"),
    [
        (VERSIONS, "2024-11-05", "2025-11-25"),
        (VERSIONS, "2026-07-28", "2025-11-25"),
        (VERSIONS, "1900-01-01", "2025-11-25"),
        (["2025-06-18"], "2025-11-25", "2025-06-18"),
        (["2025-06-18", "2025-11-25"], "2099-01-01", "2025-11-25"),
    ],
)
def test_initialize_counter_offers_the_highest_enabled_session_era_version(
    versions: list[str], requested: str, offered: str
) -> None:
    """(d) 2: otherwise the server answers with its latest session-era version (the client decides)."""
    rt = tools_only(versions=versions)
    peer = Peer("stdio", session=ServerSession())
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": requested,
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
    }
    response = dispatch(rt, message, peer)
    assert response is not None
    check_response(offered, "initialize", response)
    assert response["result"]["protocolVersion"] == offered
    assert peer.session is not None and peer.session.version == offered
    assert peer.session.initialized is False
    assert dispatch(rt, {"jsonrpc": "2.0", "method": "notifications/initialized"}, peer) is None
    assert peer.session.initialized is True


def test_initialize_shapes_server_info_for_each_version() -> None:
    """Session-era results drop fields the version's schema does not define (2025-06-18 Implementation)."""
    icons = [{"src": "https://example.test/i.png", "mimeType": "image/png"}]
    rt = tools_only(title="T", description="about", icons=icons, website_url="https://example.test")
    old = Conn(rt, "2025-06-18").init_result
    new = Conn(rt, "2025-11-25").init_result
    assert old is not None and new is not None
    assert old["serverInfo"] == {"name": "t", "version": "1", "title": "T"}
    assert new["serverInfo"] == {
        "name": "t",
        "version": "1",
        "title": "T",
        "description": "about",
        "icons": icons,
        "websiteUrl": "https://example.test",
    }
    assert defined_fields_only("2025-06-18", "InitializeResult", old) == []
    # The check itself can fail: the 2025-11-25 shape is not a valid 2025-06-18 shape.
    assert defined_fields_only("2025-06-18", "InitializeResult", new) != []
    stateless = Conn(rt).ok("server/discover")["_meta"][SI]
    assert stateless == new["serverInfo"]


@pytest.mark.parametrize(
    "params",
    [
        {"capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
        {
            "protocolVersion": 20250618,
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
        {"protocolVersion": "2025-06-18", "clientInfo": {"name": "c", "version": "1"}},
        {
            "protocolVersion": "2025-06-18",
            "capabilities": [],
            "clientInfo": {"name": "c", "version": "1"},
        },
        {"protocolVersion": "2025-06-18", "capabilities": {}},
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c"}},
    ],
)
def test_initialize_requires_version_capabilities_and_client_info(params: dict[str, Any]) -> None:
    """(d) 1: protocolVersion (str), capabilities (object), clientInfo (Implementation) -> else -32602."""
    peer = Peer("stdio", session=ServerSession())
    response = dispatch(
        tools_only(), {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, peer
    )
    assert response is not None
    check_response("2025-06-18", "initialize", response)
    assert response["error"]["code"] == -32602
    assert peer.session is not None and peer.session.version is None


def test_initialize_without_a_session_is_an_internal_error() -> None:
    """A transport that cannot hold sessions (peer.session None) answers initialize -32603."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
    }
    response = dispatch(tools_only(), message, Peer("http", session=None))
    assert response is not None and response["error"]["code"] == -32603


def test_initialize_on_a_stateless_only_runtime_is_method_not_found() -> None:
    """initialize only exists when the runtime enables a session-era version."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
    }
    response = raw(tools_only(versions=[STATELESS]), message)
    assert response is not None and response["error"]["code"] == -32601


def test_second_initialize_on_the_same_session_is_refused() -> None:
    conn = Conn(tools_only(), "2025-11-25")
    error = conn.err(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": conn.client_info},
    )
    assert error["code"] == -32600
    assert conn.peer.session is not None and conn.peer.session.version == "2025-11-25"


@pytest.mark.parametrize("version", SESSION_VERSIONS)
def test_ping_answers_empty_on_session_era(version: str) -> None:
    """(d) 9: ping -> {}."""
    assert Conn(tools_only(), version).ok("ping") == {}


def test_ping_does_not_exist_in_2026() -> None:
    """(a) 2026-07-28 removed ping: -32601."""
    error = Conn(tools_only()).err("ping")
    assert error["code"] == -32601 and error["data"] == {"method": "ping"}


@pytest.mark.parametrize("versions", [VERSIONS, SESSION_VERSIONS])
def test_ping_before_initialize_is_answered(versions: tuple[str, ...]) -> None:
    """(d) 4: before initialize the client may only ping; a bare ping gets {}."""
    response = raw(tools_only(versions=versions), {"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert response == {"jsonrpc": "2.0", "id": 3, "result": {}}


def test_notifications_before_initialize_are_ignored() -> None:
    peer = Peer("stdio", session=ServerSession())
    assert (
        dispatch(tools_only(), {"jsonrpc": "2.0", "method": "notifications/initialized"}, peer)
        is None
    )
    assert peer.session is not None and peer.session.initialized is False


# -- version selection for stateless requests ----------------------------------------------


def test_unsupported_version_is_32022_with_supported_and_requested() -> None:
    """(c) UnsupportedProtocolVersionError: -32022, data {supported, requested}."""
    response = raw(tools_only(), stateless_message("tools/list", version="1900-01-01"))
    assert response is not None
    check_response(STATELESS, "tools/list", response)
    validate(STATELESS, "UnsupportedProtocolVersionError", response)
    assert response["error"]["code"] == -32022
    assert response["error"]["data"] == {"supported": list(VERSIONS), "requested": "1900-01-01"}


def test_session_era_version_in_meta_is_32022_on_a_dual_runtime() -> None:
    """A stateless request naming a session-era version cannot be served statelessly."""
    response = raw(tools_only(), stateless_message("tools/list", version="2025-11-25"))
    assert response is not None
    assert response["error"]["code"] == -32022
    assert response["error"]["data"]["requested"] == "2025-11-25"


def test_32022_lists_only_the_runtime_s_enabled_versions() -> None:
    rt = tools_only(versions=[STATELESS])
    response = raw(rt, stateless_message("server/discover", version="2025-11-25"))
    assert response is not None
    assert response["error"]["data"] == {"supported": [STATELESS], "requested": "2025-11-25"}


@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        {"_meta": {}},
        {"_meta": {CC: {}}},
        {"_meta": "2026-07-28"},
        {"_meta": {PV: STATELESS}},
        {"_meta": {PV: STATELESS, CC: []}},
        {"_meta": {PV: STATELESS, CC: None}},
        {"_meta": {PV: 2026, CC: {}}},
    ],
)
def test_missing_or_malformed_required_meta_is_32602(params: dict[str, Any] | None) -> None:
    """(b) protocolVersion and clientCapabilities MUST be on every 2026 request -> else -32602."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    if params is not None:
        message["params"] = params
    response = raw(tools_only(), message)
    assert response is not None
    check_response(STATELESS, "tools/list", response)
    assert response["error"]["code"] == -32602


def test_malformed_client_info_and_log_level_are_32602() -> None:
    """(b)/(n) clientInfo must be an Implementation object; an unknown logLevel is -32602."""
    conn = Conn(tools_only())
    assert (
        conn.err("tools/list", meta={"io.modelcontextprotocol/clientInfo": "me"})["code"] == -32602
    )
    assert (
        conn.err("tools/list", meta={"io.modelcontextprotocol/logLevel": "loud"})["code"] == -32602
    )
    assert conn.ok("tools/list", meta={"io.modelcontextprotocol/logLevel": "warning"})["tools"]


def test_a_session_era_only_runtime_answers_the_discover_probe_like_a_session_era_server() -> None:
    """(c) a session-era-only server answers the stateless probe -32601, never -32022 (the client falls back)."""
    rt = tools_only(versions=list(SESSION_VERSIONS))
    response = raw(rt, stateless_message("server/discover"))
    assert response is not None
    assert response["error"]["code"] == -32601
    assert response["error"]["data"] == {"method": "server/discover"}


def test_a_session_era_only_runtime_refuses_requests_before_initialize() -> None:
    """A session-era-only runtime answers catalog methods before initialize with -32600 "not initialized"."""
    rt = tools_only(versions=list(SESSION_VERSIONS))
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        stateless_message("tools/call", {"name": "echo"}),
    ):
        response = raw(rt, message)
        assert response is not None and response["error"]["code"] == -32600
        assert "initialize" in response["error"]["message"]
    response = raw(rt, {"jsonrpc": "2.0", "id": 1, "method": "no/such"})
    assert response is not None and response["error"]["code"] == -32601


def test_initialized_session_wins_over_meta_protocol_version() -> None:
    """Once initialize ran on the peer, its version serves every request, whatever _meta says."""
    conn = Conn(example_runtime(), "2025-11-25")
    response = dispatch(conn.runtime, stateless_message("server/discover"), conn.peer)
    assert response is not None and response["error"]["code"] == -32601
    response = dispatch(conn.runtime, stateless_message("tools/list"), conn.peer)
    assert response is not None
    assert "resultType" not in response["result"] and "ttlMs" not in response["result"]


def test_a_stateless_request_on_a_session_peer_before_initialize_is_served_statelessly() -> None:
    """stdio peers carry a session; without initialize, _meta decides (dual-era server)."""
    conn = Conn(example_runtime(), STATELESS, kind="stdio")
    assert conn.ok("tools/list")["resultType"] == "complete"
    assert conn.peer.session is not None and conn.peer.session.version is None


# -- catalogs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method",
    [
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "tasks/get",
        "sampling/createMessage",
        "elicitation/create",
        "roots/list",
        "notifications/cancelled",
        "no/such/method",
    ],
)
def test_methods_outside_the_2026_client_request_catalog_are_32601(method: str) -> None:
    """(a) a method that is not a 2026 client request -> -32601 with data.method."""
    error = Conn(example_runtime()).err(method)
    assert error == {
        "code": -32601,
        "message": f"Method not found: {method}",
        "data": {"method": method},
    }


def test_subscriptions_listen_is_not_served_without_a_subscription_source() -> None:
    error = Conn(example_runtime()).err(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
    )
    assert error["code"] == -32601


@pytest.mark.parametrize("version", SESSION_VERSIONS)
@pytest.mark.parametrize(
    "method",
    [
        "server/discover",
        "subscriptions/listen",
        "logging/setLevel",
        "resources/subscribe",
        "tasks/list",
        "x/y",
    ],
)
def test_methods_the_session_era_server_does_not_serve_are_32601(version: str, method: str) -> None:
    """(a) session-era catalogs; methods behind capabilities the server does not advertise -> -32601."""
    error = Conn(example_runtime(), version).err(
        method, {"level": "info", "uri": "notes://welcome"}
    )
    assert error["code"] == -32601
    assert error["data"]["method"] == method


CAPABILITY_GATED = [
    ("prompts/list", {}),
    ("prompts/get", {"name": "review"}),
    (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": ""}},
    ),
    ("resources/list", {}),
    ("resources/templates/list", {}),
    ("resources/read", {"uri": "notes://welcome"}),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("method", "params"), CAPABILITY_GATED)
def test_methods_behind_unadvertised_capabilities_are_32601(
    version: str, method: str, params: dict[str, Any]
) -> None:
    """(g) -32601 for a method behind a server capability that was not advertised."""
    conn = Conn(tools_only(), version)
    caps = (
        conn.init_result["capabilities"]
        if conn.init_result
        else conn.ok("server/discover")["capabilities"]
    )
    assert caps == {"tools": {"listChanged": True}}
    error = conn.err(method, params)
    assert error["code"] == -32601 and error["data"] == {"method": method}


@pytest.mark.parametrize("version", VERSIONS)
def test_tools_methods_without_tools_are_32601(version: str) -> None:
    rt = Runtime("p", "1")
    rt.add_prompt("p", lambda a, ctx: "hi")
    conn = Conn(rt, version)
    assert conn.err("tools/list")["code"] == -32601
    assert conn.err("tools/call", {"name": "x"})["code"] == -32601


def test_templates_alone_advertise_resources() -> None:
    rt = Runtime("r", "1")
    rt.add_resource_template("notes://{name}", lambda uri, v, ctx: v["name"], name="note")
    conn = Conn(rt)
    assert conn.ok("server/discover")["capabilities"] == {
        "resources": {"subscribe": True, "listChanged": True}
    }
    assert conn.ok("resources/list")["resources"] == []
    assert len(conn.ok("resources/templates/list")["resourceTemplates"]) == 1


# -- envelopes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "code", "has_id"),
    [
        ([1, 2], -32600, False),
        ("tools/list", -32600, False),
        ({"jsonrpc": "2.0", "id": True, "method": "tools/list"}, -32600, False),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, -32600, False),
        ({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, -32600, False),
        ({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, -32600, True),
        ({"id": 1, "method": "tools/list"}, -32600, True),
        ({"jsonrpc": "2.0", "id": 1, "method": 7}, -32600, True),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}, -32602, True),
    ],
)
def test_malformed_envelopes_get_error_responses(message: Any, code: int, has_id: bool) -> None:
    """dispatch never raises for bad client input: it returns a JSON-RPC error."""
    response = raw(tools_only(), message)
    assert response is not None
    check_response(STATELESS, None, response)
    assert response["error"]["code"] == code
    assert ("id" in response) is has_id


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}},
        {"jsonrpc": "2.0", "result": {}},
        {"jsonrpc": "2.0", "method": "notifications/unknown"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "x"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}},
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1},
        },
        {"jsonrpc": "2.0", "method": 5},
    ],
)
def test_responses_and_notifications_get_no_response(message: dict[str, Any]) -> None:
    """Notifications (known or not) and responses sent to the server are answered with nothing."""
    assert raw(tools_only(), message) is None


def test_string_and_integer_ids_are_echoed() -> None:
    rt = tools_only()
    for rid in ("abc", 0, -5, 2**40):
        message = stateless_message("tools/list")
        message["id"] = rid
        response = raw(rt, message)
        assert response is not None and response["id"] == rid and "result" in response
