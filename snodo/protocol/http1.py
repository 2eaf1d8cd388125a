"""HTTP/1.1 client framing (RFC 9112), sans-IO: request heads, response heads, body framing and
the chunked transfer coding.

Pure functions and small state machines over bytes; ``snodo.transports.http_wire`` moves the
bytes. Limits are explicit: a head longer than the caller's limit (``HeadTooLarge``) or than
``MAX_HEAD`` bytes, a header line over ``MAX_LINE`` bytes, more than ``MAX_HEADERS`` fields, or a
chunk-size line over ``MAX_CHUNK_LINE`` bytes is refused (``FramingError``), never buffered
without bound; ``HeadReader`` finds a head's end scanning each byte once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Final, NamedTuple

__all__ = [
    "ChunkedDecoder",
    "FramingError",
    "Head",
    "HeadReader",
    "HeadTooLarge",
    "Headers",
    "body_framing",
    "keeps_alive",
    "parse_head",
    "request_head",
]

#: The longest header line, and the most header fields, of one response head (as http.client).
MAX_LINE: Final = 65536
MAX_HEADERS: Final = 100
#: The longest response head, whatever the caller's limit (docs/decisions/0028).
MAX_HEAD: Final = 1024 * 1024
#: The longest chunk-size line (size, extensions and CRLF).
MAX_CHUNK_LINE: Final = 4096

_TOKEN_CHARS: Final = (
    b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


class FramingError(Exception):
    """The peer's bytes are not HTTP/1.1 this client accepts."""


class HeadTooLarge(FramingError):
    """The response head is longer than the caller's limit."""


class Headers:
    """Response header fields in order; names matched without case."""

    __slots__ = ("_fields", "_index")

    def __init__(self, fields: Iterable[tuple[str, str]] = ()) -> None:
        self._fields = list(fields)
        self._index: dict[str, str] = {}
        for name, value in self._fields:
            key = name.lower()
            previous = self._index.get(key)
            self._index[key] = value if previous is None else f"{previous}, {value}"

    def get(self, name: str, default: str | None = None) -> str | None:
        """The field's value (repeated fields joined with ", "), or ``default``."""
        return self._index.get(name.lower(), default)

    def getlist(self, name: str) -> list[str]:
        """Every value of the field, in order."""
        key = name.lower()
        return [value for field, value in self._fields if field.lower() == key]

    def items(self) -> list[tuple[str, str]]:
        return list(self._fields)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._index

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        return f"Headers({self._fields!r})"


class Head(NamedTuple):
    """A parsed response head (a named tuple: frozen, and built in a fraction of a frozen
    dataclass's time, on every response)."""

    version: str  # "HTTP/1.1" or "HTTP/1.0"
    status: int
    reason: str
    headers: Headers
    size: int  # bytes of the head, the blank line included


def request_head(method: str, target: str, host: str, headers: Mapping[str, str]) -> bytes:
    """The request line and header section (ending with the blank line), latin-1 encoded.

    Field values must already be free of CR, LF and NUL (``snodo.protocol.headers`` checks).
    """
    fields = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
    return f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n{fields}\r\n".encode("latin-1")


class HeadReader:
    """Collects one response head as its bytes arrive and finds its end in linear time: each
    byte is scanned once (the search resumes where the last one stopped) and the head is bounded
    in bytes (the caller's limit and ``MAX_HEAD``), in lines (``MAX_HEADERS`` fields after the
    status line) and in line length (``MAX_LINE``), so a head that never ends fails fast."""

    __slots__ = ("_buf", "_limit", "_line", "_lines", "_scan", "rest")

    def __init__(self, limit: int) -> None:
        self._buf = bytearray()
        self._limit = limit
        self._line = 0  # where the line being read starts
        self._scan = 0  # where the search for the next CRLF resumes
        self._lines = 0  # complete lines so far, the status line included
        #: The bytes after the head, once ``feed`` returned it.
        self.rest = b""

    def feed(self, data: bytes | bytearray) -> Head | None:
        """Take the next bytes; the parsed head once its blank line arrived, else None.
        ``HeadTooLarge`` past the caller's limit, ``FramingError`` for any other bound."""
        buf = self._buf
        buf += data
        if not self._lines and not self._scan:
            # The usual case, the whole head in the first read: one search, and parse_head
            # checks the field count and line lengths.
            end = buf.find(b"\r\n\r\n")
            if end > 0:
                size = end + 4
                self._check_size(size)
                head = parse_head(buf[:size])
                self.rest = bytes(buf[size:])
                return head
        while True:
            end = buf.find(b"\r\n", self._scan)
            if end < 0:
                self._scan = max(self._line, len(buf) - 1)  # a CR may end the buffer
                if len(buf) - self._line > MAX_LINE:
                    raise FramingError(f"a response header line is longer than {MAX_LINE} bytes")
                self._check_size(len(buf))
                return None
            if end == self._line and self._lines:  # the blank line: the head is complete
                size = end + 2
                self._check_size(size)
                head = parse_head(buf[:size])
                self.rest = bytes(buf[size:])
                return head
            if end - self._line > MAX_LINE:
                raise FramingError(f"a response header line is longer than {MAX_LINE} bytes")
            self._check_size(end + 2)  # per line, so the bound hit first is the one reported
            self._lines += 1
            if self._lines > MAX_HEADERS + 1:
                raise FramingError(f"the response head has more than {MAX_HEADERS} header fields")
            self._line = self._scan = end + 2

    def _check_size(self, size: int) -> None:
        if size > self._limit:
            raise HeadTooLarge(f"response head larger than {self._limit} bytes")
        if size > MAX_HEAD:
            raise FramingError(f"the response head is longer than {MAX_HEAD} bytes")


