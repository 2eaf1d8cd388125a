"""Server-Sent Events parsing (reference (f) "Receiving": standard SSE, ``:`` keep-alives ignored,
multi-line ``data`` joined per the SSE rules; 2025-11-25 priming events, ``retry`` and
``Last-Event-ID``; WHATWG HTML §9.2.6 "Interpreting an event stream"; seed "Transport behavior •
HTTP": a subscription stream is checked one event at a time)."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snodo.protocol.sse import Event, EventTooLarge, SseParser

BOM = b"\xef\xbb\xbf"


def _parse(*chunks: bytes, limit: int | None = None) -> tuple[list[Event], SseParser]:
    parser = SseParser(limit)
    events: list[Event] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    return events, parser


def _events(*chunks: bytes) -> list[Event]:
    return _parse(*chunks)[0]


def _chunk(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(stream) + 1) for c in cuts})
    bounds = [0, *points, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


# --- the WHATWG algorithm, applied to a whole stream at once (the specification) -----------------


def _oracle(stream: bytes) -> tuple[list[Event], str | None, int | None]:
    """A literal transcription of WHATWG §9.2.6, on the whole stream decoded at once."""
    text = stream.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines: list[str] = []
    start = i = 0
    while i < len(text):
        ch = text[i]
        if ch in "\r\n":
            lines.append(text[start:i])
            i += 2 if text[i : i + 2] == "\r\n" else 1
            start = i
        else:
            i += 1
    # text[start:] has no line end: never processed (no dispatch at EOF)
    data, event_type, id_buffer, last_id, retry = "", "", None, None, None
    events: list[Event] = []
    for line in lines:
        if line == "":
            last_id = id_buffer
            if data == "":
                event_type = ""
                continue
            if data.endswith("\n"):
                data = data[:-1]
            events.append(Event(data, event_type or "message", last_id, retry))
            data, event_type = "", ""
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            field, value = line.split(":", 1)
            if value.startswith(" "):
                value = value[1:]
        else:
            field, value = line, ""
        if field == "event":
            event_type = value
        elif field == "data":
            data += value + "\n"
        elif field == "id":
            if "\0" not in value:
                id_buffer = value
        elif field == "retry" and value and all(c in "0123456789" for c in value):
            retry = int(value)
    return events, last_id, retry


_piece = st.sampled_from(
    [
        b"data",
        b"data:",
        b"data: ",
        b"event:",
        b"event: ping",
        b"id:",
        b"id: 7",
        b"id: a\x00b",
        b"retry:",
        b"retry: 1500",
        b"retry: 1x",
        b"foo: bar",
        b":",
        b": keep-alive",
        b" ",
        b"x",
        b"{}",
        b"\r",
        b"\n",
        b"\r\n",
        b"\n\n",
        BOM,
        b"\xef",
        b"\xc3\xa9",
        b"\xe4\xb8",
        b"\xff",
        b"\x00",
    ]
)
_value = st.lists(
    st.sampled_from(
        [b"x", b" ", b"7", b"42", b":", b"\x00", b"\xc3\xa9", b"\xe4\xb8", b"\xff", BOM]
    ),
    max_size=4,
).map(b"".join)
# Mostly whole lines (so events really dispatch), mixed with loose pieces that break them up.
_line = st.tuples(
    st.sampled_from(
        [
            b"data",
            b"data:",
            b"data: ",
            b"data: ",
            b"event: ",
            b"id: ",
            b"id:",
            b"retry: ",
            b":",
            b"foo:",
        ]
    ),
    _value,
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
).map(b"".join)
_blank = st.sampled_from([b"\n", b"\r\n", b"\r"])
# Blocks of lines ended by a blank line (so events really dispatch), with loose pieces that
# break lines and blocks up.
_block = st.tuples(st.lists(st.one_of(_line, _line, _line, _piece), max_size=5), _blank).map(
    lambda t: b"".join(t[0]) + t[1]
)
_stream = st.tuples(st.sampled_from([b"", BOM]), st.lists(_block, max_size=12)).map(
    lambda t: t[0] + b"".join(t[1])
)


# --- basic fields ---------------------------------------------------------------------------------


def test_a_data_line_and_a_blank_line_dispatch_a_message_event() -> None:
    """A blank line dispatches; the default type is "message" (WHATWG: dispatch the event)."""
    assert _events(b'data: {"jsonrpc":"2.0"}\n\n') == [Event('{"jsonrpc":"2.0"}', "message")]


def test_data_lines_join_with_newlines() -> None:
    """Each data line appends its value and a LF; the last LF is removed (reference (f):
    multi-line data joined per SSE rules)."""
    assert _events(b"data: a\ndata: b\ndata:\n\n") == [Event("a\nb\n")]


def test_the_event_field_sets_the_type_for_one_event_only() -> None:
    """The event type buffer resets after each dispatch; an empty type means "message"."""
    events = _events(b"event: progress\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\n")
    assert [(e.event, e.data) for e in events] == [
        ("progress", "1"),
        ("message", "2"),
        ("message", "3"),
    ]


def test_comment_lines_are_ignored_as_keep_alives() -> None:
    """Lines starting with ":" are comments the client must ignore (reference (f) keep-alives)."""
    assert _events(b": ping\n\n:\n\ndata: a\n: inside an event\ndata: b\n\n") == [Event("a\nb")]


def test_only_one_leading_space_is_removed_from_a_value() -> None:
    """WHATWG: if the value starts with a space, remove that one space."""
    assert _events(b"data:  two\n\ndata:none\n\n") == [Event(" two"), Event("none")]


def test_a_line_without_a_colon_is_a_field_with_an_empty_value() -> None:
    """WHATWG: the whole line is the field name and the value is the empty string."""
    assert _events(b"data\n\ndata\ndata\n\n") == [Event(""), Event("\n")]


def test_the_value_keeps_colons_after_the_first() -> None:
    """Only the first colon separates field and value."""
    assert _events(b"data: a:b: c\n\n") == [Event("a:b: c")]


def test_unknown_fields_are_ignored() -> None:
    """WHATWG: any other field name is ignored (field names are case-sensitive)."""
    assert _events(b"foo: 1\nData: x\nDATA: y\ndata: z\n\n") == [Event("z")]


def test_an_empty_data_line_dispatches_an_empty_priming_event() -> None:
    """2025-11-25 priming event: an id with empty data is dispatched with data "" (the transport
    skips it); "data:" makes the data buffer non-empty."""
    events, parser = _parse(b"id: prime-1\ndata:\n\n")
    assert events == [Event("", "message", "prime-1")]
    assert parser.last_event_id == "prime-1"


def test_an_event_without_data_is_not_dispatched() -> None:
    """WHATWG: a blank line with an empty data buffer dispatches nothing and resets the type."""
    assert _events(b"event: orphan\nid: 3\n\ndata: x\n\n") == [Event("x", "message", "3")]


def test_no_event_is_dispatched_at_end_of_stream_without_a_blank_line() -> None:
    """WHATWG: an incomplete event at EOF is discarded; nothing flushes it."""
    events, parser = _parse(b"data: complete\n\ndata: cut off\n")
    assert events == [Event("complete")]
    assert parser.last_event_id is None


# --- line ends ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("end", [b"\r\n", b"\n", b"\r"], ids=["CRLF", "LF", "CR"])
def test_each_line_end_form_ends_a_line(end: bytes) -> None:
    """WHATWG end-of-line: CRLF, LF or CR."""
    stream = b"data: a" + end + b"data: b" + end + end
    assert _events(stream) == [Event("a\nb")]


def test_cr_at_the_end_of_one_chunk_and_lf_at_the_start_of_the_next_are_one_line_end() -> None:
    """A CRLF split across chunks is one line end, not a blank line (which would dispatch)."""
    assert _events(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [Event("a\nb")]


def test_cr_then_lf_after_an_empty_chunk_is_still_one_line_end() -> None:
    """An empty chunk between the CR and the LF changes nothing."""
    assert _events(b"data: a\r", b"", b"\ndata: b\n\n") == [Event("a\nb")]


def test_cr_cr_lf_is_two_line_ends() -> None:
    """CR, then CRLF: a line end and then a second one, which dispatches."""
    assert _events(b"data: a\r\r\ndata: b\n\n") == [Event("a"), Event("b")]


# --- decoding ------------------------------------------------------------------------------------------


def test_a_bom_at_the_start_is_stripped() -> None:
    """WHATWG: UTF-8 decode strips one leading BOM."""
    assert _events(BOM + b"data: x\n\n") == [Event("x")]


def test_a_bom_split_across_chunks_is_stripped() -> None:
    """The BOM is recognised however the first bytes are chunked."""
    assert _events(b"\xef", b"\xbb", b"\xbfdata: x\n\n") == [Event("x")]


def test_only_the_first_bom_is_stripped() -> None:
    """A second BOM is part of the first field name, so the line is an unknown field."""
    assert _events(BOM + BOM + b"data: x\n\ndata: y\n\n") == [Event("y")]


def test_a_bom_later_in_the_stream_is_kept() -> None:
    """Only a BOM at the start of the stream is special."""
    assert _events(b"data: a\n\n" + BOM + b"data: b\n\n") == [Event("a")]
    assert _events(b"data: " + BOM + b"b\n\n") == [Event("\ufeffb")]


def test_a_stream_starting_with_part_of_a_bom_keeps_those_bytes() -> None:
    """Bytes that only begin like a BOM are decoded (and replaced when invalid)."""
    assert _events(b"\xef\xbb", b"x\ndata: y\n\n") == [Event("y")]
    assert _events(b"\xef", b"") == []


def test_invalid_utf8_is_replaced() -> None:
    """WHATWG: UTF-8 decode with replacement; multi-byte text split across chunks survives."""
    assert _events(b"data: \xff\xe4\xb8\n\n") == [Event("\ufffd\ufffd")]
    assert _events(b"data: \xe4", b"\xb8\x96\n\n") == [Event("\u4e16")]


# --- id and retry ---------------------------------------------------------------------------------


def test_id_is_carried_by_later_events_and_exposed_for_resumption() -> None:
    """The last event ID persists across events (MessageEvent.lastEventId) and is what
    Last-Event-ID resumes from."""
    events, parser = _parse(b"id: 1\ndata: a\n\ndata: b\n\n")
    assert [e.id for e in events] == ["1", "1"]
    assert parser.last_event_id == "1"


def test_an_id_containing_nul_is_ignored() -> None:
    """WHATWG: an id field whose value contains NUL is ignored."""
    events, parser = _parse(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n")
    assert [e.id for e in events] == ["1", "1"]
    assert parser.last_event_id == "1"


def test_an_id_updates_the_last_event_id_even_without_data() -> None:
    """The last event ID is set at the blank line even when no event is dispatched."""
    events, parser = _parse(b"data: a\nid: 1\n\nid: 2\n\n")
    assert events == [Event("a", "message", "1")]
    assert parser.last_event_id == "2"


def test_an_id_takes_effect_only_at_the_blank_line() -> None:
    """An event cut off before its blank line is not skipped on resume."""
    _, parser = _parse(b"id: 1\ndata: a\n\nid: 2\ndata: cut")
    assert parser.last_event_id == "1"


def test_an_empty_id_resets_the_last_event_id() -> None:
    """WHATWG: an empty id sets the buffer to "" (then no Last-Event-ID is sent)."""
    events, parser = _parse(b"id: 1\ndata: a\n\nid\ndata: b\n\n")
    assert [e.id for e in events] == ["1", ""]
    assert parser.last_event_id == ""


def test_retry_takes_ascii_digits_only() -> None:
    """WHATWG: retry is set only when the value is ASCII digits; the last valid one wins."""
    _, parser = _parse(b"retry: 1500\n\n")
    assert parser.retry == 1500
    for bad in (b"retry: 1x\n", b"retry: -1\n", b"retry:\n", b"retry: 1.5\n", b"retry:  7\n"):
        _, parser = _parse(b"retry: 10\n", bad, b"\n")
        assert parser.retry == 10, bad
    _, parser = _parse("retry: \u0661\u0662\n".encode())  # Arabic-Indic digits are not ASCII
    assert parser.retry is None


def test_retry_applies_at_once_and_events_carry_it() -> None:
    """The reconnection time is set when the field is read, even without a dispatch."""
    events, parser = _parse(b"retry: 007\ndata: a\n\nretry: 20\n")
    assert events == [Event("a", "message", None, 7)]
    assert parser.retry == 20


def test_an_absurdly_long_retry_is_ignored_without_error() -> None:
    """A digit string too long to mean anything is ignored (Python refuses to parse >4300
    digits; the parser must not raise)."""
    events, parser = _parse(b"retry: 5\nretry: " + b"9" * 10_000 + b"\ndata: x\n\n")
    assert events == [Event("x", "message", None, 5)]
    assert parser.retry == 5
    _, parser = _parse(b"retry: " + b"0" * 10_000 + b"42\n")
    assert parser.retry == 42


# --- max_event_bytes -------------------------------------------------------------------------------


def test_the_limit_must_be_positive() -> None:
    """max_event_bytes below 1 is a configuration error."""
    for bad in (0, -1):
        with pytest.raises(ValueError):
            SseParser(bad)


def test_an_event_within_the_limit_is_dispatched() -> None:
    """Exactly the limit is allowed: "data: " + 4 bytes is 10 bytes of field lines."""
    events, _ = _parse(b"data: abcd\n\n", limit=10)
    assert events == [Event("abcd")]


def test_an_event_over_the_limit_raises_with_the_events_before_it() -> None:
    """Seed "HTTP": a subscription stream is checked one event at a time; the events the chunk
    completed before the big one are handed over on the error."""
    parser = SseParser(20)
    with pytest.raises(EventTooLarge) as caught:
        parser.feed(b"data: ok\n\ndata: 0123456789\ndata: 0123456789\n\n")
    assert caught.value.limit == 20
    assert caught.value.events == (Event("ok"),)
    with pytest.raises(EventTooLarge):  # the stream cannot be read further
        parser.feed(b"data: x\n\n")


def test_the_limit_counts_every_field_line_of_the_event() -> None:
    """id, event and unknown field lines count, not just data."""
    with pytest.raises(EventTooLarge):
        _parse(b"id: 12345\nevent: abcde\nfoo: bar\ndata: x\n\n", limit=30)


def test_the_limit_raises_before_a_long_line_ends() -> None:
    """The partial line counts as it arrives: the parser never buffers more than about the limit
    plus one chunk."""
    parser = SseParser(1000)
    parser.feed(b"data: ")
    fed = 6
    with pytest.raises(EventTooLarge):
        for _ in range(10_000):
            fed += 100
            parser.feed(b"x" * 100)
    assert 1000 < fed <= 1000 + 100


def test_the_limit_is_per_event() -> None:
    """The count restarts at each blank line, so many small events never trip it."""
    events, _ = _parse(b"data: 1234\n\n" * 1000, limit=12)
    assert len(events) == 1000


def test_comments_do_not_count_toward_the_limit() -> None:
    """Keep-alive comments are dropped as they arrive, however long."""
    chunks = [b": " + b"k" * 5000, b"k" * 5000, b"\n", b"data: x\n\n"]
    events, _ = _parse(*chunks, limit=16)
    assert events == [Event("x")]


# --- properties -----------------------------------------------------------------------------------------


@settings(max_examples=400)
@given(stream=_stream)
def test_the_parser_matches_the_whatwg_algorithm(stream: bytes) -> None:
    """Fed at once, the parser agrees with a literal transcription of WHATWG §9.2.6."""
    events, parser = _parse(stream)
    expected, last_id, retry = _oracle(stream)
    assert events == expected
    assert parser.last_event_id == last_id
    assert parser.retry == retry


@settings(max_examples=400)
@given(stream=_stream, cuts=st.lists(st.integers(min_value=0), max_size=12))
def test_any_chunking_gives_the_same_events(stream: bytes, cuts: list[int]) -> None:
    """Chunk boundaries (inside CRLF, inside the BOM, inside UTF-8) never change the result."""
    whole, whole_parser = _parse(stream)
    chunked, chunked_parser = _parse(*_chunk(stream, cuts))
    assert chunked == whole
    assert chunked_parser.last_event_id == whole_parser.last_event_id
    assert chunked_parser.retry == whole_parser.retry


def _until_failure(chunks: list[bytes], limit: int) -> tuple[list[Event], bool]:
    parser = SseParser(limit)
    events: list[Event] = []
    for chunk in chunks:
        try:
            events += parser.feed(chunk)
        except EventTooLarge as exc:
            return events + list(exc.events), True
    return events, False


@settings(max_examples=300)
@given(
    stream=_stream,
    cuts=st.lists(st.integers(min_value=0), max_size=12),
    limit=st.integers(min_value=1, max_value=40),
)
def test_the_limit_trips_at_the_same_event_whatever_the_chunking(
    stream: bytes, cuts: list[int], limit: int
) -> None:
    """Which event passes max_event_bytes, and what was delivered before it, does not depend on
    how the bytes arrive."""
    assert _until_failure(_chunk(stream, cuts), limit) == _until_failure([stream], limit)


@settings(max_examples=300)
@given(
    chunks=st.lists(st.binary(max_size=64), max_size=20),
    limit=st.none() | st.integers(min_value=1, max_value=64),
)
def test_arbitrary_bytes_never_raise_anything_but_event_too_large(
    chunks: list[bytes], limit: int | None
) -> None:
    """Hostile input: only EventTooLarge escapes, and only with a limit."""
    parser = SseParser(limit)
    try:
        for chunk in chunks:
            for event in parser.feed(chunk):
                assert isinstance(event.data, str)
    except EventTooLarge:
        assert limit is not None


# --- speed ------------------------------------------------------------------------------------------


def test_many_small_events_in_one_chunk_are_parsed_quickly() -> None:
    """50,000 progress notifications in 64 KiB chunks parse in well under the deadline (~0.2 s
    here; a per-byte or quadratic parser takes far longer)."""
    event = b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n\n'
    body = event * 50_000
    parser = SseParser(1 << 20)
    start = time.perf_counter()
    count = 0
    for i in range(0, len(body), 65536):
        count += len(parser.feed(body[i : i + 65536]))
    assert count == 50_000
    assert time.perf_counter() - start < 5.0


def test_a_long_line_in_small_chunks_is_linear() -> None:
    """A 4 MiB data line in 64-byte chunks is buffered in parts, not re-joined per chunk."""
    parser = SseParser()
    piece = b"x" * 64
    start = time.perf_counter()
    parser.feed(b"data: ")
    for _ in range(65536):
        assert parser.feed(piece) == []
    (event,) = parser.feed(b"\n\n")
    assert len(event.data) == 64 * 65536
    assert time.perf_counter() - start < 5.0
