"""Newline-delimited JSON-RPC framing (stdio), sans-IO.

``LineFramer`` turns a byte stream, fed in chunks of any size, into complete lines: the
``b"\\n"`` terminator removed, one trailing ``b"\\r"`` stripped, a UTF-8 BOM at the start of a
line stripped, empty lines skipped. A line longer than ``max_line_bytes`` is never buffered whole:
once the partial line passes the limit it is dropped and the rest of it skipped up to the next
newline, and a single ``Oversized`` event takes its place in the output. The events depend only
on the bytes fed, never on how they were chunked.

The limit counts the raw bytes of a line before its ``b"\\n"`` (a ``b"\\r"`` or a BOM included),
and ``Oversized.size`` is that count for the discarded line, so it is at least
``max_line_bytes + 1``. ``Oversized.head`` and ``.tail`` are the line's first and last
``OVERSIZED_EDGE_BYTES`` raw bytes (what ``snodo.protocol.oversized`` reads its id from). The
framer holds at most ``max_line_bytes`` bytes between calls, plus those two edges while it
discards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["DEFAULT_MAX_LINE_BYTES", "OVERSIZED_EDGE_BYTES", "LineFramer", "Oversized"]

#: The default line limit (16 MiB), the same as the codec's ``MAX_MESSAGE_BYTES``.
DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024

#: How many bytes of an oversized line's start and of its end are kept (``Oversized.head``/``tail``).
OVERSIZED_EDGE_BYTES: Final = 1024

_BOM: Final = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the limit was discarded; ``size`` is its length in bytes, ``head``
    and ``tail`` its first and last ``OVERSIZED_EDGE_BYTES`` bytes."""

    size: int
    head: bytes = b""
    tail: bytes = b""


class LineFramer:
    """Splits a byte stream into lines, refusing lines longer than ``max_line_bytes``."""

    __slots__ = ("_buf", "_discarding", "_head", "_limit", "_skipped", "_tail")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be at least 1, got {max_line_bytes}")
        self._limit = max_line_bytes
        self._buf = bytearray()  # the partial line (never more than the limit)
        self._discarding = False  # inside an oversized line, skipping to the next newline
        self._skipped = 0  # bytes of the oversized line seen so far
        self._head = b""  # the oversized line's first and last bytes
        self._tail = b""

    @property
    def max_line_bytes(self) -> int:
        """The line limit in bytes."""
        return self._limit

    @property
    def buffered(self) -> int:
        """Bytes of a partial line held until its newline arrives."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        """Take the next chunk; return the lines (and ``Oversized`` events) it completed."""
        out: list[bytes | Oversized] = []
        if not data:
            return out
        limit = self._limit
        start = 0
        if self._discarding or self._buf:
            # Finish the line already under way before splitting the rest of the chunk.
            nl = data.find(b"\n")
            if nl < 0:
                self._extend(data)
                return out
            if self._discarding:
                head = _head_of(self._head, data[: min(nl, OVERSIZED_EDGE_BYTES)])
                tail = _tail_of(self._tail, data[max(0, nl - OVERSIZED_EDGE_BYTES) : nl])
                out.append(Oversized(self._skipped + nl, head, tail))
                self._end_discarding()
            else:
                size = len(self._buf) + nl
                if size > limit:
                    part = data[:nl]
                    out.append(Oversized(size, *_edges(self._buf, part)))
                else:
                    self._buf += data[:nl]
                    _append_line(out, bytes(self._buf))
                self._buf.clear()
            start = nl + 1
            if start == len(data):
                return out
            data = data[start:]
        lines = data.split(b"\n")
        tail = lines.pop()
        for line in lines:  # _append_line inlined: this loop runs once per stdio message
            if len(line) > limit:
                edge = OVERSIZED_EDGE_BYTES
                out.append(Oversized(len(line), line[:edge], line[-edge:]))
                continue
            if line.endswith(b"\r"):
                line = line[:-1]
            if line.startswith(_BOM):
                line = line[3:]
            if line:
                out.append(line)
        if tail:
            self._extend(tail)
        return out

    def flush(self) -> list[bytes | Oversized]:
        """At end of input: the final unterminated line, if any; the framer is then empty."""
        out: list[bytes | Oversized] = []
        if self._discarding:
            out.append(Oversized(self._skipped, self._head, self._tail))
            self._end_discarding()
        elif self._buf:
            _append_line(out, bytes(self._buf))
            self._buf.clear()
        return out

    def _extend(self, part: bytes) -> None:
        """Add bytes of an unfinished line, switching to discarding once it passes the limit."""
        if self._discarding:
            self._skipped += len(part)
            self._head = _head_of(self._head, part)
            self._tail = _tail_of(self._tail, part)
            return
        size = len(self._buf) + len(part)
        if size > self._limit:
            self._head, self._tail = _edges(self._buf, part)
            self._buf.clear()
            self._discarding = True
            self._skipped = size
        else:
            self._buf += part

    def _end_discarding(self) -> None:
        self._discarding = False
        self._skipped = 0
        self._head = self._tail = b""


def _edges(buf: bytearray, part: bytes) -> tuple[bytes, bytes]:
    """The first and last ``OVERSIZED_EDGE_BYTES`` of ``buf + part``, without joining them."""
    edge = OVERSIZED_EDGE_BYTES
    return _head_of(bytes(buf[:edge]), part), _tail_of(bytes(buf[-edge:]), part)


def _head_of(before: bytes, part: bytes) -> bytes:
    """The first ``OVERSIZED_EDGE_BYTES`` of ``before + part``."""
    missing = OVERSIZED_EDGE_BYTES - len(before)
    return before if missing <= 0 else before + part[:missing]


def _tail_of(before: bytes, part: bytes) -> bytes:
    """The last ``OVERSIZED_EDGE_BYTES`` of ``before + part``."""
    edge = OVERSIZED_EDGE_BYTES
    if len(part) >= edge:
        return part[-edge:]
    return (before + part)[-edge:]


def _append_line(out: list[bytes | Oversized], line: bytes) -> None:
    if line.endswith(b"\r"):
        line = line[:-1]
    if line.startswith(_BOM):
        line = line[3:]
    if line:
        out.append(line)
