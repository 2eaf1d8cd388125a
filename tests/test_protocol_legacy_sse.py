"""snodo.protocol.legacy_sse: the HTTP+SSE (2024-11-05) rules, pure (docs/decisions/0040)."""

from __future__ import annotations

import pytest

from snodo.protocol import legacy_sse, streamable
from snodo.protocol.errors import McpError, connection_error

STREAM = "http://127.0.0.1:8080/sse"


def test_a_relative_endpoint_resolves_against_the_stream_url() -> None:
    """Spec 2024-11-05: the endpoint event names the URL to POST to; the TypeScript SDK sends
    a path with the session in its query."""
    got = legacy_sse.endpoint_url(STREAM, "/messages?sessionId=abc")
    assert got == "http://127.0.0.1:8080/messages?sessionId=abc"
    assert legacy_sse.endpoint_url(STREAM, "messages") == "http://127.0.0.1:8080/messages"
    assert legacy_sse.endpoint_url(STREAM, " http://127.0.0.1:8080/m#frag ") == (
        "http://127.0.0.1:8080/m"
    )
    assert legacy_sse.endpoint_url("https://h.example/sse", "https://H.example:443/m") == (
        "https://H.example:443/m"
    )


@pytest.mark.parametrize(
    "data",
    [
        "http://127.0.0.2:8080/messages",
        "//evil.example/messages",
        "https://127.0.0.1:8080/messages",
        "http://127.0.0.1:8081/messages",
    ],
)
def test_an_endpoint_on_another_origin_is_refused(data: str) -> None:
    with pytest.raises(McpError) as caught:
        legacy_sse.endpoint_url(STREAM, data)
    error = caught.value
    assert error.code == -32000
    assert error.cause[:2] == ("sse_endpoint", "cross_origin")
    assert "another origin" in error.message and "http://127.0.0.1:8080" in error.message


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        ("", "empty"),
        ("  ", "empty"),
        ("/a b", "malformed"),
        ("http://u:p@127.0.0.1:8080/m", "userinfo"),
    ],
)
def test_an_unusable_endpoint_is_refused(data: str, detail: str) -> None:
    with pytest.raises(McpError) as caught:
        legacy_sse.endpoint_url(STREAM, data)
    assert caught.value.cause == ("sse_endpoint", detail)


def test_long_query_values_of_the_endpoint_are_secrets() -> None:
    url = "http://h/messages?sessionId=0123456789abcdef0123&x=1"
    assert legacy_sse.endpoint_secrets(url) == ("0123456789abcdef0123",)


def test_event_roles() -> None:
    """The first endpoint event names the endpoint, later ones are skipped; message events
    carry messages once the endpoint is known; other types are skipped."""
    assert legacy_sse.event_role("endpoint", False) == "endpoint"
    assert legacy_sse.event_role("endpoint", True) == "skip"
    assert legacy_sse.event_role("message", True) == "message"
    assert legacy_sse.event_role("ping", False) == "skip"
    with pytest.raises(McpError) as caught:
        legacy_sse.event_role("message", False)
    assert caught.value.cause == ("sse_endpoint", "message_first")


def test_sse_implies_2024_11_05_and_refuses_a_protocol_without_it() -> None:
    assert legacy_sse.sse_versions(None) == ("2024-11-05",)
    assert legacy_sse.sse_versions(("2025-06-18", "2024-11-05")) == ("2024-11-05",)
    with pytest.raises(McpError) as caught:
        legacy_sse.sse_versions(("2025-06-18",))
    assert caught.value.code == -32602
    assert caught.value.data == {"requested": ["2025-06-18"], "supported": ["2024-11-05"]}
    assert "allow 2024-11-05" in caught.value.message


def _refused(status: int, body: bytes = b"nope") -> McpError:
    return streamable.status_error(status, "http://h/mcp", body, ())


@pytest.mark.parametrize("status", [400, 404, 405])
def test_a_refused_initialize_falls_back_when_2024_11_05_is_allowed(status: int) -> None:
    """Spec 2025-03-26 "Backwards Compatibility": a 4xx to the POST of initialize → GET."""
    assert legacy_sse.falls_back(_refused(status), ("2025-06-18", "2024-11-05"))
    assert not legacy_sse.falls_back(_refused(status), ("2025-11-25", "2025-06-18"))


def test_a_json_rpc_refusal_falls_back_too() -> None:
    body = b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "bad"}}'
    error = _refused(400, body)
    assert error.code == -32600
    assert legacy_sse.refused_status(error) == 400
    assert legacy_sse.falls_back(error, ("2024-11-05",))


@pytest.mark.parametrize("status", [401, 403, 406, 500, 503])
def test_other_statuses_and_errors_do_not_fall_back(status: int) -> None:
    assert not legacy_sse.falls_back(_refused(status), ("2024-11-05",))
    assert not legacy_sse.falls_back(connection_error("gone", cause=("http", "x")), ("2024-11-05",))
    assert legacy_sse.refused_status(McpError(-32000, cause=("http_status", True))) is None


def test_the_fallback_error_names_both_answers() -> None:
    get = connection_error("HTTP 404 from http://h/mcp", cause=("http_status", 404, b""))
    error = legacy_sse.fallback_error(_refused(405), get)
    assert error.code == -32000
    assert "HTTP 405" in error.message and "HTTP 404 from" in error.message
    assert error.cause[0] == "sse_fallback"
