"""Request params and ``_meta`` (reference "Options", "Progress", "Multi round-trip requests",
session-era requests; Elixir notes "trace_context" merge order)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snodo.protocol import dialects, meta
from snodo.protocol.meta import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    PROTOCOL_VERSION_KEY,
    build_params,
)

NEW = dialects.get("2026-07-28")
SESSION = [dialects.get("2025-11-25"), dialects.get("2025-06-18")]
CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
INFO = {"name": "app", "version": "1"}
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"


def test_meta_keys() -> None:
    assert meta.PROTOCOL_VERSION_KEY == "io.modelcontextprotocol/protocolVersion"
    assert meta.CLIENT_CAPABILITIES_KEY == "io.modelcontextprotocol/clientCapabilities"
    assert meta.CLIENT_INFO_KEY == "io.modelcontextprotocol/clientInfo"
    assert meta.SERVER_INFO_KEY == "io.modelcontextprotocol/serverInfo"
    assert meta.SUBSCRIPTION_ID_KEY == "io.modelcontextprotocol/subscriptionId"
    assert meta.LOG_LEVEL_KEY == "io.modelcontextprotocol/logLevel"


def test_2026_requests_carry_version_capabilities_and_client_info() -> None:
    """2026-07-28 requests carry the dialect metadata and the client info in _meta."""
    params = build_params(NEW, {"name": "t"}, client_info=INFO, client_capabilities=CAPS)
    assert params == {
        "name": "t",
        "_meta": {
            PROTOCOL_VERSION_KEY: "2026-07-28",
            CLIENT_CAPABILITIES_KEY: CAPS,
            CLIENT_INFO_KEY: INFO,
        },
    }


def test_2026_params_are_always_an_object_even_empty() -> None:
    """RequestParams._meta is required on 2026-07-28, so every request has params."""
    params = build_params(NEW, None, client_info=None, client_capabilities={})
    assert params == {"_meta": {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}}}


@pytest.mark.parametrize("dialect", SESSION, ids=lambda d: d.version)
def test_session_era_requests_carry_no_metadata_and_no_client_info(dialect: Any) -> None:
    """On a session-era connection requests carry no _meta metadata and no client info."""
    params = build_params(dialect, {"uri": "x"}, client_info=INFO, client_capabilities=CAPS)
    assert params == {"uri": "x"}


@pytest.mark.parametrize("dialect", SESSION, ids=lambda d: d.version)
def test_session_era_with_nothing_left_sends_no_params(dialect: Any) -> None:
    """An empty _meta is left out entirely; nothing left means no params member."""
    assert build_params(dialect, None, client_info=INFO, client_capabilities=CAPS) is None
    assert build_params(dialect, {"_meta": {}}, client_info=INFO, client_capabilities={}) is None


@pytest.mark.parametrize("dialect", SESSION, ids=lambda d: d.version)
def test_session_era_still_sends_caller_meta_and_progress(dialect: Any) -> None:
    params = build_params(
        dialect,
        None,
        client_info=INFO,
        client_capabilities=CAPS,
        meta={"k": 1},
        progress_token=7,
    )
    assert params == {"_meta": {"k": 1, "progressToken": 7}}


def test_merge_order_dialect_then_info_then_params_meta_then_meta_then_trace() -> None:
    """Merge order: dialect metadata, clientInfo, params._meta, :meta, then trace context."""
    params = build_params(
        NEW,
        {"_meta": {CLIENT_INFO_KEY: "from params", "a": "params", "b": "params"}},
        client_info=INFO,
        client_capabilities=CAPS,
        meta={"b": "meta", "c": "meta", "traceparent": "from meta", PROTOCOL_VERSION_KEY: "x"},
        trace={"traceparent": TRACEPARENT},
    )
    assert params is not None
    assert params["_meta"] == {
        PROTOCOL_VERSION_KEY: "x",
        CLIENT_CAPABILITIES_KEY: CAPS,
        CLIENT_INFO_KEY: "from params",
        "a": "params",
        "b": "meta",
        "c": "meta",
        "traceparent": TRACEPARENT,
    }


def test_trace_context_wins_over_duplicate_keys_in_meta() -> None:
    """The named option wins over duplicate keys in :meta."""
    params = build_params(
        NEW,
        None,
        client_info=None,
        client_capabilities={},
        meta={"tracestate": "a=1"},
        trace={"traceparent": TRACEPARENT, "tracestate": "b=2"},
    )
    assert params is not None
    assert params["_meta"]["tracestate"] == "b=2"


def test_progress_sets_the_progress_token() -> None:
    """The client sends the request ID as _meta.progressToken."""
    params = build_params(NEW, None, client_info=None, client_capabilities={}, progress_token=42)
    assert params is not None
    assert params["_meta"]["progressToken"] == 42


@pytest.mark.parametrize(
    ("params", "extra"),
    [({"_meta": {"progressToken": "p"}}, None), (None, {"progressToken": "p"})],
)
def test_progress_token_in_meta_as_well_as_progress_raises(params: Any, extra: Any) -> None:
    """Passing a "progressToken" in :meta as well as progress: raises ArgumentError."""
    with pytest.raises(ValueError):
        build_params(
            NEW, params, client_info=None, client_capabilities={}, meta=extra, progress_token=1
        )


def test_a_progress_token_in_meta_without_progress_is_sent_as_given() -> None:
    params = build_params(
        NEW, None, client_info=None, client_capabilities={}, meta={"progressToken": "p"}
    )
    assert params is not None
    assert params["_meta"]["progressToken"] == "p"


def test_input_responses_and_request_state_are_sent_when_given() -> None:
    """A retry carries the responses as inputResponses and the requestState unchanged."""
    answers = {"confirm": {"action": "accept"}}
    params = build_params(
        NEW,
        {"name": "deploy"},
        client_info=None,
        client_capabilities={},
        input_responses=answers,
        request_state="opaque==",
    )
    assert params is not None
    assert params["inputResponses"] == answers
    assert params["requestState"] == "opaque=="


def test_request_state_is_never_sent_when_none() -> None:
    """If none was given, the client MUST NOT send a requestState."""
    params = build_params(NEW, {"name": "t"}, client_info=None, client_capabilities={})
    assert params is not None
    assert "requestState" not in params
    assert "inputResponses" not in params


def test_build_params_never_mutates_its_inputs() -> None:
    given_params = {"name": "t", "_meta": {"a": 1}}
    given_meta = {"b": 2}
    caps: dict[str, Any] = {"roots": {}}
    before = copy.deepcopy((given_params, given_meta, caps))
    params = build_params(
        NEW,
        given_params,
        client_info=INFO,
        client_capabilities=caps,
        meta=given_meta,
        progress_token=1,
    )
    assert params is not None
    params["_meta"]["c"] = 3
    params["x"] = 4
    assert (given_params, given_meta, caps) == before


@pytest.mark.parametrize("token", [True, 1.5, ["x"]])
def test_progress_token_type_is_checked(token: Any) -> None:
    with pytest.raises(TypeError):
        build_params(NEW, None, client_info=None, client_capabilities={}, progress_token=token)


def test_request_state_type_is_checked() -> None:
    with pytest.raises(TypeError):
        build_params(NEW, None, client_info=None, client_capabilities={}, request_state=5)  # type: ignore[arg-type]


@given(
    st.dictionaries(st.text(), st.integers() | st.text(), max_size=5),
    st.dictionaries(st.text(), st.integers() | st.text(), max_size=5),
)
def test_later_sources_always_win(params_meta: dict[str, Any], extra: dict[str, Any]) -> None:
    """Property: every key of :meta wins over params._meta, which wins over dialect metadata."""
    params = build_params(
        NEW, {"_meta": params_meta}, client_info=INFO, client_capabilities=CAPS, meta=extra
    )
    assert params is not None
    merged = params["_meta"]
    for key, value in extra.items():
        assert merged[key] == value
    for key, value in params_meta.items():
        if key not in extra:
            assert merged[key] == value
    if PROTOCOL_VERSION_KEY not in params_meta and PROTOCOL_VERSION_KEY not in extra:
        assert merged[PROTOCOL_VERSION_KEY] == "2026-07-28"


def test_log_level_is_the_loglevel_key_on_2026_and_wins_over_meta() -> None:
    """On 2026-07-28 ``log_level`` sets ``_meta["io.modelcontextprotocol/logLevel"]``."""
    params = build_params(
        NEW,
        None,
        client_info=None,
        client_capabilities={},
        meta={meta.LOG_LEVEL_KEY: "debug"},
        log_level="warning",
    )
    assert params is not None
    assert params["_meta"][meta.LOG_LEVEL_KEY] == "warning"


@pytest.mark.parametrize("dialect", SESSION, ids=lambda d: d.version)
def test_log_level_is_not_sent_on_the_session_era(dialect: Any) -> None:
    """The session era sets the level with logging/setLevel, not per request."""
    assert (
        build_params(dialect, None, client_info=None, client_capabilities={}, log_level="info")
        is None
    )


def test_rfc5424_levels_map_to_stdlib_levels() -> None:
    import logging

    expected = {
        "debug": logging.DEBUG,
        "info": logging.INFO,
        "notice": logging.INFO,
        "warning": logging.WARNING,
        "error": logging.ERROR,
        "critical": logging.CRITICAL,
        "alert": logging.CRITICAL,
        "emergency": logging.CRITICAL,
    }
    assert dict(meta.STDLIB_LEVELS) == expected
    assert set(meta.STDLIB_LEVELS) == set(meta.LOG_LEVELS)
    assert all(meta.stdlib_level(name) == value for name, value in expected.items())
    assert meta.stdlib_level("loud") == logging.WARNING
    assert meta.stdlib_level(None) == logging.WARNING


@pytest.mark.parametrize("value", ["info", "emergency", None])
def test_check_log_level_accepts_rfc5424_names_and_none(value: Any) -> None:
    meta.check_log_level("log_level", value)


@pytest.mark.parametrize("value", ["INFO", "warn", 20, True, ""])
def test_check_log_level_refuses_anything_else(value: Any) -> None:
    with pytest.raises(ValueError, match="log_level must be one of"):
        meta.check_log_level("log_level", value)
