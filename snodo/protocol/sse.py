"""An incremental Server-Sent Events parser (WHATWG HTML "Server-sent events" parsing rules).

Feed it the bytes of a ``text/event-stream`` body as they arrive; it returns the events each
chunk completes. Sans-IO: no sockets, no threads. The Streamable HTTP transport reads request
streams and ``subscriptions/listen`` streams through it (reference (f) "Receiving": keep-alive
comments are ignored, multi-line ``data`` is joined per the SSE rules).

Rules applied (WHATWG §9.2.6): UTF-8 with invalid bytes replaced and one BOM at the start of the
stream dropped; lines end with CRLF, LF or CR (a CR that ends one chunk and an LF that starts the
next are one line end); ``:`` lines are comments; ``data`` lines join with ``\\n``; ``event``
names the type (default ``message``); ``id`` sets the last event ID unless it contains NUL;
``retry`` takes ASCII digits only; other fields are ignored; a blank line dispatches, and an event
with no ``data`` line is not dispatched; an event without a closing blank line at the end of the
stream is never dispatched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["Event", "EventTooLarge", "SseParser"]

_BOM: Final = b"\xef\xbb\xbf"
_LF: Final = 0x0A
_CR: Final = 0x0D
_COLON: Final = 0x3A
#: A ``retry`` value with more significant digits than this is ignored (over 10**18 ms means
#: nothing as a reconnection delay, and Python refuses to parse very long digit strings).
_MAX_RETRY_DIGITS: Final = 18


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched event.

    ``id`` and ``retry`` are the stream's values when the event was dispatched (as WHATWG's
    ``MessageEvent.lastEventId`` and reconnection time): an event without an ``id`` line carries
    the last id set before it. ``None`` means never set.
    """

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class EventTooLarge(ValueError):
    """The event being read passed ``max_event_bytes``; the stream cannot be read further.

    ``events`` holds the events the failing chunk completed before the limit was passed, so a
    caller can still deliver them.
    """

    limit: int
    events: tuple[Event, ...]

    def __init__(self, limit: int, events: tuple[Event, ...] = ()) -> None:
        super().__init__(f"an event passed the limit of {limit} bytes")
        self.limit = limit
        self.events = events


class SseParser:
    """Incremental event-stream parser: :meth:`feed` bytes, get the completed events.

    ``max_event_bytes`` bounds the bytes of one event's field lines (comment lines and line ends
    do not count); the partial line being received counts as it arrives, so the parser holds at
    most about the limit plus one chunk. Once :class:`EventTooLarge` is raised, every later
    :meth:`feed` raises it again.
    """

    __slots__ = (
        "_comment",
        "_data",
        "_event_bytes",
        "_event_type",
        "_failed",
        "_head",
        "_id_buffer",
        "_last_id",
        "_limit",
        "_pending",
        "_pending_len",
        "_retry",
        "_skip_lf",
    )

    def __init__(self, max_event_bytes: int | None = None) -> None:
        if max_event_bytes is not None and (
            isinstance(max_event_bytes, bool)
            or not isinstance(max_event_bytes, int)
            or max_event_bytes < 1
        ):
            raise ValueError(f"max_event_bytes must be a positive int, got: {max_event_bytes!r}")
        self._limit = max_event_bytes
        self._head: bytes | None = b""  # the stream's first bytes until the BOM is decided
        self._skip_lf = False  # the last chunk ended in CR: an LF starting the next is skipped
        self._pending: list[bytes] = []  # the partial line received so far
        self._pending_len = 0
        self._comment = False  # the partial line is a comment (its bytes are not kept)
        self._data: list[str] = []
        self._event_type = ""
        self._event_bytes = 0
        self._id_buffer: str | None = None
        self._last_id: str | None = None
        self._retry: int | None = None
        self._failed = False

    @property
    def last_event_id(self) -> str | None:
        """The id to resume from (``Last-Event-ID``): set at each dispatching blank line, also by
        an event with no data, so an event cut off mid-way is not skipped. ``None`` until an
        ``id`` field is dispatched; ``""`` after an empty ``id`` (send no header then)."""
        return self._last_id

    @property
    def retry(self) -> int | None:
        """The last valid ``retry`` field, in milliseconds (applied as soon as it is read)."""
        return self._retry

    def feed(self, chunk: bytes) -> list[Event]:
        """Parse the next bytes of the stream; the events they complete, in order."""
        if self._failed:
            assert self._limit is not None
            raise EventTooLarge(self._limit)
        if not chunk:
            return []
        if self._head is not None:
            head = self._head + chunk
            if len(head) < len(_BOM) and _BOM.startswith(head):
                self._head = head
                return []
            self._head = None
            chunk = head[len(_BOM) :] if head.startswith(_BOM) else head
            if not chunk:
                return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == _LF:
                chunk = chunk[1:]
                if not chunk:
                    return []
        if b"\r" in chunk:
            self._skip_lf = chunk[-1] == _CR
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = chunk.rfind(b"\n")
        if end < 0:
            self._partial(chunk, [])
            return []
        lines = chunk[:end].split(b"\n")
        if self._comment:
            lines[0] = b":"
        elif self._pending:
            self._pending.append(lines[0])
            lines[0] = b"".join(self._pending)
        self._pending = []
        self._pending_len = 0
        self._comment = False
        events = self._lines(lines)
        self._partial(chunk[end + 1 :], events)
        return events

    def _partial(self, fragment: bytes, events: list[Event]) -> None:
        """Keep the start of a line whose end has not arrived yet (a comment's is dropped);
        ``events`` are this chunk's, handed over if the limit is passed."""
        if not fragment or self._comment:
            return
        if not self._pending and fragment[0] == _COLON:
            self._comment = True
            return
        self._pending.append(fragment)
        self._pending_len += len(fragment)
        if self._limit is not None and self._event_bytes + self._pending_len > self._limit:
            self._fail(events)

    def _fail(self, events: list[Event]) -> None:
        assert self._limit is not None
        self._failed = True
        self._pending = []
        self._data = []
        raise EventTooLarge(self._limit, tuple(events))

    def _lines(self, lines: list[bytes]) -> list[Event]:
        events: list[Event] = []
        limit = self._limit
        for line in lines:
            if not line:
                self._last_id = self._id_buffer
                if self._data:
                    events.append(
                        Event(
                            "\n".join(self._data),
                            self._event_type or "message",
                            self._last_id,
                            self._retry,
                        )
                    )
                    self._data = []
                self._event_type = ""
                self._event_bytes = 0
                continue
            if line[0] == _COLON:
                continue
            self._event_bytes += len(line)
            if limit is not None and self._event_bytes > limit:
                self._fail(events)
            text = line.decode("utf-8", "replace")
            colon = text.find(":")
            if colon < 0:
                field, value = text, ""
            else:
                field = text[:colon]
                value = text[colon + 1 :]
                if value[:1] == " ":
                    value = value[1:]
            if field == "data":
                self._data.append(value)
            elif field == "event":
                self._event_type = value
            elif field == "id":
                if "\x00" not in value:
                    self._id_buffer = value
            elif field == "retry":
                self._set_retry(value)
        return events

    def _set_retry(self, value: str) -> None:
        if value and value.isascii() and value.isdigit():
            digits = value.lstrip("0") or "0"
            if len(digits) <= _MAX_RETRY_DIGITS:
                self._retry = int(digits)
