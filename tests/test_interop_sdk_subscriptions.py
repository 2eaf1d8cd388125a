"""Client.listen against the official Python SDK's server (mcp 2.3.0), over stdio and HTTP.

The SDK serves ``subscriptions/listen`` itself (``mcp.server.subscriptions.ListenHandler``,
registered by ``MCPServer`` unless ``subscriptions=False``): it acknowledges every requested
core kind, tags each message with the listen id and ends the stream without a result when the
client goes away. The ``announce`` tool of tests/servers/sdk_server.py publishes events on the
SDK's bus (``ctx.notify_*``); the SDK reaches only 2026-07-28 listen streams that way.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import snodo
from snodo import Closed, Notification
from snodo.supervision import call
from tests.support import stdio_support as support

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers"
STATELESS_VERSION = "2026-07-28"
START_DEADLINE = 30.0


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    support.warm_up()


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    with support.no_leaks(pooled=True):
        yield


def _http_server(tmp: Path) -> tuple[subprocess.Popen[bytes], int]:
    log = open(tmp / "sdk-http.log", "wb")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / "sdk_http_server.py"), "0"],
        stdout=subprocess.PIPE,
        stderr=log,
        cwd=str(ROOT),
    )
    log.close()
    assert process.stdout is not None
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    seen = b""
    deadline = time.monotonic() + START_DEADLINE
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while b"\n" not in seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or process.poll() is not None:
                process.kill()
                process.wait(10)
                raise AssertionError(f"sdk_http_server.py gave no port: {seen!r}")
            if selector.select(remaining):
                seen += os.read(fd, 4096)
    word, port = seen.split(b"\n", 1)[0].decode().split()
    assert word == "PORT"
    return process, int(port)


@pytest.fixture(params=["stdio", "http"])
def sdk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[snodo.Client]:
    if request.param == "stdio":
        target = snodo.Stdio(sys.executable, [str(SERVERS / "sdk_server.py")])
        with snodo.connect(target, cwd=str(ROOT), protocol=STATELESS_VERSION) as client:
            yield client
        return
    process, port = _http_server(tmp_path)
    try:
        with snodo.connect(
            snodo.Http(f"http://127.0.0.1:{port}/mcp"), protocol=STATELESS_VERSION
        ) as client:
            yield client
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def test_listen_against_the_sdk_server(sdk: snodo.Client) -> None:
    sub = sdk.listen(
        {
            "toolsListChanged": True,
            "resourceSubscriptions": ["info://server"],
            "taskIds": ["not-an-sdk-key"],
        }
    )
    try:
        assert sub.accepted == {
            "toolsListChanged": True,
            "resourceSubscriptions": ["info://server"],
        }
        sdk.call_tool("announce", {"what": "prompts"})  # not asked for
        sdk.call_tool("announce", {"what": "weather://paris"})  # not asked for
        sdk.call_tool("announce", {"what": "tools"})
        sdk.call_tool("announce", {"what": "info://server"})
        first, second = sub.next(timeout=10), sub.next(timeout=10)
        assert isinstance(first, Notification) and isinstance(second, Notification)
        assert first.method == "notifications/tools/list_changed"
        assert second.method == "notifications/resources/updated"
        assert second.params["uri"] == "info://server"
    finally:
        sub.close()
    ended = sub.next(timeout=0.01)
    assert isinstance(ended, Closed) and ended.reason is not None


def test_many_sdk_subscriptions_and_a_slow_one(sdk: snodo.Client) -> None:
    slow = sdk.listen({"toolsListChanged": True}, max_buffer=2)
    quick = [sdk.listen({"resourceSubscriptions": [f"weather://{c}"]}) for c in ("bern", "paris")]
    try:
        for _ in range(5):
            sdk.call_tool("announce", {"what": "tools"})
        sdk.call_tool("announce", {"what": "weather://paris"})
        sdk.call_tool("announce", {"what": "weather://bern"})
        bern, paris = (q.next(timeout=10) for q in quick)
        assert isinstance(bern, Notification) and bern.params["uri"] == "weather://bern"
        assert isinstance(paris, Notification) and paris.params["uri"] == "weather://paris"
        support.wait_until(
            lambda: (
                call(slow.ref, lambda a: a.stats(), 5.0)
                == {"buffered": 2, "demand": 0, "dropped": 3}
            )
        )
        seen = [slow.next(timeout=10) for _ in range(3)]
        assert seen[0] == snodo.Dropped(3)
        assert all(isinstance(e, Notification) for e in seen[1:])
    finally:
        slow.close()
        for q in quick:
            q.close()
