"""Interop: snodo over Streamable HTTP against a server that speaks only 2025-03-26 (decision 0039).

The server is a real node process on the pinned ``@modelcontextprotocol/sdk`` 1.12.3
(tests/interop/legacy_http_server.mjs, ``StreamableHTTPServerTransport``, bound to 127.0.0.1 by
tests/interop/bind-localhost.cjs). It logs the MCP headers of every request it gets, so the test
checks snodo sends no ``MCP-Protocol-Version`` header on 2025-03-26 (the header is 2025-06-18's).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import snodo
from tests.support import everything_support as everything
from tests.support import stdio_support as support
from tests.support.started_processes import START_DEADLINE, stop

SERVER = everything.INTEROP / "legacy_http_server.mjs"
VERSION = "2025-03-26"


@dataclass
class LegacyHttp:
    url: str
    headers_file: Path

    def requests(self) -> list[dict[str, Any]]:
        text = self.headers_file.read_text() if self.headers_file.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LegacyHttp]:
    node = everything.ensure_installed()
    work = tmp_path_factory.mktemp("legacy-http")
    listen, headers, log = work / "listen.jsonl", work / "headers.jsonl", work / "server.log"
    env = {**os.environ, "SNODO_LISTEN_FILE": str(listen), "SNODO_HEADERS_FILE": str(headers)}
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [node, "--require", str(everything.PRELOAD), str(SERVER)],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            cwd=str(everything.INTEROP),
            env=env,
        )

    def listening() -> int | None:
        if process.poll() is not None:
            raise AssertionError(f"the server exited: {log.read_text(errors='replace')[-2000:]}")
        lines = [x for x in (listen.read_text() if listen.exists() else "").split("\n")[:-1] if x]
        return int(json.loads(lines[0])["port"]) if lines else None

    try:
        port = support.wait_until(listening, timeout=START_DEADLINE)
        yield LegacyHttp(f"http://127.0.0.1:{port}/mcp", headers)
    finally:
        stop(process)


@pytest.fixture(scope="session", autouse=True)
def _warm() -> None:
    support.warm_up()


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """No child process or file descriptor outlives a test (the HTTP pool's idle sockets aside)."""
    with support.no_leaks(pooled=True):
        yield


def texts(result: Any) -> list[str]:
    assert isinstance(result, dict), result
    return [block["text"] for block in result["content"] if block.get("type") == "text"]


def test_2025_03_26_over_streamable_http(server: LegacyHttp) -> None:
    """Pinned with ``protocol=``: list, call with progress, read, prompts; no elicitation
    declared (a form handler is given) and no MCP-Protocol-Version header on any request, the session id on every one after
    initialize."""
    before = len(server.requests())
    with snodo.connect(
        snodo.Http(server.url),
        protocol=VERSION,
        input_handlers={"form": lambda params: {"action": "decline"}},
        timeout=20.0,
    ) as client:
        assert client.version == VERSION
        session = client.session
        assert session is not None and session.session_id
        assert [t["name"] for t in client.list_tools()] == ["echo", "count", "client"]
        assert client.list_resources()[0]["uri"] == "legacy://note"
        assert [p["name"] for p in client.list_prompts()] == ["greet"]
        seen: list[dict[str, Any]] = []
        assert texts(client.call_tool("count", {"steps": 3}, progress=seen.append)) == ["counted 3"]
        assert [p["progress"] for p in seen] == [1, 2, 3]
        read = client.read_resource("legacy://note")
        assert isinstance(read, dict) and read["contents"][0]["text"] == "an old note"
        prompt = client.get_prompt("greet", {"who": "Ada"})
        assert isinstance(prompt, dict)
        assert prompt["messages"][0]["content"]["text"] == "Hello, Ada"
        assert json.loads(texts(client.call_tool("client", {}))[0]) == {}
        session_id = session.session_id
    seen_requests = server.requests()[before:]
    methods = [r["method"] for r in seen_requests if r["http"] == "POST"]
    assert methods[0] == "initialize" and "tools/call" in methods
    for request in seen_requests:
        assert "mcp-protocol-version" not in request["headers"], request
        if request["method"] != "initialize":
            assert request["headers"].get("mcp-session-id") == session_id, request


def test_the_default_protocol_refuses_the_2025_03_26_server(server: LegacyHttp) -> None:
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(snodo.Http(server.url), timeout=20.0)
    error = caught.value
    assert error.code == -32602
    assert error.data == {"negotiated": VERSION, "requested": list(snodo.SUPPORTED_VERSIONS)}
    assert "the server speaks 2025-03-26" in error.message
    assert "protocol=snodo.ALL_VERSIONS" in error.message


def test_all_versions_probes_falls_back_and_accepts_2025_03_26(server: LegacyHttp) -> None:
    """``protocol=snodo.ALL_VERSIONS``: the server/discover probe is refused, snodo reopens and
    initializes, the server answers 2025-03-26 and that is accepted."""
    before = len(server.requests())
    with snodo.connect(snodo.Http(server.url), protocol=snodo.ALL_VERSIONS, timeout=20.0) as c:
        assert c.version == VERSION
        assert texts(c.call_tool("echo", {"text": "hi"})) == ["hi"]
    posted = [r["method"] for r in server.requests()[before:] if r["http"] == "POST"]
    assert posted[:2] == ["server/discover", "initialize"]
