"""snodo.testing's fault proxy over Streamable HTTP (issue 22): each fault between a real
``snodo.connect`` client and a real Runtime served by ``serve_http`` on 127.0.0.1, asserting
what the client sees (the error and its cause, that the next request works, that a restart
policy restarts, that a duplicated answer is dropped, that nothing is sent twice)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import snodo
from examples.example_runtime import build
from snodo.server.http_server import serve_http
from snodo.testing.proxy import TO_CLIENT, TO_SERVER, Action, FaultProxy, Match

LATEST = "2026-07-28"
SESSION = "2025-11-25"
VERSIONS = (LATEST, SESSION)


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with serve_http(build()) as server:
        yield server.url


@pytest.fixture
def proxy(upstream: str) -> Iterator[FaultProxy]:
    with FaultProxy.http(upstream) as p:
        yield p


def connect(proxy: FaultProxy, version: str = LATEST, **options: Any) -> snodo.Client:
    options.setdefault("timeout", 5.0)
    return snodo.connect(proxy.target, protocol=version, **options)


def echo(client: snodo.Client, text: str, **options: Any) -> str:
    result = client.call_tool("echo", {"text": text}, **options)
    return str(result["content"][0]["text"])


def test_passes_everything_on_and_records_both_directions(proxy: FaultProxy) -> None:
    """Without faults the proxy is a recording tee: 127.0.0.1 only, the request bytes as sent."""
    assert proxy.url is not None and proxy.url.startswith("http://127.0.0.1:")
    assert proxy.target == snodo.Http(proxy.url)
    with connect(proxy, SESSION) as client:
        assert echo(client, "plain") == "plain"
    calls = [r for r in proxy.requests if r.rpc == "tools/call"]
    assert len(calls) == 1 and calls[0].header("mcp-session-id")
    (asked,) = proxy.sent("tools/call")
    (answer,) = proxy.sent("tools/call", TO_CLIENT)
    assert asked.kind == "request" and answer.kind == "response" and answer.id == asked.id
    assert answer.message["result"]["content"][0]["text"] == "plain"
    assert all(m.faults == () for m in proxy.messages)


@pytest.mark.parametrize("version", VERSIONS)
def test_cut_breaks_the_answer_off_and_the_next_call_works(proxy: FaultProxy, version: str) -> None:
    with connect(proxy, version) as client:
        proxy.cut("tools/call")
        with pytest.raises(snodo.McpError) as caught:
            echo(client, "lost")
        assert caught.value.code == -32000
        assert caught.value.cause == ("http", "the connection closed before the end of the body")
        assert echo(client, "next") == "next"
    assert [m.faults for m in proxy.sent("tools/call", TO_CLIENT)] == [("cut",), ()]
    assert len(proxy.sent("tools/call")) == 2  # the cut call was not sent again


def test_reset_is_a_tcp_rst_whose_outcome_is_unknown(proxy: FaultProxy) -> None:
    with connect(proxy) as client:
        proxy.reset("tools/call")
        with pytest.raises(snodo.McpError) as caught:
            echo(client, "lost")
        assert caught.value.code == -32000 and caught.value.data == {"outcome": "unknown"}
        assert "Connection reset by peer" in str(caught.value.cause)
        assert echo(client, "next") == "next"


def test_delay_holds_the_answer(proxy: FaultProxy) -> None:
    with connect(proxy) as client:
        proxy.delay(0.3, method="tools/call")
        started = time.monotonic()
        assert echo(client, "late") == "late"
        assert time.monotonic() - started >= 0.3
        with pytest.raises(snodo.McpError) as caught:
            proxy.delay(2.0, method="tools/call")
            echo(client, "too late", timeout=0.3)
        assert caught.value.code == -32001  # the request timed out


def test_a_dropped_answer_ends_its_stream_and_is_not_resent(proxy: FaultProxy) -> None:
    with connect(proxy) as client:
        proxy.drop(method="tools/call")
        with pytest.raises(snodo.McpError) as caught:
            echo(client, "lost")
        assert caught.value.code == -32000 and caught.value.cause == ("sse_ended",)
        assert echo(client, "next") == "next"
    assert len(proxy.sent("tools/call")) == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_a_duplicated_answer_is_dropped(proxy: FaultProxy, version: str) -> None:
    with connect(proxy, version) as client:
        proxy.duplicate(method="tools/call")
        assert echo(client, "once") == "once"
        assert echo(client, "twice") == "twice"  # the second answer is its own, not the copy
    assert proxy.sent("tools/call", TO_CLIENT)[0].faults == ("duplicate",)


def test_a_broken_event_before_the_answer_is_skipped(proxy: FaultProxy) -> None:
    with connect(proxy) as client:
        proxy.garbage(method="tools/call")
        assert echo(client, "after garbage") == "after garbage"


def test_an_oversized_answer_trips_max_response_bytes(proxy: FaultProxy) -> None:
    with connect(proxy, max_response_bytes=20_000) as client:
        proxy.oversize(10_000, method="tools/call")
        assert echo(client, "padded") == "padded"  # padding is JSON whitespace: still valid
        proxy.oversize(50_000, method="tools/call")
        with pytest.raises(snodo.McpError) as caught:
            echo(client, "too big")
        assert caught.value.code == -32000
        assert caught.value.cause == ("max_response_bytes", 20_000)
        assert echo(client, "next") == "next"
    sizes = [len(m.data) for m in proxy.sent("tools/call", TO_CLIENT)]
    assert sizes[0] < 10_000  # recorded as the server sent it


@pytest.mark.parametrize("stall", ["stall_head", "stall_body"])
def test_a_stalled_answer_waits_for_release(proxy: FaultProxy, stall: str) -> None:
    with connect(proxy) as client:
        getattr(proxy, stall)("tools/call")
        got: list[str] = []
        done = threading.Event()

        def call() -> None:
            got.append(echo(client, "held"))
            done.set()

        caller = threading.Thread(target=call)
        caller.start()
        proxy.wait_stalled()
        assert not done.is_set()
        proxy.release()
        assert done.wait(5.0) and got == ["held"]
        caller.join(5.0)
        getattr(proxy, stall)("tools/call")
        with pytest.raises(snodo.McpError) as caught:
            echo(client, "never", timeout=0.3)
        assert caught.value.code == -32001
        proxy.release()


def test_session_404_makes_a_transient_connection_start_a_new_session(proxy: FaultProxy) -> None:
    with connect(proxy, SESSION, restart="transient") as client:
        first = client.session
        assert first is not None
        proxy.session_404()
        assert echo(client, "again") == "again"  # refused unseen, so sent again on the new session
        assert client.session is not None and client.session.session_id != first.session_id
    assert [m.method for m in proxy.sent(None) if m.method == "initialize"] == ["initialize"] * 2
    refused = [m for m in proxy.messages if "session_404" in m.faults]
    assert len(refused) == 1 and refused[0].session_id == first.session_id


def test_session_404_ends_a_temporary_connection(proxy: FaultProxy) -> None:
    with connect(proxy, SESSION) as client:
        proxy.session_404()
        with pytest.raises(snodo.McpError) as caught:
            echo(client, "refused")
        assert caught.value.cause == ("http_status", 404)


def test_a_flood_of_server_requests_is_answered_and_stops_at_the_proxy(
    proxy: FaultProxy,
) -> None:
    with connect(proxy, SESSION) as client:
        proxy.flood(5)
        assert echo(client, "flooded") == "flooded"
        answers = proxy.wait_for(lambda m: str(m.id).startswith("snodo-flood-"), 5)
        assert echo(client, "after") == "after"
    assert all(m.direction == TO_SERVER and m.kind == "response" for m in answers)
    assert all(m.message.get("result") == {} for m in answers)  # pings answered


def test_rules_pick_messages_by_method_and_count_their_hits(proxy: FaultProxy) -> None:
    with connect(proxy) as client:
        rule = proxy.on(Match(direction=TO_CLIENT, method="tools/call"), "drop", times=None)
        delayed = proxy.on("tools/list", Action("delay", seconds=0.05), times=2)
        for _ in range(2):
            with pytest.raises(snodo.McpError):
                echo(client, "dropped")
        assert client.list_tools(bypass_cache=True)
        assert rule.hits == 2 and rule.remaining is None
        assert delayed.hits == 2  # the request and its answer
        proxy.clear()
        assert echo(client, "clear") == "clear"
    assert proxy.rules == []


def test_unknown_faults_and_https_upstreams_are_refused(
    proxy: FaultProxy,
) -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        proxy.on(None, "explode")
    with pytest.raises(ValueError, match="plain http"):
        FaultProxy.http("https://127.0.0.1:1/mcp")


def test_closing_the_proxy_ends_its_connections(upstream: str) -> None:
    proxy = FaultProxy.http(upstream)
    try:
        with connect(proxy, SESSION) as client:
            assert echo(client, "up") == "up"
            proxy.close()
            with pytest.raises(snodo.McpError) as caught:
                echo(client, "down")
            assert caught.value.code == -32000
    finally:
        proxy.close()