def parse_head(raw: bytes | bytearray) -> Head:
    """Parse a complete response head, through its blank line (as ``HeadReader`` delimits it)."""
    text = bytes(raw[:-4]) if raw.endswith(b"\r\n\r\n") else bytes(raw)
    lines = text.split(b"\r\n")
    status_line = lines[0]
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise FramingError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
    code = parts[1]
    if len(code) != 3 or not code.isdigit():
        raise FramingError(f"invalid status code: {code[:10]!r}")
    if len(lines) - 1 > MAX_HEADERS:
        raise FramingError(f"got more than {MAX_HEADERS} headers")
    fields: list[tuple[str, str]] = []
    for line in lines[1:]:
        if len(line) > MAX_LINE:
            raise FramingError("header line too long")
        name, colon, value = line.partition(b":")
        # a field name is a token: nothing is left of it once token bytes are gone
        if not colon or not name or name.translate(None, _TOKEN_CHARS):
            if line[:1] in (b" ", b"\t"):
                raise FramingError("obsolete header line folding")
            raise FramingError(f"invalid header line: {line[:80]!r}")
        fields.append((name.decode("latin-1"), value.strip(b" \t").decode("latin-1")))
    return Head(
        parts[0].decode("ascii"),
        int(code),
        parts[2].decode("latin-1") if len(parts) > 2 else "",
        Headers(fields),
        len(raw),
    )


def body_framing(head: Head, method: str) -> tuple[str, int]:
    """How the body after ``head`` is delimited (RFC 9112 section 6.3):
    ``("none", 0)``, ``("length", n)``, ``("chunked", 0)`` or ``("close", 0)``."""
    status = head.status
    if method == "HEAD" or 100 <= status < 200 or status in (204, 304):
        return "none", 0
    coding = head.headers.get("transfer-encoding")
    if coding is not None:
        last = coding.rsplit(",", 1)[-1].strip().lower()
        if last == "chunked":
            return "chunked", 0
        return "close", 0  # another coding last: read to the close (no reuse)
    length = head.headers.get("content-length")
    if length is not None:
        if "," in length:  # repeated (or a list): every value must be the same
            values = {value.strip() for value in length.split(",")}
            if len(values) != 1:
                raise FramingError("conflicting Content-Length values")
            value = values.pop()
        else:
            value = length.strip()
        if not value.isdigit() or not value.isascii():
            raise FramingError(f"invalid Content-Length: {value[:20]!r}")
        return "length", int(value)
    return "close", 0


def keeps_alive(head: Head) -> bool:
    """True when the connection may carry another request after this response."""
    connection = head.headers.get("connection")
    if connection is None:
        return head.version == "HTTP/1.1"
    tokens = {t.strip().lower() for t in connection.split(",")}
    if head.version == "HTTP/1.1":
        return "close" not in tokens
    return "keep-alive" in tokens


class ChunkedDecoder:
    """The chunked transfer coding, decoded incrementally; trailers are read and dropped."""

    __slots__ = ("_buf", "_left", "_state")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._left = 0  # data bytes left in the current chunk
        self._state = "size"  # size | data | data_end | trailer | done

    @property
    def done(self) -> bool:
        """True once the last chunk and the trailer section have been read."""
        return self._state == "done"

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        """Take raw bytes; return (decoded body bytes, bytes after the end of the body)."""
        self._buf += data
        out = bytearray()
        buf = self._buf
        while buf and self._state != "done":
            state = self._state
            if state == "data":
                take = min(self._left, len(buf))
                out += buf[:take]
                del buf[:take]
                self._left -= take
                if self._left == 0:
                    self._state = "data_end"
                continue
            if state == "data_end":
                if len(buf) < 2:
                    break
                if buf[:2] != b"\r\n":
                    raise FramingError("missing CRLF after chunk data")
                del buf[:2]
                self._state = "size"
                continue
            end = buf.find(b"\r\n")
            if end < 0:
                if len(buf) > MAX_CHUNK_LINE:
                    raise FramingError("chunk-size line too long")
                break
            if end > MAX_CHUNK_LINE:
                raise FramingError("chunk-size line too long")
            line = bytes(buf[:end])
            del buf[: end + 2]
            if state == "trailer":
                if not line:
                    self._state = "done"
                continue
            size_text = line.split(b";", 1)[0].strip(b" \t")
            if not size_text or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
                raise FramingError(f"invalid chunk size: {size_text[:20]!r}")
            if len(size_text) > 15:
                raise FramingError("chunk size too large")
            size = int(size_text, 16)
            if size == 0:
                self._state = "trailer"
            else:
                self._left = size
                self._state = "data"
        rest = b""
        if self._state == "done" and buf:
            rest = bytes(buf)
            buf.clear()
        return bytes(out), rest
