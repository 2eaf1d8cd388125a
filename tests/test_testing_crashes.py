"""snodo.testing.crashes: an owner crashed at a chosen moment closes the connections it owns.

Owners of each kind (a thread, a greenlet under gevent, a snodo actor, the actor behind
``snodo.actors.start_client``) hold a connection to a real HTTP server process; crashing the
owner closes the connection, and a call then fails -32000 saying the owner ended. The crash
armed on a method fires when the client sends that request through a ``FaultProxy``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

import snodo
from snodo.actors import start_client
from snodo.supervision import green_mode
from snodo.testing import ServedRuntime, crash_owner, crash_owner_on, owner, serve_http

WAIT = 10.0


@pytest.fixture(scope="module")
def served() -> Iterator[ServedRuntime]:
    with serve_http("snodo.testing.servers:empty_runtime") as server:
        yield server


def wait_closed(client: snodo.Client) -> None:
    deadline = time.monotonic() + WAIT
    pause = threading.Event()
    while not client.closed:
        assert time.monotonic() < deadline, "the owner's crash did not close the client"
        pause.wait(0.01)


def echo(client: snodo.Client, text: str) -> str:
    answer: Any = client.call_tool("echo", {"text": text}, timeout=5.0)
    return str(answer["content"][0]["text"])


KINDS = ["thread", "actor", "greenlet"] if green_mode() else ["thread", "actor"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_crashed_owner_closes_its_connection_and_calls_say_the_owner_ended(
    kind: Any, served: ServedRuntime
) -> None:
    held = owner(kind)
    client = held.connect(served.target)
    try:
        assert echo(client, "owned") == "owned"
        assert held.alive
        crash_owner(client)
        assert not held.alive and held.crashed
        wait_closed(client)
        with pytest.raises(snodo.McpError) as closed:
            echo(client, "after")
        assert closed.value.code == -32000
        assert "ended" in closed.value.message
    finally:
        client.close()
        held.close()


def test_the_default_owner_follows_the_mode() -> None:
    with owner() as held:
        assert held.kind == ("greenlet" if green_mode() else "thread")
        assert held.run(lambda x: x + 1, 41) == 42


def test_an_error_in_the_owner_is_raised_to_the_caller_and_the_owner_lives_on() -> None:
    with owner("thread") as held:
        with pytest.raises(ZeroDivisionError):
            held.run(lambda: 1 / 0)
        assert held.alive


def test_the_actor_behind_start_client_is_killed_and_its_calls_fail(
    served: ServedRuntime,
) -> None:
    ref = start_client(served.target)
    try:
        proxy = ref.proxy()
        answer: Any = proxy.call_tool("echo", {"text": "actor"}).get(timeout=WAIT)
        assert answer["content"][0]["text"] == "actor"
        crash_owner(ref)
        assert not ref.is_alive()
        with pytest.raises(pykka.ActorDeadError):
            proxy.state.get(timeout=WAIT)
    finally:
        ref.stop(block=False)


def test_a_thread_cannot_be_crashed_from_outside() -> None:
    with pytest.raises(TypeError, match=r"snodo\.testing\.owner"):
        crash_owner(threading.current_thread())


def test_crash_owner_on_a_method_fires_when_the_client_sends_it(served: ServedRuntime) -> None:
    from snodo.testing import FaultProxy

    assert served.url is not None
    with FaultProxy.http(served.url) as proxy, owner() as held:
        target = proxy.target  # (a URL string in kit-proxy's first cut; snodo.Http later)
        client = held.connect(snodo.Http(target) if isinstance(target, str) else target)
        try:
            assert echo(client, "listed") == "listed"
            wire = crash_owner_on(held, proxy, "tools/list")
            assert not wire.fired.is_set()
            try:
                client.list_tools()
            except snodo.McpError:
                pass  # the crash may close the connection before the answer is read
            wire.wait(WAIT)
            assert held.crashed and not held.alive
            wait_closed(client)
            assert [m.method for m in proxy.sent("tools/list")] == ["tools/list"]
        finally:
            client.close()
