"""The server's side of a Streamable HTTP event stream: events, the priming event, keep-alive
comments and event ids (the client's side, the parser, is :mod:`snodo.protocol.sse`).

Event ids are ``"<stream>-<n>"``: ``stream`` names one response stream of a session (``"0"``
is the session's standalone GET stream) and ``n`` counts its events from 1, so a
``Last-Event-ID`` says both which stream to resume and from where.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "KEEPALIVE",
    "STANDALONE_STREAM",
    "event_id",
    "parse_event_id",
    "priming_event",
    "sse_event",
]

#: The stream key of a session's standalone (GET) stream.
STANDALONE_STREAM: Final = "0"

#: A comment line that keeps a quiet stream (and the proxies on its way) open.
KEEPALIVE: Final = b": keep-alive\n\n"

_EVENT_ID: Final = re.compile(r"([0-9]+)-([0-9]+)")


def sse_event(data: bytes, event_id: str | None = None, retry_ms: int | None = None) -> bytes:
    """One SSE event carrying one JSON message (JSON output holds no raw newline)."""
    head = b""
    if event_id is not None:
        head += b"id: " + event_id.encode("ascii") + b"\n"
    if retry_ms is not None:
        head += b"retry: " + str(retry_ms).encode("ascii") + b"\n"
    return head + b"data: " + data + b"\n\n"


def priming_event(event_id: str, retry_ms: int | None = None) -> bytes:
    """The 2025-11-25 priming event: an id and empty data (the client's resumption point)."""
    head = b"id: " + event_id.encode("ascii") + b"\n"
    if retry_ms is not None:
        head += b"retry: " + str(retry_ms).encode("ascii") + b"\n"
    return head + b"data:\n\n"


def event_id(stream: str, n: int) -> str:
    """The id of event ``n`` of ``stream``."""
    return f"{stream}-{n}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """``"<stream>-<n>"`` -> ``(stream, n)``; ``None`` for anything else."""
    m = _EVENT_ID.fullmatch(value.strip())
    if m is None or len(value) > 40:
        return None
    return m.group(1), int(m.group(2))
