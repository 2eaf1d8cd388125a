"""The actor proxy (``snodo.actors.start_client``) over real stdio servers and direct runtimes.

A test actor fans 100 calls out through the proxy: every future comes back before any call
completes (the server tool waits on a gate the test opens afterwards), the server sees them run
at once, and every result arrives. Errors are the McpError a Client raises for the same call.
An actor that stops or fails closes its connection (the server process exits); subscription
events reach an owner actor as ``SubscriptionEvent`` messages; a failed connect leaves no
actor. The shared background loop (``snodo.aio.background``) is reference-counted.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

import snodo
from snodo import McpError, Notification, SubscriptionEvent
from snodo.actors import start_client, start_direct
from snodo.actors.client_proxy import ClientProxy, ClientRef
from snodo.aio import background
from snodo.supervision import Actor, call, join, link, registry
from tests.support import client_runtime
from tests.support.stdio_support import (
    PYTHON,
    ROOT,
    no_leaks,
    running,
    wait_until,
    warm_up,
)

LATEST = "2026-07-28"
SESSION_ERA = "2025-11-25"
RUNTIME = "tests.servers.actor_runtime:runtime"
WAIT = 20.0
FAN_OUT = 100


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    warm_up()


def actor_server() -> snodo.Stdio:
    return snodo.Stdio(PYTHON, ["-m", "snodo.server", RUNTIME, "--max-concurrency", "200"])


def text_of(result: Any) -> str:
    assert isinstance(result, dict), result
    return str(result["content"][0]["text"])


@pytest.fixture
def proxied() -> Iterator[ClientRef]:
    """A ClientActor on a fresh stdio server (no child process or fd left after it)."""
    with no_leaks():
        ref = start_client(actor_server(), cwd=str(ROOT), protocol=LATEST)
        try:
            yield ref
        finally:
            ref.stop(timeout=WAIT)
    assert background.shared().thread is None


class Caller(pykka.ThreadingActor):
    """An application actor that calls through the proxy and never waits on a call."""

    def __init__(self, proxy: ClientProxy) -> None:
        super().__init__()
        self.proxy = proxy
        self.futures: list[pykka.Future[Any]] = []
        self.handled = 0

    def fan_out(self, n: int) -> int:
        """Issue ``n`` held calls; how many of them had completed when the last one returned."""
        self.futures = [self.proxy.call_tool("held", {"n": i}) for i in range(n)]
        return sum(1 for future in self.futures if _done(future))

    def other(self) -> int:
        """Another message, handled while the calls are out."""
        self.handled += 1
        return self.handled

    def collect(self) -> list[str]:
        return [text_of(future.get(timeout=WAIT)) for future in self.futures]


def _done(future: pykka.Future[Any]) -> bool:
    try:
        future.get(timeout=0)
    except pykka.Timeout:
        return False
    except Exception:
        return True
    return True


def test_an_actor_issues_a_hundred_calls_without_blocking_and_gets_every_result(
    proxied: ClientRef,
) -> None:
    proxy = proxied.proxy()
    assert isinstance(proxy, ClientProxy)
    assert isinstance(proxy, pykka.ActorProxy)
    caller = Caller.start(proxy)
    try:
        me = caller.proxy()
        completed = me.fan_out(FAN_OUT).get(timeout=WAIT)
        assert completed == 0  # every future came back while the gate held every call
        assert me.other().get(timeout=WAIT) == 1  # the caller's mailbox is not blocked
        # The server runs them all at once (none has answered: the gate is shut).
        wait_until(lambda: text_of(proxy.call_tool("running").get(timeout=WAIT)) == "100", WAIT)
        assert text_of(proxy.call_tool("open_gate").get(timeout=WAIT)) == "open"
        results = me.collect().get(timeout=WAIT)
        assert results == [f"held {i}" for i in range(FAN_OUT)]
        assert len(set(results)) == FAN_OUT
        assert text_of(proxy.call_tool("peak").get(timeout=WAIT)) == str(FAN_OUT)
    finally:
        caller.stop(timeout=WAIT)


def test_the_proxy_calls_are_not_queued_in_the_mailbox(proxied: ClientRef) -> None:
    """A mailbox call made while 10 held calls are out is answered before any of them."""
    proxy = proxied.proxy()
    held = [proxy.call_tool("held", {"n": i}) for i in range(10)]
    wait_until(lambda: text_of(proxy.call_tool("running").get(timeout=WAIT)) == "10", WAIT)
    assert proxy.state.get(timeout=WAIT) == "ready"
    assert proxy.version.get(timeout=WAIT) == LATEST
    assert not any(_done(future) for future in held)
    proxy.call_tool("open_gate").get(timeout=WAIT)
    assert [text_of(f.get(timeout=WAIT)) for f in held] == [f"held {i}" for i in range(10)]


def test_errors_are_the_mcp_error_of_the_same_call_on_a_client() -> None:
    runtime = client_runtime.build()
    ref = start_direct(runtime, protocol=LATEST)
    try:
        proxy = ref.proxy()
        with snodo.direct(runtime, protocol=LATEST) as client:
            for method, args in [
                ("call_tool", ("refuse", {})),
                ("request", ("no/such/method", {})),
                ("read_resource", ("note://missing",)),
                ("get_prompt", ("review", {})),
            ]:
                with pytest.raises(McpError) as on_client:
                    getattr(client, method)(*args)
                with pytest.raises(McpError) as on_proxy:
                    getattr(proxy, method)(*args).get(timeout=WAIT)
                assert type(on_proxy.value) is type(on_client.value)
                expected = (on_client.value.code, on_client.value.message, on_client.value.data)
                assert (on_proxy.value.code, on_proxy.value.message, on_proxy.value.data) == (
                    expected
                ), method
            # And the successes are the same results.
            assert proxy.call_tool("echo", {"text": "hi"}).get(timeout=WAIT) == client.call_tool(
                "echo", {"text": "hi"}
            )
            assert proxy.list_tools().get(timeout=WAIT) == client.list_tools()
            assert proxy.list_resources().get(timeout=WAIT) == client.list_resources()
            assert proxy.list_prompts().get(timeout=WAIT) == client.list_prompts()
            assert (
                proxy.list_resource_templates().get(timeout=WAIT)
                == client.list_resource_templates()
            )
            assert proxy.list_page("tools").get(timeout=WAIT) == client.list_page("tools")
            assert proxy.discover().get(timeout=WAIT) == client.discover()
    finally:
        ref.stop(timeout=WAIT)


def test_a_proxy_call_with_wrong_arguments_fails_in_its_future() -> None:
    ref = start_direct(client_runtime.build(), protocol=LATEST)
    try:
        future = ref.proxy().call_tool("echo", {"text": "x"}, no_such_option=1)
        with pytest.raises(TypeError):
            future.get(timeout=WAIT)
    finally:
        ref.stop(timeout=WAIT)


def test_stopping_the_actor_closes_its_connection_and_the_server_exits() -> None:
    with no_leaks():
        ref = start_client(actor_server(), cwd=str(ROOT), protocol=LATEST)
        proxy = ref.proxy()
        pid = int(text_of(proxy.call_tool("pid").get(timeout=WAIT)))
        held = proxy.call_tool("held", {"n": 0})
        client = ref.calls.client
        assert client is not None and running(pid)
        assert ref.stop(timeout=WAIT) is True
        assert client.closed
        wait_until(lambda: not running(pid), WAIT)
        with pytest.raises(McpError) as in_flight:
            held.get(timeout=WAIT)
        assert in_flight.value.code == -32000
        with pytest.raises(McpError) as later:
            proxy.call_tool("pid").get(timeout=WAIT)
        assert later.value.code == -32000
    assert background.shared().thread is None


def test_close_through_the_proxy_closes_the_connection_and_stops_the_actor() -> None:
    with no_leaks():
        ref = start_client(actor_server(), cwd=str(ROOT), protocol=SESSION_ERA)
        proxy = ref.proxy()
        assert proxy.version.get(timeout=WAIT) == SESSION_ERA
        assert proxy.ping().get(timeout=WAIT) == {}
        pid = int(text_of(proxy.call_tool("pid").get(timeout=WAIT)))
        proxy.close().get(timeout=WAIT)
        assert ref.actor_stopped.wait(WAIT)
        wait_until(lambda: not running(pid), WAIT)
    assert background.shared().thread is None


def test_an_actor_that_fails_closes_its_connection() -> None:
    with no_leaks():
        ref = start_client(actor_server(), cwd=str(ROOT), protocol=LATEST)
        pid = int(text_of(ref.proxy().call_tool("pid").get(timeout=WAIT)))
        client = ref.calls.client
        ref.tell("not a message of a ClientActor")  # crashes it: on_failure closes
        assert ref.actor_stopped.wait(WAIT)
        wait_until(lambda: not running(pid), WAIT)
        assert client is not None and client.closed
    assert background.shared().thread is None


def test_the_connection_closes_when_an_owner_given_ends() -> None:
    """``owner=`` another actor: its end closes the connection (the proxy's calls then fail)."""
    owner = Actor.start()
    ref = start_direct(client_runtime.build(), protocol=LATEST, owner=owner)
    try:
        client = ref.calls.client
        assert client is not None
        assert owner.stop(timeout=WAIT) is True
        wait_until(lambda: client.closed, WAIT)
        with pytest.raises(McpError) as closed:
            ref.proxy().call_tool("echo", {"text": "x"}).get(timeout=WAIT)
        assert closed.value.code == -32000
    finally:
        ref.stop(timeout=WAIT)


class Collector(Actor):
    """A subscription owner: records every SubscriptionEvent it receives."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[Any] = []

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, SubscriptionEvent):
            self.events.append(message.event)
        return None


@pytest.mark.parametrize("version", [LATEST, SESSION_ERA])
def test_subscription_events_reach_the_owner_actor_as_messages(version: str) -> None:
    uri = "mem://actor"
    with no_leaks():
        ref = start_client(actor_server(), cwd=str(ROOT), protocol=version)
        collector = Collector.start()
        try:
            proxy = ref.proxy()
            sub = proxy.listen({"resourceSubscriptions": [uri]}, owner=collector).get(timeout=WAIT)
            assert isinstance(sub, snodo.Subscription)
            assert sub.owner.kind == "actor"
            sub.demand(3)
            for _ in range(3):
                assert text_of(proxy.call_tool("touch", {"uri": uri}).get(timeout=WAIT)) == (
                    "touched"
                )

            def received() -> list[Any]:
                events: list[Any] = call(collector, lambda a: list(a.events), WAIT)
                return events if len(events) == 3 else []

            events = wait_until(received, WAIT)
            assert all(isinstance(e, Notification) for e in events)
            assert [(e.method, e.params["uri"]) for e in events] == [
                ("notifications/resources/updated", uri)
            ] * 3
            sub.close()
        finally:
            collector.stop(timeout=WAIT)
            ref.stop(timeout=WAIT)


def test_listen_through_the_proxy_needs_an_owner() -> None:
    ref = start_direct(client_runtime.build(), protocol=LATEST)
    try:
        with pytest.raises(TypeError, match="owner="):
            ref.proxy().listen({"resourceSubscriptions": ["note://readme"]}, owner=None).get(
                timeout=WAIT
            )
    finally:
        ref.stop(timeout=WAIT)


@pytest.mark.parametrize(
    ("target", "says"),
    [
        (snodo.Stdio("/nonexistent/mcp-server"), "cannot start"),
        (snodo.Stdio(PYTHON, ["-c", "import sys; sys.exit(3)"]), "exited with status 3"),
    ],
    ids=["no-such-command", "server-exits"],
)
def test_a_target_that_fails_to_connect_raises_and_leaves_no_actor(
    target: snodo.Stdio, says: str
) -> None:
    before = {r.actor_urn for r in registry.all()}
    with no_leaks():
        with pytest.raises(McpError, match=says) as failed:
            start_client(target, timeout=5.0)  # the probe talks to the server
        assert failed.value.code == -32000
    assert {r.actor_urn for r in registry.all()} <= before
    assert not [r for r in registry.all() if r.actor_class.__name__ == "ClientActor"]
    assert background.shared().users == 0
    assert background.shared().thread is None


def test_clients_share_one_background_loop_thread() -> None:
    runtime = client_runtime.build()
    first = start_direct(runtime, protocol=LATEST)
    second = start_direct(runtime, protocol=SESSION_ERA)
    try:
        loops = [t for t in threading.enumerate() if t.name == "snodo-aio"]
        assert len(loops) == 1
        assert background.shared().users == 2
        answers = [
            ref.proxy().call_tool("echo", {"text": "a"}).get(timeout=WAIT)["content"]
            for ref in (first, second)
        ]
        assert answers == [[{"type": "text", "text": "a"}]] * 2
        first.stop(timeout=WAIT)
        assert background.shared().users == 1
        assert background.shared().thread is not None and background.shared().thread.is_alive()
    finally:
        first.stop(timeout=WAIT)
        second.stop(timeout=WAIT)
    assert background.shared().users == 0
    assert background.shared().thread is None


def test_the_background_loop_starts_on_first_use_and_ends_with_the_last() -> None:
    loop_of = background.BackgroundLoop("snodo-aio-test")
    assert loop_of.thread is None
    loop = loop_of.acquire()
    assert loop_of.acquire() is loop
    thread = loop_of.thread
    assert thread is not None and thread.daemon and thread.name == "snodo-aio-test"
    assert loop.is_running()
    loop_of.release()
    assert thread.is_alive()
    loop_of.release()
    assert not thread.is_alive()
    assert loop.is_closed()
    loop_of.release()  # one too many: ignored
    assert loop_of.users == 0
    again = loop_of.acquire()
    assert again is not loop and again.is_running()
    loop_of.release()
    assert loop_of.thread is None


def test_starting_a_client_actor_on_the_background_loop_is_refused() -> None:
    """It would wait on the loop it runs on: refused at once, and no actor is left."""
    loop = background.acquire()
    try:

        async def on_the_loop() -> None:
            with pytest.raises(RuntimeError, match="snodo-aio loop"):
                start_direct(client_runtime.build(), protocol=LATEST)

        asyncio.run_coroutine_threadsafe(on_the_loop(), loop).result(WAIT)
        assert background.shared().users == 1
    finally:
        background.release()
    assert not [r for r in registry.all() if r.actor_class.__name__ == "ClientActor"]


class Fragile(Actor):
    """Crashes on "crash"."""

    def on_receive(self, message: Any) -> Any:
        if message == "crash":
            raise RuntimeError("the linked actor crashes")
        return None


def test_a_linked_crash_ends_the_client_actor_and_closes_its_connection() -> None:
    ref = start_direct(client_runtime.build(), protocol=SESSION_ERA)
    fragile = Fragile.start()
    client = ref.calls.client
    assert client is not None
    link(ref, fragile)
    fragile.tell("crash")
    assert ref.actor_stopped.wait(WAIT)
    assert join(ref, WAIT)
    assert client.closed
    assert background.shared().thread is None
