"""Version negotiation decisions (reference "Protocol versions"; Elixir notes "Version negotiation")."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snodo.protocol import negotiation as n
from snodo.protocol.dialects import ALL_VERSIONS, SUPPORTED_VERSIONS
from snodo.protocol.errors import CONNECTION_CLOSED, INVALID_PARAMS, McpError

NEW, MID, OLD = "2026-07-28", "2025-11-25", "2025-06-18"
ALL = (NEW, MID, OLD)
V0326, V1105 = "2025-03-26", "2024-11-05"
EVERY = (NEW, MID, OLD, V0326, V1105)


# -- allowed_versions ---------------------------------------------------------------------------


def test_no_protocol_allows_every_version_newest_first() -> None:
    """Without :protocol the client allows every version it speaks, newest first."""
    assert n.allowed_versions(None) == ALL == SUPPORTED_VERSIONS


def test_a_string_pins_one_version() -> None:
    """:protocol names one version."""
    assert n.allowed_versions(MID) == (MID,)


def test_a_list_is_reordered_into_preference_order_and_deduplicated() -> None:
    """The list is always reordered into the client's preference order."""
    assert n.allowed_versions([OLD, NEW, OLD]) == (NEW, OLD)
    assert n.allowed_versions((OLD, MID)) == (MID, OLD)


def test_an_empty_list_is_argument_misuse() -> None:
    with pytest.raises(ValueError):
        n.allowed_versions([])


@pytest.mark.parametrize("bad", [[NEW, 2026], [None], 7, b"2026-07-28", {NEW: True}])
def test_non_string_versions_are_argument_misuse(bad: Any) -> None:
    """The reference raises ArgumentError for a :protocol that is not a string or string list."""
    with pytest.raises(TypeError):
        n.allowed_versions(bad)


def test_an_unspoken_version_is_refused_before_connecting() -> None:
    """A version the client does not speak at all is -32602 with requested and supported."""
    with pytest.raises(McpError) as info:
        n.allowed_versions("2023-01-01")
    assert info.value.code == INVALID_PARAMS
    assert info.value.data == {"requested": "2023-01-01", "supported": list(EVERY)}


def test_an_unspoken_version_in_a_list_refuses_the_whole_list() -> None:
    with pytest.raises(McpError) as info:
        n.allowed_versions([NEW, "2024-10-07"])
    assert info.value.code == INVALID_PARAMS
    assert info.value.data == {"requested": [NEW, "2024-10-07"], "supported": list(EVERY)}


def test_the_older_versions_are_allowed_only_when_named() -> None:
    """Decision 0039: 2025-03-26 and 2024-11-05 are opt in; the default stays the three."""
    assert V0326 not in n.allowed_versions(None) and V1105 not in n.allowed_versions(None)
    assert n.allowed_versions(V1105) == (V1105,)
    assert n.allowed_versions([V1105, OLD, V0326]) == (OLD, V0326, V1105)
    assert n.allowed_versions(ALL_VERSIONS) == EVERY
    assert n.plan([V1105]) == n.Plan("initialize", V1105)
    assert n.plan(EVERY) == n.Plan("probe", NEW)
    assert n.probe_verdict(None, EVERY) == n.ProbeVerdict("fallback", MID)


def test_initialize_declares_only_what_the_older_version_defines() -> None:
    """No elicitation capability is declared when proposing 2025-03-26 or 2024-11-05."""
    caps = {"elicitation": {"form": {}}, "sampling": {}, "roots": {"listChanged": False}}
    for version in (V0326, V1105):
        params = n.initialize_params(version, caps, {"name": "c", "version": "1"})
        assert params["protocolVersion"] == version
        assert params["capabilities"] == {"sampling": {}, "roots": {"listChanged": False}}
    assert n.initialize_params(OLD, caps, {})["capabilities"] == caps


@pytest.mark.parametrize("version", [V0326, V1105])
def test_a_server_on_an_older_version_not_allowed_is_refused_with_how_to_allow(
    version: str,
) -> None:
    """-32602 as today, and the message names the server's version and how to allow it."""
    with pytest.raises(McpError) as info:
        n.initialize_verdict({"protocolVersion": version}, SUPPORTED_VERSIONS)
    assert info.value.code == INVALID_PARAMS
    assert info.value.data == {"negotiated": version, "requested": list(SUPPORTED_VERSIONS)}
    message = info.value.message
    assert f"the server speaks {version}" in message
    assert f"protocol=['{NEW}', '{MID}', '{OLD}', '{version}']" in message
    assert "protocol=snodo.ALL_VERSIONS" in message
    allowed = n.allowed_versions([*SUPPORTED_VERSIONS, version])
    assert n.initialize_verdict({"protocolVersion": version}, allowed).version == version


