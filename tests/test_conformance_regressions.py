"""Regressions the official conformance suite found (conformance/run, docs/decisions/0015).

- elicitation-sep1034-client-defaults: a server request sent on the standalone GET stream right
  after the handshake was lost when the client opened that stream only after ``connect``
  returned; ``connect`` now waits (bounded) until the GET is answered.
- request-metadata: a 2026-07-28 request refused with -32022 whose ``data.supported`` lists the
  connection's version is sent once more ("choose a mutually supported version and retry").
- server-stateless: ``initialize`` in a 2026-07-28 request (its ``_meta`` names that version) is
  a removed method, -32601 and HTTP 404, not -32603.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any

import pytest

import snodo
from snodo.protocol import negotiation
from snodo.protocol.errors import McpError
from snodo.server import Peer, Runtime, dispatch
from snodo.server.http import serve_http
from tests.http_fault_server import (
    LATEST,
    Exchange,
    McpResponder,
    Request,
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
