"""Following ``nextCursor`` to the end, as a small immutable state machine.

``list_tools()`` and the other list functions collect every page::

    state = paging.start("tools/list", max_pages)
    cursor = None
    while True:
        page = results.page_of("tools/list", result_of(request("tools/list", cursor)))
        state, cursor = paging.advance(state, page)   # or: state.advance(page)
        if cursor is None:
            break
    items = state.items                               # every item, in page order

:func:`advance` returns the cursor of the next page to fetch, or ``None`` when the last page
has been read. It raises -32000 (``kind="transport"``) when a server repeats a cursor (cause
``{"kind": method, "cursor": c}``) or when the last of ``max_pages`` pages still has a
``nextCursor`` (cause ``{"kind": method, "max_pages": n}``). Pages are counted, not items, and
``""`` is a valid cursor, not the end.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import chain
from typing import Any, Final

from snodo.protocol.errors import connection_error
from snodo.protocol.results import Page

#: Pages a list function requests at most, unless ``max_pages=`` says otherwise.
DEFAULT_MAX_PAGES: Final = 1000


@dataclass(frozen=True, slots=True)
class PagerState:
    """Where a paged listing stands: pages read, cursors seen, items so far, whether it is done."""

    method: str
    max_pages: int
    pages: int = 0
    done: bool = False
    #: Every cursor a page returned (the first request has none), to detect a repeat.
    seen: frozenset[str] = frozenset()
    #: The items of each page read, one tuple per page (kept apart so adding a page is cheap).
    chunks: tuple[tuple[Any, ...], ...] = ()

    @property
    def items(self) -> list[Any]:
        """Every item read so far, in page order."""
        return list(chain.from_iterable(self.chunks))

    def advance(self, page: Page) -> tuple[PagerState, str | None]:
        """Same as :func:`advance`."""
        return advance(self, page)


#: The reference's name for the paging state machine.
Pager = PagerState


def start(method: str, max_pages: int = DEFAULT_MAX_PAGES) -> PagerState:
    """The state before the first page; ``max_pages`` must be a positive integer."""
    if isinstance(max_pages, bool) or not isinstance(max_pages, int):
        raise TypeError(f"max_pages must be a positive integer, got: {max_pages!r}")
    if max_pages < 1:
        raise ValueError(f"max_pages must be a positive integer, got: {max_pages!r}")
    return PagerState(method=method, max_pages=max_pages)


def advance(state: PagerState, page: Page) -> tuple[PagerState, str | None]:
    """Take in one page; return the new state and the next cursor to fetch (``None``: done)."""
    if state.done:
        raise ValueError("this listing already reached its last page")
    pages = state.pages + 1
    chunks = (*state.chunks, tuple(page.items))
    cursor = page.next_cursor
    if cursor is None:
        return replace(state, pages=pages, chunks=chunks, done=True), None
    if cursor in state.seen:
        raise connection_error(
            "The server repeated a pagination cursor",
            cause={"kind": state.method, "cursor": cursor},
        )
    if pages >= state.max_pages:
        raise connection_error(
            f"The server sent more than {state.max_pages} pages",
            cause={"kind": state.method, "max_pages": state.max_pages},
        )
    return replace(state, pages=pages, chunks=chunks, seen=state.seen | {cursor}), cursor


__all__ = ["DEFAULT_MAX_PAGES", "Pager", "PagerState", "advance", "start"]
