"""Lists: one page of a ``*/list`` method, every page to the end, and ending a session on close.

What the client facade runs around its calls without deciding anything itself: paging follows
``snodo.protocol.paging``, the header policy's tool filter is ``protocol.headers.filter_tools``.
``send`` is the client's own call as steps, so the cache and restarts apply, and either driver
(``snodo.calls.drive``, ``snodo.aio``) carries the listing out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from snodo.log import get_logger
from snodo.options import CallOptions
from snodo.protocol import errors, paging, results
from snodo.protocol.errors import McpError
from snodo.protocol.negotiation import Session
from snodo.protocol.results import InputRequired, Page
from snodo.transports.base import SessionEndingTransport, Transport, TransportTraits

if TYPE_CHECKING:
    from snodo.calls import Steps
    from snodo.protocol.inputs import Done

__all__ = ["Send", "complete", "end_session", "list_all", "list_page"]

_log = get_logger("snodo.client")

#: The client's call as steps: ``(method, params, call) -> steps of its Done``.
Send = Callable[[str, Mapping[str, Any] | None, CallOptions], "Steps[Done]"]


def complete(outcome: dict[str, Any] | InputRequired) -> dict[str, Any]:
    """A complete result; -32000 for an ``input_required`` one where none may come."""
    if isinstance(outcome, InputRequired):  # interpret() only allows it for MRTR methods
        raise errors.connection_error("Unexpected input_required result")
    return outcome


def list_page(
    send: Send, method: str, cursor: str | None, call: CallOptions, header_policy: bool
) -> Steps[Page]:
    """One page of ``method``; with the header policy, tools with invalid headers left out."""
    params = {"cursor": cursor} if cursor is not None else None
    page = results.page_of(method, complete((yield from send(method, params, call)).outcome))
    if method == "tools/list" and header_policy:
        # The header policy's module: loaded by the transport that has the trait anyway.
        from snodo.protocol.headers import filter_tools

        kept, dropped = filter_tools(page.items)
        for name, reason in dropped:
            _log.warning(
                "left out a tool with an invalid x-mcp-header annotation", tool=name, reason=reason
            )
        page = replace(page, items=kept)
    return page


def list_all(
    send: Send, method: str, call: CallOptions, max_pages: int, header_policy: bool
) -> Steps[list[dict[str, Any]]]:
    """Every item of ``method``, following ``nextCursor`` to the end (``paging``'s rules)."""
    first = yield from list_page(send, method, None, call, header_policy)
    if first.next_cursor is None:
        return list(first.items)  # one page: nothing to follow (the common case)
    state = paging.start(method, max_pages)
    state, cursor = paging.advance(state, first)
    while cursor is not None:
        page = yield from list_page(send, method, cursor, call, header_policy)
        state, cursor = paging.advance(state, page)
    return cast("list[dict[str, Any]]", list(state.items))


def end_session(
    transport: Transport, session: Session | None, traits: TransportTraits, wait: float
) -> None:
    """Before closing: end a session the server identified, if the transport can (and its
    close does not do it already), waiting at most ``wait``."""
    if (
        session is None
        or session.session_id is None
        or traits.deletes_session_on_close
        or not isinstance(transport, SessionEndingTransport)
    ):
        return
    try:
        transport.delete_session(wait)
    except McpError:
        pass  # the session ends with the connection anyway
