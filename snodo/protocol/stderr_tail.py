"""The last lines a stdio server wrote to its stderr, and the exit error that carries them.

A server that dies says why on its stderr; the -32000 error for its exit names the last line in
its message and carries the kept lines in ``data["stderr"]``. Pure: the transport feeds lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from snodo.protocol.errors import McpError

__all__ = [
    "EXIT_CAUSES",
    "MAX_TAIL_BYTES",
    "MAX_TAIL_LINES",
    "MESSAGE_LINE_CHARS",
    "StderrTail",
    "is_exit_error",
    "oversized_line",
    "shorten",
    "with_tail",
]

#: Bounds on the kept lines: 20 lines and 4 KiB (UTF-8), whichever is reached first.
MAX_TAIL_LINES: Final = 20
MAX_TAIL_BYTES: Final = 4 * 1024
#: Longest form of the last line in an error message (the whole line is in ``data``).
MESSAGE_LINE_CHARS: Final = 200
#: ``McpError.cause`` tags of a server that is gone (exited, closed stdout, broken pipe).
EXIT_CAUSES: Final = frozenset({"exit_status", "stdout_closed", "port_exit"})


@dataclass(frozen=True, slots=True)
class StderrTail:
    """The last lines (oldest first) within ``max_lines`` and ``max_bytes``; ``size`` is
    their UTF-8 size. ``add`` returns the tail with one more line, dropping the oldest ones
    beyond a bound; a line longer than ``max_bytes`` is cut to it."""

    lines: tuple[str, ...] = ()
    size: int = 0
    max_lines: int = MAX_TAIL_LINES
    max_bytes: int = MAX_TAIL_BYTES

    def add(self, line: str) -> StderrTail:
        """This tail with ``line`` (no newline) appended."""
        encoded = line.encode("utf-8", "replace")
        if len(encoded) > self.max_bytes:
            line = encoded[: self.max_bytes].decode("utf-8", "ignore")
            encoded = line.encode("utf-8")
        lines = (*self.lines, line)
        size = self.size + len(encoded)
        start = 0
        while len(lines) - start > self.max_lines or size > self.max_bytes:
            size -= len(lines[start].encode("utf-8"))
            start += 1
        return StderrTail(lines[start:], size, self.max_lines, self.max_bytes)


def oversized_line(size: int) -> str:
    """What the tail keeps for a stderr line too long to pass on (``size`` bytes)."""
    return f"[a stderr line of {size} bytes was dropped]"


def shorten(line: str, limit: int = MESSAGE_LINE_CHARS) -> str:
    """``line`` stripped, and cut to ``limit`` characters with an ellipsis when longer."""
    line = line.strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def is_exit_error(error: McpError) -> bool:
    """True for the -32000 of a server that is gone (the errors a stderr tail explains)."""
    cause = error.cause
    return isinstance(cause, tuple) and bool(cause) and cause[0] in EXIT_CAUSES


def with_tail(error: McpError, tail: StderrTail) -> McpError:
    """``error`` naming the last stderr line in its message ("...: <line>") and carrying the
    kept lines in ``data["stderr"]``; ``error`` itself when nothing was kept."""
    if not tail.lines:
        return error
    data: Any = error.data
    lines = list(tail.lines)
    if data is None:
        data = {"stderr": lines}
    elif isinstance(data, dict):
        data = {**data, "stderr": lines}
    last = next((line for line in reversed(tail.lines) if line.strip()), "")
    message = f"{error.message}: {shorten(last)}" if last else error.message
    return McpError(error.code, message, data, kind=error.kind, cause=error.cause)
