"""``snodo.protocol.serving.http_rules``: what the Streamable HTTP server decides about a
request's headers, era, status, ``Accept``, ``Origin`` and ``Host``."""

from __future__ import annotations

from typing import Any

import pytest

from snodo.protocol.meta import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY
from snodo.protocol.serving import http_rules as rules

STATELESS = "2026-07-28"
META = {PROTOCOL_VERSION_KEY: STATELESS, CLIENT_CAPABILITIES_KEY: {}}
BOTH = {"serves_stateless": True, "serves_session": True}


def _headers(**values: str) -> dict[str, list[str]]:
    return rules.header_map([(name.replace("_", "-"), value) for name, value in values.items()])


# -- header values ---------------------------------------------------------------------------


def test_header_map_lower_cases_names_and_strips_values() -> None:
    headers = rules.header_map([("Mcp-Method", " tools/call\t"), ("MCP-METHOD", "x")])
    assert headers == {"mcp-method": ["tools/call", "x"]}
    assert rules.first(headers, "mcp-method") == "tools/call"
    assert rules.first(headers, "mcp-name") is None


def test_x_mcp_header_annotations_must_be_valid() -> None:
    """(f) x-mcp-header constraints: only statically reachable string/integer/boolean
    properties, token names, unique ignoring case; otherwise nothing is checked."""
    ok = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "x-mcp-header": "A"},
            "o": {"type": "object", "properties": {"b": {"type": "integer", "x-mcp-header": "B"}}},
        },
    }
    params = rules.header_params(ok)
    assert params is not None and [(p.path, p.name) for p in params] == [
        (("a",), "A"),
        (("o", "b"), "B"),
    ]
    bad_schemas = [
        {"properties": {"a": {"type": "number", "x-mcp-header": "A"}}},
        {"properties": {"a": {"type": "string", "x-mcp-header": "Has Space"}}},
        {
            "properties": {
                "a": {"type": "string", "x-mcp-header": "A"},
                "b": {"type": "string", "x-mcp-header": "a"},
            }
        },
        {"properties": {"l": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}},
        {"anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]},
    ]
    for schema in bad_schemas:
        assert rules.header_params(schema) is None, schema


def test_header_scalars_render_as_a_client_mirrors_them() -> None:
    assert rules.render_header_scalar(True) == "true"
    assert rules.render_header_scalar(False) == "false"
    assert rules.render_header_scalar(42) == "42"
    assert rules.render_header_scalar("x") == "x"
    assert rules.render_header_scalar(2.0, "integer") == "2"
    assert rules.render_header_scalar(2.5, "integer") is None
    assert rules.render_header_scalar(None) is None


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "n": {"type": "integer", "x-mcp-header": "N"},
    },
}


@pytest.mark.parametrize(
    ("arguments", "headers", "ok"),
    [
        ({"region": "eu", "n": 3}, {"mcp_param_region": "eu", "mcp_param_n": "3"}, True),
        ({"region": "eu"}, {"mcp_param_region": "eu"}, True),
        ({"n": 3}, {"mcp_param_n": "3.0"}, True),  # the same integer
        ({"n": 3}, {"mcp_param_n": "3.5"}, False),
        ({"region": "eu"}, {}, False),  # missing
        ({}, {"mcp_param_region": "eu"}, False),  # present without its argument
        ({"region": "eu"}, {"mcp_param_region": "us"}, False),
        ({"region": "é"}, {"mcp_param_region": "=?base64?w6k=?="}, True),
        ({"region": "é"}, {"mcp_param_region": "é"}, False),  # not visible ASCII
    ],
)
def test_mcp_param_headers_mirror_their_arguments(
    arguments: dict[str, Any], headers: dict[str, str], ok: bool
) -> None:
    params = rules.header_params(SCHEMA)
    assert params is not None
    problem = rules.check_params(params, arguments, _headers(**headers))
    assert (problem is None) is ok
    if problem is not None:
        assert problem.code == -32020


def test_a_repeated_mcp_param_header_is_a_mismatch() -> None:
    params = rules.header_params(SCHEMA)
    assert params is not None
    headers = rules.header_map([("Mcp-Param-Region", "eu"), ("mcp-param-region", "eu")])
    problem = rules.check_params(params, {"region": "eu"}, headers)
    assert problem is not None and "more than once" in problem.message


# -- the stateless era's request rules -------------------------------------------------------


def _check(
    method: str, params: dict[str, Any] | None, schema: Any = None, **headers: str
) -> int | None:
    problem = rules.check_stateless_request(method, params, _headers(**headers), schema)
    return None if problem is None else problem.code


def test_the_headers_must_mirror_the_body() -> None:
    call = {"name": "echo", "_meta": META}
    good = {"mcp_protocol_version": STATELESS, "mcp_method": "tools/call", "mcp_name": "echo"}
    assert _check("tools/call", call, **good) is None
    assert _check("tools/call", call, **{**good, "mcp_name": "other"}) == -32020
    assert _check("tools/call", call, **{**good, "mcp_method": "tools/list"}) == -32020
    assert _check("tools/call", call, **{**good, "mcp_protocol_version": "2025-11-25"}) == -32020
    missing = dict(good)
    del missing["mcp_name"]
    assert _check("tools/call", call, **missing) == -32020
    assert _check("tools/list", {"_meta": META}, mcp_method="tools/list") == -32020


