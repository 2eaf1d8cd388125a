"""snodo.testing's fault proxy over stdio (issue 22): the client runs the relay, the relay runs
the real server (``python -m snodo.server`` with the example Runtime) and hands every line to
the proxy in this process. Each fault is asserted by what a real ``snodo.connect`` client sees;
no test leaves the relay or its server running (the stdio leak check, and the server's pid)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
from snodo.testing.proxy import TO_CLIENT, TO_SERVER, FaultProxy, Match
from tests.support import stdio_support as support
from tests.support.stdio_support import stdio_no_leaks, stdio_warm_up

__all__ = ["stdio_no_leaks", "stdio_warm_up"]

LATEST = "2026-07-28"
SESSION = "2025-11-25"


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    with FaultProxy.stdio(support.snodo_server()) as p:
        yield p


def connect(proxy: FaultProxy, version: str = LATEST, **options: Any) -> snodo.Client:
    options.setdefault("timeout", 5.0)
    return snodo.connect(proxy.target, cwd=str(support.ROOT), protocol=version, **options)


def echo(client: snodo.Client, text: str, **options: Any) -> str:
    result = client.call_tool("echo", {"text": text}, **options)
    return str(result["content"][0]["text"])


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def test_the_relay_passes_lines_on_and_takes_its_server_with_it(proxy: FaultProxy) -> None:
    """The target is a snodo.Stdio running the relay; the real server is the relay's child and
    both are gone once the client has closed."""
    assert isinstance(proxy.target, snodo.Stdio) and proxy.url is None
    assert any(arg.startswith("127.0.0.1:") for arg in proxy.target.args)  # where it calls back
    before = support.children()
    with connect(proxy, SESSION) as client:
        assert echo(client, "plain") == "plain"
        (relay,) = support.children() - before
        (server,) = _children_of(relay)
    support.wait_until(lambda: support.gone(relay) and not support.running(server), 5.0)
    (asked,) = proxy.sent("tools/call")
    (answer,) = proxy.sent("tools/call", TO_CLIENT)
    assert answer.id == asked.id and answer.message["result"]["content"][0]["text"] == "plain"
    assert proxy.sent("initialize")[0].connection == answer.connection


def test_cut_closes_the_servers_stdout_mid_answer(proxy: FaultProxy) -> None:
    with connect(proxy) as client:
        proxy.cut("tools/call")
        with pytest.raises(snodo.McpError) as caught:
            echo(client, "lost")
        assert caught.value.code == -32000 and caught.value.data == {"outcome": "unknown"}
        assert caught.value.cause in {("exit_status", 1), ("stdout_closed",)}, caught.value
        with pytest.raises(snodo.McpError):
            echo(client, "down")  # temporary: the connection stays down


def test_a_transient_connection_restarts_through_a_new_relay_after_a_cut(
    proxy: FaultProxy,
) -> None:
    backoff = snodo.Backoff(initial=0.01, jitter=False)
    with connect(proxy, restart="transient", backoff=backoff) as client:
        assert echo(client, "first") == "first"
        proxy.cut("tools/call")
        with pytest.raises(snodo.McpError):
            echo(client, "lost")
        assert echo(client, "restarted") == "restarted"  # waits for the restart
    connections = {m.connection for m in proxy.sent("tools/call")}
    assert len(connections) == 2


def test_reset_closes_both_pipes(proxy: FaultProxy) -> None:
    with connect(proxy, SESSION) as client:
        proxy.reset("tools/call")
        with pytest.raises(snodo.McpError) as caught:
            echo(client, "lost")
        assert caught.value.code == -32000


def test_a_dropped_answer_times_out_and_nothing_is_sent_twice(proxy: FaultProxy) -> None:
    with connect(proxy) as client:
        proxy.drop(method="tools/call")
        with pytest.raises(snodo.McpError) as caught:
            echo(client, "lost", timeout=0.5)
        assert caught.value.code == -32001
        assert echo(client, "next") == "next"
    assert [m.message["params"]["arguments"]["text"] for m in proxy.sent("tools/call")] == [
        "lost",
        "next",
    ]


def test_a_dropped_request_never_reaches_the_server(proxy: FaultProxy) -> None:
    with connect(proxy) as client:
        rule = proxy.on(Match(direction=TO_SERVER, method="tools/call"), "drop")
        with pytest.raises(snodo.McpError) as caught:
            echo(client, "lost", timeout=0.5)
        assert caught.value.code == -32001 and rule.hits == 1
        assert echo(client, "next") == "next"
    assert len(proxy.sent("tools/call", TO_CLIENT)) == 1


def test_a_duplicated_answer_is_dropped(proxy: FaultProxy) -> None:
    with connect(proxy, SESSION) as client:
        proxy.duplicate(method="tools/call")
        assert echo(client, "once") == "once"
        assert echo(client, "twice") == "twice"
        assert client.ping() == {}


def test_a_line_that_is_not_json_is_skipped(proxy: FaultProxy) -> None:
    with connect(proxy) as client:
        proxy.garbage(method="tools/call")
        assert echo(client, "after garbage") == "after garbage"


def test_an_oversized_answer_trips_max_response_bytes(proxy: FaultProxy) -> None:
    with connect(proxy, max_response_bytes=20_000) as client:
        proxy.oversize(10_000, method="tools/call")
        assert echo(client, "padded") == "padded"
        proxy.oversize(50_000, method="tools/call")
        with pytest.raises(snodo.McpError) as caught:
            echo(client, "too big")
        assert caught.value.code == -32000


def test_delay_and_stall_hold_the_answer(proxy: FaultProxy) -> None:
    with connect(proxy) as client:
        proxy.delay(0.3, method="tools/call")
        started = time.monotonic()
        assert echo(client, "late") == "late"
        assert time.monotonic() - started >= 0.3
        proxy.stall_body("tools/call")
        with pytest.raises(snodo.McpError) as caught:
            echo(client, "held", timeout=0.3)
        assert caught.value.code == -32001
        proxy.wait_stalled()
        proxy.release()
        assert echo(client, "released") == "released"


def test_a_flood_of_server_requests_is_answered_and_stops_at_the_proxy(
    proxy: FaultProxy,
) -> None:
    with connect(proxy, SESSION) as client:
        proxy.flood(20)
        assert echo(client, "flooded") == "flooded"
        answers = proxy.wait_for(lambda m: str(m.id).startswith("snodo-flood-"), 20)
        assert echo(client, "after") == "after"
    assert all(m.direction == TO_SERVER and m.message.get("result") == {} for m in answers)


def test_session_404_is_an_http_fault(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="HTTP fault"):
        proxy.session_404()


def test_closing_the_proxy_ends_the_relay_and_its_server() -> None:
    before = support.children()
    proxy = FaultProxy.stdio(support.snodo_server())
    try:
        with connect(proxy) as client:
            assert echo(client, "up") == "up"
            (relay,) = support.children() - before
            (server,) = _children_of(relay)
            proxy.close()
            support.wait_until(lambda: not support.running(server), 5.0)
            with pytest.raises(snodo.McpError) as caught:
                echo(client, "down")
            assert caught.value.code == -32000
    finally:
        proxy.close()
