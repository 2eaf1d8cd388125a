"""Custom transports (the reference's "Custom transports"): a transport written in the tests,
``tests/support/pipe_transport.py``, passes the same call checks as the built-in connections."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

import snodo
from examples.custom_transport import SocketPairTransport
from snodo.protocol.dialects import SUPPORTED_VERSIONS
from snodo.server import Runtime
from snodo.transports.base import (
    ConnectOptions,
    ListeningTransport,
    NotifyingTransport,
    RequestOptions,
    SessionEndingTransport,
)
from tests.support import client_runtime
from tests.support.client_calls import check_calls, check_errors
from tests.support.pipe_transport import PipeTransport

LATEST = "2026-07-28"
SESSION_ERA = ["2025-11-25", "2025-06-18"]

CASES = [
    pytest.param(LATEST, LATEST, id="2026-pinned"),
    pytest.param(None, LATEST, id="negotiated"),
    *[pytest.param(v, v, id=f"{v}-pinned") for v in SESSION_ERA],
    *[pytest.param([LATEST, v], v, id=f"{v}-fallback") for v in SESSION_ERA],
]


class RequestOnly:
    """A transport with only the required methods (no notify, listen or delete_session)."""

    opened = 0

    def __init__(self, runtime: Any) -> None:
        self._inner = PipeTransport(runtime)

    @classmethod
    def connect(cls, runtime: Any, options: ConnectOptions) -> RequestOnly:
        cls.opened += 1
        return cls(runtime)

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        return self._inner.request(message, options)

    def close(self) -> None:
        self._inner.close()


class NoProgress(RequestOnly):
    """Ignores the progress option."""

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        return self._inner.request(message, replace(options, on_progress=None))


class CountingPipe(PipeTransport):
    """Counts how often the client opened a connection (a reopen after the probe is two)."""

    opened: list[CountingPipe] = []

    @classmethod
    def connect(cls, runtime: Any, options: ConnectOptions) -> CountingPipe:
        transport = cls(runtime)
        cls.opened.append(transport)
        return transport


class SessionPipe(PipeTransport):
    """Reports a session id after initialize and records delete_session calls."""

    def __init__(self, runtime: Any) -> None:
        super().__init__(runtime)
        self.session_id: str | None = None
        self.deleted: list[float | None] = []

    @classmethod
    def connect(cls, runtime: Any, options: ConnectOptions) -> SessionPipe:
        return cls(runtime)

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        response = super().request(message, options)
        if message["method"] == "initialize":
            self.session_id = "session-7"
        return response

    def delete_session(self, timeout: float | None = None) -> None:
        self.deleted.append(timeout)


@pytest.fixture
def runtime() -> Any:
    return client_runtime.build()


@pytest.mark.parametrize(("protocol", "version"), CASES)
def test_a_custom_transport_passes_the_call_checks(protocol: Any, version: str) -> None:
    """Custom transports: any class implementing snodo.Transport, passed as (class, init_arg),
    works like a built-in connection on every version, pinned, negotiated or by fallback."""
    CountingPipe.opened = []
    # the fallback: a runtime that refuses the probe, so the transport is reopened
    rt = client_runtime.build(
        versions=SESSION_ERA if isinstance(protocol, list) else SUPPORTED_VERSIONS
    )
    with snodo.connect((CountingPipe, rt), protocol=protocol) as client:
        assert client.version == version
        check_calls(client)
        check_errors(client)
        if version == LATEST:
            assert LATEST in client.discover()["supportedVersions"]
        else:
            assert client.session is not None and client.ping() == {}
    # probe and reopen as for other connections: the probe's transport is closed, a new one opened
    assert len(CountingPipe.opened) == (2 if isinstance(protocol, list) else 1)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_progress_and_input_handlers_through_a_custom_transport(version: str) -> None:
    """on_progress delivers progress; on_server_request (session era) and the input loop
    (2026-07-28) answer the deploy tool's elicitation through the handlers."""
    rt = client_runtime.build()
    seen: list[dict[str, Any]] = []
    handlers = {"form": lambda params: {"action": "accept", "content": {"approved": True}}}
    with snodo.connect((PipeTransport, rt), protocol=version, input_handlers=handlers) as client:
        result = client.call_tool("count", {"n": 3}, progress=seen.append)
        deployed = client.call_tool("deploy", {})
    assert result["structuredContent"] == {"counted": 3}
    assert [p["progress"] for p in seen] == [1, 2, 3]
    assert deployed["structuredContent"] == {"action": "accept", "given": {"approved": True}}


