"""The server offers logging: ``Runtime(logging=True)`` advertises it, ``ctx.log`` sends
``notifications/message``; in the session era every level goes out until ``logging/setLevel``
raises the threshold, in the stateless era only at the request's ``_meta`` logLevel (none
without it); over HTTP the notes travel on the request's event stream before its result.

Found by the conformance suite, scenarios logging-set-level, tools-call-with-logging and
server-stateless (no log without logLevel).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from snodo.server import Peer, Runtime, ServerSession, dispatch
from snodo.server.http_server import serve_http
from tests.support.http_fault_server import LATEST

SESSION = "2025-11-25"

STATELESS_META = {
    "io.modelcontextprotocol/protocolVersion": LATEST,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _logging_runtime(*, logging: bool = True) -> Runtime:
    runtime = Runtime("logs", "1.0", logging=logging)

    def chatty(args: dict[str, Any], ctx: Any) -> str:
        for level in ("debug", "info", "error"):
            ctx.log(level, f"at {level}", logger="chatty")
        return "done"

    runtime.add_tool("chatty", chatty)
    return runtime


def _session_peer(runtime: Runtime) -> Peer:
    peer = Peer("stdio", session=ServerSession())
    init = {
        "protocolVersion": SESSION,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    response = dispatch(
        runtime, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, peer
    )
    assert response is not None and "result" in response
    return peer


def _levels_logged(runtime: Runtime, peer: Peer, params: dict[str, Any]) -> list[str]:
    sent: list[tuple[str, dict[str, Any]]] = []
    message = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
    response = dispatch(runtime, message, peer, notify=lambda m, p: sent.append((m, p)))
    assert response is not None and response["result"]["content"][0]["text"] == "done"
    assert all(method == "notifications/message" for method, _ in sent)
    assert all(p["logger"] == "chatty" and p["data"] == f"at {p['level']}" for _, p in sent)
    return [p["level"] for _, p in sent]


def test_session_era_logs_every_level_until_set_level_raises_the_threshold() -> None:
    """Found by the conformance suite, scenario logging-set-level."""
    runtime = _logging_runtime()
    peer = _session_peer(runtime)
    assert _levels_logged(runtime, peer, {"name": "chatty"}) == ["debug", "info", "error"]
    set_level = {"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {}}
    set_level["params"] = {"level": "warning"}
    assert dispatch(runtime, set_level, peer) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert _levels_logged(runtime, peer, {"name": "chatty"}) == ["error"]
    set_level["params"] = {"level": "loud"}
    response = dispatch(runtime, set_level, peer)
    assert response is not None and response["error"]["code"] == -32602


def test_a_runtime_without_logging_neither_advertises_nor_sends_it() -> None:
    """Added with the fix for the conformance suite's scenario logging-set-level."""
    runtime = _logging_runtime(logging=False)
    assert "logging" not in runtime.capabilities
    assert "logging" in _logging_runtime().capabilities
    peer = _session_peer(runtime)
    assert _levels_logged(runtime, peer, {"name": "chatty"}) == []
    set_level = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "logging/setLevel",
        "params": {"level": "info"},
    }
    response = dispatch(runtime, set_level, peer)
    assert response is not None and response["error"]["code"] == -32601


def test_2026_07_28_logs_only_at_the_requests_log_level() -> None:
    """Found by the conformance suite, scenario server-stateless (no log without logLevel)."""
    runtime = _logging_runtime()
    peer = Peer("http", session=None)
    assert _levels_logged(runtime, peer, {"name": "chatty", "_meta": STATELESS_META}) == []
    asked = {**STATELESS_META, "io.modelcontextprotocol/logLevel": "info"}
    assert _levels_logged(runtime, peer, {"name": "chatty", "_meta": asked}) == ["info", "error"]


def test_log_messages_travel_on_the_http_response_stream() -> None:
    """2026-07-28 over serve_http: the tools/call answer is an event stream carrying the
    notifications/message events before the result.

    Found by the conformance suite, scenario tools-call-with-logging.
    """
    asked = {**STATELESS_META, "io.modelcontextprotocol/logLevel": "error"}
    body = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "chatty", "arguments": {}, "_meta": asked},
    }
    with serve_http(_logging_runtime()) as server:
        request = urllib.request.Request(
            server.url,
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": LATEST,
                "Mcp-Method": "tools/call",
                "Mcp-Name": "chatty",
            },
        )
        with urllib.request.urlopen(request, timeout=10.0) as answer:
            assert answer.headers["Content-Type"].startswith("text/event-stream")
            text = answer.read().decode()
    messages = [
        json.loads(line[len("data:") :]) for line in text.splitlines() if line.startswith("data:")
    ]
    notes = [m for m in messages if m.get("method") == "notifications/message"]
    assert [n["params"]["level"] for n in notes] == ["error"]
    assert messages[-1]["id"] == 5 and messages[-1]["result"]["content"][0]["text"] == "done"
    assert messages.index(notes[0]) < len(messages) - 1


def test_ctx_log_refuses_an_unknown_level() -> None:
    """Added with the fix for the conformance suite's scenario tools-call-with-logging."""
    runtime = Runtime("logs", "1.0", logging=True)

    def bad(args: dict[str, Any], ctx: Any) -> str:
        ctx.log("loud", "x")
        return "unreachable"

    runtime.add_tool("bad", bad)
    peer = _session_peer(runtime)
    message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "bad"}}
    response = dispatch(runtime, message, peer, notify=lambda m, p: None)
    assert response is not None and response["result"]["isError"] is True
