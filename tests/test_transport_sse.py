"""The HTTP+SSE transport (``snodo.Sse``, 2024-11-05) against a scripted server on 127.0.0.1
(tests/support/legacy_sse_faults.py): the endpoint's origin, the token provider and 401,
timeouts and cancellation, header checks and what close() leaves (docs/decisions/0040)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import snodo
from snodo.auth import Challenge
from tests.support.legacy_sse_faults import LegacySse, legacy_sse_server
from tests.support.stdio_support import no_leaks


@pytest.fixture
def sse() -> Iterator[LegacySse]:
    with legacy_sse_server() as server:
        yield server


def test_a_call_round_trips_and_close_leaves_no_thread_or_fd(sse: LegacySse) -> None:
    with no_leaks(pooled=True):
        client = snodo.connect(snodo.Sse(sse.url))
        result = client.call_tool("echo", {"text": "hi"})
        assert result["content"][0]["text"] == "hi"
        posts = sse.posts()
        assert [p.target for p in posts] == ["/messages?sessionId=s3cr3t-0123456789abcdef"] * 3
        assert all(p.header("MCP-Protocol-Version") is None for p in posts)
        assert sse.server.received(lambda r: r.method == "GET")[0].header("Accept") == (
            "text/event-stream"
        )
        client.close()
        assert not [t for t in threading.enumerate() if t.name.startswith("snodo-sse")]


def test_an_endpoint_on_another_origin_is_refused(sse: LegacySse) -> None:
    """Messages go only to the stream's origin: another one is -32000 before any POST."""
    sse.endpoint = lambda s: f"http://localhost:{s.server.port}/messages"
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Sse(sse.url))
    assert caught.value.code == -32000
    assert caught.value.cause[:2] == ("sse_endpoint", "cross_origin")
    assert "another origin" in caught.value.message
    assert sse.posts() == []


def test_a_message_before_the_endpoint_is_refused(sse: LegacySse) -> None:
    sse.before_endpoint = b'event: message\ndata: {"jsonrpc": "2.0", "method": "x"}\n\n'
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Sse(sse.url))
    assert caught.value.cause == ("sse_endpoint", "message_first")


class Provider:
    """A token provider whose first token is stale; refresh gives the good one."""

    def __init__(self) -> None:
        self.current = "stale-token-1"
        self.refreshed: list[int] = []

    def token(self, url: str) -> str | None:
        return self.current

    def refresh(
        self, challenge: Challenge | None, *, url: str, status: int, token: str | None
    ) -> str | None:
        self.refreshed.append(status)
        self.current = "good-token-2"
        return self.current


def test_a_401_is_refreshed_once_with_the_token_provider(sse: LegacySse) -> None:
    """As on Streamable HTTP: Authorization from the provider on the GET and every POST; a 401
    refreshes once and the request goes again."""
    sse.authorize = lambda r: r.header("Authorization") == "Bearer good-token-2"
    provider = Provider()
    client = snodo.connect(snodo.Sse(sse.url), token_provider=provider)
    try:
        assert client.call_tool("echo", {"text": "ok"})["content"][0]["text"] == "ok"
    finally:
        client.close()
    assert provider.refreshed == [401]
    posts = sse.posts()
    assert posts and all(p.header("Authorization") == "Bearer good-token-2" for p in posts)


def test_a_second_401_is_an_error_without_the_token(sse: LegacySse) -> None:
    sse.authorize = lambda r: False
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Sse(sse.url), token_provider=Provider())
    assert caught.value.code == -32000
    assert caught.value.cause[:2] == ("unauthorized", 401)
    assert "token-" not in repr(caught.value)


def test_header_values_with_cr_lf_are_refused_before_anything_is_sent(sse: LegacySse) -> None:
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Sse(sse.url), headers={"x-note": "a\r\nInjected: 1"})
    assert caught.value.cause == ("invalid_header", "x-note")
    assert sse.server.received() == []


