"""The SDK interop server (sdk_server.py) served over Streamable HTTP by the official SDK.

    python tests/servers/sdk_http_server.py [PORT] [--legacy] [--json] [--name NAME] [--logging]

Binds 127.0.0.1:PORT (0, the default, lets the OS choose), starts ``uvicorn`` on the SDK's own
Starlette app (``MCPServer.streamable_http_app()``: stateful, event-stream answers unless
``--json``, endpoint ``/mcp``), and once it serves prints ``PORT <port>`` on stdout.

The SDK's manager serves both eras on one endpoint and routes by header: a request whose
``MCP-Protocol-Version`` is not a session-era version goes to its 2026-07-28 single-exchange
entry (``server/discover``, ``input_required`` rounds); anything else to the session-era
transport (``initialize``, ``Mcp-Session-Id``, server requests on the POST's event stream, DELETE).

``--legacy`` serves the session era only, as a server from before 2026-07-28 would: a small
ASGI wrapper removes a non-session-era ``MCP-Protocol-Version`` header before the SDK sees it,
so a ``server/discover`` probe reaches the SDK's session-era transport, which refuses it (no
session, not ``initialize``) and a probing client has to fall back.

Every request is also recorded (HTTP method, ``Mcp-Session-Id``, ``MCP-Protocol-Version``, what
the body carried: a JSON-RPC method, or ``response`` for the client's answer to a server request,
the HTTP status, the client's ``X-Interop-Tag`` header and the JSON body itself);
``GET /_requests?tag=TAG`` answers the record of one tag as a JSON list, so tests can see a
DELETE arrive and check what the client sent against the schema. The
interop tests (tests/test_interop_sdk_http.py) import nothing from here.
"""

from __future__ import annotations

import argparse
import json
import socket
from typing import Any
from urllib.parse import parse_qs

import anyio
import uvicorn
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from sdk_logging_server import build_logging
from sdk_server import NAME, build  # this directory is sys.path[0] when run as a script

RECORD_LIMIT = 10_000
VERSION_HEADER = b"mcp-protocol-version"
SESSION_HEADER = b"mcp-session-id"
TAG_HEADER = b"x-interop-tag"


class Recorder:
    """ASGI wrapper: records each request, answers ``GET /_requests``, and (``legacy``) hides
    a 2026-07-28 protocol header from the SDK."""

    def __init__(self, app: Any, *, legacy: bool) -> None:
        self.app = app
        self.legacy = legacy
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/_requests":
            tag = parse_qs(scope.get("query_string", b"").decode()).get("tag", [None])[0]
            record = json.dumps([r for r in self.requests if tag is None or r["tag"] == tag])
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": record.encode()})
            return
        headers = dict(scope["headers"])
        if self.legacy:
            version = headers.get(VERSION_HEADER, b"").decode("latin-1")
            if version and version not in HANDSHAKE_PROTOCOL_VERSIONS:
                kept = [(k, v) for k, v in scope["headers"] if k != VERSION_HEADER]
                scope = {**scope, "headers": kept}
        entry: dict[str, Any] = {
            "method": scope["method"],
            "session": headers.get(SESSION_HEADER, b"").decode("latin-1") or None,
            "rpc": None,
            "version": headers.get(VERSION_HEADER, b"").decode("latin-1") or None,
            "status": None,
            "tag": headers.get(TAG_HEADER, b"").decode("latin-1") or None,
            "message": None,
        }
        if len(self.requests) < RECORD_LIMIT:
            self.requests.append(entry)

        body: list[bytes] = []

        async def recording_receive() -> dict[str, Any]:
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request":
                body.append(message.get("body", b""))
                if not message.get("more_body", False):
                    entry["message"] = _json(b"".join(body))
                    entry["rpc"] = _rpc_kind(entry["message"])
            return message

        async def recording_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                entry["status"] = message["status"]
            await send(message)

        await self.app(scope, recording_receive, recording_send)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def _rpc_kind(message: Any) -> str | None:
    """The JSON-RPC method a POST body carries, ``response`` for a result or error, else None."""
    if not isinstance(message, dict):
        return None
    if isinstance(message.get("method"), str):
        return str(message["method"])
    return "response" if "result" in message or "error" in message else None


async def serve(
    port: int, *, legacy: bool, json_response: bool, name: str, logging: bool = False
) -> None:
    server_app = build_logging(name) if logging else build(name)
    app = server_app.streamable_http_app(json_response=json_response)
    # proto=IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP
    # (accepted sockets inherit it). With proto 0 every keep-alive response stalls ~40 ms on
    # the client's delayed ACK (the Nagle trap of the research notes, section 4E).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(1024)
    config = uvicorn.Config(
        Recorder(app, legacy=legacy),
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=1,
        access_log=False,
    )
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: server.serve(sockets=[listener]))
        with anyio.fail_after(30):
            while not server.started:
                if server.should_exit:
                    return
                await anyio.sleep(0.01)  # uvicorn offers no started event to wait on
        print(f"PORT {listener.getsockname()[1]}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", nargs="?", type=int, default=0)
    parser.add_argument("--legacy", action="store_true", help="serve the session era only")
    parser.add_argument("--json", action="store_true", help="JSON answers, not event streams")
    parser.add_argument("--name", default=NAME, help="the server's name")
    parser.add_argument("--logging", action="store_true", help="add sdk_logging_server's tool")
    args = parser.parse_args(argv)
    anyio.run(
        lambda: serve(
            args.port,
            legacy=args.legacy,
            json_response=args.json,
            name=args.name,
            logging=args.logging,
        )
    )


if __name__ == "__main__":
    main()
