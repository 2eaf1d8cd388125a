"""Interop: snodo over stdio against servers that speak only 2024-11-05 (decision 0039).

The servers are real node processes on the pinned ``@modelcontextprotocol/sdk`` 1.0.1: our own
tests/interop/legacy_stdio_server.mjs (tools with progress, a resource, a prompt, and a tool that
reports what the client declared in ``initialize``) and ``@modelcontextprotocol/server-brave-search``
0.6.2 from the registry (only listed: ``BRAVE_API_KEY`` is a dummy and no tool is called, so
nothing reaches the network). 2024-11-05 is opt in: named in ``protocol=`` it connects; with
the default ``protocol`` the server's 2024-11-05 answer to ``initialize`` is refused with -32602
saying how to allow it.
"""

from __future__ import annotations

import json
import logging
import queue
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import snodo
from tests.support import everything_support as everything
from tests.support import stdio_support as support

INTEROP = everything.INTEROP
LEGACY_SERVER = INTEROP / "legacy_stdio_server.mjs"
BRAVE = (
    INTEROP / "node_modules" / "@modelcontextprotocol" / "server-brave-search" / "dist" / "index.js"
)
OLD = "2024-11-05"
SERVER_NAME = "snodo-legacy-2024-11-05"


@pytest.fixture(scope="session")
def node() -> str:
    """node, with the pinned packages installed (npm ci, once)."""
    return everything.ensure_installed()


@pytest.fixture(scope="session", autouse=True)
def _warm() -> None:
    support.warm_up()


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """No child process (zombies included) or file descriptor outlives a test."""
    with support.no_leaks():
        yield


def _handlers() -> dict[str, Any]:
    return {
        "form": lambda params: {"action": "decline"},
        "sampling": lambda params: {
            "role": "assistant",
            "content": {"type": "text", "text": "no"},
            "model": "none",
        },
        "roots": lambda params: {"roots": []},
    }


def legacy(node: str) -> snodo.Stdio:
    return snodo.Stdio(node, [str(LEGACY_SERVER)])


@pytest.fixture(scope="module")
def client(node: str) -> Iterator[snodo.Client]:
    """One client on the legacy server for the module, 2024-11-05 named in ``protocol=``."""
    with support.no_leaks():
        with snodo.connect(
            legacy(node), protocol=OLD, input_handlers=_handlers(), timeout=20.0
        ) as opened:
            yield opened


def texts(result: Any) -> list[str]:
    assert isinstance(result, dict), result
    return [block["text"] for block in result["content"] if block.get("type") == "text"]


def test_named_2024_11_05_connects_and_speaks_it(client: snodo.Client) -> None:
    assert client.version == OLD
    assert client.dialect.version == OLD
    session = client.session
    assert session is not None
    assert session.server_info == {"name": SERVER_NAME, "version": "1.0.1"}
    assert set(session.capabilities) == {"tools", "resources", "prompts"}


def test_lists_tools_resources_and_prompts(client: snodo.Client) -> None:
    assert [t["name"] for t in client.list_tools()] == ["echo", "count", "client"]
    assert client.list_resources() == [
        {"uri": "legacy://note", "name": "note", "mimeType": "text/plain"}
    ]
    prompts = client.list_prompts()
    assert [p["name"] for p in prompts] == ["greet"]
    assert prompts[0]["arguments"] == [{"name": "who", "required": True}]


def test_call_read_and_get_prompt(client: snodo.Client) -> None:
    assert texts(client.call_tool("echo", {"text": "héllo"})) == ["héllo"]
    read = client.read_resource("legacy://note")
    assert isinstance(read, dict)
    assert read["contents"] == [
        {"uri": "legacy://note", "mimeType": "text/plain", "text": "an old note"}
    ]
    prompt = client.get_prompt("greet", {"who": "Ada"})
    assert isinstance(prompt, dict)
    assert prompt["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Hello, Ada"}}
    ]


def test_a_call_receives_its_progress_before_the_result(client: snodo.Client) -> None:
    seen: list[dict[str, Any]] = []
    result = client.call_tool("count", {"steps": 4}, progress=seen.append)
    assert texts(result) == ["counted 4"]
    assert [(p["progress"], p["total"]) for p in seen] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert len({p["progressToken"] for p in seen}) == 1


def test_the_client_declares_no_elicitation_on_2024_11_05(client: snodo.Client) -> None:
    """The server reports the capabilities snodo declared: the form handler adds no elicitation
    (2024-11-05 has none); sampling and roots stay."""
    declared = json.loads(texts(client.call_tool("client", {}))[0])
    assert declared["capabilities"] == {"sampling": {}, "roots": {"listChanged": False}}
    assert declared["clientInfo"]["name"]


