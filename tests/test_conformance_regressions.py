"""Regressions the official conformance suite found (conformance/run, docs/decisions/0015).

- elicitation-sep1034-client-defaults: a server request sent on the standalone GET stream right
  after the handshake was lost when the client opened that stream only after ``connect``
  returned; ``connect`` now waits (bounded) until the GET is answered.
- request-metadata: a 2026-07-28 request refused with -32022 whose ``data.supported`` lists the
  connection's version is sent once more ("choose a mutually supported version and retry").
- server-stateless: ``initialize`` in a 2026-07-28 request (its ``_meta`` names that version) is
  a removed method, -32601 and HTTP 404, not -32603.
- logging-set-level, tools-call-with-logging, server-stateless (no log without logLevel): the
  server offers logging (``Runtime(logging=True)``, ``logging/setLevel``, ``ctx.log``).
- server-sse-polling: ``python -m snodo.server --http --sse-retry-ms N`` serves SEP-1699 polling
  (``serve_http(sse_retry_ms=)`` already did).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import snodo
from snodo.protocol import negotiation
from snodo.protocol.errors import McpError
from snodo.server import Peer, Runtime, dispatch
from snodo.server.http_server import serve_http
from tests.support.http_fault_server import (
    LATEST,
    Exchange,
    McpResponder,
    Request,
    TeeProxy,
    error,
    event,
    fault_server,
)

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": LATEST,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _connect(url: str, **options: Any) -> snodo.Client:
    return snodo.connect(snodo.Http(url), timeout=10.0, **options)


# -- the standalone stream is open before connect returns --------------------------------------


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_connect_returns_after_the_standalone_stream_is_answered(version: str) -> None:
    """A server that sends a request only on the standalone stream, at once, is not raced: the
    GET arrived before any request that follows the handshake."""
    with fault_server(McpResponder(session_id="s-ready")) as server:
        released = threading.Event()

        def standalone(request: Request, ex: Exchange) -> None:
            ex.start_chunked()
            released.wait(10.0)
            ex.wait_client_gone(10.0)
            ex.close()

        server.once(lambda r: r.method == "GET", standalone)
        client = _connect(server.url, protocol=version)
        try:
            assert server.received(lambda r: r.method == "GET"), "connect returned before the GET"
            client.list_tools()
            (get,) = server.received(lambda r: r.method == "GET")
            (listed,) = server.received(lambda r: r.rpc == "tools/list")
            assert get.index < listed.index
        finally:
            released.set()
            client.close()


def test_connect_is_not_held_by_a_server_without_a_standalone_stream() -> None:
    """405 for the GET (no standalone stream) releases connect at once; calls work."""

    def refuse(request: Request, ex: Exchange) -> None:
        ex.respond(405, b"", [("Allow", "POST")])

    with fault_server(McpResponder(session_id="s-405")) as server:
        server.always(lambda r: r.method == "GET", refuse)
        with _connect(server.url, protocol="2025-11-25") as client:
            assert isinstance(client.list_tools(), list)
            assert len(server.received(lambda r: r.method == "GET")) == 1


def test_a_server_request_sent_at_once_on_the_standalone_stream_is_answered() -> None:
    """The conformance mock's order: the GET is answered and the server asks there at once."""
    with fault_server(McpResponder(session_id="s-ask")) as server:

        def standalone(request: Request, ex: Exchange) -> None:
            ex.start_chunked()
            ex.chunk(
                event(
                    {
                        "jsonrpc": "2.0",
                        "id": "ask-1",
                        "method": "elicitation/create",
                        "params": {
                            "mode": "form",
                            "message": "defaults?",
                            "requestedSchema": {
                                "type": "object",
                                "properties": {"n": {"type": "integer", "default": 3}},
                            },
                        },
                    }
                )
            )
            ex.wait_client_gone(10.0)
            ex.close()

        def defaults(params: dict[str, Any]) -> dict[str, Any]:
            return {"action": "accept", "content": {"n": 3}}

        server.once(lambda r: r.method == "GET", standalone)
        with _connect(server.url, protocol="2025-11-25", input_handlers={"form": defaults}):
            (answer,) = server.wait_for(lambda r: r.kind == "response", 1, timeout=10.0)
            assert answer.message["result"] == {"action": "accept", "content": {"n": 3}}


