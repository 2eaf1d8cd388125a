"""Client.listen over direct, stdio and HTTP, on 2026-07-28 and a session-era version.

The servers are snodo's own Runtime (tests/servers/subs_runtime.py): in process (direct, HTTP)
or as a child process (stdio). Events are made by calling its tools (``burst``, ``touch``,
``finish``), so every transport is driven the same way; ``open_count`` reports the subscriptions
the server still holds, which is how a cancellation is seen from the server's side.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import snodo
from snodo import Closed, Dropped, McpError, Notification, SubscriptionEvent
from snodo.server import Runtime
from snodo.server.http_server import HttpServer, serve_http
from snodo.supervision import Actor, call, green_mode
from tests.servers.subs_runtime import build
from tests.support.stdio_support import (
    PYTHON,
    ROOT,
    no_leaks,
    script,
    snodo_server,
    wait_until,
    warm_up,
)

LATEST = "2026-07-28"
SESSION_ERA = "2025-11-25"
SUBS_RUNTIME = "tests.servers.subs_runtime:runtime"
URIS = [f"mem://{n}" for n in range(10)]
UPDATED = "notifications/resources/updated"


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    warm_up()


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """No child process or file descriptor outlives a test (idle keep-alive sockets of the
    shared HTTP pool aside); threads and actors are checked by conftest."""
    with no_leaks(pooled=True):
        yield


@dataclass
class Conn:
    client: snodo.Client
    kind: str
    server: HttpServer | None = None
    runtime: Runtime | None = None

    def burst(self, count: int, first: int = 0) -> None:
        self.client.call_tool("burst", {"count": count, "first": first})

    def open_count(self) -> int:
        result = self.client.call_tool("open_count", {})
        assert isinstance(result, dict)
        return int(result["content"][0]["text"])

    def close(self) -> None:
        self.client.close()
        if self.server is not None:
            self.server.close()


def open_conn(kind: str, version: str, runtime: Runtime | None = None) -> Conn:
    if kind == "direct":
        rt = runtime or build()
        return Conn(snodo.direct(rt, protocol=version), kind, runtime=rt)
    if kind == "stdio":
        client = snodo.connect(snodo_server(SUBS_RUNTIME), cwd=str(ROOT), protocol=version)
        return Conn(client, kind)
    rt = runtime or build()
    server = serve_http(rt)
    return Conn(snodo.connect(snodo.Http(server.url), protocol=version), kind, server, rt)


KINDS = ["direct", "stdio", "http"]
ALL = [pytest.param((k, v), id=f"{k}-{v}") for k in KINDS for v in (LATEST, SESSION_ERA)]


@pytest.fixture(params=ALL)
def conn(request: pytest.FixtureRequest) -> Iterator[Conn]:
    kind, version = request.param
    c = open_conn(kind, version)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(params=[pytest.param(k, id=k) for k in KINDS])
def stateless(request: pytest.FixtureRequest) -> Iterator[Conn]:
    c = open_conn(request.param, LATEST)
    try:
        yield c
    finally:
        c.close()


def uris(events: list[Any]) -> list[Any]:
    return [e.params["uri"] if isinstance(e, Notification) else e for e in events]


def wait_buffered(sub: snodo.Subscription, buffered: int, dropped: int) -> None:
    """Wait until the stream actor holds ``buffered`` events and ``dropped`` undelivered drops."""
    wait_until(lambda: call(sub.ref, lambda a: a.stats(), 5.0)[:2] == (buffered, dropped))


def _stats(actor: Any) -> tuple[int, int, int]:
    st = actor.stats()
    return st["buffered"], st["dropped"], st["demand"]


# -- acknowledgement ------------------------------------------------------------------------


def test_listen_returns_the_accepted_subset(conn: Conn) -> None:
    sub = conn.client.listen(
        {"toolsListChanged": True, "resourceSubscriptions": ["mem://0"], "taskIds": ["t1"]}
    )
    try:
        assert sub.accepted == {"toolsListChanged": True, "resourceSubscriptions": ["mem://0"]}
        conn.client.call_tool("touch", {"kind": "prompts"})  # not asked for
        conn.client.call_tool("touch", {"kind": "tools"})
        conn.burst(2)  # mem://1 was not asked for
        first, second = sub.next(timeout=10), sub.next(timeout=10)
        assert isinstance(first, Notification) and isinstance(second, Notification)
        assert first.method == "notifications/tools/list_changed"
        assert (second.method, second.params["uri"]) == (UPDATED, "mem://0")
    finally:
        sub.close()


# -- buffer, demand and overflow ------------------------------------------------------------


@pytest.mark.parametrize(
    ("overflow", "kept"),
    [("drop_oldest", ["mem://7", "mem://8", "mem://9"]), ("drop_newest", URIS[:3])],
)
def test_slow_consumer_gets_the_drop_count_then_what_was_kept(
    conn: Conn, overflow: str, kept: list[str]
) -> None:
    sub = conn.client.listen({"resourceSubscriptions": URIS}, max_buffer=3, overflow=overflow)
    try:
        conn.burst(10)
        wait_until(lambda: _stats_of(sub)[:2] == (3, 7))
        events = [sub.next(timeout=10) for _ in range(4)]
        assert uris(events) == [Dropped(7), *kept]
        conn.burst(1, first=5)  # the buffer is empty again: nothing more was dropped
        assert uris([sub.next(timeout=10)]) == ["mem://5"]
    finally:
        sub.close()


def _stats_of(sub: snodo.Subscription) -> tuple[int, int, int]:
    return call(sub.ref, _stats, 5.0)


class Collector(Actor):
    """An actor owner: opens a subscription, records every SubscriptionEvent."""

    def __init__(self, client: snodo.Client, demand: int) -> None:
        super().__init__()
        self.client = client
        self.initial = demand
        self.events: list[Any] = []
        self.sub: snodo.Subscription | None = None

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, SubscriptionEvent):
            assert self.sub is not None and message.ref is self.sub.ref
            self.events.append(message.event)
        elif message == "crash":
            raise RuntimeError("the owner crashes")
        return None

    def open(self, notifications: dict[str, Any]) -> snodo.Subscription:
        self.sub = self.client.listen(notifications)
        if self.initial:
            self.sub.demand(self.initial)
        return self.sub


def test_an_actor_owner_receives_only_what_it_demanded(conn: Conn) -> None:
    ref = Collector.start(conn.client, 2)
    try:
        sub = call(ref, lambda a: a.open({"resourceSubscriptions": URIS}), 15.0)
        assert sub.owner.kind == "actor"
        conn.burst(5)
        wait_until(lambda: _stats_of(sub)[0] == 3)
        got = call(ref, lambda a: list(a.events), 5.0)
        assert uris(got) == ["mem://0", "mem://1"]
        with pytest.raises(TypeError):
            sub.next()
        sub.demand(3)
        wait_until(lambda: len(call(ref, lambda a: list(a.events), 5.0)) == 5)
        sub.close()
    finally:
        ref.stop()


def test_closed_follows_the_queued_events_and_next_after_the_end_is_an_error(
    stateless: Conn,
) -> None:
    sub = stateless.client.listen({"resourceSubscriptions": URIS})
    stateless.burst(3)
    wait_until(lambda: _stats_of(sub)[0] == 3)
    stateless.client.call_tool("finish", {})
    events = list(sub)
    assert uris(events) == [*URIS[:3], Closed(None)]
    after = sub.next(timeout=0.1)
    assert isinstance(after, Closed) and isinstance(after.reason, McpError)
    assert after.reason.code == -32000


def test_next_after_close_returns_closed_with_an_error_at_once(conn: Conn) -> None:
    baseline = conn.open_count()
    sub = conn.client.listen({"toolsListChanged": True})
    assert conn.open_count() == baseline + (1 if conn.client.dialect.stateless else 0)
    sub.close()
    sub.close()  # idempotent
    sub.demand(5)  # asking an ended stream is harmless
    ended = sub.next(timeout=0.01)
    assert isinstance(ended, Closed) and isinstance(ended.reason, McpError)
    assert ended.reason.code == -32000
    wait_until(lambda: conn.open_count() == baseline)


def test_observe_notification_sees_events_before_any_demand(conn: Conn) -> None:
    seen: list[tuple[str, Any]] = []
    conn.client._observe_notification = lambda m, p: seen.append((m, p.get("uri")))  # type: ignore[method-assign]
    sub = conn.client.listen({"resourceSubscriptions": URIS}, max_buffer=1)
    try:
        conn.burst(4)
        wait_until(lambda: len(seen) == 4)
        assert seen == [(UPDATED, u) for u in URIS[:4]]
    finally:
        sub.close()


# -- owners ---------------------------------------------------------------------------------


def test_an_owner_thread_that_exits_cancels_its_subscription(conn: Conn) -> None:
    baseline = conn.open_count()
    opened: list[snodo.Subscription] = []
    worker = threading.Thread(
        target=lambda: opened.append(conn.client.listen({"toolsListChanged": True}))
    )
    worker.start()
    worker.join(30)
    assert opened and opened[0].owner.kind == ("greenlet" if green_mode() else "thread")
    wait_until(lambda: not opened[0].ref.is_alive())
    wait_until(lambda: conn.open_count() == baseline)
    assert isinstance(opened[0].next(timeout=0.01), Closed)


def test_an_owner_actor_that_crashes_cancels_its_subscription(conn: Conn) -> None:
    baseline = conn.open_count()
    ref = Collector.start(conn.client, 1)
    sub = call(ref, lambda a: a.open({"toolsListChanged": True}), 15.0)
    conn.client.call_tool("touch", {"kind": "tools"})
    wait_until(lambda: len(call(ref, lambda a: list(a.events), 5.0)) == 1)
    ref.tell("crash")
    wait_until(lambda: not ref.is_alive())
    wait_until(lambda: not sub.ref.is_alive())
    wait_until(lambda: conn.open_count() == baseline)


def test_an_explicit_owner_is_used() -> None:
    c = open_conn("direct", LATEST)
    try:
        ref = Collector.start(c.client, 0)
        sub = c.client.listen({"toolsListChanged": True}, owner=ref)
        call(ref, lambda a: setattr(a, "sub", sub), 5.0)
        sub.demand(1)
        c.client.call_tool("touch", {"kind": "tools"})
        wait_until(lambda: len(call(ref, lambda a: list(a.events), 5.0)) == 1)
        ref.stop()
        wait_until(lambda: not sub.ref.is_alive())
        with pytest.raises(TypeError):
            c.client.listen({"toolsListChanged": True}, owner="someone")
    finally:
        c.close()


# -- endings --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [LATEST, SESSION_ERA])
def test_a_killed_stdio_server_ends_open_subscriptions_with_32000(version: str) -> None:
    with no_leaks():
        c = open_conn("stdio", version)
        try:
            sub = c.client.listen({"toolsListChanged": True, "resourceSubscriptions": URIS})
            c.burst(2)
            result = c.client.call_tool("pid", {})
            assert isinstance(result, dict)
            os.kill(int(result["content"][0]["text"]), signal.SIGKILL)
            events = list(sub)
            assert uris(events[:2]) == URIS[:2]
            end = events[-1]
            assert isinstance(end, Closed) and end.reason is not None
            assert end.reason.code == -32000 and len(events) == 3
        finally:
            c.close()


@pytest.mark.parametrize("version", [LATEST, SESSION_ERA])
def test_closing_a_stdio_client_ends_its_subscriptions_with_32000(version: str) -> None:
    c = open_conn("stdio", version)
    sub = c.client.listen({"toolsListChanged": True})
    c.close()
    end = sub.next(timeout=10)
    assert isinstance(end, Closed) and end.reason is not None and end.reason.code == -32000


@pytest.mark.parametrize("kind", ["direct", "http"])
def test_closing_the_client_leaves_direct_and_http_subscriptions_open(kind: str) -> None:
    c = open_conn(kind, LATEST)
    try:
        sub = c.client.listen({"resourceSubscriptions": URIS})
        c.client.close()
        assert c.runtime is not None
        c.runtime.resource_updated("mem://3")
        assert uris([sub.next(timeout=10)]) == ["mem://3"]
        sub.close()
        wait_until(lambda: c.runtime is not None and c.runtime.subscription_source.count == 0)  # type: ignore[union-attr]
    finally:
        c.close()


@pytest.mark.parametrize("version", [LATEST, SESSION_ERA])
def test_a_cut_http_stream_ends_with_32000(version: str) -> None:
    """The server process is killed while the stream is open (the shared keep-alive pool may
    keep a socket to it, so only the child is checked, by waiting for it)."""
    proc = subprocess.Popen(
        [PYTHON, "-m", "snodo.server", "--http", "--port", "0", SUBS_RUNTIME],
        cwd=str(ROOT),
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        url = line.split("serving ", 1)[1].split()[0]
        with snodo.connect(snodo.Http(url), protocol=version) as client:
            sub = client.listen({"resourceSubscriptions": URIS})
            client.call_tool("burst", {"count": 1})
            assert uris([sub.next(timeout=10)]) == ["mem://0"]
            proc.kill()
            end = sub.next(timeout=20)  # session era: after the GET retries
            assert isinstance(end, Closed) and end.reason is not None
            assert end.reason.code == -32000
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def test_a_closing_http_server_ends_listen_streams_gracefully() -> None:
    c = open_conn("http", LATEST)
    sub = c.client.listen({"toolsListChanged": True})
    assert c.server is not None
    c.server.close()
    assert sub.next(timeout=10) == Closed(None)
    c.client.close()


# -- many at once, and races ----------------------------------------------------------------


@pytest.mark.parametrize("version", [LATEST, SESSION_ERA])
def test_fifty_subscriptions_share_one_stdio_connection(version: str) -> None:
    with no_leaks():
        c = open_conn("stdio", version)
        try:
            base = c.open_count()  # a session-era session holds one channel
            subs = [c.client.listen({"resourceSubscriptions": [f"mem://{n}"]}) for n in range(50)]
            if version == LATEST:
                assert c.open_count() == 50
            c.burst(50)
            for n, sub in enumerate(subs):
                assert uris([sub.next(timeout=10)]) == [f"mem://{n}"]
            for sub in subs[::2]:
                sub.close()
            if version == LATEST:
                wait_until(lambda: c.open_count() == 25)
            c.burst(50)
            for n, sub in enumerate(subs):
                if n % 2:
                    assert uris([sub.next(timeout=10)]) == [f"mem://{n}"]
                else:
                    assert isinstance(sub.next(timeout=0.01), Closed)
            for sub in subs[1::2]:
                sub.close()
            wait_until(lambda: c.open_count() == base)
        finally:
            c.close()


def test_nothing_is_delivered_after_close_returns(conn: Conn) -> None:
    ref = Collector.start(conn.client, 10_000)
    try:
        sub = call(ref, lambda a: a.open({"resourceSubscriptions": URIS}), 15.0)
        racing = threading.Thread(target=lambda: [conn.burst(10) for _ in range(20)])
        racing.start()
        wait_until(lambda: call(ref, lambda a: len(a.events), 5.0) > 0)
        sub.close()
        count = call(ref, lambda a: len(a.events), 5.0)
        racing.join(60)
        conn.burst(10)
        assert call(ref, lambda a: len(a.events), 5.0) == count
        assert not sub.ref.is_alive()
    finally:
        ref.stop()


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["direct", "http"])
def test_a_runtime_without_a_subscription_source_answers_32601(kind: str) -> None:
    c = open_conn(kind, LATEST, Runtime("plain", subscriptions=False))
    try:
        with pytest.raises(McpError) as caught:
            c.client.listen({"toolsListChanged": True})
        assert caught.value.code == -32601
    finally:
        c.close()


def test_an_invalid_filter_is_32602(stateless: Conn) -> None:
    with pytest.raises(McpError) as caught:
        stateless.client.listen({"resourceSubscriptions": "mem://0"})
    assert caught.value.code == -32602


def test_request_refuses_listen_and_arguments_are_checked() -> None:
    c = open_conn("direct", LATEST)
    try:
        with pytest.raises(ValueError):
            c.client.request("subscriptions/listen", {"notifications": {}})
        with pytest.raises(ValueError):
            c.client.listen({}, max_buffer=0)
        with pytest.raises(ValueError):
            c.client.listen({}, overflow="block")
        with pytest.raises(TypeError):
            c.client.listen(["toolsListChanged"])  # type: ignore[arg-type]
    finally:
        c.close()


def scripted(mode: str, log: str | None = None) -> snodo.Client:
    args = ["--log", log] if log else []
    return snodo.connect(
        script("scripted_listen.py", *args), env={"LISTEN_MODE": mode}, protocol=LATEST
    )


def test_no_acknowledgement_within_timeout_is_32001_and_cancels(tmp_path: Any) -> None:
    log = tmp_path / "in.log"
    with scripted("silent", str(log)) as client:
        with pytest.raises(McpError) as caught:
            client.listen({"toolsListChanged": True}, timeout=0.3)
        assert caught.value.code == -32001
        wait_until(lambda: "notifications/cancelled" in log.read_text())


@pytest.mark.parametrize(("mode", "code"), [("early-end", -32000), ("error", -32602)])
def test_a_stream_refused_or_ended_before_its_acknowledgement(mode: str, code: int) -> None:
    with scripted(mode) as client:
        with pytest.raises(McpError) as caught:
            client.listen({"toolsListChanged": True})
        assert caught.value.code == code


def test_a_server_cancelling_the_stream_is_a_graceful_end() -> None:
    with scripted("ack-cancel") as client:
        sub = client.listen({"toolsListChanged": True})
        events = list(sub)
        assert [type(e) for e in events] == [Notification, Closed]
        assert events[-1] == Closed(None)


def test_an_error_response_after_the_acknowledgement_ends_with_that_error() -> None:
    with scripted("ack-error") as client:
        sub = client.listen({"toolsListChanged": True})
        events = list(sub)
        end = events[-1]
        assert isinstance(end, Closed) and end.reason is not None and end.reason.code == -32603


def test_a_transport_without_listen_is_refused() -> None:
    class Plain:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def request(self, message: dict[str, Any], options: Any) -> dict[str, Any]:
            result: dict[str, Any] = self.inner.request(message, options)
            return result

        def close(self) -> None:
            self.inner.close()

    from snodo.options import build_options
    from snodo.protocol.dialects import get
    from snodo.transports.direct import DirectTransport

    client = snodo.Client(Plain(DirectTransport(build())), get(LATEST), build_options())
    try:
        with pytest.raises(TypeError):
            client.listen({"toolsListChanged": True})
    finally:
        client.close()


def test_closing_a_stdio_subscription_sends_notifications_cancelled(tmp_path: Any) -> None:
    log = tmp_path / "stdin.log"
    target = snodo_server(SUBS_RUNTIME, log=log)
    with snodo.connect(target, cwd=str(ROOT), protocol=LATEST) as client:
        sub = client.listen({"toolsListChanged": True})
        sent = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        listen_id = next(m["id"] for m in sent if m.get("method") == "subscriptions/listen")
        sub.close()

        def cancelled() -> bool:
            lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
            return any(
                m.get("method") == "notifications/cancelled"
                and m["params"]["requestId"] == listen_id
                for m in lines
            )

        wait_until(cancelled)
        result = client.call_tool("open_count", {})
        assert isinstance(result, dict) and result["content"][0]["text"] == "0"


def test_an_http_subscription_event_over_max_response_bytes_ends_the_stream() -> None:
    runtime = build()
    with serve_http(runtime) as server:
        with snodo.connect(
            snodo.Http(server.url), protocol=LATEST, max_response_bytes=4096
        ) as client:
            sub = client.listen({"resourceSubscriptions": ["mem://1"]})
            runtime.resource_updated("mem://1")
            assert uris([sub.next(timeout=10)]) == ["mem://1"]
            source = runtime.subscription_source
            assert source is not None
            source.publish(UPDATED, {"uri": "mem://1", "padding": "x" * 8192})
            end = sub.next(timeout=10)
            assert isinstance(end, Closed) and end.reason is not None
            assert end.reason.code == -32000
            assert end.reason.cause == ("max_response_bytes", 4096)


def test_the_subscriptions_example_runs() -> None:
    done = subprocess.run(
        [PYTHON, str(ROOT / "examples" / "subscriptions.py")],
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=45,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "accepted: {'toolsListChanged': True, 'resourceSubscriptions'" in done.stdout
    assert "slow consumer: Dropped(n=7)" in done.stdout
    assert "actor saw: ['file:///notes.md', 'file:///notes.md', 'file:///notes.md']" in done.stdout


def test_an_http_listen_stream_whose_backlog_fills_ends_without_losing_events_silently(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """snodo's HTTP server ends a listen stream rather than drop its events; the client sees an
    abrupt end (-32000) after the events that were sent."""
    import snodo.server.http_server as server_http

    monkeypatch.setattr(server_http, "LISTEN_BACKLOG", 1)
    c = open_conn("http", LATEST)
    try:
        assert c.runtime is not None and c.runtime.subscription_source is not None
        source = c.runtime.subscription_source
        sub = c.client.listen({"resourceSubscriptions": URIS}, max_buffer=10_000)
        for _ in range(2000):
            c.runtime.resource_updated("mem://0")
        assert source.count == 0
        sub.demand(10_000)
        events = []
        while not isinstance(event := sub.next(timeout=10), Closed):
            events.append(event)
        assert event.reason is not None and event.reason.code == -32000
        assert 0 < len(events) < 2000
        assert all(e == Notification(UPDATED, events[0].params) for e in events)
    finally:
        c.close()


@pytest.mark.parametrize("kind", ["direct", "http"])
def test_closing_an_session_era_client_ends_its_session_subscriptions(kind: str) -> None:
    """Decision 0017: the session is over, so are the subscriptions that used it."""
    c = open_conn(kind, SESSION_ERA)
    try:
        sub = c.client.listen({"toolsListChanged": True})
        assert c.runtime is not None and c.runtime.subscription_source is not None
        c.client.close()
        end = sub.next(timeout=10)
        assert isinstance(end, Closed) and end.reason is not None and end.reason.code == -32000
        wait_until(lambda: c.runtime.subscription_source.count == 0)  # type: ignore[union-attr]
    finally:
        c.close()


@pytest.mark.parametrize("kind", ["direct", "http"])
def test_an_event_invalidates_the_response_cache_before_any_demand(kind: str) -> None:
    """The seed's cache rule, end to end: a subscription event removes the cached read of its
    URI when it reaches the client, though the owner has demanded nothing."""
    from snodo.server import CacheHint

    reads = iter(range(1, 100))
    runtime = Runtime("cached", cache_hints={"resources": CacheHint(60_000, "public")})
    runtime.add_resource("mem://doc", lambda ctx: f"read {next(reads)}")
    server = serve_http(runtime) if kind == "http" else None
    client = (
        snodo.connect(snodo.Http(server.url), protocol=LATEST, cache=True)
        if server is not None
        else snodo.direct(runtime, cache=True)
    )
    try:

        def text() -> str:
            result = client.read_resource("mem://doc")
            assert isinstance(result, dict)
            return str(result["contents"][0]["text"])

        assert text() == "read 1"
        assert text() == "read 1"  # cached
        sub = client.listen({"resourceSubscriptions": ["mem://doc"]}, max_buffer=1)
        runtime.resource_updated("mem://doc")
        wait_until(lambda: _stats_of(sub)[0] == 1)  # arrived, buffered, not demanded
        assert text() == "read 2"
        sub.close()
    finally:
        client.close()
        if server is not None:
            server.close()
