"""Following nextCursor (reference "Lists and paging"; Elixir notes "Paging")."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snodo.protocol import paging
from snodo.protocol.errors import CONNECTION_CLOSED, McpError
from snodo.protocol.results import Page


def _page(items: list[Any], cursor: str | None) -> Page:
    return Page(items, cursor, {"tools": items, "nextCursor": cursor})


def _collect(
    pages: list[Page], max_pages: int = 1000
) -> tuple[paging.PagerState, list[str | None]]:
    """Drive the pager over scripted pages; returns the final state and the cursors requested."""
    state = paging.start("tools/list", max_pages)
    requested: list[str | None] = [None]
    for page in pages:
        state, cursor = paging.advance(state, page)
        if cursor is None:
            return state, requested
        requested.append(cursor)
    raise AssertionError("the pager asked for more pages than scripted")


def test_follows_next_cursor_to_the_end_and_returns_every_item() -> None:
    """list_tools/1 follows nextCursor to the end and returns every item."""
    state, requested = _collect([_page([1, 2], "a"), _page([3], "b"), _page([4, 5], None)])
    assert state.items == [1, 2, 3, 4, 5]
    assert requested == [None, "a", "b"]
    assert state.done
    assert state.pages == 3


def test_empty_string_cursor_is_followed() -> None:
    """ "" is a valid cursor, not the end."""
    state, requested = _collect([_page([1], ""), _page([2], None)])
    assert requested == [None, ""]
    assert state.items == [1, 2]


def test_a_repeated_cursor_is_32000_with_kind_and_cursor() -> None:
    """They stop with a -32000 error if a server repeats a cursor."""
    with pytest.raises(McpError) as info:
        _collect([_page([1], "a"), _page([2], "b"), _page([3], "a")])
    assert info.value.code == CONNECTION_CLOSED
    assert info.value.kind == "transport"
    assert info.value.cause == {"kind": "tools/list", "cursor": "a"}


def test_a_page_returning_its_own_cursor_is_a_repeat() -> None:
    with pytest.raises(McpError) as info:
        _collect([_page([1], "a"), _page([2], "a")])
    assert info.value.cause == {"kind": "tools/list", "cursor": "a"}


def test_the_last_of_max_pages_with_a_next_cursor_is_32000() -> None:
    """... or if the last of :max_pages pages still has a nextCursor."""
    with pytest.raises(McpError) as info:
        _collect([_page([i], f"c{i}") for i in range(3)], max_pages=3)
    assert info.value.code == CONNECTION_CLOSED
    assert info.value.kind == "transport"
    assert info.value.cause == {"kind": "tools/list", "max_pages": 3}


def test_exactly_max_pages_ending_on_the_last_is_fine() -> None:
    """Pages are counted, not items: max_pages pages whose last has no cursor succeed."""
    pages = [_page(list(range(50)), "a"), _page(list(range(50)), "b"), _page([], None)]
    state, _ = _collect(pages, max_pages=3)
    assert len(state.items) == 100


def test_one_page_limit() -> None:
    with pytest.raises(McpError):
        _collect([_page([1], "a")], max_pages=1)
    state, _ = _collect([_page([1], None)], max_pages=1)
    assert state.items == [1]


def test_default_max_pages_is_1000() -> None:
    """:max_pages (1,000 by default)."""
    assert paging.DEFAULT_MAX_PAGES == 1000
    assert paging.start("tools/list").max_pages == 1000


@pytest.mark.parametrize("bad", [0, -1])
def test_max_pages_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError):
        paging.start("tools/list", bad)


@pytest.mark.parametrize("bad", [True, 1.0, "3"])
def test_max_pages_must_be_an_integer(bad: Any) -> None:
    with pytest.raises(TypeError):
        paging.start("tools/list", bad)


def test_advance_after_the_end_is_misuse() -> None:
    state, _ = _collect([_page([1], None)])
    with pytest.raises(ValueError):
        paging.advance(state, _page([2], None))


def test_states_are_immutable_and_the_method_form_matches() -> None:
    first = paging.start("prompts/list", 5)
    second, cursor = first.advance(_page(["p"], "x"))
    assert cursor == "x"
    assert first.items == [] and first.pages == 0
    assert second.items == ["p"] and second.pages == 1
    assert paging.Pager is paging.PagerState


@given(st.lists(st.text(max_size=3), max_size=30), st.integers(min_value=1, max_value=40))
def test_untrusted_cursor_sequences_end_or_fail_within_max_pages(
    cursors: list[str], max_pages: int
) -> None:
    """Whatever cursors a server sends, the pager stops: done, repeat, or max_pages."""
    pages = [_page([i], c) for i, c in enumerate(cursors)] + [_page(["end"], None)]
    state = paging.start("tools/list", max_pages)
    fetched = 0
    seen: set[str] = set()
    try:
        for page in pages:
            fetched += 1
            state, cursor = paging.advance(state, page)
            if cursor is None:
                break
            assert cursor not in seen
            seen.add(cursor)
    except McpError as error:
        assert error.code == CONNECTION_CLOSED
        assert "cursor" in error.cause or error.cause["max_pages"] == max_pages
    else:
        assert state.done
        assert len(state.items) == fetched
    assert fetched <= max_pages
