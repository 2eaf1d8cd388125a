"""The reference's "Progress" section over direct: each test names its rule."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pykka
import pytest

import snodo
from tests.support import client_runtime
from tests.support.client_support import Wire


@pytest.fixture
def observed() -> client_runtime.Observed:
    return client_runtime.Observed()


@pytest.fixture
def runtime(observed: client_runtime.Observed) -> Any:
    return client_runtime.build(observed=observed)


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25", "2025-06-18"])
def test_progress_function_is_called_in_the_calling_thread_before_return(
    runtime: Any, version: str, wire: Wire, observed: client_runtime.Observed
) -> None:
    """A function is called in the requesting thread with each notification's params."""
    caller = threading.get_ident()
    seen: list[tuple[int, dict[str, Any]]] = []
    with snodo.direct(runtime, protocol=version) as client:
        result = client.call_tool(
            "count", {"n": 3}, progress=lambda p: seen.append((threading.get_ident(), p))
        )
    assert result["structuredContent"] == {"counted": 3}
    assert [p["progress"] for _, p in seen] == [1, 2, 3]
    assert {t for t, _ in seen} == {caller}
    token = wire.requests("tools/call")[0]["params"]["_meta"]["progressToken"]
    assert token == wire.requests("tools/call")[0]["id"]
    assert all(p["progressToken"] == token for _, p in seen)
    assert seen[0][1]["total"] == 3
    assert seen[0][1]["message"] == "step 1"


def test_direct_handler_runs_in_a_linked_task(
    runtime: Any, observed: client_runtime.Observed
) -> None:
    """A direct client's handler runs in a linked task while the caller receives the reports."""
    with snodo.direct(runtime) as client:
        client.call_tool("count", {"n": 1}, progress=lambda p: None)
        client.call_tool("count", {"n": 1})
    with_progress, without = observed.threads
    assert with_progress != threading.get_ident()
    assert without == threading.get_ident()


def test_progress_to_a_queue(runtime: Any) -> None:
    """progress= a queue.Queue receives snodo.Progress(params)."""
    reports: queue.Queue[Any] = queue.Queue()
    with snodo.direct(runtime) as client:
        client.call_tool("count", {"n": 2}, progress=reports)
    got = [reports.get_nowait(), reports.get_nowait()]
    assert all(isinstance(r, snodo.Progress) for r in got)
    assert [r.params["progress"] for r in got] == [1, 2]


def test_progress_to_an_actor(runtime: Any) -> None:
    """progress= a Pykka actor ref is sent snodo.Progress(params)."""
    received: queue.Queue[Any] = queue.Queue()

    class Sink(pykka.ThreadingActor):
        def on_receive(self, message: Any) -> None:
            received.put(message)

    ref = Sink.start()
    try:
        with snodo.direct(runtime) as client:
            client.call_tool("count", {"n": 2}, progress=ref)
        got = [received.get(timeout=5), received.get(timeout=5)]
    finally:
        ref.stop(timeout=5)
    assert [g.params["progress"] for g in got] == [1, 2]


def test_progress_token_in_meta_and_progress_raises(runtime: Any, wire: Wire) -> None:
    """Passing a "progressToken" in :meta as well as progress: raises ArgumentError."""
    with snodo.direct(runtime) as client, pytest.raises(ValueError):
        client.call_tool("count", {}, progress=lambda p: None, meta={"progressToken": "mine"})
    assert wire.sent == []


def test_bad_progress_target_raises(runtime: Any) -> None:
    """progress must be a callable, a queue or an actor ref."""
    with snodo.direct(runtime) as client, pytest.raises(TypeError):
        client.call_tool("count", {}, progress=42)


def test_progress_function_that_raises_cancels_the_request(
    runtime: Any, observed: client_runtime.Observed
) -> None:
    """A progress function that raises abandons the request; the handler sees the cancellation."""

    class Stop(Exception):
        pass

    def stop(params: dict[str, Any]) -> None:
        if params["progress"] >= 2:
            raise Stop

    with snodo.direct(runtime) as client, pytest.raises(Stop):
        client.call_tool("forever", {}, progress=stop)
    assert observed.cancelled.wait(10), "the in-process handler was not cancelled"


def test_no_progress_token_without_progress(runtime: Any, wire: Wire) -> None:
    """Without progress: no progressToken is sent and no reports are delivered."""
    with snodo.direct(runtime) as client:
        client.call_tool("count", {"n": 2})
    assert "progressToken" not in wire.requests("tools/call")[0]["params"]["_meta"]
