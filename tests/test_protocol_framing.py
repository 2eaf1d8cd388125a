"""stdio line framing (reference (e) "stdio transport": UTF-8 JSON-RPC, one message per line;
Elixir notes "Stdio transport details": BOM and CR stripped, a line over max_line_bytes is
discarded as it arrives and later lines still arrive)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snodo.protocol.framing import (
    DEFAULT_MAX_LINE_BYTES,
    OVERSIZED_EDGE_BYTES,
    LineFramer,
    Oversized,
)

BOM = b"\xef\xbb\xbf"
Event = bytes | Oversized


def _over(raw: bytes) -> Oversized:
    """The event for the discarded raw line ``raw``: its size and its two edges."""
    return Oversized(len(raw), raw[:OVERSIZED_EDGE_BYTES], raw[-OVERSIZED_EDGE_BYTES:])


def _feed_all(framer: LineFramer, chunks: list[bytes]) -> list[Event]:
    events: list[Event] = []
    for chunk in chunks:
        events += framer.feed(chunk)
    return events + framer.flush()


def _oracle(stream: bytes, limit: int) -> list[Event]:
    """The framing rules applied to the whole stream at once (the specification)."""
    events: list[Event] = []
    for raw in stream.split(b"\n"):
        if len(raw) > limit:
            events.append(_over(raw))
            continue
        line = raw[:-1] if raw.endswith(b"\r") else raw
        line = line[3:] if line.startswith(BOM) else line
        if line:
            events.append(line)
    return events


def _chunk(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(stream) + 1) for c in cuts})
    bounds = [0, *points, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


# Lines built from bytes that make the rules interesting: newlines, CRs, BOM pieces.
_piece = st.sampled_from(
    [b"a", b"{}", b"\r", b"\n", b"\xef", b"\xbb", b"\xbf", BOM, b"\xc3\xa9", b" "]
)
_stream = st.lists(_piece, max_size=60).map(b"".join)


def test_default_limit_is_16_mib() -> None:
    """max_line_bytes defaults to 16 MiB (Elixir notes: the stdio line limit)."""
    assert LineFramer().max_line_bytes == DEFAULT_MAX_LINE_BYTES == 16 * 1024 * 1024


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        LineFramer(0)


def test_complete_lines_in_order_without_terminators() -> None:
    """One message per line: each line comes out in order, without its newline."""
    framer = LineFramer()
    assert framer.feed(b'{"a":1}\n{"b":2}\n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert framer.buffered == 4
    assert framer.feed(b":3}\n") == [b'{"c":3}']
    assert framer.buffered == 0
    assert framer.flush() == []


def test_crlf_and_bom_are_stripped_and_empty_lines_skipped() -> None:
    """A trailing CR and a leading UTF-8 BOM are stripped; empty lines are skipped."""
    framer = LineFramer()
    data = BOM + b"{}\r\n\n\r\n" + BOM + b"\r\n" + b"[1]\n" + b"x\r\r\n"
    assert framer.feed(data) == [b"{}", b"[1]", b"x\r"]


def test_a_bom_is_stripped_only_at_the_start_of_a_line() -> None:
    framer = LineFramer()
    assert framer.feed(b"a" + BOM + b"\n" + BOM + BOM + b"b\n") == [b"a" + BOM, BOM + b"b"]


def test_flush_returns_a_final_unterminated_line() -> None:
    """At EOF the last line without a newline is still a line."""
    framer = LineFramer()
    assert framer.feed(b"one\ntwo\r") == [b"one"]
    assert framer.flush() == [b"two"]
    assert framer.flush() == []
    assert framer.feed(b"three\n") == [b"three"]


def test_one_byte_at_a_time() -> None:
    data = b'{"jsonrpc":"2.0","id":1}\r\n' + BOM + b"[]\n\nz"
    framer = LineFramer()
    events = [e for i in range(len(data)) for e in framer.feed(data[i : i + 1])]
    assert events + framer.flush() == [b'{"jsonrpc":"2.0","id":1}', b"[]", b"z"]


def test_a_line_of_exactly_the_limit_passes_and_one_byte_more_is_oversized() -> None:
    """The limit is inclusive; a longer line becomes one Oversized with its size."""
    framer = LineFramer(8)
    assert framer.feed(b"12345678\n123456789\nok\n") == [b"12345678", _over(b"123456789"), b"ok"]


def test_an_oversized_line_is_discarded_as_it_arrives_and_later_lines_arrive() -> None:
    """Elixir notes: a line longer than max_line_bytes is discarded as it arrives; later
    responses still arrive. The framer never holds more than the limit."""
    limit = 1000
    framer = LineFramer(limit)
    assert framer.feed(b'{"id":1}\n' + b"x" * 600) == [b'{"id":1}']
    assert framer.buffered == 600
    for _ in range(50):
        assert framer.feed(b"y" * 700) == []
        assert framer.buffered == 0  # dropped, not held
    line = b"x" * 600 + b"y" * 50 * 700 + b"zz"
    assert framer.feed(b"zz\n" + b'{"id":2}\n') == [_over(line), b'{"id":2}']
    assert framer.feed(b'{"id":3}\n') == [b'{"id":3}']


def test_an_oversized_line_inside_one_chunk_is_reported() -> None:
    framer = LineFramer(4)
    assert framer.feed(b"ab\nabcdefgh\ncd\n") == [b"ab", _over(b"abcdefgh"), b"cd"]


def test_an_oversized_line_at_eof_is_reported_by_flush() -> None:
    framer = LineFramer(4)
    assert framer.feed(b"ok\n123") == [b"ok"]
    assert framer.feed(b"45") == []
    assert framer.flush() == [_over(b"12345")]
    assert framer.buffered == 0


def test_the_limit_counts_cr_and_bom_bytes() -> None:
    """The raw line (CR and BOM included) is measured, so the outcome never depends on chunking."""
    framer = LineFramer(4)
    assert framer.feed(b"abcd\r\n" + BOM + b"ab\n") == [_over(b"abcd\r"), _over(BOM + b"ab")]


@settings(max_examples=300)
@given(
    _stream, st.lists(st.integers(min_value=0, max_value=10_000), max_size=20), st.integers(1, 8)
)
def test_any_chunking_gives_the_same_events(stream: bytes, cuts: list[int], limit: int) -> None:
    """The events depend only on the bytes, never on how they were chunked (and match the rules
    applied to the whole stream at once)."""
    expected = _oracle(stream, limit)
    assert _feed_all(LineFramer(limit), [stream]) == expected
    assert _feed_all(LineFramer(limit), _chunk(stream, cuts)) == expected
    assert _feed_all(LineFramer(limit), [bytes([b]) for b in stream]) == expected


@settings(max_examples=200)
@given(
    _stream, st.lists(st.integers(min_value=0, max_value=10_000), max_size=20), st.integers(1, 8)
)
def test_memory_never_exceeds_the_limit_between_feeds(
    stream: bytes, cuts: list[int], limit: int
) -> None:
    """At most max_line_bytes are held between calls (plus the chunk being fed, during a call)."""
    framer = LineFramer(limit)
    for chunk in _chunk(stream, cuts):
        framer.feed(chunk)
        assert framer.buffered <= limit
    framer.flush()
    assert framer.buffered == 0


# Long lines, so that an oversized line's edges are shorter than the line.
_long_piece = st.sampled_from([b"a" * 300, b"b" * 700, b"{", b"\n", b"\r", BOM, b"c"])
_long_stream = st.lists(_long_piece, max_size=20).map(b"".join)


@settings(max_examples=200)
@given(
    _long_stream,
    st.lists(st.integers(min_value=0, max_value=20_000), max_size=20),
    st.integers(100, 3000),
)
def test_the_edges_of_long_oversized_lines_do_not_depend_on_chunking(
    stream: bytes, cuts: list[int], limit: int
) -> None:
    """An oversized line's head and tail are its first and last OVERSIZED_EDGE_BYTES bytes,
    however the line was chunked."""
    expected = _oracle(stream, limit)
    assert _feed_all(LineFramer(limit), [stream]) == expected
    assert _feed_all(LineFramer(limit), _chunk(stream, cuts)) == expected
    pieces = [stream[i : i + 97] for i in range(0, len(stream), 97)]
    assert _feed_all(LineFramer(limit), pieces) == expected


def test_an_oversized_line_keeps_its_first_and_last_bytes() -> None:
    """The id of an oversized response is in its first bytes or its last: both are kept."""
    framer = LineFramer(4096)
    head = b'{"jsonrpc":"2.0","id":7,"result":{"text":"'
    tail = b'"},"jsonrpc":"2.0","id":7}'
    events = framer.feed(head + b"x" * 10_000) + framer.feed(b"x" * 10_000 + tail + b"\n")
    (event,) = events
    assert isinstance(event, Oversized)
    assert event.size == len(head) + 20_000 + len(tail)
    assert event.head.startswith(head) and len(event.head) == OVERSIZED_EDGE_BYTES
    assert event.tail.endswith(tail) and len(event.tail) == OVERSIZED_EDGE_BYTES


_line = st.binary(max_size=40).filter(
    lambda b: b"\n" not in b and b != b"" and not b.endswith(b"\r") and not b.startswith(BOM)
)


@settings(max_examples=200)
@given(st.lists(_line, max_size=20), st.booleans(), st.lists(st.integers(0, 1000), max_size=10))
def test_lines_round_trip(lines: list[bytes], terminated: bool, cuts: list[int]) -> None:
    """Lines joined with newlines come back exactly, terminated or not at EOF."""
    stream = b"\n".join(lines) + (b"\n" if terminated and lines else b"")
    assert _feed_all(LineFramer(64), _chunk(stream, cuts)) == lines
