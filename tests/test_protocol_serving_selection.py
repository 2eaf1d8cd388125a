"""``snodo.protocol.serving.selection``: the envelope dispatch accepts, which version serves a
request, and the stateless era's ``_meta`` rules."""

from __future__ import annotations

from typing import Any

import pytest

from snodo.protocol.dialects import DIALECTS, Dialect
from snodo.protocol.errors import McpError
from snodo.protocol.meta import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    LOG_LEVEL_KEY,
    PROTOCOL_VERSION_KEY,
)
from snodo.protocol.serving.selection import (
    CAPABILITIES_PROBLEM,
    INITIALIZE,
    PONG,
    Refused,
    check_envelope,
    error_reply,
    meta_keys_problem,
    progress_token_problem,
    select_version,
    stateless_meta_problem,
    unsupported_version,
)

STATELESS = {v: d for v, d in DIALECTS.items() if d.stateless}
SESSION = {v: d for v, d in DIALECTS.items() if not d.stateless}
ENABLED = tuple(DIALECTS)
LATEST_STATELESS = next(iter(STATELESS))


# -- the envelope ----------------------------------------------------------------------------


def test_a_request_notification_and_response_are_told_apart() -> None:
    assert check_envelope({"jsonrpc": "2.0", "id": 1, "method": "ping"}) is None
    assert check_envelope({"jsonrpc": "2.0", "id": "a", "method": "x", "params": {}}) is None
    assert check_envelope({"jsonrpc": "2.0", "method": "notifications/x"}) == "notification"
    assert check_envelope({"method": 3}) == "notification"  # dispatch ignores it
    assert check_envelope({"jsonrpc": "2.0", "id": 1, "result": {}}) == "response"
    assert check_envelope({"jsonrpc": "2.0", "id": 1, "error": {}}) == "response"


@pytest.mark.parametrize(
    ("message", "rid", "code"),
    [
        ([], None, -32600),
        ("ping", None, -32600),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None, -32600),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None, -32600),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, 1, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": 7}, 1, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": []}, 1, -32602),
    ],
)
def test_anything_else_is_refused_with_the_id_when_it_had_a_valid_one(
    message: Any, rid: int | None, code: int
) -> None:
    verdict = check_envelope(message)
    assert isinstance(verdict, Refused)
    assert verdict.id == rid and verdict.error.code == code


# -- the version -----------------------------------------------------------------------------


def select(
    method: str,
    meta: Any = None,
    session_version: str | None = None,
    stateless: dict[str, Dialect] = STATELESS,
    session: dict[str, Dialect] = SESSION,
) -> Any:
    """The selection, or the error it raises."""
    enabled = (*stateless, *session)
    try:
        return select_version(method, meta, session_version, stateless, session, enabled)
    except McpError as exc:
        return exc


def test_initialize_opens_a_session_unless_it_is_a_stateless_era_request() -> None:
    assert select("initialize") is INITIALIZE
    assert select("initialize", {PROTOCOL_VERSION_KEY: "2025-11-25"}) is INITIALIZE
    refused = select("initialize", {PROTOCOL_VERSION_KEY: LATEST_STATELESS})
    assert isinstance(refused, McpError) and refused.code == -32601
    assert select("initialize", {PROTOCOL_VERSION_KEY: ["not", "hashable"]}) is INITIALIZE


def test_an_initialized_session_serves_its_own_version() -> None:
    chosen = select("tools/list", {PROTOCOL_VERSION_KEY: LATEST_STATELESS}, "2025-06-18")
    assert chosen.action == "session" and chosen.dialect is DIALECTS["2025-06-18"]


def test_the_meta_names_the_stateless_version() -> None:
    chosen = select("tools/list", {PROTOCOL_VERSION_KEY: LATEST_STATELESS})
    assert chosen.action == "stateless" and chosen.dialect is STATELESS[LATEST_STATELESS]
    missing = select("tools/list", {})
    assert isinstance(missing, McpError) and missing.code == -32602
    typed = select("tools/list", {PROTOCOL_VERSION_KEY: 1})
    assert isinstance(typed, McpError) and typed.code == -32602


def test_a_bare_ping_before_initialize_is_answered_when_the_session_era_is_served() -> None:
    assert select("ping") is PONG
    refused = select("ping", session={})
    assert isinstance(refused, McpError) and refused.code == -32602


def test_an_unknown_version_is_32022_with_what_is_supported() -> None:
    refused = select("tools/list", {PROTOCOL_VERSION_KEY: "1999-01-01"})
    assert isinstance(refused, McpError) and refused.code == -32022
    assert refused.data == {"supported": list(ENABLED), "requested": "1999-01-01"}
    needs = select("tools/list", {PROTOCOL_VERSION_KEY: "2025-11-25"})
    assert isinstance(needs, McpError) and "initialize handshake" in needs.message
    assert unsupported_version("x", {}, ("a",)).message == "Unsupported protocol version: x"


def test_a_session_era_only_server_answers_like_one_before_initialize() -> None:
    assert select("ping", stateless={}) is PONG
    early = select("tools/list", stateless={})
    assert isinstance(early, McpError) and early.code == -32600
    unknown = select("server/discover", stateless={})
    assert isinstance(unknown, McpError) and unknown.code == -32601


# -- the stateless era's _meta ---------------------------------------------------------------


def test_stateless_meta_rules() -> None:
    good = {PROTOCOL_VERSION_KEY: LATEST_STATELESS, CLIENT_CAPABILITIES_KEY: {}}
    assert stateless_meta_problem({"_meta": good}) is None
    assert stateless_meta_problem(None) is not None
    assert stateless_meta_problem({"_meta": []}) is not None
    assert stateless_meta_problem({"_meta": {CLIENT_CAPABILITIES_KEY: {}}}) is not None
    assert stateless_meta_problem({"_meta": {**good, PROTOCOL_VERSION_KEY: 7}}) is not None
    caps = {CLIENT_CAPABILITIES_KEY: {}}
    assert meta_keys_problem({}) is CAPABILITIES_PROBLEM
    assert meta_keys_problem({CLIENT_CAPABILITIES_KEY: []}) is CAPABILITIES_PROBLEM
    assert meta_keys_problem({CLIENT_INFO_KEY: "x"}) is CAPABILITIES_PROBLEM  # reported first
    assert meta_keys_problem({**caps, CLIENT_INFO_KEY: "x"}) is not None
    assert meta_keys_problem({**caps, LOG_LEVEL_KEY: "loud"}) is not None
    assert meta_keys_problem({**caps, LOG_LEVEL_KEY: ["debug"]}) is not None
    assert meta_keys_problem({**caps, "progressToken": 1.5}) is not None
    assert meta_keys_problem({**caps, LOG_LEVEL_KEY: "debug", CLIENT_INFO_KEY: {}}) is None


@pytest.mark.parametrize(("token", "ok"), [("t", True), (3, True), (None, True), (1.5, False)])
def test_a_progress_token_is_a_string_or_an_integer(token: Any, ok: bool) -> None:
    assert (progress_token_problem({"progressToken": token}) is None) is ok


def test_an_error_reply_carries_the_id_only_when_one_was_read() -> None:
    error = McpError(-32600, "Invalid Request")
    assert error_reply(7, error) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32600, "message": "Invalid Request"},
    }
    assert "id" not in error_reply(None, error)
