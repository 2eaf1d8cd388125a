"""The client reading a response a transport hands back (issue 12, item 10): JSON-RPC says a
response carries "result" or "error", never both; such a response from a custom transport fails
the call at once with -32000, the same error the stdio transport gives (tests/test_transport_stdio_hostile.py).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import snodo
from examples.custom_transport import SocketPairTransport
from snodo.server import Runtime
from snodo.transports.base import ConnectOptions, RequestOptions

LATEST = "2026-07-28"


class BothTransport:
    """A custom transport whose every answer carries both a result and an error."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    @classmethod
    def connect(cls, init_arg: Any, options: ConnectOptions) -> BothTransport:
        return cls()

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        self.sent.append(message)
        return {
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": {"content": [{"type": "text", "text": "which one?"}]},
            "error": {"code": -32603, "message": "both at once"},
        }

    def notify(self, message: dict[str, Any], options: RequestOptions) -> None:
        self.sent.append(message)

    def close(self) -> None:
        pass


def test_a_custom_transport_response_with_both_result_and_error_is_32000() -> None:
    """Neither the result nor the error can be trusted: -32000 (kind transport) at once."""
    with snodo.connect((BothTransport, None), protocol=LATEST, timeout=30.0) as client:
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("echo", {"text": "hi"})
        assert time.monotonic() - started < 1.0
    assert caught.value.code == -32000
    assert caught.value.kind == "transport"
    assert caught.value.message == (
        'The server sent an invalid response: a response cannot carry both "result" and "error"'
    )


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_an_initialize_answer_with_both_result_and_error_is_32000(version: str) -> None:
    """The initialize answer is read by the same rule: connect() fails with -32000, not with the
    server's error code, and sends no notifications/initialized."""
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect((BothTransport, None), protocol=version, timeout=30.0)
    assert caught.value.code == -32000
    assert "invalid response" in caught.value.message


def test_close_fails_a_custom_transport_call_in_flight_at_once() -> None:
    """Item 3 for custom transports: only the transport can wake a caller blocked in its
    ``request``, and the example transport (examples/custom_transport.py, a Runtime behind a
    socket pair) does: a call with no timeout fails -32000 within a second of ``close()``."""
    release, entered = threading.Event(), threading.Event()
    runtime = Runtime("faults", "1.0")

    @runtime.tool(description="Blocks until released")
    def block(arguments: dict[str, Any], ctx: Any) -> str:
        entered.set()
        release.wait(10.0)
        return "released"

    outcome: list[BaseException | dict[str, Any]] = []
    ended = threading.Event()
    ended_at: list[float] = []
    client = snodo.connect((SocketPairTransport, runtime), protocol=LATEST)
    try:

        def call() -> None:
            try:
                outcome.append(client.call_tool("block", {}, timeout=None))
            except BaseException as error:  # the assertion below says what it was
                outcome.append(error)
            finally:
                ended_at.append(time.monotonic())
                ended.set()

        caller = threading.Thread(target=call)
        caller.start()
        assert entered.wait(5.0), "the tool never started"
        closed_at = time.monotonic()
        client.close()
        assert ended.wait(5.0), "the call did not end after close()"
        took = ended_at[0] - closed_at
        caller.join(5.0)
    finally:
        release.set()
        client.close()
    (error,) = outcome
    assert isinstance(error, snodo.McpError), error
    assert error.code == -32000 and error.kind == "transport", error
    assert took < 1.0, took  # before close() has finished joining the server