def test_a_timeout_cancels_once_and_never_resends(sse: LegacySse) -> None:
    """-32001 at the deadline; notifications/cancelled is POSTed; the call went out once; the
    connection keeps serving."""
    sse.hold.add("slow")
    client = snodo.connect(snodo.Sse(sse.url))
    try:
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("slow", {}, timeout=0.3)
        assert caught.value.code == -32001
        assert time.monotonic() - started < 3.0
        sse.server.wait_for(lambda r: r.rpc == "notifications/cancelled", timeout=5.0)
        calls = sse.posts("tools/call")
        assert len(calls) == 1
        cancelled = sse.posts("notifications/cancelled")[0].message
        assert cancelled["params"]["requestId"] == calls[0].message["id"]
        assert client.call_tool("echo", {"text": "next"})["content"][0]["text"] == "next"
    finally:
        client.close()


def _slow_call(client: snodo.Client, failure: list[Any]) -> threading.Thread:
    """A thread (not started) that calls the held tool "slow" and keeps the error it gets."""

    def call() -> None:
        try:
            client.call_tool("slow", {})
        except snodo.McpError as error:
            failure.append(error)

    return threading.Thread(target=call)


def test_a_stream_dropped_mid_call_fails_it_at_once(sse: LegacySse) -> None:
    sse.hold.add("slow")
    client = snodo.connect(snodo.Sse(sse.url), timeout=30.0)
    failure: list[Any] = []
    worker = _slow_call(client, failure)
    try:
        worker.start()
        sse.server.wait_for(lambda r: r.rpc == "tools/call", timeout=5.0)
        started = time.monotonic()
        sse.outbox.put(None)
        worker.join(5.0)
        assert time.monotonic() - started < 5.0
        assert failure and failure[0].code == -32000
        assert failure[0].cause[0] in ("sse_ended", "http")  # an end, or a cut chunked body
        assert "event stream" in failure[0].message
        assert len(sse.posts("tools/call")) == 1
    finally:
        client.close()
        worker.join(5.0)


def test_close_fails_a_waiting_call_at_once(sse: LegacySse) -> None:
    sse.hold.add("slow")
    client = snodo.connect(snodo.Sse(sse.url), timeout=30.0)
    failure: list[Any] = []
    worker = _slow_call(client, failure)
    worker.start()
    sse.server.wait_for(lambda r: r.rpc == "tools/call", timeout=5.0)
    started = time.monotonic()
    client.close()
    worker.join(5.0)
    assert time.monotonic() - started < 5.0
    assert failure and failure[0].code == -32000


def test_the_fallback_reports_both_answers_when_there_is_no_legacy_stream(sse: LegacySse) -> None:
    """snodo.Http's POST of initialize refused with 405 and the GET refused too: one error."""
    url = f"http://127.0.0.1:{sse.server.port}/mcp"
    sse.server.once(lambda r: r.target == "/mcp", lambda r, ex: ex.respond(405), times=2)
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Http(url), protocol=["2025-06-18", "2024-11-05"])
    assert caught.value.code == -32000
    assert caught.value.cause[0] == "sse_fallback"
    assert "HTTP 405" in caught.value.message
    assert [r.method for r in sse.server.received()] == ["POST", "GET"]


def test_the_endpoint_session_secret_is_never_in_an_error(sse: LegacySse) -> None:
    """The endpoint's session id lets anyone post into the session: a refused POST's error
    names the endpoint with it redacted, as Streamable HTTP redacts ``Mcp-Session-Id``."""
    sse.authorize = lambda r: r.method == "GET"  # the stream opens; every POST is 401
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Sse(sse.url))
    assert caught.value.code == -32000
    assert "/messages?sessionId=" in caught.value.message
    secret = "s3cr3t-0123456789abcdef"
    assert secret not in caught.value.message
    assert secret not in repr(caught.value) and secret not in repr(caught.value.cause)
    assert [p.target for p in sse.posts()] == [f"/messages?sessionId={secret}"]
