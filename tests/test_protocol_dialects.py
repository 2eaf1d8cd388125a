"""The Dialect catalogs equal the unions of each version's published schema, and the catalog check.

Reference: "request/4 refuses a method the negotiated dialect's catalog does not define as a
client request, with -32601 before anything is sent ... On 2026-07-28 a method the catalog lists
only as a server request or a notification is refused the same way, and an unlisted method is
sent as it is".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from snodo.protocol import dialects, headers
from snodo.protocol.dialects import Dialect
from snodo.protocol.errors import METHOD_NOT_FOUND, McpError

SCHEMA_DIR = Path(__file__).parent / "data" / "schema"
VERSIONS = ("2026-07-28", "2025-11-25", "2025-06-18")
OLDER = ("2025-03-26", "2024-11-05")
EVERY = VERSIONS + OLDER


def _definitions(version: str) -> dict[str, Any]:
    schema = json.loads((SCHEMA_DIR / version / "schema.json").read_text(encoding="utf-8"))
    defs = schema.get("$defs") or schema.get("definitions")
    assert isinstance(defs, dict), f"{version}: schema has no $defs/definitions"
    return defs


def _resolve(defs: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    name = ref.rsplit("/", 1)[-1]
    return _resolve(defs, defs[name])


def _members(defs: dict[str, Any], union: dict[str, Any]) -> list[dict[str, Any]]:
    """A union's members: an anyOf/oneOf list, a single $ref, or one inline object."""
    for key in ("anyOf", "oneOf"):
        if key in union:
            members: list[dict[str, Any]] = []
            for member in union[key]:
                members.extend(_members(defs, _resolve(defs, member)))
            return members
    if "$ref" in union:
        return _members(defs, _resolve(defs, union))
    return [union]


def _methods(version: str, union_name: str) -> frozenset[str]:
    defs = _definitions(version)
    methods = set()
    for member in _members(defs, defs[union_name]):
        method = member["properties"]["method"]["const"]
        assert isinstance(method, str)
        methods.add(method)
    return frozenset(methods)


def _server_request_union(version: str) -> str:
    # 2026-07-28 has no ServerRequest union: server asks travel as InputRequest members.
    return "ServerRequest" if "ServerRequest" in _definitions(version) else "InputRequest"


@pytest.mark.parametrize("version", EVERY)
def test_client_requests_equal_schema_client_request_union(version: str) -> None:
    """The catalogs are the schema's ClientRequest union (the reference's dialect profiles)."""
    assert dialects.get(version).client_requests == _methods(version, "ClientRequest")


@pytest.mark.parametrize("version", EVERY)
def test_server_requests_equal_schema_server_request_union(version: str) -> None:
    """Server requests: ServerRequest, or 2026-07-28's InputRequest union (no ServerRequest)."""
    union = _server_request_union(version)
    if version == "2026-07-28":
        assert union == "InputRequest"
    assert dialects.get(version).server_requests == _methods(version, union)


@pytest.mark.parametrize("version", EVERY)
def test_client_notifications_equal_schema_union(version: str) -> None:
    """ClientNotification (2026-07-28's is a single inline member, notifications/cancelled)."""
    assert dialects.get(version).client_notifications == _methods(version, "ClientNotification")


@pytest.mark.parametrize("version", EVERY)
def test_server_notifications_equal_schema_union(version: str) -> None:
    assert dialects.get(version).server_notifications == _methods(version, "ServerNotification")


def test_supported_versions_newest_first() -> None:
    """Without :protocol the client allows every version it speaks, newest first."""
    assert dialects.SUPPORTED_VERSIONS == VERSIONS
    assert [dialects.get(v).stateless for v in VERSIONS] == [True, False, False]


def _refused(dialect: Dialect, method: str) -> McpError:
    with pytest.raises(McpError) as info:
        dialect.check_client_request(method)
    return info.value


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", *OLDER])
def test_session_era_refuses_anything_but_a_client_request(version: str) -> None:
    """Session-era request/4 refuses a method that is not a client request with -32601."""
    dialect = dialects.get(version)
    for method in dialect.client_requests:
        dialect.check_client_request(method)  # allowed: no exception
    others = (
        (dialect.all_methods - dialect.client_requests)
        | {"server/discover", "subscriptions/listen", "x.example/extension"}
    ) - dialect.client_requests
    for method in sorted(others):
        error = _refused(dialect, method)
        assert error.code == METHOD_NOT_FOUND
        assert error.data == {"method": method, "protocolVersion": version}


