"""What a JSON-RPC response means: a complete result, an ``input_required`` result, or an error.

:func:`interpret` reads one response dict under a dialect; :func:`page_of` reads a list
result as a :class:`Page`. Both raise :class:`~snodo.protocol.errors.McpError`: the server's
own code, message and data for a JSON-RPC error, and -32000 (``kind="transport"``) for a
response the client cannot use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from snodo.protocol.dialects import Dialect
from snodo.protocol.dialects.base import LIST_METHODS
from snodo.protocol.errors import (
    HEADER_MISMATCH,
    McpError,
    broken_response_error,
    connection_error,
)


@dataclass(frozen=True, slots=True)
class InputRequired:
    """An ``input_required`` result handed to a caller that answers it by hand.

    Call again with ``input_responses=`` (keyed like ``input_requests``) and
    ``request_state=request_state``. ``input_requests`` is ``{}`` when the server sent only a
    ``requestState``; ``result`` is the whole result as the server sent it.
    """

    input_requests: dict[str, Any]
    request_state: str | None
    result: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list method: its items, the cursor of the next page (``None`` at the end).

    ``""`` is a valid cursor, not the end. ``result`` is the whole result (cache hints etc.).
    """

    items: list[Any]
    next_cursor: str | None
    result: dict[str, Any]


def _unusable(message: str, response: Any) -> McpError:
    return connection_error(message, cause=("invalid_response", response))


def interpret(
    dialect: Dialect, method: str, response: Mapping[str, Any]
) -> dict[str, Any] | InputRequired:
    """Decode the response to a ``method`` request sent under ``dialect``.

    Returns the result dict when it is complete (or a task's ``CreateTaskResult``), an
    :class:`InputRequired` for a valid ``input_required`` result of a multi round-trip method;
    raises :class:`McpError` otherwise.
    """
    if not isinstance(response, Mapping):
        raise _unusable("The server sent an invalid JSON-RPC response", response)
    has_result = "result" in response
    has_error = "error" in response
    if has_result and has_error:
        # The stdio transport fails such an answer with the same error (its classify reason).
        raise broken_response_error(
            'a response cannot carry both "result" and "error"',
            cause=("invalid_response", response),
        )
    if has_error:
        raise McpError.from_wire(response["error"])
    if not has_result:
        raise _unusable("The server sent a response with neither a result nor an error", response)
    result = response["result"]
    if not isinstance(result, dict):
        raise _unusable("The server sent a result that is not an object", response)
    result_type = result.get("resultType")
    if not dialect.stateless:
        # Session-era results carry no resultType; only a multi round-trip answer is wrong.
        if result_type == "input_required":
            raise _unusable(f"input_required is not allowed for {method}", result)
        return result
    if result_type is None and "resultType" not in result:
        # A missing resultType is what earlier-protocol servers send: treat it as complete.
        return result
    if result_type == "complete":
        return result
    if result_type == "task" and isinstance(result.get("taskId"), str):
        # A CreateTaskResult (the Tasks extension, snodo.protocol.tasks): a call that opted in
        # reads it as a task (snodo.tasks); a bare "task" without its taskId stays unknown.
        return result
    if result_type == "input_required":
        return _input_required(dialect, method, result)
    raise _unusable(f"The server sent an unknown resultType {result_type!r}", result)


def _input_required(dialect: Dialect, method: str, result: dict[str, Any]) -> InputRequired:
    if method not in dialect.mrtr_methods:
        raise _unusable(f"input_required is not allowed for {method}", result)
    requests = result.get("inputRequests")
    state = result.get("requestState")
    if "inputRequests" in result and not isinstance(requests, dict):
        raise _unusable(
            "The server sent an input_required result whose inputRequests is not an object",
            result,
        )
    if "requestState" in result and not isinstance(state, str):
        raise _unusable(
            "The server sent an input_required result whose requestState is not a string",
            result,
        )
    if not requests and state is None:
        raise _unusable(
            "The server sent an input_required result with nothing to answer and no state",
            result,
        )
    return InputRequired(
        input_requests=requests if isinstance(requests, dict) else {},
        request_state=state,
        result=result,
    )


def page_of(method: str, result: dict[str, Any]) -> Page:
    """Read a list method's result as a :class:`Page`; a result without its item list is -32000.

    ``nextCursor`` absent or ``null`` is the end; any string (``""`` included) is a cursor.
    """
    key = LIST_METHODS.get(method)
    if key is None:
        raise ValueError(f"{method!r} is not a paginated list method")
    if not isinstance(result, dict):
        raise _unusable(f"The {method} result is not an object", result)
    items = result.get(key)
    if not isinstance(items, list):
        raise _unusable(f"The {method} result has no {key!r} list", result)
    cursor = result.get("nextCursor")
    if cursor is not None and not isinstance(cursor, str):
        raise _unusable(f"The {method} result has a nextCursor that is not a string", result)
    return Page(items=items, next_cursor=cursor, result=result)


def relists_on_header_mismatch(error: McpError, *, header_policy: bool, by_name: bool) -> bool:
    """Whether a ``tools/call`` refused with -32020 is sent once more with the tool's listed
    definition: only on a transport that derives ``Mcp-Param-*`` headers from definitions
    (``TransportTraits.header_policy``), and only for a tool called by name (a call that came
    with its definition already sent the headers it could)."""
    return error.code == HEADER_MISMATCH and header_policy and by_name


__all__ = ["InputRequired", "Page", "interpret", "page_of", "relists_on_header_mismatch"]
