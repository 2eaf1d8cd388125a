"""snodo.aio.AsyncFleet against real servers: snodo Runtimes over stdio (child processes) and
HTTP (``serve_http`` on 127.0.0.1): routed calls as coroutines (many in flight at once), the
catalog, a lazy server started by its first call, a server's AsyncClient made again after an
idle stop, reload, and nothing left after ``aclose()``. (asyncio only: under gevent the module
is skipped, as every snodo.aio test is.)"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import snodo.aio
from snodo import McpError
from snodo.server.http_server import serve_http
from snodo.supervision import green_mode
from tests.servers.subs_runtime import build
from tests.support.stdio_support import PYTHON, ROOT, gone, no_leaks, wait_until

pytestmark = pytest.mark.skipif(
    green_mode(), reason="asyncio and gevent are two schedulers: snodo.aio is for asyncio programs"
)

SUBS = "tests.servers.subs_runtime:runtime"


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    with no_leaks(pooled=True):
        yield


def stdio(**keys: Any) -> dict[str, Any]:
    return {"command": PYTHON, "args": ["-m", "snodo.server", SUBS], "cwd": str(ROOT), **keys}


def text(result: Any) -> str:
    assert isinstance(result, dict)
    return str(result["content"][0]["text"])


def test_routed_calls_are_coroutines_many_in_flight() -> None:
    server = serve_http(build())

    async def main() -> None:
        config = {"a": stdio(), "b": {"type": "http", "url": server.url}}
        async with await snodo.aio.AsyncFleet.open(config) as fleet:
            assert [fleet.status()[n]["state"] for n in ("a", "b")] == ["ready", "ready"]
            names = {tool["name"] for tool in await fleet.list_tools()}
            assert {"a_pid", "b_pid", "a_touch"} <= names
            threads = threading.active_count()
            before = time.monotonic()
            results = await asyncio.gather(
                *(fleet.call_tool(f"{'ab'[n % 2]}_touch", {"kind": "tools"}) for n in range(64))
            )
            assert [text(result) for result in results] == ["tools"] * 64
            assert threading.active_count() <= threads + 1  # no thread per call in flight
            for name in ("a", "b"):  # the routed calls count as the servers' last successes
                assert fleet.status()[name]["since_success"] <= time.monotonic() - before
            pid = int(text(await fleet.call_tool("a_pid", {})))
            assert pid == fleet.status()["a"]["pid"]
            client = await fleet.client("a")
            assert isinstance(client, snodo.aio.AsyncClient)
            assert client is await fleet.client("a")
            read = await fleet.read_resource("mem://0", server="b")
            assert isinstance(read, dict)
            assert read["contents"][0]["text"] == "zero"
            with pytest.raises(McpError) as unknown:
                await fleet.call_tool("nobody_pid", {})
            assert unknown.value.code == -32602
        assert fleet.status()["a"]["state"] == "stopped"
        assert wait_until(lambda: gone(pid), timeout=10.0)

    try:
        asyncio.run(main())
    finally:
        server.close()


def test_a_lazy_server_starts_on_its_first_call_and_again_after_an_idle_stop() -> None:
    async def main() -> None:
        fleet = await snodo.aio.AsyncFleet.open({"a": stdio()}, start="lazy", idle_timeout=1.0)
        try:
            assert fleet.status()["a"]["state"] == "stopped"
            first = int(text(await fleet.call_tool("a_pid", {})))
            old = await fleet.client("a")
            wait_until(lambda: fleet.status()["a"]["state"] == "idle", timeout=10.0)
            assert wait_until(lambda: gone(first), timeout=10.0)
            second = int(text(await fleet.call_tool("a_pid", {})))
            assert second != first
            assert (await fleet.client("a")) is not old
            done = await fleet.reload({"a": stdio(), "c": stdio(start="eager")})
            assert done["added"] == ["c"]
            assert len(fleet) == 2
            assert "c" in fleet
            assert text(await fleet.call_tool("c_touch", {"kind": "tools"})) == "tools"
        finally:
            await fleet.aclose()
            await fleet.aclose()

    asyncio.run(main())