def test_a_discover_answer_listing_only_older_versions_says_how_to_allow() -> None:
    response = {"jsonrpc": "2.0", "id": 1, "result": {"supportedVersions": [V0326, V1105]}}
    with pytest.raises(McpError) as info:
        n.probe_verdict(response, SUPPORTED_VERSIONS)
    assert info.value.code == INVALID_PARAMS
    assert "the server speaks 2025-03-26" in info.value.message
    assert n.probe_verdict(response, EVERY) == n.ProbeVerdict("initialize", V0326)


def test_a_version_neither_allowed_nor_opt_in_gets_no_hint() -> None:
    with pytest.raises(McpError) as info:
        n.initialize_verdict({"protocolVersion": OLD}, [MID])
    assert "ALL_VERSIONS" not in info.value.message


@given(st.lists(st.sampled_from(EVERY), min_size=1))
def test_any_list_of_spoken_versions_comes_back_ordered(versions: list[str]) -> None:
    allowed = n.allowed_versions(versions)
    assert set(allowed) == set(versions)
    assert list(allowed) == sorted(allowed, key=EVERY.index)


@given(st.text())
def test_any_other_string_is_refused_with_32602(version: str) -> None:
    if version in ALL:
        assert n.allowed_versions(version) == (version,)
        return
    with pytest.raises(McpError) as info:
        n.allowed_versions(version)
    assert info.value.code == INVALID_PARAMS


# -- plan ---------------------------------------------------------------------------------------


def test_stateless_only_sends_nothing_at_connect() -> None:
    """A stateless pin sends nothing at connect time."""
    assert n.plan([NEW]) == n.Plan("stateless", NEW)


def test_session_era_only_initializes_at_once_with_the_highest() -> None:
    """A session-era pin (or a list from one era) sends initialize at once."""
    assert n.plan([MID]) == n.Plan("initialize", MID)
    assert n.plan([OLD, MID]) == n.Plan("initialize", MID)


def test_both_eras_probe_with_the_newest_stateless() -> None:
    """When the allowed versions span both eras, connect probes with server/discover (the
    verdict picks the fallback, see below)."""
    assert n.plan(ALL) == n.Plan("probe", NEW)
    assert n.plan([OLD, NEW]) == n.Plan("probe", NEW)


def test_plan_refuses_an_empty_allowed_list() -> None:
    with pytest.raises(ValueError):
        n.plan([])


# -- probe_verdict ------------------------------------------------------------------------------


def _discover(versions: Any, **extra: Any) -> dict[str, Any]:
    result = {"resultType": "complete", "supportedVersions": versions, "capabilities": {}}
    result.update(extra)
    return {"jsonrpc": "2.0", "id": 1, "result": result}


def test_supported_versions_highest_allowed_wins() -> None:
    """A result with supportedVersions: the highest allowed version the server lists wins."""
    assert n.probe_verdict(_discover([OLD, NEW]), ALL) == n.ProbeVerdict("use", NEW)


def test_a_listed_session_era_version_is_initialized_on_the_same_connection() -> None:
    """Elixir notes: when that is a session-era version, initialize on the same connection."""
    assert n.probe_verdict(_discover([MID, "2099-01-01"]), ALL) == n.ProbeVerdict("initialize", MID)
    assert n.probe_verdict(_discover([OLD, MID]), [NEW, OLD]) == n.ProbeVerdict("initialize", OLD)


def test_no_common_version_is_32602_with_requested_and_supported() -> None:
    """A server that supports none of the allowed versions is -32602 (requested, supported)."""
    with pytest.raises(McpError) as info:
        n.probe_verdict(_discover(["2099-01-01", MID]), [NEW, OLD])
    assert info.value.code == INVALID_PARAMS
    assert info.value.data == {"requested": [NEW, OLD], "supported": ["2099-01-01", MID]}


@pytest.mark.parametrize(
    "response",
    [
        None,  # timeout or transport failure
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Invalid params"}},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": [NEW], "requested": NEW},
            },
        },
        {"jsonrpc": "2.0", "id": 1, "error": "garbage"},
        {"jsonrpc": "2.0", "id": 1, "result": [NEW]},
        {"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {}}},
        {"jsonrpc": "2.0", "id": 1, "result": {"supportedVersions": NEW}},
        {"jsonrpc": "2.0", "id": 1, "result": {"supportedVersions": None}},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "result": {"supportedVersions": [NEW]}, "error": {}},
        _discover([NEW], resultType="input_required", inputRequests={}),
    ],
)
def test_any_other_answer_falls_back_to_initialize_with_the_highest_session_era(
    response: Any,
) -> None:
    """Any other answer, whatever the error code or shape, and a timeout, mean: reopen and
    initialize with the highest allowed session-era version (-32022 is not special-cased)."""
    assert n.probe_verdict(response, ALL) == n.ProbeVerdict("fallback", MID)
    assert n.probe_verdict(response, [NEW, OLD]) == n.ProbeVerdict("fallback", OLD)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )
)
def test_untrusted_probe_answers_never_crash(result: Any) -> None:
    """Whatever the server answers, the verdict is use/initialize/fallback or a -32602."""
    try:
        verdict = n.probe_verdict({"jsonrpc": "2.0", "id": 1, "result": result}, ALL)
    except McpError as error:
        assert error.code == INVALID_PARAMS
        assert isinstance(result, dict)
        assert isinstance(result.get("supportedVersions"), list)
        return
    assert verdict.action in ("use", "initialize", "fallback")
    assert verdict.version in ALL


