"""The session era's standalone GET stream is open before ``connect`` returns.

A server may send a request on the standalone stream right after the handshake; ``connect``
waits (bounded) until the GET is answered, so nothing that follows the handshake can race it.
A 405 (no standalone stream) releases ``connect`` at once.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import snodo
from tests.support.http_fault_server import Exchange, McpResponder, Request, event, fault_server


def _connect(url: str, **options: Any) -> snodo.Client:
    return snodo.connect(snodo.Http(url), timeout=10.0, **options)


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_connect_returns_after_the_standalone_stream_is_answered(version: str) -> None:
    """A server that sends a request only on the standalone stream, at once, is not raced: the
    GET arrived before any request that follows the handshake.

    Found by the conformance suite, scenario elicitation-sep1034-client-defaults: the client
    opened that stream only after ``connect`` returned, and the request sent there was lost.
    """
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
    """405 for the GET (no standalone stream) releases connect at once; calls work.

    Added with the fix for the conformance suite's scenario elicitation-sep1034-client-defaults:
    the wait it made ``connect`` do must not hold a server that has no standalone stream.
    """

    def refuse(request: Request, ex: Exchange) -> None:
        ex.respond(405, b"", [("Allow", "POST")])

    with fault_server(McpResponder(session_id="s-405")) as server:
        server.always(lambda r: r.method == "GET", refuse)
        with _connect(server.url, protocol="2025-11-25") as client:
            assert isinstance(client.list_tools(), list)
            assert len(server.received(lambda r: r.method == "GET")) == 1


def test_a_server_request_sent_at_once_on_the_standalone_stream_is_answered() -> None:
    """The conformance mock's order: the GET is answered and the server asks there at once.

    Found by the conformance suite, scenario elicitation-sep1034-client-defaults.
    """
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
