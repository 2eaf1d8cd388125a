"""Unit tests for snodo.protocol.stderr_tail: the bounded stderr tail and the exit error."""

from __future__ import annotations

import dataclasses

import pytest

from snodo.protocol import errors
from snodo.protocol.stderr_tail import (
    MAX_TAIL_BYTES,
    MAX_TAIL_LINES,
    MESSAGE_LINE_CHARS,
    StderrTail,
    is_exit_error,
    oversized_line,
    shorten,
    with_tail,
)


def fill(tail: StderrTail, lines: list[str]) -> StderrTail:
    for line in lines:
        tail = tail.add(line)
    return tail


def test_an_empty_tail_keeps_nothing() -> None:
    tail = StderrTail()
    assert tail.lines == ()
    assert tail.size == 0


def test_lines_are_kept_in_order_and_the_tail_is_frozen() -> None:
    first = StderrTail()
    tail = fill(first, ["one", "two", "three"])
    assert tail.lines == ("one", "two", "three")
    assert tail.size == len("onetwothree")
    assert first.lines == ()  # add returns a new tail
    with pytest.raises(dataclasses.FrozenInstanceError):
        tail.size = 0  # type: ignore[misc]


def test_the_line_bound_keeps_the_last_twenty() -> None:
    tail = fill(StderrTail(), [f"line {i}" for i in range(1000)])
    assert len(tail.lines) == MAX_TAIL_LINES == 20
    assert tail.lines[0] == "line 980"
    assert tail.lines[-1] == "line 999"
    assert tail.size == sum(len(line) for line in tail.lines)


def test_the_byte_bound_wins_when_it_is_smaller() -> None:
    tail = fill(StderrTail(), ["x" * 1000 + str(i) for i in range(10)])
    assert tail.size <= MAX_TAIL_BYTES == 4096
    assert len(tail.lines) == 4
    assert tail.lines[-1].endswith("9")


def test_the_byte_bound_counts_utf8_bytes() -> None:
    tail = fill(StderrTail(max_bytes=10), ["ééé", "éé"])  # 6 and 4 bytes
    assert tail.lines == ("ééé", "éé")
    assert tail.size == 10
    tail = tail.add("é")
    assert tail.lines == ("éé", "é")


def test_a_line_longer_than_the_byte_bound_is_cut() -> None:
    tail = StderrTail().add("y" * 10_000)
    assert tail.lines == ("y" * MAX_TAIL_BYTES,)
    assert tail.size == MAX_TAIL_BYTES
    cut = StderrTail(max_bytes=5).add("aéééé")  # the cut falls inside a character: dropped
    assert cut.lines == ("aéé",)
    assert cut.size == 5


def test_shorten() -> None:
    assert shorten("  boom \t") == "boom"
    long = "z" * 500
    short = shorten(long)
    assert len(short) == MESSAGE_LINE_CHARS
    assert short.endswith("…")


def test_exit_errors_are_the_ones_of_a_gone_server() -> None:
    assert is_exit_error(errors.connection_error("x", cause=("exit_status", 1)))
    assert is_exit_error(errors.connection_error("x", cause=("stdout_closed",)))
    assert is_exit_error(errors.connection_error("x", cause=("port_exit", "epipe")))
    assert not is_exit_error(errors.connection_error("x", cause=("closed",)))
    assert not is_exit_error(errors.connection_error("x"))
    assert not is_exit_error(errors.timeout_error(1.0))


def test_with_tail_names_the_last_line_and_carries_the_lines() -> None:
    error = errors.connection_error("The server exited with status 1", cause=("exit_status", 1))
    tail = fill(StderrTail(), ["starting", "reading config", "fatal: no such file", ""])
    marked = with_tail(error, tail)
    assert marked.message == "The server exited with status 1: fatal: no such file"
    assert marked.data == {"stderr": ["starting", "reading config", "fatal: no such file", ""]}
    assert marked.code == -32000
    assert marked.kind == "transport"
    assert marked.cause == ("exit_status", 1)


def test_with_tail_keeps_existing_data_and_the_outcome() -> None:
    error = errors.with_outcome(
        errors.connection_error("The server exited with status 2", cause=("exit_status", 2)),
        "unknown",
    )
    marked = with_tail(error, StderrTail().add("x" * 300))
    assert marked.data == {"outcome": "unknown", "stderr": ["x" * 300]}
    assert marked.message.startswith("The server exited with status 2: xxx")
    assert marked.message.endswith("…")
    assert len(marked.message) == len("The server exited with status 2: ") + MESSAGE_LINE_CHARS


def test_with_tail_and_nothing_kept_is_the_error_itself() -> None:
    error = errors.connection_error("The server exited with status 1", cause=("exit_status", 1))
    assert with_tail(error, StderrTail()) is error
    blank = with_tail(error, StderrTail().add("   "))
    assert blank.message == error.message
    assert blank.data == {"stderr": ["   "]}


def test_an_oversized_line_is_named() -> None:
    assert oversized_line(9000) == "[a stderr line of 9000 bytes was dropped]"
