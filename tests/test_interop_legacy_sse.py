"""snodo over the HTTP+SSE transport of 2024-11-05 against a real server written with the
official TypeScript SDK 1.0.1 (``SSEServerTransport``; tests/interop/legacy_sse_server.mjs on
node's http, 127.0.0.1): ``snodo.Sse``, and ``snodo.Http``'s fallback (docs/decisions/0040).
The server counts every message the SDK accepted from a POST (``GET /stats``), so the tests see
what was sent, and that nothing was sent twice."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
from tests.support.everything_support import INTEROP, ensure_installed
from tests.support.started_processes import announced_port, stop
from tests.support.stdio_support import no_leaks, wait_until

SCRIPT = INTEROP / "legacy_sse_server.mjs"
ROOTS = [{"uri": "file:///work/project", "name": "project"}]


class LegacyServer:
    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/sse"

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=5) as answer:
            data: dict[str, Any] = json.loads(answer.read())
        return data


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LegacyServer]:
    node = ensure_installed()
    log = Path(tmp_path_factory.mktemp("legacy-sse")) / "server.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [node, str(SCRIPT)], cwd=INTEROP, stdout=subprocess.PIPE, stderr=sink
        )
    try:
        port = announced_port(process, log, "legacy_sse_server.mjs")
        yield LegacyServer(port)
    finally:
        stop(process)


def _text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


def test_sse_lists_calls_reads_and_gets_prompts(server: LegacyServer) -> None:
    """Spec 2024-11-05 transports: GET opens the stream, the endpoint event names the POST URL,
    responses come back as message events. ``snodo.Sse`` implies 2024-11-05."""
    seen: list[dict[str, Any]] = []
    with no_leaks(pooled=True):
        client = snodo.connect(snodo.Sse(server.url))
        try:
            assert client.session is not None
            assert client.session.version == "2024-11-05"
            assert client.session.server_info == {"name": "legacy-sse-server", "version": "1.0.1"}
            names = [tool["name"] for tool in client.list_tools()]
            assert names[:3] == ["echo", "progress", "roots"]
            assert _text(client.call_tool("echo", {"text": "héllo"})) == "héllo"
            done = client.call_tool("progress", {"steps": 3}, progress=seen.append)
            assert _text(done) == "did 3 steps"
            assert [p["progress"] for p in seen] == [1, 2, 3]
            assert all(p["total"] == 3 for p in seen)
            assert [r["uri"] for r in client.list_resources()] == ["note://hello"]
            read = client.read_resource("note://hello")
            assert read["contents"][0]["text"] == "the note note://hello"
            assert [p["name"] for p in client.list_prompts()] == ["greet"]
            prompt = client.get_prompt("greet", {"name": "Ada"})
            assert prompt["messages"][0]["content"]["text"] == "Hello, Ada!"
            assert client.ping() == {}
        finally:
            client.close()
        assert not [t for t in threading.enumerate() if t.name.startswith("snodo-sse")]


def test_server_requests_are_answered_by_the_input_handlers(server: LegacyServer) -> None:
    """The SDK's ``listRoots()`` and ``createMessage()`` during a call arrive on the stream; the
    handlers answer them with a POST each."""
    asked: list[str] = []

    def roots(params: dict[str, Any]) -> dict[str, Any]:
        asked.append("roots")
        return {"roots": ROOTS}

    def sampling(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["messages"][0]["content"]["text"])
        content = {"type": "text", "text": "sampled"}
        return {"role": "assistant", "content": content, "model": "m"}

    client = snodo.connect(
        snodo.Sse(server.url), input_handlers={"roots": roots, "sampling": sampling}
    )
    try:
        assert json.loads(_text(client.call_tool("roots", {}))) == ROOTS
        assert _text(client.call_tool("sample", {"prompt": "hi"})) == "sampled"
        assert asked == ["roots", "hi"]
    finally:
        client.close()


def test_server_log_messages_reach_the_log_handler(server: LegacyServer) -> None:
    logs: list[Any] = []
    client = snodo.connect(snodo.Sse(server.url), log_handler=logs.append)
    try:
        assert _text(client.call_tool("log", {"text": "note"})) == "logged"
        wait_until(lambda: logs, timeout=5.0)
        assert logs[0].data == "note" and logs[0].level == "info"
    finally:
        client.close()


def test_sse_refuses_a_protocol_without_2024_11_05_before_connecting(server: LegacyServer) -> None:
    before = server.stats()["posts"].get("initialize", 0)
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Sse(server.url), protocol=["2025-11-25", "2025-06-18"])
    assert caught.value.code == -32602
    assert caught.value.data["supported"] == ["2024-11-05"]
    assert server.stats()["posts"].get("initialize", 0) == before


def test_http_falls_back_to_the_legacy_stream_when_2024_11_05_is_allowed(
    server: LegacyServer,
) -> None:
    """Spec 2025-03-26 "Backwards Compatibility": the POST of initialize is refused with a 4xx
    (405 here), then a GET of the same URL opens the legacy stream."""
    refused = len(server.stats()["refused"])
    client = snodo.connect(snodo.Http(server.url), protocol=["2025-06-18", "2024-11-05"])
    try:
        assert client.session is not None and client.session.version == "2024-11-05"
        assert _text(client.call_tool("echo", {"text": "fell back"})) == "fell back"
    finally:
        client.close()
    assert server.stats()["refused"][refused:] == [["POST", "/sse", 405]]


def test_http_without_2024_11_05_allowed_fails_as_before(server: LegacyServer) -> None:
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Http(server.url), protocol=["2025-11-25", "2025-06-18"])
    assert caught.value.code == -32000
    assert caught.value.cause[:2] == ("http_status", 405)


def test_a_dropped_stream_fails_the_call_at_once_and_nothing_is_resent(
    server: LegacyServer,
) -> None:
    """The server ends the stream mid-call: the call fails with -32000 at once (not at its
    timeout), its POST went out once, and the connection reports its end."""
    states: list[Any] = []
    client = snodo.connect(snodo.Sse(server.url), timeout=20.0, on_state=states.append)
    try:
        before = server.stats()["posts"].get("tools/call", 0)
        started = time.monotonic()
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("drop", {})
        assert time.monotonic() - started < 5.0
        assert caught.value.code == -32000
        assert caught.value.cause in (("sse_ended",), ("http", caught.value.cause[-1]))
        assert "event stream" in caught.value.message
        assert server.stats()["posts"].get("tools/call", 0) == before + 1
        wait_until(lambda: any(s.state == "closed" for s in states), timeout=5.0)
        with pytest.raises(snodo.McpError) as later:
            client.call_tool("echo", {"text": "x"})
        assert later.value.code == -32000
    finally:
        client.close()


def test_an_oversized_message_event_fails_its_call(server: LegacyServer) -> None:
    """As on Streamable HTTP: -32000 with cause ("max_response_bytes", limit)."""
    client = snodo.connect(snodo.Sse(server.url), max_response_bytes=4096)
    try:
        assert _text(client.call_tool("big", {"size": 100})) == "x" * 100
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("big", {"size": 10_000})
        assert caught.value.code == -32000
        assert caught.value.cause == ("max_response_bytes", 4096)
    finally:
        client.close()


async def _async_calls(url: str) -> tuple[str, list[int]]:
    import snodo.aio

    seen: list[int] = []
    client = await snodo.aio.connect(snodo.Sse(url))
    try:
        done = await client.call_tool(
            "progress", {"steps": 2}, progress=lambda p: seen.append(p["progress"])
        )
        return _text(done), seen
    finally:
        await client.aclose()


def test_asyncio_client_over_sse(server: LegacyServer) -> None:
    """``snodo.aio`` over ``Sse`` runs the blocking requests on its worker pool."""
    import asyncio

    text, seen = asyncio.run(_async_calls(server.url))
    assert text == "did 2 steps"
    assert seen == [1, 2]


def test_a_fleet_entry_of_type_sse_connects_over_http_sse(server: LegacyServer) -> None:
    """``"type": "sse"`` in an ``mcpServers`` config builds an ``snodo.Sse`` server."""
    config = {"mcpServers": {"old": {"type": "sse", "url": server.url}}}
    with snodo.Fleet(config) as fleet:
        assert "old_echo" in [tool["name"] for tool in fleet.list_tools()]
        assert _text(fleet.call_tool("old_echo", {"text": "fleet"})) == "fleet"
