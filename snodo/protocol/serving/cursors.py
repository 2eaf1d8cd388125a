"""Opaque list cursors: ``base64url("<kind>:<offset>")``.

The kind ties a cursor to its list, so a ``tools/list`` cursor is refused by ``prompts/list``.
A cursor that does not decode, belongs to another list, or points past the end of the list
(it shrank since) is -32602 "Invalid cursor"; the client then restarts from the first page.
"""

from __future__ import annotations

import base64
import binascii

from snodo.protocol.errors import McpError, invalid_params

__all__ = ["INVALID_CURSOR", "decode_cursor", "encode_cursor", "page_bounds"]

INVALID_CURSOR = "Invalid cursor"


def encode_cursor(kind: str, offset: int) -> str:
    """The cursor of the page that starts at ``offset`` of list ``kind``."""
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).rstrip(b"=").decode("ascii")


def decode_cursor(kind: str, cursor: object, length: int) -> int:
    """The offset a cursor stands for; ``None`` (no cursor) is the first page."""
    if cursor is None:
        return 0
    if not isinstance(cursor, str) or not cursor or not cursor.isascii():
        raise _invalid()
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (ValueError, binascii.Error):
        raise _invalid() from None
    prefix, sep, number = text.partition(":")
    if not sep or prefix != kind or not number.isdigit() or len(number) > 18:
        raise _invalid()
    offset = int(number)
    if offset > length:
        raise _invalid()
    return offset


def page_bounds(
    kind: str, cursor: object, length: int, page_size: int
) -> tuple[int, int, str | None]:
    """``(start, end, next_cursor)`` for the page ``cursor`` asks for."""
    start = decode_cursor(kind, cursor, length)
    end = min(start + page_size, length)
    return start, end, (encode_cursor(kind, end) if end < length else None)


def _invalid() -> McpError:
    return invalid_params(INVALID_CURSOR)
