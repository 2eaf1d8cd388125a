"""``snodo.protocol.serving.cursors``: opaque list cursors tied to their list."""

from __future__ import annotations

import pytest

from snodo.protocol.errors import McpError
from snodo.protocol.serving.cursors import (
    INVALID_CURSOR,
    decode_cursor,
    encode_cursor,
    page_bounds,
)


def test_cursor_round_trip() -> None:
    assert decode_cursor("t", encode_cursor("t", 5), 10) == 5
    assert decode_cursor("t", None, 10) == 0
    assert page_bounds("t", None, 7, 3) == (0, 3, encode_cursor("t", 3))
    assert page_bounds("t", encode_cursor("t", 6), 7, 3) == (6, 7, None)


@pytest.mark.parametrize(
    "bad",
    [
        encode_cursor("p", 1),  # another list's cursor
        encode_cursor("t", 11),  # past the end: the list shrank
        "",
        "!!",
        3,
        encode_cursor("t", -1),
        "é",
        encode_cursor("t", 10**19),  # more digits than any list has items
    ],
)
def test_a_cursor_that_is_not_this_lists_is_invalid_params(bad: object) -> None:
    with pytest.raises(McpError) as info:
        decode_cursor("t", bad, 10)
    assert info.value.code == -32602 and info.value.message == INVALID_CURSOR


def test_a_cursor_at_the_end_of_the_list_is_an_empty_last_page() -> None:
    assert page_bounds("t", encode_cursor("t", 10), 10, 3) == (10, 10, None)


def test_cursors_carry_no_padding() -> None:
    assert "=" not in "".join(encode_cursor("rt", n) for n in range(50))
