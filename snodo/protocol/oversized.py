"""What an oversized stdio line answers, read from the edges the framer keeps of it (sans-IO).

A line over ``max_response_bytes`` is never parsed (it is never held whole), so its id comes from
``Oversized.head`` and ``.tail`` (``snodo.protocol.framing``): the top-level members at its start
are scanned (senders that put ``"id"`` first: the Python SDK, snodo), else its end is matched for
a last member ``"id": <id>`` (the TypeScript SDK writes ``{"result": ..., "jsonrpc", "id"}``).
The line answers that id only if it is recognisably a response: a top-level ``"result"`` or
``"error"`` member is seen in the head, and no ``"method"`` (a server request has an id of the
server's own). Otherwise the id is unknown (docs/decisions/0038-oversized-stdio-lines.md).
"""

from __future__ import annotations

import re
from typing import Final, TypeGuard

import orjson

from snodo.protocol.errors import McpError
from snodo.protocol.framing import Oversized
from snodo.protocol.jsonrpc import RequestId

__all__ = ["answered_id", "timeout_after_dropped_line"]

_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_NUMBER: Final = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERAL: Final = re.compile(rb"true|false|null")
_SPACE: Final = b" \t\r\n"
#: Inside a nested value: a string (skipped whole), a quote that opens one the head cuts, or a
#: bracket.
_NESTED: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|"|[\[\]{}]', re.S)
#: The line's last member is ``"id": <integer or string>`` (the final brace closes the object).
_TAIL_ID: Final = re.compile(
    rb'[{,][ \t]*"id"[ \t]*:[ \t]*(-?\d+|"(?:[^"\\]|\\.)*")[ \t]*\}[ \t\r]*\Z', re.S
)
_BOM: Final = b"\xef\xbb\xbf"
#: The scan stopped: the head ended (or was not JSON) before the answer was known.
_UNKNOWN: Final = object()


def answered_id(line: Oversized) -> RequestId | None:
    """The id of the request an oversized line answers; None when it cannot be known (not a
    response, or its id is in neither edge)."""
    head = line.head[3:] if line.head.startswith(_BOM) else line.head
    found, response = _scan_head(head)
    if not response:
        return None
    if found is not _UNKNOWN:
        return found if _is_id(found) else None
    match = _TAIL_ID.search(line.tail)
    if match is None:
        return None
    value = _load(match.group(1))
    return value if _is_id(value) else None


def timeout_after_dropped_line(error: McpError, size: int, limit: int) -> McpError:
    """The -32001 of a request that waited while an oversized line whose id could not be read
    was dropped: the message says so (that line may have been its answer)."""
    return McpError(
        error.code,
        f"{error.message}; while it waited the server sent a line of {size} bytes, over "
        f"max_response_bytes ({limit}), whose id could not be read: it was dropped",
        error.data,
        kind=error.kind,
        cause=error.cause,
    )


def _is_id(value: object) -> TypeGuard[RequestId]:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _load(raw: bytes) -> object:
    """A scalar's value; None (never an id) when it is not valid JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _scan_head(head: bytes) -> tuple[object, bool]:
    """Scan the top-level members at the start of a JSON object: the ``id`` value (or
    ``_UNKNOWN``) and whether the line is a response (a "result" or "error" member seen, no
    "method"). Stops at the first member that does not end within ``head``."""
    found: object = _UNKNOWN
    response = False
    at = _skip(head, 0)
    if head[at : at + 1] != b"{":
        return _UNKNOWN, False
    at += 1
    while True:
        at = _skip(head, at)
        key = _STRING.match(head, at)
        if key is None:
            return found, response
        at = _skip(head, key.end())
        if head[at : at + 1] != b":":
            return found, response
        at = _skip(head, at + 1)
        name = key.group()
        if name == b'"method"':
            return _UNKNOWN, False
        if name in (b'"result"', b'"error"'):
            response = True
        end = _value_end(head, at)
        if end is None:
            return found, response
        if name == b'"id"':
            found = _load(head[at:end])
        at = _skip(head, end)
        if head[at : at + 1] != b",":
            return found, response
        at += 1


def _skip(head: bytes, at: int) -> int:
    """The first position at or after ``at`` that is not JSON whitespace."""
    while head[at : at + 1] and head[at] in _SPACE:
        at += 1
    return at


def _value_end(head: bytes, at: int) -> int | None:
    """Where the JSON value at ``at`` ends, if it ends (followed by a byte) within ``head``."""
    first = head[at : at + 1]
    if first == b'"':
        match = _STRING.match(head, at)
        end = None if match is None else match.end()
    elif first in (b"{", b"["):
        depth = 0
        end = None
        for match in _NESTED.finditer(head, at):
            token = match.group()
            if token == b'"':
                break  # a string the head cuts: the value goes on past it
            if token in (b"{", b"["):
                depth += 1
            elif token in (b"}", b"]"):
                depth -= 1
                if depth == 0:
                    end = match.end()
                    break
    else:
        match = _NUMBER.match(head, at) or _LITERAL.match(head, at)
        end = None if match is None else match.end()
    if end is None or end >= len(head):
        return None  # not a value, or it may go on past the head
    return end
