"""Shared helpers for client tests: a recorder that also checks every sent message's schema,
and a scripted transport that answers each request with the next scripted reply."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from snodo.transports.base import RequestOptions
from snodo.transports.direct import DirectTransport
from tests.support.wire_schema import check_client_message


def message_version(message: dict[str, Any], options: RequestOptions) -> str:
    """The version a client message belongs to (initialize names it; others follow the dialect)."""
    if message.get("method") == "initialize":
        version: str = message["params"]["protocolVersion"]
        return version
    return options.dialect.version


class Wire:
    """Every message the client handed to a transport during a test, in order."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def record(self, message: dict[str, Any], options: RequestOptions) -> None:
        check_client_message(message_version(message, options), message)
        with self.lock:
            self.sent.append(message)

    def methods(self) -> list[str]:
        return [m["method"] for m in self.sent]

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.sent if m.get("method") == method]


@contextmanager
def recording_direct() -> Iterator[Wire]:
    """Record (and schema-check) every message sent through any DirectTransport."""
    wire = Wire()
    original_request = DirectTransport.request
    original_notify = DirectTransport.notify

    def request(self: DirectTransport, message: dict[str, Any], options: RequestOptions) -> Any:
        wire.record(message, options)
        return original_request(self, message, options)

    def notify(self: DirectTransport, message: dict[str, Any], options: RequestOptions) -> None:
        wire.record(message, options)
        original_notify(self, message, options)

    DirectTransport.request = request  # type: ignore[method-assign]
    DirectTransport.notify = notify  # type: ignore[method-assign]
    try:
        yield wire
    finally:
        DirectTransport.request = original_request  # type: ignore[method-assign]
        DirectTransport.notify = original_notify  # type: ignore[method-assign]


Reply = Callable[[dict[str, Any]], dict[str, Any]]


class ScriptedTransport:
    """Answers each request with the next scripted reply and records what was sent (and the
    options it came with), schema-checking every message."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.sent: list[dict[str, Any]] = []
        self.options: list[RequestOptions] = []
        self.closed = False

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        check_client_message(message_version(message, options), message)
        self.sent.append(message)
        self.options.append(options)
        return self.replies.pop(0)(message)

    def notify(self, message: dict[str, Any], options: RequestOptions) -> None:
        check_client_message(options.dialect.version, message)
        self.sent.append(message)

    def close(self) -> None:
        self.closed = True


def result(body: dict[str, Any]) -> Reply:
    """A reply with ``body`` as the result."""
    return lambda m: {"jsonrpc": "2.0", "id": m["id"], "result": body}


def error(code: int, message: str, data: Any = None) -> Reply:
    """A reply with a JSON-RPC error."""
    wire: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        wire["data"] = data
    return lambda m: {"jsonrpc": "2.0", "id": m["id"], "error": wire}


def page(cursor: str | None, *names: str) -> Reply:
    """A ``tools/list`` page of the tools ``names``, with ``cursor`` as its nextCursor."""
    body: dict[str, Any] = {
        "tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names]
    }
    if cursor is not None:
        body["nextCursor"] = cursor
    return result(body)