def test_a_transport_that_ignores_progress_delivers_none(runtime: Any) -> None:
    """A transport that ignores the progress option delivers no progress; the call succeeds."""
    seen: list[dict[str, Any]] = []
    with snodo.connect((NoProgress, runtime), protocol=LATEST) as client:
        result = client.call_tool("count", {"n": 2}, progress=seen.append)
    assert result["structuredContent"] == {"counted": 2}
    assert seen == []


def test_without_notify_only_2026_connections_open(runtime: Any) -> None:
    """notify is optional: without it 2026-07-28 opens, a session-era session is -32602."""
    transport = RequestOnly(runtime)
    try:
        assert not isinstance(transport, NotifyingTransport)
        assert not isinstance(transport, ListeningTransport)
        assert not isinstance(transport, SessionEndingTransport)
    finally:
        transport.close()
    with snodo.connect((RequestOnly, runtime)) as client:
        assert client.version == LATEST
        check_calls(client)
    for protocol in ("2025-11-25", ["2026-07-28", "2025-06-18"]):
        legacy_only = client_runtime.build(versions=SESSION_ERA)
        with pytest.raises(snodo.McpError) as caught:
            snodo.connect((RequestOnly, legacy_only), protocol=protocol)
        assert caught.value.code == -32602


def test_close_ends_an_identified_session_with_delete_session(runtime: Any) -> None:
    """delete_session is optional: close() calls it for a session the server identified,
    waiting at most min(timeout, 5 s)."""
    client = snodo.connect((SessionPipe, runtime), protocol="2025-11-25", timeout=2.0)
    transport = client.transport
    assert isinstance(transport, SessionPipe)
    assert client.session is not None and client.session.session_id == "session-7"
    client.close()
    client.close()
    assert transport.deleted == [2.0]
    stateless = snodo.connect((SessionPipe, runtime), protocol=LATEST)
    stateless.close()
    assert isinstance(stateless.transport, SessionPipe) and stateless.transport.deleted == []


def test_targets_that_are_not_transports_are_refused(runtime: Any) -> None:
    """(class, init_arg) needs a class with connect() and request(); other options are refused."""
    with pytest.raises(TypeError):
        snodo.connect((object, runtime))
    with pytest.raises(TypeError):
        snodo.connect((PipeTransport, runtime, "extra"))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        snodo.connect((PipeTransport, runtime), env={"A": "1"})


def test_threads_share_a_custom_transport_client(runtime: Any) -> None:
    """One client over a custom transport is shared by threads (this one serializes requests)."""
    failures: list[BaseException] = []
    with snodo.connect((PipeTransport, runtime), protocol=LATEST) as client:

        def worker(n: int) -> None:
            try:
                for i in range(5):
                    text = f"{n}-{i}"
                    assert client.call_tool("echo", {"text": text})["content"][0]["text"] == text
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in threads)
    assert failures == []


def test_a_runtime_served_over_a_socket_pair_answers_in_both_modes() -> None:
    """serve_stdio over a socket's streams (examples/custom_transport.py): under gevent a
    socket is already cooperative and must be read on its own hub's thread, not moved to
    gevent's thread pool (which failed with "Cannot switch to a different thread" and left
    every call to its timeout)."""
    runtime = Runtime("socket-pair", "1.0")

    @runtime.tool(description="Echo")
    def echo(arguments: dict[str, Any], ctx: Any) -> str:
        return str(arguments["text"])

    with snodo.connect((SocketPairTransport, runtime), protocol=LATEST) as client:
        for n in range(20):
            result = client.call_tool("echo", {"text": f"n{n}"}, timeout=5.0)
            assert result["content"][0]["text"] == f"n{n}", result