def test_a_malformed_meta_is_invalid_params_once_the_version_header_is_there() -> None:
    headers = {"mcp_protocol_version": STATELESS, "mcp_method": "tools/list"}
    assert _check("tools/list", {}, **headers) == -32602
    assert _check("tools/list", {"_meta": {PROTOCOL_VERSION_KEY: STATELESS}}, **headers) == -32602
    assert _check("tools/list", {}, mcp_method="tools/list") == -32020


def test_a_tools_call_checks_the_tools_header_annotations() -> None:
    call = {"name": "t", "arguments": {"region": "eu"}, "_meta": META}
    headers = {"mcp_protocol_version": STATELESS, "mcp_method": "tools/call", "mcp_name": "t"}
    assert _check("tools/call", call, SCHEMA, **headers) == -32020
    assert _check("tools/call", call, SCHEMA, **headers, mcp_param_region="eu") is None
    assert _check("tools/call", call, None, **headers) is None


def test_stateless_era_errors_have_their_http_status() -> None:
    def status(code: int | None) -> int:
        if code is None:
            return rules.stateless_status({"jsonrpc": "2.0", "id": 1, "result": {}})
        return rules.stateless_status({"error": {"code": code, "message": "m"}})

    assert [status(c) for c in (-32700, -32600, -32020, -32021, -32022)] == [400] * 5
    assert status(-32601) == 404
    assert status(-32602) == 200
    assert status(None) == 200


# -- routing ---------------------------------------------------------------------------------


def test_the_body_then_the_headers_decide_the_era_of_a_post() -> None:
    meta = {"_meta": {PROTOCOL_VERSION_KEY: STATELESS}}
    route = rules.route_post
    assert route("request", "tools/list", meta, {}, **BOTH) == "stateless"
    assert route("request", "initialize", {}, {}, **BOTH) == "initialize"
    assert route("request", "tools/list", {}, {"mcp-session-id": ["s"]}, **BOTH) == "session"
    assert route("request", "tools/list", {}, {}, **BOTH) == "stateless"
    session_only = {"serves_stateless": False, "serves_session": True}
    assert route("request", "tools/list", meta, {}, **session_only) == "session"
    stateless_only = {"serves_stateless": True, "serves_session": False}
    assert route("request", "initialize", {}, {}, **stateless_only) == "stateless"
    by_header = {"mcp-protocol-version": [STATELESS]}
    assert route("notification", "x", None, by_header, **BOTH) == "stateless"
    assert route("notification", "x", None, {"mcp-protocol-version": ["2025-06-18"]}, **BOTH) == (
        "session"
    )
    assert route("response", None, None, {}, **BOTH) == "session"
    assert route("response", None, None, {}, **stateless_only) == "stateless"


# -- content negotiation, origin, host -------------------------------------------------------


def test_accept_lists_what_the_client_takes() -> None:
    assert rules.accepts("application/json, text/event-stream", "text/event-stream")
    assert rules.accepts("*/*", "application/json")
    assert rules.accepts("text/*;q=0.5, application/json", "text/event-stream")
    assert not rules.accepts("text/event-stream;q=0, application/json", "text/event-stream")
    assert not rules.accepts("text/event-stream;q=x", "text/event-stream")
    assert not rules.accepts(None, "application/json")


def test_the_body_must_be_json() -> None:
    assert rules.is_json_content_type("application/json")
    assert rules.is_json_content_type("Application/JSON; charset=utf-8")
    assert not rules.is_json_content_type("text/plain")
    assert not rules.is_json_content_type(None)


def test_origins_and_hosts() -> None:
    assert rules.origin_allowed("http://127.0.0.1:8080", None)
    assert rules.origin_allowed("https://LOCALHOST", None)
    assert rules.origin_allowed("http://[::1]:9", None)
    assert not rules.origin_allowed("http://localhost.evil.example", None)
    assert not rules.origin_allowed("http://user@localhost", None)
    assert not rules.origin_allowed("null", None)
    assert rules.origin_allowed("https://app.example/", frozenset({"https://app.example"}))
    assert not rules.origin_allowed("http://localhost", frozenset({"https://app.example"}))
    assert rules.host_allowed("localhost:8000", None)
    assert rules.host_allowed("[::1]:8000", None)
    assert not rules.host_allowed("evil.example", None)
    assert not rules.host_allowed(None, None)
    assert rules.host_allowed("api.example:443", frozenset({"api.example"}))
    assert rules.is_loopback("127.0.0.2") and not rules.is_loopback("0.0.0.0")


def test_a_session_id_is_visible_ascii() -> None:
    assert rules.visible_ascii("abc-_~!")
    assert not rules.visible_ascii("")
    assert not rules.visible_ascii("a b")
    assert not rules.visible_ascii("é")
