"""snodo.protocol.streamable: reading Streamable HTTP answers without a socket (seed "Transport
behavior • HTTP": JSON or event-stream answers, an error without an id, resumption with
Last-Event-ID on the session era, the standalone GET stream after notifications/initialized)."""

from __future__ import annotations

from typing import Any

import pytest

from snodo.protocol import jsonrpc, streamable
from snodo.protocol.dialects import V2025_06_18, V2025_11_25, V2026_07_28
from snodo.protocol.errors import McpError
from snodo.protocol.http1 import Headers

URL = "http://127.0.0.1:9/mcp"
SECRET = "tok-0123456789-secret"


def _headers(content_type: str | None) -> Headers:
    return Headers([] if content_type is None else [("Content-Type", content_type)])


def _body(message: Any) -> bytes:
    return jsonrpc.encode(message)


# -- media types ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("text/event-stream", "text/event-stream"),
        ("Text/Event-Stream", "text/event-stream"),
        ("TEXT/EVENT-STREAM; charset=utf-8", "text/event-stream"),
        ("application/json;charset=utf-8", "application/json"),
        ("  Application/JSON  ", "application/json"),
        ("", ""),
        (None, ""),
    ],
)
def test_the_media_type_is_read_without_parameters_or_case(
    value: str | None, expected: str
) -> None:
    assert streamable.media_type(_headers(value)) == expected


def test_an_event_stream_is_recognised_in_any_case() -> None:
    assert streamable.is_event_stream(_headers("Text/Event-Stream"))
    assert streamable.is_event_stream(Headers([("content-type", "text/event-stream;x=1")]))
    assert not streamable.is_event_stream(_headers("application/json"))
    assert not streamable.is_event_stream(_headers(None))


# -- bodies and events ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[1, 2]", b'{"id": 1, "result": {}}', b'{"jsonrpc": "1.0", "id": 1}'],
    ids=["empty", "not-json", "array", "no-jsonrpc", "wrong-version"],
)
def test_a_body_that_is_not_json_rpc_decodes_to_none(body: bytes) -> None:
    assert streamable.decode_body(body) is None


def test_an_event_carries_a_message_and_a_priming_event_none() -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    assert streamable.event_message(jsonrpc.encode(message).decode()) == message
    assert streamable.event_message("") is None
    assert streamable.event_message("hello") is None


def test_response_to_finds_our_response_only() -> None:
    ours = {"jsonrpc": "2.0", "id": 5, "result": {"ok": True}}
    assert streamable.response_to(ours, 5) is ours
    assert streamable.response_to(ours, 6) is None
    error = {"jsonrpc": "2.0", "id": 5, "error": {"code": -32602, "message": "bad"}}
    assert streamable.response_to(error, 5) is error
    request = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
    assert streamable.response_to(request, 5) is None


def test_a_broken_response_to_our_request_fails_at_once() -> None:
    both = {"jsonrpc": "2.0", "id": 5, "result": {}, "error": {"code": 1, "message": "x"}}
    with pytest.raises(McpError) as caught:
        streamable.response_to(both, 5)
    assert caught.value.code == -32000
    assert caught.value.cause == ("broken_response", 5)


# -- a POST's JSON answer ---------------------------------------------------------------------------


def test_a_post_answer_is_the_response_to_the_request() -> None:
    response = {"jsonrpc": "2.0", "id": 3, "result": {"tools": []}}
    assert streamable.read_post_answer(3, _body(response)) == response


def test_an_error_without_an_id_is_taken_as_the_requests() -> None:
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "bad"}}
    assert streamable.read_post_answer("r-1", _body(error)) == {**error, "id": "r-1"}
    missing = {"jsonrpc": "2.0", "error": {"code": -32600, "message": "bad"}}
    assert streamable.read_post_answer(4, _body(missing))["id"] == 4


def test_a_response_to_another_id_is_a_connection_error() -> None:
    other = {"jsonrpc": "2.0", "id": 99, "result": {}}
    with pytest.raises(McpError) as caught:
        streamable.read_post_answer(3, _body(other))
    assert caught.value.code == -32000
    assert caught.value.cause == ("unexpected_id", 99)


@pytest.mark.parametrize(
    "body",
    [b"", b"<html>oops</html>", _body({"jsonrpc": "2.0", "id": 3, "method": "ping"})],
    ids=["empty", "html", "a-request"],
)
def test_a_body_that_is_no_response_is_left_to_the_status_error(body: bytes) -> None:
    assert streamable.read_post_answer(3, body) is None


def test_the_status_error_is_the_servers_json_rpc_error_when_it_sent_one() -> None:
    body = _body({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": SECRET}})
    error = streamable.status_error(400, URL, body, [SECRET])
    assert error.code == -32600
    assert SECRET not in error.message
    assert error.cause == ("http_status", 400)


def test_the_status_error_is_the_status_and_a_redacted_excerpt_otherwise() -> None:
    body = b"denied for " + SECRET.encode() + b" " + b"x" * 2000
    error = streamable.status_error(502, URL, body, [SECRET])
    assert error.code == -32000 and error.kind == "transport"
    assert error.message == f"HTTP 502 from {URL}"
    kind, status, excerpt = error.cause
    assert (kind, status) == ("http_status", 502)
    assert SECRET.encode() not in excerpt and len(excerpt) <= 512 + 64


def test_a_listen_refusal_is_the_error_the_result_or_the_status() -> None:
    error = _body({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "no"}})
    assert streamable.listen_refusal(200, error, URL, []).code == -32602
    result = _body({"jsonrpc": "2.0", "id": 1, "result": {}})
    refused = streamable.listen_refusal(200, result, URL, [])
    assert refused.cause == ("not_acknowledged",)
    assert streamable.listen_refusal(404, b"", URL, []).cause[:2] == ("http_status", 404)


# -- the session era's event streams -----------------------------------------------------------------


@pytest.mark.parametrize("dialect", [V2025_11_25, V2025_06_18], ids=lambda d: d.version)
def test_a_broken_session_era_stream_with_event_ids_is_resumed_a_bounded_number_of_times(
    dialect: Any,
) -> None:
    assert streamable.may_resume(dialect, "ev-1", 0, "s-1")
    assert streamable.may_resume(dialect, "ev-1", streamable.MAX_RESUMES - 1, "s-1")
    assert not streamable.may_resume(dialect, "ev-1", streamable.MAX_RESUMES, "s-1")
    assert not streamable.may_resume(dialect, None, 0, "s-1")
    assert not streamable.may_resume(dialect, "", 0, "s-1")
    assert not streamable.may_resume(dialect, "ev-1", 0, None)


def test_a_2026_stream_is_never_resumed() -> None:
    assert not streamable.may_resume(V2026_07_28, "ev-1", 0, "s-1")


def test_the_retry_delay_is_the_servers_else_the_default() -> None:
    assert streamable.retry_delay(250) == 0.25
    assert streamable.retry_delay(0) == 0.0
    assert streamable.retry_delay(None) == streamable.DEFAULT_RETRY_MS / 1000.0


def test_the_standalone_stream_opens_after_initialized_on_an_identified_session() -> None:
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert streamable.opens_standalone_stream(initialized, V2025_11_25, "s-1")
    assert not streamable.opens_standalone_stream(initialized, V2025_11_25, None)
    assert not streamable.opens_standalone_stream(initialized, V2026_07_28, "s-1")
    other = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}
    assert not streamable.opens_standalone_stream(other, V2025_11_25, "s-1")
