"""Shared helpers for client tests: a recorder that also checks every sent message's schema."""

from __future__ import annotations

import threading
from collections.abc import Iterator
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
