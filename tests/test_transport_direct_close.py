"""``close()`` of a direct client with calls in flight (issue 12, item 3: "close() must fail every
pending call with -32000 at once, on every transport"; docs/decisions/0029).

A linked call (one with ``progress=``, whose handler runs in a task of its own) fails at once. An
inline call runs the handler in the caller's own thread, so nothing can return that caller
before the handler does: close() tells the handler (``notifications/cancelled``, so
``ctx.cancelled`` turns true) and the call fails with -32000 as soon as the handler returns.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import snodo
from snodo.server import Context, Runtime

LATEST = "2026-07-28"
#: How soon a failed call must return after close().
PROMPT = 1.0


class Blocking:
    """A Runtime whose tools block until ``release`` is set (``polite`` also returns when the
    request is cancelled), and the events that let a test wait for them."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.finished = threading.Event()
        self.saw_cancel: list[bool] = []
        self.runtime = Runtime("faults", "1.0")

        @self.runtime.tool(description="Blocks until released")
        def block(arguments: dict[str, Any], ctx: Context) -> str:
            self.entered.set()
            try:
                assert self.release.wait(10.0), "never released"
                return "released"
            finally:
                self.saw_cancel.append(ctx.cancelled)
                self.finished.set()

        @self.runtime.tool(description="Blocks until released or cancelled")
        def polite(arguments: dict[str, Any], ctx: Context) -> str:
            self.entered.set()
            deadline = time.monotonic() + 10.0
            try:
                # The handler's own loop: it looks at ctx.cancelled between short waits.
                while not ctx.cancelled and time.monotonic() < deadline:
                    if self.release.wait(0.01):
                        return "released"
                return "cancelled" if ctx.cancelled else "timed out"
            finally:
                self.saw_cancel.append(ctx.cancelled)
                self.finished.set()


def call_in_thread(
    client: snodo.Client, tool: str, **options: Any
) -> tuple[threading.Thread, list[Any]]:
    """Call ``tool`` with no timeout on a thread; the outcome lands in the list, then the
    time it returned."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(client.call_tool(tool, {}, timeout=None, **options))
        except snodo.McpError as error:
            outcome.append(error)
        outcome.append(time.monotonic())

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_close_fails_a_linked_direct_call_at_once() -> None:
    """A call with progress= runs its handler in a linked task: close() from another thread
    fails it with -32000 within a second, while the handler is still blocked; the handler is
    told the request was cancelled and ends when released."""
    server = Blocking()
    client = snodo.direct(server.runtime, protocol=LATEST)
    reports: list[Any] = []
    thread, outcome = call_in_thread(client, "block", progress=reports.append)
    try:
        assert server.entered.wait(5.0)
        closed_at = time.monotonic()
        client.close()
        thread.join(5.0)
        assert not thread.is_alive()
        error, returned = outcome
        assert isinstance(error, snodo.McpError), error
        assert error.code == -32000 and error.kind == "transport"
        assert returned - closed_at < PROMPT
        assert not server.finished.is_set()  # the handler is still blocked
    finally:
        server.release.set()
        thread.join(5.0)
    assert server.finished.wait(5.0)
    assert server.saw_cancel == [True]


def test_close_cancels_an_inline_direct_call_and_fails_it_when_the_handler_returns() -> None:
    """A call without progress= runs its handler in the caller's thread: close() tells the
    handler at once (ctx.cancelled), a handler that watches it returns, and the call fails
    with -32000 within a second of close(), not with the handler's answer."""
    server = Blocking()
    client = snodo.direct(server.runtime, protocol=LATEST)
    thread, outcome = call_in_thread(client, "polite")
    try:
        assert server.entered.wait(5.0)
        closed_at = time.monotonic()
        client.close()
        thread.join(5.0)
        assert not thread.is_alive()
    finally:
        server.release.set()
        thread.join(5.0)
    error, returned = outcome
    assert isinstance(error, snodo.McpError), error
    assert error.code == -32000 and error.kind == "transport"
    assert returned - closed_at < PROMPT
    assert server.saw_cancel == [True]


def test_close_does_not_wait_for_an_inline_handler_that_ignores_cancellation() -> None:
    """close() itself never waits for a handler: it returns at once, the handler is told
    (ctx.cancelled), and its caller fails with -32000 once the handler returns (decision 0029:
    an inline call cannot return before the handler running in its own thread)."""
    server = Blocking()
    client = snodo.direct(server.runtime, protocol=LATEST)
    thread, outcome = call_in_thread(client, "block")
    try:
        assert server.entered.wait(5.0)
        started = time.monotonic()
        client.close()
        assert time.monotonic() - started < PROMPT
        assert not outcome  # still in the handler
    finally:
        server.release.set()
        thread.join(5.0)
    assert not thread.is_alive()
    error, _ = outcome
    assert isinstance(error, snodo.McpError) and error.code == -32000
    assert server.saw_cancel == [True]
    with snodo.direct(server.runtime, protocol=LATEST) as again:  # the Runtime serves on
        assert again.call_tool("block", {})["content"][0]["text"] == "released"