def test_probe_verdict_needs_a_fallback_version() -> None:
    with pytest.raises(ValueError):
        n.probe_verdict(None, [NEW])


# -- direct_version -----------------------------------------------------------------------------


def test_direct_takes_the_highest_allowed_enabled_version() -> None:
    """direct/2: the highest allowed version among the runtime's enabled ones, no probe."""
    assert n.direct_version(ALL, [OLD, NEW]) == NEW
    assert n.direct_version(ALL, [OLD, MID]) == MID
    assert n.direct_version([OLD], [OLD, MID, NEW]) == OLD


def test_direct_with_nothing_in_common_is_32602() -> None:
    with pytest.raises(McpError) as info:
        n.direct_version([NEW], [MID, OLD])
    assert info.value.code == INVALID_PARAMS
    assert info.value.data == {"requested": [NEW], "supported": [MID, OLD]}


# -- initialize ---------------------------------------------------------------------------------


def test_initialize_carries_version_capabilities_and_client_info() -> None:
    """initialize carries :client_capabilities and :client_info."""
    caps = {"roots": {"listChanged": False}}
    info = {"name": "app", "version": "1"}
    params = n.initialize_params(MID, caps, info)
    assert params == {"protocolVersion": MID, "capabilities": caps, "clientInfo": info}
    params["capabilities"]["x"] = 1
    assert "x" not in caps


def test_initialize_verdict_builds_the_session() -> None:
    """The session holds the negotiated version, the session id, serverInfo, capabilities and
    instructions from the result."""
    result = {
        "protocolVersion": OLD,
        "serverInfo": {"name": "s", "version": "2"},
        "capabilities": {"tools": {}},
        "instructions": "be nice",
    }
    session = n.initialize_verdict(result, ALL, session_id="abc")
    assert session == n.Session(OLD, "abc", {"name": "s", "version": "2"}, {"tools": {}}, "be nice")


def test_initialize_verdict_defaults() -> None:
    session = n.initialize_verdict({"protocolVersion": MID}, [MID])
    assert session == n.Session(MID, None, None, {}, None)


def test_a_negotiated_version_the_client_does_not_allow_is_32602() -> None:
    """The server's protocolVersion must be one the client allows: -32602 negotiated/requested."""
    with pytest.raises(McpError) as info:
        n.initialize_verdict({"protocolVersion": OLD}, [MID])
    assert info.value.code == INVALID_PARAMS
    assert info.value.data == {"negotiated": OLD, "requested": [MID]}
    with pytest.raises(McpError) as info:
        n.initialize_verdict({"protocolVersion": "2024-11-05"}, [MID, OLD])
    assert info.value.data == {"negotiated": "2024-11-05", "requested": [MID, OLD]}


@pytest.mark.parametrize(
    "result",
    [
        None,
        [],
        "x",
        {},
        {"protocolVersion": 20250618},
        {"protocolVersion": MID, "resultType": "input_required", "inputRequests": {}},
    ],
)
def test_an_unusable_initialize_result_is_32000(result: Any) -> None:
    """Elixir notes: a result without protocolVersion, or input_required, is -32000."""
    with pytest.raises(McpError) as info:
        n.initialize_verdict(result, [MID])
    assert info.value.code == CONNECTION_CLOSED
    assert info.value.kind == "transport"
    assert info.value.cause == ("invalid_initialize_result", result)


def test_session_is_frozen() -> None:
    session = n.Session(MID, None, None, {}, None)
    with pytest.raises(AttributeError):
        session.version = OLD  # type: ignore[misc]


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [([NEW], True), (ALL, True), ([OLD, NEW], True), ([MID], False), ([MID, OLD], False)],
)
def test_standard_headers_are_announced_whenever_a_stateless_version_is_allowed(
    allowed: list[str], expected: bool
) -> None:
    """SEP-2243: a client that also speaks 2026-07-28 sends Mcp-Method/Mcp-Name on every POST,
    after a fallback to the session era too."""
    assert n.announces_standard_headers(allowed) is expected