def test_2026_refuses_server_requests_and_notifications() -> None:
    """On 2026-07-28 a method listed only as a server request or a notification is refused."""
    dialect = dialects.get("2026-07-28")
    listed_elsewhere = dialect.all_methods - dialect.client_requests
    assert "elicitation/create" in listed_elsewhere
    assert "notifications/progress" in listed_elsewhere
    for method in sorted(listed_elsewhere):
        error = _refused(dialect, method)
        assert error.code == METHOD_NOT_FOUND
        assert error.data == {"method": method, "protocolVersion": "2026-07-28"}


def test_2026_lets_unlisted_extension_methods_through() -> None:
    """On 2026-07-28 an unlisted method is sent as it is (negotiated extensions add methods)."""
    dialect = dialects.get("2026-07-28")
    for method in ("tasks/get", "io.example/ext/run", "ping", "initialize"):
        assert method not in dialect.all_methods
        dialect.check_client_request(method)
    for method in dialect.client_requests:
        dialect.check_client_request(method)


# -- the older, opt-in versions (decision 0039) -----------------------------------------------


def test_every_version_newest_first_and_the_older_ones_opt_in() -> None:
    """ALL_VERSIONS is every version snodo can speak, newest first; the default set is unchanged
    and the older ones are exactly what it adds."""
    assert dialects.ALL_VERSIONS == EVERY
    assert list(EVERY) == sorted(EVERY, reverse=True)
    assert dialects.OPT_IN_VERSIONS == OLDER
    assert set(dialects.DIALECTS) == set(VERSIONS)
    assert all(not dialects.get(v).stateless for v in OLDER)


@pytest.mark.parametrize("version", EVERY)
def test_batches_are_the_versions_whose_schema_defines_them(version: str) -> None:
    """Only 2025-03-26 has JSONRPCBatchRequest/Response (2025-06-18 removed them)."""
    defined = "JSONRPCBatchResponse" in _definitions(version)
    assert dialects.get(version).batches is defined
    assert defined is (version == "2025-03-26")


@pytest.mark.parametrize("version", EVERY)
def test_declared_client_capabilities_follow_the_schema(version: str) -> None:
    """The client declares only the ClientCapabilities keys its version defines: no elicitation
    (and no tasks) before 2025-06-18; the newer versions pass every key through."""
    schema_keys = set(_definitions(version)["ClientCapabilities"]["properties"])
    given = {
        "roots": {"listChanged": True},
        "sampling": {},
        "elicitation": {"form": {}},
        "tasks": {},
        "experimental": {"x": {}},
    }
    declared = dialects.get(version).declared_capabilities(given)
    if version in OLDER:
        assert set(declared) == schema_keys == {"experimental", "roots", "sampling"}
        assert declared["roots"] == {"listChanged": True}
    else:
        assert declared == given
        assert "elicitation" in schema_keys


@pytest.mark.parametrize("version", OLDER)
def test_older_versions_refuse_newer_methods_before_sending(version: str) -> None:
    """Methods a newer version added are -32601 before anything is sent on an older
    connection; elicitation/create is not a server request there either."""
    dialect = dialects.get(version)
    assert "elicitation/create" not in dialect.server_requests
    assert "elicitation/create" in dialects.get("2025-06-18").server_requests
    for method in ("tasks/get", "tasks/list", "tasks/result", "tasks/cancel", "server/discover"):
        error = _refused(dialect, method)
        assert error.code == METHOD_NOT_FOUND
        assert error.data == {"method": method, "protocolVersion": version}
    dialect.check_client_request("completion/complete")  # 2024-11-05 defines it already


@pytest.mark.parametrize("version", EVERY)
def test_no_protocol_version_header_before_2025_06_18(version: str) -> None:
    """The header policy reads the dialect: MCP-Protocol-Version on POSTs after initialize and
    on stream GETs from 2025-06-18 on; before it only Mcp-Session-Id."""
    dialect = dialects.get(version)
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    post = headers.mcp_headers(dialect, message, session_id="s1")
    get = headers.stream_headers(dialect, "s1")
    sent = version not in OLDER
    assert dialect.protocol_version_header is sent
    assert (headers.MCP_PROTOCOL_VERSION in post) is sent
    assert (headers.MCP_PROTOCOL_VERSION in get) is sent
    if not dialect.stateless:
        assert post[headers.MCP_SESSION_ID] == get[headers.MCP_SESSION_ID] == "s1"
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
        assert headers.mcp_headers(dialect, init) == {}
