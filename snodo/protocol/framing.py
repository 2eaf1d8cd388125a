"""Newline-delimited JSON-RPC framing (stdio), sans-IO.

``LineFramer`` turns a byte stream, fed in chunks of any size, into complete lines: the
``b"\\n"`` terminator removed, one trailing ``b"\\r"`` stripped, a UTF-8 BOM at the start of a
line stripped, empty lines skipped. A line longer than ``max_line_bytes`` is never buffered whole:
once the partial line passes the limit it is dropped and the rest of it skipped up to the next
newline, and a single ``Oversized`` event takes its place in the output. The events depend only
on the bytes fed, never on how they were chunked.

The limit counts the raw bytes of a line before its ``b"\\n"`` (a ``b"\\r"`` or a BOM included),
and ``Oversized.size`` is that count for the discarded line, so it is at least
``max_line_bytes + 1``. The framer holds at most ``max_line_bytes`` bytes between calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["DEFAULT_MAX_LINE_BYTES", "LineFramer", "Oversized"]

#: The default line limit (16 MiB), the same as the codec's ``MAX_MESSAGE_BYTES``.
DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024

_BOM: Final = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the limit was discarded; ``size`` is its length in bytes."""

    size: int


class LineFramer:
    """Splits a byte stream into lines, refusing lines longer than ``max_line_bytes``."""

    __slots__ = ("_buf", "_discarding", "_limit", "_skipped")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be at least 1, got {max_line_bytes}")
        self._limit = max_line_bytes
        self._buf = bytearray()  # the partial line (never more than the limit)
        self._discarding = False  # inside an oversized line, skipping to the next newline
        self._skipped = 0  # bytes of the oversized line seen so far

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
                out.append(Oversized(self._skipped + nl))
                self._discarding = False
                self._skipped = 0
            else:
                size = len(self._buf) + nl
                if size > limit:
                    out.append(Oversized(size))
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
                out.append(Oversized(len(line)))
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
            out.append(Oversized(self._skipped))
            self._discarding = False
            self._skipped = 0
        elif self._buf:
            _append_line(out, bytes(self._buf))
            self._buf.clear()
        return out

    def _extend(self, part: bytes) -> None:
        """Add bytes of an unfinished line, switching to discarding once it passes the limit."""
        if self._discarding:
            self._skipped += len(part)
            return
        size = len(self._buf) + len(part)
        if size > self._limit:
            self._buf.clear()
            self._discarding = True
            self._skipped = size
        else:
            self._buf += part


def _append_line(out: list[bytes | Oversized], line: bytes) -> None:
    if line.endswith(b"\r"):
        line = line[:-1]
    if line.startswith(_BOM):
        line = line[3:]
    if line:
        out.append(line)