def test_methods_newer_versions_added_are_refused_before_sending(client: snodo.Client) -> None:
    for method in ("tasks/get", "server/discover"):
        with pytest.raises(snodo.McpError) as caught:
            client.request(method, {})
        assert caught.value.code == -32601
        assert caught.value.data == {"method": method, "protocolVersion": OLD}
    assert texts(client.call_tool("echo", {"text": "still here"})) == ["still here"]


def test_the_default_protocol_refuses_the_2024_11_05_server_and_says_how_to_allow(
    node: str,
) -> None:
    """Default ``protocol``: snodo proposes 2025-11-25 (after the probe's fallback), the server
    answers 2024-11-05, and the connection is refused with -32602 naming the version and how to
    allow it; the server process is stopped (no_leaks)."""
    with pytest.raises(snodo.McpError) as caught:
        snodo.connect(legacy(node), timeout=20.0)
    error = caught.value
    assert error.code == -32602
    assert error.data == {"negotiated": OLD, "requested": list(snodo.SUPPORTED_VERSIONS)}
    assert "the server speaks 2024-11-05" in error.message
    assert "protocol=snodo.ALL_VERSIONS" in error.message


def test_all_versions_probes_falls_back_and_accepts_2024_11_05(node: str, tmp_path: Path) -> None:
    """``protocol=snodo.ALL_VERSIONS``: the probe is refused by the old server, snodo restarts
    it and initializes with 2025-11-25, the server answers 2024-11-05 and that is accepted.
    Every message snodo wrote is valid for the version it was sent on (schema.json)."""
    log = tmp_path / "wire.jsonl"
    tee = support.SERVERS / "scripted_tee.py"
    with snodo.connect(
        snodo.Stdio(support.PYTHON, [str(tee), str(log), node, str(LEGACY_SERVER)]),
        protocol=snodo.ALL_VERSIONS,
        timeout=20.0,
    ) as opened:
        assert opened.version == OLD
        assert texts(opened.call_tool("count", {"steps": 1}, progress=lambda p: None)) == [
            "counted 1"
        ]
        assert opened.list_prompts()[0]["name"] == "greet"
    methods = [m.get("method", "response") for m in support.check_wire(log, OLD)]
    assert methods.count("server/discover") == 1
    assert methods.count("initialize") == 1
    assert "notifications/initialized" in methods


def test_brave_search_lists_its_tools_on_2024_11_05(node: str) -> None:
    """A registry server on sdk 1.0.1: listed, never called (no network)."""
    with snodo.connect(
        snodo.Stdio(node, [str(BRAVE)]),
        env={"BRAVE_API_KEY": "not-a-real-key"},
        protocol=[*snodo.SUPPORTED_VERSIONS, OLD],
        timeout=20.0,
    ) as brave:
        assert brave.version == OLD
        session = brave.session
        assert session is not None and session.server_info is not None
        assert session.server_info["name"] == "example-servers/brave-search"
        tools = {t["name"]: t for t in brave.list_tools()}
    assert set(tools) == {"brave_web_search", "brave_local_search"}
    assert tools["brave_web_search"]["inputSchema"]["required"] == ["query"]


def test_a_2025_03_26_batch_line_is_read_element_by_element(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """JSON-RPC batches (2025-03-26): one line holding two responses (in reverse order), a log
    notification and a ping request is read element by element: each call gets its own
    response, the notification reaches the log handler and the ping is answered. The empty
    batch before it and the element that is not JSON-RPC are skipped with a warning each, and
    lose nothing else."""
    log = tmp_path / "wire.jsonl"
    messages: queue.Queue[snodo.LogMessage] = queue.Queue(maxsize=10)
    target = support.script("scripted_batch.py", "--versions", "2025-03-26", "--log", str(log))
    with caplog.at_level(logging.WARNING, logger="snodo"):
        with snodo.connect(
            target, protocol="2025-03-26", log_handler=messages, timeout=10.0
        ) as batched:
            assert batched.version == "2025-03-26"
            with ThreadPoolExecutor(2) as pool:
                calls = [pool.submit(batched.call_tool, "echo", {"text": t}) for t in ("a", "b")]
                assert [texts(c.result(timeout=15.0)) for c in calls] == [["a"], ["b"]]
            note = messages.get(timeout=10.0)
            pong = support.wait_for_message(log, lambda m: m.get("id") == "batch-ping")
            assert texts(batched.call_tool("alone", {})) == ["alone"]
    assert (note.level, note.data) == ("info", "in a batch")
    assert pong == {"jsonrpc": "2.0", "id": "batch-ping", "result": {}}
    skipped = [r.getMessage() for r in caplog.records if "not JSON-RPC" in r.getMessage()]
    assert len(skipped) == 2, skipped
    assert "empty batch" in skipped[0]
    assert "message is not a JSON object" in skipped[1]
