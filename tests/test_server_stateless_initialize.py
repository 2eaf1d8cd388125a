"""``initialize`` in a stateless-era request (its ``_meta`` names 2026-07-28) is a removed
method: -32601, and HTTP 404 over Streamable HTTP, not -32603. Without that ``_meta`` it is the
session era's handshake as before.

Found by the conformance suite, scenario server-stateless.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

import snodo
from snodo.server import Peer, Runtime, dispatch
from snodo.server.http_server import serve_http
from tests.support.http_fault_server import LATEST

STATELESS_META = {
    "io.modelcontextprotocol/protocolVersion": LATEST,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _connect(url: str, **options: Any) -> snodo.Client:
    return snodo.connect(snodo.Http(url), timeout=10.0, **options)


def _runtime() -> Runtime:
    runtime = Runtime("regressions", "1.0")
    runtime.add_tool("noop", lambda args, ctx: "ok")
    return runtime


def test_initialize_naming_2026_07_28_is_method_not_found() -> None:
    """Found by the conformance suite, scenario server-stateless (it was -32603)."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"_meta": STATELESS_META},
    }
    response = dispatch(_runtime(), message, Peer("http", session=None))
    assert response is not None and response["error"]["code"] == -32601


def test_initialize_over_http_in_a_2026_07_28_request_is_404() -> None:
    """Found by the conformance suite, scenario server-stateless."""
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "initialize",
        "params": {"_meta": STATELESS_META},
    }
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


def test_session_era_initialize_still_opens_a_session() -> None:
    """Without a 2026-07-28 _meta, initialize is the handshake as before.

    Added with the fix for the conformance suite's scenario server-stateless.
    """
    with serve_http(_runtime()) as server, _connect(server.url, protocol="2025-11-25") as client:
        assert client.session is not None and client.session.version == "2025-11-25"
