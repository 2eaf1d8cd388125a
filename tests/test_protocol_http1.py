"""snodo.protocol.http1: HTTP/1.1 response framing for the HTTP client (sans-IO, RFC 9112)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snodo.protocol import http1
from snodo.protocol.http1 import ChunkedDecoder, FramingError, HeadReader, HeadTooLarge


def head(raw: bytes) -> http1.Head:
    reader = HeadReader(1 << 20)
    parsed = reader.feed(raw)
    assert parsed is not None and parsed.size == len(raw) and reader.rest == b""
    return parsed


def test_a_request_head_has_the_request_line_host_and_fields() -> None:
    got = http1.request_head("POST", "/mcp?x=1", "example.com:8080", {"Accept": "a, b"})
    assert got == b"POST /mcp?x=1 HTTP/1.1\r\nHost: example.com:8080\r\nAccept: a, b\r\n\r\n"


def test_a_response_head_is_parsed_with_fields_matched_without_case() -> None:
    parsed = head(
        b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer a\r\n"
        b"www-authenticate: Basic\r\nContent-Length:  7 \r\n\r\n"
    )
    assert (parsed.version, parsed.status, parsed.reason) == ("HTTP/1.1", 401, "Unauthorized")
    assert parsed.headers.get("content-length") == "7"
    assert parsed.headers.getlist("WWW-Authenticate") == ["Bearer a", "Basic"]
    assert parsed.headers.get("Www-Authenticate") == "Bearer a, Basic"
    assert "CONTENT-LENGTH" in parsed.headers and parsed.headers.get("missing") is None


def test_the_head_end_is_found_only_when_complete_and_within_the_limit() -> None:
    assert HeadReader(100).feed(b"HTTP/1.1 200 OK\r\nA: b\r\n") is None
    reader = HeadReader(100)
    parsed = reader.feed(b"HTTP/1.1 200 OK\r\n\r\nbody")
    assert parsed is not None and parsed.size == 19 and reader.rest == b"body"
    with pytest.raises(HeadTooLarge):
        HeadReader(100).feed(b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 50)
    with pytest.raises(HeadTooLarge):
        HeadReader(100).feed(b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 50 + b"\r\n")


HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-A: 1\r\n"
    b"Set-Cookie: a=b\r\nContent-Length: 2\r\n\r\nok"
)


@given(st.lists(st.integers(min_value=1, max_value=len(HEAD) - 1), max_size=20))
def test_the_head_does_not_depend_on_how_the_bytes_are_split(cuts: list[int]) -> None:
    """Each piece is scanned from where the last search stopped, a CRLF split between two
    pieces included: the head found and the bytes after it are the same for every split."""
    reader = HeadReader(1 << 20)
    points = sorted(set(cuts))
    found = []
    for start, end in zip([0, *points], [*points, len(HEAD)], strict=True):
        parsed = reader.feed(HEAD[start:end])
        if parsed is not None:
            found.append(parsed)
            break
    assert len(found) == 1
    assert found[0].size == len(HEAD) - 2
    assert found[0].headers.items() == head(HEAD[:-2]).headers.items()
    assert reader.rest == HEAD[found[0].size : end]


def test_a_head_with_too_many_fields_is_refused_as_its_lines_arrive() -> None:
    """At most MAX_HEADERS fields (as http.client): the 101st line fails before the head ends."""
    reader = HeadReader(1 << 30)
    assert reader.feed(b"HTTP/1.1 200 OK\r\n") is None
    for _ in range(http1.MAX_HEADERS):
        assert reader.feed(b"X: y\r\n") is None
    with pytest.raises(FramingError, match="more than 100 header fields"):
        reader.feed(b"X: y\r\n")


def test_an_endless_header_line_is_refused_once_it_passes_max_line() -> None:
    reader = HeadReader(1 << 30)
    reader.feed(b"HTTP/1.1 200 OK\r\nX-Endless: ")
    with pytest.raises(FramingError, match="longer than"):
        for _ in range(http1.MAX_LINE):
            reader.feed(b"a" * 64)


def test_a_head_is_never_longer_than_max_head_whatever_the_limit() -> None:
    reader = HeadReader(1 << 30)
    line = b"X: " + b"a" * 60000 + b"\r\n"
    reader.feed(b"HTTP/1.1 200 OK\r\n")
    with pytest.raises(FramingError, match="longer than"):
        for _ in range(http1.MAX_HEADERS):
            reader.feed(line)
    assert http1.MAX_HEADERS * len(line) > http1.MAX_HEAD


def test_the_byte_bound_passed_first_is_reported_even_when_lines_arrive_together() -> None:
    """Complete lines are checked against the byte bounds one by one: a head whose size passes
    MAX_HEAD before its field count passes MAX_HEADERS is refused for its size, even when the
    lines past both arrive in one read (a busy client reads many at once)."""
    line = b"X-Long: " + b"a" * 11000 + b"\r\n"
    data = b"HTTP/1.1 200 OK\r\n" + line * (http1.MAX_HEADERS + 5)
    reader = HeadReader(1 << 30)
    with pytest.raises(FramingError, match=f"longer than {http1.MAX_HEAD} bytes"):
        reader.feed(data)
    limited = HeadReader(4096)
    with pytest.raises(HeadTooLarge):
        limited.feed(b"HTTP/1.1 200 OK\r\n" + (b"X: " + b"y" * 100 + b"\r\n") * 90)


def test_reading_a_dripping_head_is_linear() -> None:
    """A 1 MiB head of 11 KB lines arriving 16 bytes at a time is scanned once, then refused
    at MAX_HEAD: tens of milliseconds of CPU (rescanning and copying the whole buffer at each
    piece, as before, is ~34 GB of copying: minutes)."""
    data = b"HTTP/1.1 200 OK\r\n" + (b"X-Long: " + b"a" * 11000 + b"\r\n") * 100
    assert len(data) > http1.MAX_HEAD
    reader = HeadReader(1 << 30)
    started = time.process_time()
    with pytest.raises(FramingError, match=f"longer than {http1.MAX_HEAD} bytes"):
        for at in range(0, len(data), 16):
            reader.feed(data[at : at + 16])
    assert time.process_time() - started < 0.5


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/2 200 OK\r\n\r\n",
        b"ICY 200 OK\r\n\r\n",
        b"HTTP/1.1 20 OK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n",
    ],
)
def test_malformed_heads_are_refused(raw: bytes) -> None:
    with pytest.raises(FramingError):
        http1.parse_head(raw)


@pytest.mark.parametrize(
    ("raw", "method", "framing"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", "POST", ("length", 12)),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n", "POST", ("length", 3)),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "POST", ("chunked", 0)),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST",
            ("chunked", 0),
        ),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "POST", ("close", 0)),
        (b"HTTP/1.1 200 OK\r\n\r\n", "POST", ("close", 0)),
        (b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", "POST", ("none", 0)),
        (b"HTTP/1.1 304 Not Modified\r\n\r\n", "GET", ("none", 0)),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", "HEAD", ("none", 0)),
    ],
)
def test_body_framing_follows_rfc_9112(raw: bytes, method: str, framing: tuple[str, int]) -> None:
    assert http1.body_framing(head(raw), method) == framing


@pytest.mark.parametrize("value", ["-1", "1e3", "3, 4", "٣"])
def test_an_invalid_content_length_is_refused(value: str) -> None:
    raw = f"HTTP/1.1 200 OK\r\nContent-Length: {value}\r\n\r\n".encode()
    with pytest.raises(FramingError):
        http1.body_framing(http1.parse_head(raw), "POST")


@pytest.mark.parametrize(
    ("raw", "alive"),
    [
        (b"HTTP/1.1 200 OK\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", False),
        (b"HTTP/1.1 200 OK\r\nConnection: Upgrade, Close\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", True),
    ],
)
def test_keep_alive_follows_the_version_and_connection_field(raw: bytes, alive: bool) -> None:
    assert http1.keeps_alive(head(raw)) is alive


CHUNKED = b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nTrailer: x\r\n\r\nNEXT"


def test_a_chunked_body_is_decoded_and_what_follows_it_is_returned() -> None:
    decoder = ChunkedDecoder()
    body, rest = decoder.feed(CHUNKED)
    assert (body, rest, decoder.done) == (b"hello, world", b"NEXT", True)


@given(st.lists(st.integers(min_value=1, max_value=len(CHUNKED)), max_size=12))
def test_chunked_decoding_does_not_depend_on_how_the_bytes_are_split(cuts: list[int]) -> None:
    decoder = ChunkedDecoder()
    body, rest = b"", b""
    points = sorted(set(cuts))
    for start, end in zip([0, *points], [*points, len(CHUNKED)], strict=True):
        got, after = decoder.feed(CHUNKED[start:end])
        body += got
        rest += after
    assert body == b"hello, world"
    assert decoder.done
    assert rest == b"NEXT"


@pytest.mark.parametrize(
    "raw",
    [b"zz\r\n", b"5\r\nhelloXX", b"0" * (http1.MAX_CHUNK_LINE + 10), b"1" * 20 + b"\r\n"],
)
def test_bad_or_endless_chunk_framing_is_refused(raw: bytes) -> None:
    with pytest.raises(FramingError):
        ChunkedDecoder().feed(raw)