# -- -32022 naming our version: one retry ------------------------------------------------------


def _unsupported(supported: list[str]) -> McpError:
    return McpError(-32022, "Unsupported protocol version", {"supported": supported})


def test_the_retry_rule_is_pure() -> None:
    """Retry only a stateless, allowed version that the server says it supports."""
    allowed = ("2026-07-28", "2025-11-25")
    assert negotiation.retries_unsupported_version(LATEST, allowed, _unsupported([LATEST]))
    assert not negotiation.retries_unsupported_version(
        LATEST, allowed, _unsupported(["2099-01-01"])
    )
    assert not negotiation.retries_unsupported_version(
        LATEST, ("2025-11-25",), _unsupported([LATEST])
    )
    assert not negotiation.retries_unsupported_version(
        "2025-11-25", allowed, _unsupported(["2025-11-25"])
    )
    assert not negotiation.retries_unsupported_version(
        LATEST, allowed, McpError(-32602, "Invalid params", {"supported": [LATEST]})
    )
    assert not negotiation.retries_unsupported_version(
        LATEST, allowed, McpError(-32022, "Unsupported protocol version", None)
    )


def _refuse_version(supported: list[str]) -> Any:
    def handler(request: Request, ex: Exchange) -> None:
        message = request.message
        ex.json(
            error(
                message["id"],
                -32022,
                "Unsupported protocol version",
                {
                    "supported": supported,
                    "requested": LATEST,
                },
            ),
            status=400,
        )

    return handler


def test_a_refusal_naming_our_version_is_retried_once_with_a_fresh_id() -> None:
    with fault_server() as server:
        server.once(lambda r: r.rpc == "tools/list", _refuse_version([LATEST]))
        with _connect(server.url, protocol=LATEST) as client:
            assert isinstance(client.list_tools(), list)
        first, second = server.received(lambda r: r.rpc == "tools/list")
        assert first.message["id"] != second.message["id"]
        assert second.header("MCP-Protocol-Version") == LATEST


def test_a_second_refusal_is_raised() -> None:
    with fault_server() as server:
        server.always(lambda r: r.rpc == "tools/list", _refuse_version([LATEST]))
        with _connect(server.url, protocol=LATEST) as client, pytest.raises(McpError) as caught:
            client.list_tools()
        assert caught.value.code == -32022
        assert len(server.received(lambda r: r.rpc == "tools/list")) == 2


def test_a_refusal_without_our_version_is_raised_at_once() -> None:
    with fault_server() as server:
        server.always(lambda r: r.rpc == "tools/list", _refuse_version(["2099-01-01"]))
        with _connect(server.url, protocol=LATEST) as client, pytest.raises(McpError) as caught:
            client.list_tools()
        assert caught.value.code == -32022
        assert len(server.received(lambda r: r.rpc == "tools/list")) == 1


# -- initialize in a 2026-07-28 request ----------------------------------------------------------


def _runtime() -> Runtime:
    runtime = Runtime("regressions", "1.0")
    runtime.add_tool("noop", lambda args, ctx: "ok")
    return runtime


def test_initialize_naming_2026_07_28_is_method_not_found() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"_meta": MODERN_META}}
    response = dispatch(_runtime(), message, Peer("http", session=None))
    assert response is not None and response["error"]["code"] == -32601


