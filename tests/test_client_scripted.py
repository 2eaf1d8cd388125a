"""Exact wire sequences a real Runtime will not produce (a misbehaving server), on a scripted
transport: repeated cursors, initialize counter-offers, malformed responses.
"""

from __future__ import annotations

from typing import Any

import pytest

import snodo
from snodo.client import Client
from snodo.connections import initialize_session
from snodo.options import build_options
from snodo.protocol import dialects
from snodo.transports.base import RequestOptions
from tests.support.client_support import ScriptedTransport, page, result


def client_on(transport: ScriptedTransport, version: str = "2025-11-25", **options: Any) -> Client:
    return Client(transport, dialects.get(version), build_options(protocol=version, **options))


def test_repeated_cursor_stops_with_connection_error() -> None:
    """Lists: a server that repeats a cursor stops the listing with -32000."""
    transport = ScriptedTransport(page("a", "t1"), page("b", "t2"), page("a", "t3"))
    with pytest.raises(snodo.McpError) as caught:
        client_on(transport).list_tools()
    assert caught.value.code == -32000
    assert caught.value.cause == {"kind": "tools/list", "cursor": "a"}
    assert [m.get("params", {}).get("cursor") for m in transport.sent] == [None, "a", "b"]


def test_empty_string_cursor_is_followed() -> None:
    """An empty-string cursor is a cursor, not the end of the list."""
    transport = ScriptedTransport(page("", "t1"), page(None, "t2"))
    tools = client_on(transport).list_tools()
    assert [t["name"] for t in tools] == ["t1", "t2"]
    assert transport.sent[1]["params"]["cursor"] == ""


def test_initialize_result_with_a_version_not_allowed_is_refused() -> None:
    """initialize: the server's protocolVersion must be allowed, else -32602 negotiated/requested."""
    transport = ScriptedTransport(
        result(
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "serverInfo": {"name": "s", "version": "1"},
            }
        )
    )
    options = build_options(protocol="2025-11-25")
    with pytest.raises(snodo.McpError) as caught:
        initialize_session(transport, options, "2025-11-25", dialects.get("2025-11-25"))
    assert caught.value.code == -32602
    assert caught.value.data == {"negotiated": "2025-06-18", "requested": ["2025-11-25"]}
    assert [m["method"] for m in transport.sent] == ["initialize"]


def test_initialize_counter_offer_within_allowed_is_accepted() -> None:
    """initialize: a counter-offer the client allows becomes the session's version."""
    transport = ScriptedTransport(
        result(
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "s", "version": "1"},
            }
        )
    )
    options = build_options(protocol=["2025-11-25", "2025-06-18"])
    session = initialize_session(transport, options, "2025-11-25", dialects.get("2025-11-25"))
    assert session.version == "2025-06-18"
    assert [m["method"] for m in transport.sent] == ["initialize", "notifications/initialized"]


def test_initialize_without_protocol_version_is_connection_error() -> None:
    """initialize: a result without protocolVersion is -32000."""
    transport = ScriptedTransport(result({"capabilities": {}}))
    options = build_options(protocol="2025-11-25")
    with pytest.raises(snodo.McpError) as caught:
        initialize_session(transport, options, "2025-11-25", dialects.get("2025-11-25"))
    assert caught.value.code == -32000


def test_transport_without_notify_cannot_open_an_session_era_session() -> None:
    """A transport without notify can open 2026-07-28 connections only (-32602)."""

    class RequestOnly:
        def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
            raise AssertionError("nothing may be sent")

        def close(self) -> None:
            pass

    with pytest.raises(snodo.McpError) as caught:
        initialize_session(RequestOnly(), build_options(), "2025-11-25", dialects.get("2025-11-25"))
    assert caught.value.code == -32602


def test_response_with_both_result_and_error_is_connection_error() -> None:
    """A response with both result and error is an unusable response: -32000."""
    transport = ScriptedTransport(
        lambda m: {
            "jsonrpc": "2.0",
            "id": m["id"],
            "result": {},
            "error": {"code": 1, "message": "x"},
        }
    )
    with pytest.raises(snodo.McpError) as caught:
        client_on(transport).call_tool("t", {})
    assert caught.value.code == -32000


def test_input_required_on_a_list_is_connection_error() -> None:
    """input_required is only valid for tools/call, resources/read and prompts/get."""
    transport = ScriptedTransport(
        result({"resultType": "input_required", "requestState": "s", "tools": []})
    )
    with pytest.raises(snodo.McpError) as caught:
        client_on(transport, "2026-07-28").list_tools()
    assert caught.value.code == -32000


def test_input_required_with_nothing_to_answer_is_connection_error() -> None:
    """A result with nothing to answer and no state is -32000."""
    transport = ScriptedTransport(result({"resultType": "input_required"}))
    with pytest.raises(snodo.McpError) as caught:
        client_on(transport, "2026-07-28", input_handlers={"form": lambda p: {}}).call_tool("t")
    assert caught.value.code == -32000


def test_timeout_defaults_to_30_seconds_or_the_client_option() -> None:
    """Each request can set timeout:; the default is 30 s, or the client's :timeout option."""
    echo = result({"content": []})
    transport = ScriptedTransport(echo, echo, echo)
    client_on(transport).call_tool("t")
    client_on(transport, timeout=5.0).call_tool("t")
    client_on(transport, timeout=5.0).call_tool("t", timeout=0.5)
    assert [o.timeout for o in transport.options] == [30.0, 5.0, 0.5]


def test_progress_timeout_options_reach_the_transport() -> None:
    """reset_timeout_on_progress and max_total_timeout (600 s by default) reach the transport."""
    echo = result({"content": []})
    transport = ScriptedTransport(echo, echo)
    client_on(transport).call_tool("t")
    client_on(transport, reset_timeout_on_progress=True).call_tool("t", max_total_timeout=60.0)
    first, second = transport.options
    assert (first.reset_timeout_on_progress, first.max_total_timeout) == (False, 600.0)
    assert (second.reset_timeout_on_progress, second.max_total_timeout) == (True, 60.0)


def test_each_input_round_gets_its_own_timeout() -> None:
    """Each round of a multi round-trip call has its own timeout: (the same per-round value)."""
    ask = result(
        {
            "resultType": "input_required",
            "inputRequests": {"a": {"method": "roots/list"}},
            "requestState": "s",
        }
    )
    done = result({"resultType": "complete", "content": []})
    transport = ScriptedTransport(ask, ask, done)
    client = client_on(transport, "2026-07-28", input_handlers={"roots": lambda p: {"roots": []}})
    client.call_tool("t", timeout=2.0)
    assert [o.timeout for o in transport.options] == [2.0, 2.0, 2.0]
    ids = [m["id"] for m in transport.sent]
    assert len(set(ids)) == 3
    assert [m["params"].get("requestState") for m in transport.sent] == [None, "s", "s"]
