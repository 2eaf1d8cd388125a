"""``snodo.protocol.serving.event_stream``: the server's SSE events and their ids."""

from __future__ import annotations

import pytest

from snodo.protocol.serving.event_stream import (
    KEEPALIVE,
    STANDALONE_STREAM,
    event_id,
    parse_event_id,
    priming_event,
    sse_event,
)
from snodo.protocol.sse import SseParser


def test_an_event_carries_its_id_and_one_data_line() -> None:
    assert sse_event(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert sse_event(b"{}", "3-7") == b"id: 3-7\ndata: {}\n\n"
    assert sse_event(b"{}", "3-7", 500) == b"id: 3-7\nretry: 500\ndata: {}\n\n"


def test_the_priming_event_has_an_id_and_empty_data() -> None:
    assert priming_event("1-0") == b"id: 1-0\ndata:\n\n"
    assert priming_event("1-0", 0) == b"id: 1-0\nretry: 0\ndata:\n\n"


def test_the_client_parser_reads_what_the_server_writes() -> None:
    """The priming event carries no message, only the resumption point and the retry."""
    parser = SseParser()
    primed = parser.feed(priming_event("2-0", 50))
    assert [(e.id, e.data, e.retry) for e in primed] == [("2-0", "", 50)]
    events = parser.feed(sse_event(b'{"x":1}', event_id("2", 1)) + KEEPALIVE)
    assert [(e.id, e.data) for e in events] == [("2-1", '{"x":1}')]
    assert parser.last_event_id == "2-1"


def test_event_ids_name_the_stream_and_the_event() -> None:
    assert event_id(STANDALONE_STREAM, 4) == "0-4"
    assert parse_event_id("12-345") == ("12", 345)
    assert parse_event_id(" 1-2 ") == ("1", 2)


@pytest.mark.parametrize("value", ["", "1", "a-1", "1-", "-1", "1-2-3", "1-" + "9" * 40])
def test_anything_else_is_no_event_id(value: str) -> None:
    assert parse_event_id(value) is None