def test_initialize_over_http_in_a_2026_07_28_request_is_404() -> None:
    body = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"_meta": MODERN_META}}
    with serve_http(_runtime()) as server:
        request = urllib.request.Request(
            server.url,
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": LATEST,
                "Mcp-Method": "initialize",
            },
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=10.0)
        with caught.value as answer:
            assert answer.status == 404
            reply = json.loads(answer.read())
    assert reply["id"] == 7 and reply["error"]["code"] == -32601


def test_initialize_era_initialize_still_opens_a_session() -> None:
    """Without a 2026-07-28 _meta, initialize is the handshake as before."""
    with serve_http(_runtime()) as server, _connect(server.url, protocol="2025-11-25") as client:
        assert client.session is not None and client.session.version == "2025-11-25"


# -- server logging: logging/setLevel, ctx.log, _meta logLevel ------------------------------------

SESSION = "2025-11-25"


def _logging_runtime(*, logging: bool = True) -> Runtime:
    runtime = Runtime("logs", "1.0", logging=logging)

    def chatty(args: dict[str, Any], ctx: Any) -> str:
        for level in ("debug", "info", "error"):
            ctx.log(level, f"at {level}", logger="chatty")
        return "done"

    runtime.add_tool("chatty", chatty)
    return runtime


def _session_peer(runtime: Runtime) -> Peer:
    from snodo.server import ServerSession

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


def test_initialize_era_logs_every_level_until_set_level_raises_the_threshold() -> None:
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
    runtime = _logging_runtime()
    peer = Peer("http", session=None)
    assert _levels_logged(runtime, peer, {"name": "chatty", "_meta": MODERN_META}) == []
    asked = {**MODERN_META, "io.modelcontextprotocol/logLevel": "info"}
    assert _levels_logged(runtime, peer, {"name": "chatty", "_meta": asked}) == ["info", "error"]


def test_log_messages_travel_on_the_http_response_stream() -> None:
    """2026-07-28 over serve_http: the tools/call answer is an event stream carrying the
    notifications/message events before the result."""
    asked = {**MODERN_META, "io.modelcontextprotocol/logLevel": "error"}
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
    runtime = Runtime("logs", "1.0", logging=True)

    def bad(args: dict[str, Any], ctx: Any) -> str:
        ctx.log("loud", "x")
        return "unreachable"

    runtime.add_tool("bad", bad)
    peer = _session_peer(runtime)
    message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "bad"}}
    response = dispatch(runtime, message, peer, notify=lambda m, p: None)
    assert response is not None and response["result"]["isError"] is True


# -- python -m snodo.server --http --sse-retry-ms (server-sse-polling) ----------------------------

ROOT = str(Path(__file__).resolve().parent.parent)


def test_cli_sse_retry_ms_makes_2025_11_25_streams_resumable() -> None:
    """``--sse-retry-ms`` serves SEP-1699 polling: the response stream closes after its priming
    event (with ``retry``), the client resumes with GET and Last-Event-ID, and the call returns."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "snodo.server",
            "--http",
            "--port",
            "0",
            "--sse-retry-ms",
            "50",
            "examples.example_runtime:runtime",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("snodo.server: serving http://127.0.0.1:"), line
        parts = urlsplit(line.split("serving ", 1)[1].strip())
        assert parts.hostname is not None and parts.port is not None
        with TeeProxy((parts.hostname, parts.port), parts.path) as proxy:
            with _connect(proxy.url, protocol="2025-11-25") as client:
                result = client.call_tool("echo", {"text": "resumed"})
                assert isinstance(result, dict)
                assert result["content"][0]["text"] == "resumed"
            resumed = proxy.received(lambda r: r.method == "GET" and r.header("last-event-id"))
            assert resumed, "no GET carried Last-Event-ID"
    finally:
        proc.terminate()
        proc.wait(10.0)
        if proc.stderr is not None:
            proc.stderr.close()


def test_cli_sse_retry_ms_needs_http() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "snodo.server", "--sse-retry-ms", "50", "x:y"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30.0,
    )
    assert done.returncode == 2 and "--sse-retry-ms need --http" in done.stderr
