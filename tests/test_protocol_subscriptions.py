"""snodo.protocol.subscriptions: filters, stream messages, matching, the session-era plan."""

from __future__ import annotations

import pytest

from snodo.protocol import subscriptions as s
from snodo.protocol.errors import McpError

KEY = s.SUBSCRIPTION_ID_KEY


def test_subscription_id_keeps_its_type_and_ignores_anything_else() -> None:
    assert s.subscription_id({"_meta": {KEY: 7}}) == 7
    assert s.subscription_id({"_meta": {KEY: "7"}}) == "7"
    for params in (None, {}, {"_meta": None}, {"_meta": {KEY: 1.5}}, {"_meta": {KEY: True}}, []):
        assert s.subscription_id(params) is None


def test_read_notification_tells_ack_end_and_events_apart() -> None:
    ack = s.read_notification(s.ACKNOWLEDGED, {"notifications": {"toolsListChanged": True}})
    assert ack == s.Acknowledged({"toolsListChanged": True})
    assert s.read_notification(s.ACKNOWLEDGED, None) == s.Acknowledged({})
    assert s.read_notification(s.CANCELLED, {"requestId": 3}) == s.Ended(None)
    event = s.read_notification(s.RESOURCE_UPDATED, {"uri": "a://b"})
    assert event == s.Notification(s.RESOURCE_UPDATED, {"uri": "a://b"})


def test_read_response_result_is_graceful_and_error_is_kept() -> None:
    assert s.read_response({"id": 1, "result": {}}) == s.Ended(None)
    ended = s.read_response({"id": 1, "error": {"code": -32603, "message": "broke"}})
    assert isinstance(ended.error, McpError) and ended.error.code == -32603


def test_client_filter_sends_extension_keys_as_given() -> None:
    given = {"toolsListChanged": True, "taskIds": ["t1"], "x-vendor": {"a": 1}}
    assert s.client_filter(given) == given
    with pytest.raises(TypeError):
        s.client_filter(["toolsListChanged"])
    with pytest.raises(TypeError):
        s.client_filter({1: True})


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {"toolsListChanged": "yes"},
        {"resourceSubscriptions": "a://b"},
        {"resourceSubscriptions": [1]},
    ],
)
def test_validate_filter_refuses_wrong_types_with_32602(bad: object) -> None:
    with pytest.raises(McpError) as caught:
        s.validate_filter(bad)
    assert caught.value.code == -32602


def test_honoured_keeps_true_flags_and_uris_and_drops_unknown_keys() -> None:
    requested = {
        "toolsListChanged": True,
        "promptsListChanged": False,
        "resourceSubscriptions": ["a://1", "a://1", "a://2"],
        "taskIds": ["t"],
    }
    assert s.honoured(requested) == {
        "toolsListChanged": True,
        "resourceSubscriptions": ["a://1", "a://2"],
    }
    assert s.honoured(requested, frozenset({"prompts"})) == {}
    assert s.honoured({"resourceSubscriptions": []}) == {}


def test_matches_follows_the_filter() -> None:
    accepted = {"toolsListChanged": True, "resourceSubscriptions": ["a://1"]}
    assert s.matches(accepted, "notifications/tools/list_changed", None)
    assert not s.matches(accepted, "notifications/prompts/list_changed", None)
    assert s.matches(accepted, s.RESOURCE_UPDATED, {"uri": "a://1"})
    assert not s.matches(accepted, s.RESOURCE_UPDATED, {"uri": "a://2"})
    assert not s.matches(accepted, s.RESOURCE_UPDATED, None)
    assert not s.matches(accepted, "notifications/message", {"level": "info"})


def test_session_accepts_needs_the_capabilities() -> None:
    requested = {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourceSubscriptions": ["a://1", "a://1"],
        "taskIds": ["t"],
    }
    caps = {"tools": {"listChanged": True}, "prompts": {}, "resources": {"subscribe": True}}
    assert s.session_accepts(requested, caps) == ({"toolsListChanged": True}, ["a://1"])
    assert s.session_accepts(requested, {"resources": {"listChanged": True}}) == ({}, [])


def test_server_messages_carry_the_subscription_id() -> None:
    assert s.acknowledgement(4, {"toolsListChanged": True}) == {
        "jsonrpc": "2.0",
        "method": s.ACKNOWLEDGED,
        "params": {"notifications": {"toolsListChanged": True}, "_meta": {KEY: 4}},
    }
    note = s.stream_notification("x", s.RESOURCE_UPDATED, {"uri": "a://1"})
    assert note["params"] == {"uri": "a://1", "_meta": {KEY: "x"}}
    assert s.stream_notification(None, "notifications/tools/list_changed") == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
    }
    assert s.listen_result(4)["result"] == {"resultType": "complete", "_meta": {KEY: 4}}


def test_check_buffer() -> None:
    s.check_buffer(1, "drop_newest")
    for size in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            s.check_buffer(size, "drop_oldest")
    with pytest.raises(ValueError):
        s.check_buffer(10, "block")
