"""What a response means (reference "Calls", "Multi round-trip requests", "Lists and paging";
Elixir notes "Timeouts and transport errors" and "Multi round-trip")."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snodo.protocol import dialects
from snodo.protocol.errors import CONNECTION_CLOSED, McpError
from snodo.protocol.results import (
    InputRequired,
    Page,
    interpret,
    page_of,
    relists_on_header_mismatch,
)

NEW = dialects.get("2026-07-28")
SESSION = [dialects.get("2025-11-25"), dialects.get("2025-06-18")]
ALL_DIALECTS = [NEW, *SESSION]


def _ok(result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": result}


def _transport_error(dialect: Any, method: str, response: Any) -> McpError:
    with pytest.raises(McpError) as info:
        interpret(dialect, method, response)
    assert info.value.code == CONNECTION_CLOSED
    assert info.value.kind == "transport"
    return info.value


@pytest.mark.parametrize("dialect", ALL_DIALECTS, ids=lambda d: d.version)
def test_json_rpc_errors_keep_code_message_and_data(dialect: Any) -> None:
    """Decoded JSON-RPC errors keep the server's code, message, and data."""
    error = {"code": -32021, "message": "Need caps", "data": {"requiredCapabilities": {}}}
    with pytest.raises(McpError) as info:
        interpret(dialect, "tools/call", {"jsonrpc": "2.0", "id": 1, "error": error})
    assert (info.value.code, info.value.message, info.value.data) == (
        -32021,
        "Need caps",
        {"requiredCapabilities": {}},
    )
    assert info.value.kind == "protocol"


@pytest.mark.parametrize("dialect", ALL_DIALECTS, ids=lambda d: d.version)
def test_both_result_and_error_is_32000(dialect: Any) -> None:
    """A response with both result and error is -32000 (an unusable response)."""
    response = {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}}
    _transport_error(dialect, "tools/list", response)


@pytest.mark.parametrize("dialect", ALL_DIALECTS, ids=lambda d: d.version)
@pytest.mark.parametrize("response", [{"jsonrpc": "2.0", "id": 1}, _ok([]), _ok("x"), _ok(None)])
def test_neither_or_a_non_object_result_is_32000(dialect: Any, response: Any) -> None:
    _transport_error(dialect, "tools/list", response)


def test_missing_result_type_is_complete() -> None:
    """A missing resultType MUST be treated as complete."""
    result: dict[str, Any] = {"content": []}
    assert interpret(NEW, "tools/call", _ok(result)) is result


def test_complete_result_is_returned() -> None:
    result = {"resultType": "complete", "tools": []}
    assert interpret(NEW, "tools/list", _ok(result)) == result


def test_a_tool_result_with_is_error_is_a_success() -> None:
    """A tools/call result with isError: true is a success."""
    result = {"resultType": "complete", "content": [], "isError": True}
    assert interpret(NEW, "tools/call", _ok(result)) == result


@pytest.mark.parametrize("method", ["tools/call", "resources/read", "prompts/get"])
def test_input_required_is_returned_for_mrtr_methods(method: str) -> None:
    """A server that needs input returns input_required with inputRequests and a requestState."""
    requests = {"confirm": {"method": "elicitation/create", "params": {}}}
    result = {"resultType": "input_required", "inputRequests": requests, "requestState": "s1"}
    got = interpret(NEW, method, _ok(result))
    assert got == InputRequired(requests, "s1", result)


def test_state_only_input_required_is_accepted() -> None:
    """A result that carries only a requestState is sent again with it."""
    result = {"resultType": "input_required", "requestState": ""}
    assert interpret(NEW, "tools/call", _ok(result)) == InputRequired({}, "", result)


def test_requests_without_state_are_accepted() -> None:
    requests = {"a": {"method": "roots/list"}}
    result = {"resultType": "input_required", "inputRequests": requests}
    assert interpret(NEW, "tools/call", _ok(result)) == InputRequired(requests, None, result)


@pytest.mark.parametrize(
    "result",
    [
        {"resultType": "input_required"},
        {"resultType": "input_required", "inputRequests": {}},
        {"resultType": "input_required", "inputRequests": None, "requestState": "s"},
        {"resultType": "input_required", "inputRequests": [], "requestState": "s"},
        {"resultType": "input_required", "inputRequests": {"a": {}}, "requestState": 5},
    ],
)
def test_nothing_to_answer_and_no_state_is_32000(result: dict[str, Any]) -> None:
    """A result with nothing to answer and no state is -32000."""
    _transport_error(NEW, "tools/call", _ok(result))


@pytest.mark.parametrize("method", ["tools/list", "server/discover", "completion/complete"])
def test_input_required_for_other_methods_is_32000(method: str) -> None:
    """Only tools/call, resources/read and prompts/get may return input_required."""
    result = {"resultType": "input_required", "requestState": "s"}
    error = _transport_error(NEW, method, _ok(result))
    assert method in error.message


@pytest.mark.parametrize("result_type", ["task", "", None, 1])
def test_unknown_result_type_is_32000(result_type: Any) -> None:
    """Any unrecognized resultType MUST be treated as invalid."""
    _transport_error(NEW, "tools/call", _ok({"resultType": result_type}))


@pytest.mark.parametrize("dialect", SESSION, ids=lambda d: d.version)
def test_session_era_ignores_result_type_except_input_required(dialect: Any) -> None:
    """Session-era results carry no resultType; only input_required is refused."""
    result = {"resultType": "task", "content": []}
    assert interpret(dialect, "tools/call", _ok(result)) is result
    _transport_error(
        dialect, "tools/call", _ok({"resultType": "input_required", "requestState": "s"})
    )


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )
)
def test_untrusted_responses_give_a_result_or_an_mcp_error(response: Any) -> None:
    for dialect in ALL_DIALECTS:
        try:
            outcome = interpret(dialect, "tools/call", response)
        except McpError:
            continue
        assert isinstance(outcome, (dict, InputRequired))


# -- page_of ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "key"),
    [
        ("tools/list", "tools"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
        ("prompts/list", "prompts"),
    ],
)
def test_page_reads_items_and_next_cursor(method: str, key: str) -> None:
    """list_page returns one Page (items, next_cursor) for manual paging."""
    result = {key: [{"name": "a"}], "nextCursor": "c2"}
    assert page_of(method, result) == Page([{"name": "a"}], "c2", result)


def test_missing_next_cursor_is_the_end() -> None:
    assert page_of("tools/list", {"tools": []}).next_cursor is None
    assert page_of("tools/list", {"tools": [], "nextCursor": None}).next_cursor is None


def test_empty_string_is_a_valid_cursor_not_the_end() -> None:
    """An empty string "" IS a valid cursor and MUST NOT be read as the end."""
    assert page_of("tools/list", {"tools": [], "nextCursor": ""}).next_cursor == ""


@pytest.mark.parametrize(
    "result", [{}, {"tools": None}, {"tools": {}}, {"tools": [], "nextCursor": 3}, []]
)
def test_a_page_without_its_item_list_is_32000(result: Any) -> None:
    with pytest.raises(McpError) as info:
        page_of("tools/list", result)
    assert info.value.code == CONNECTION_CLOSED
    assert info.value.kind == "transport"


def test_page_of_refuses_a_method_that_is_not_a_list() -> None:
    with pytest.raises(ValueError):
        page_of("tools/call", {"tools": []})


# -- the -32020 re-list ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "header_policy", "by_name", "expected"),
    [
        (-32020, True, True, True),
        (-32020, True, False, False),  # it came with its definition: nothing to learn
        (-32020, False, True, False),  # the transport sends no Mcp-Param-* headers
        (-32602, True, True, False),
        (-32022, True, True, False),
    ],
)
def test_a_header_mismatch_relists_only_a_tool_called_by_name_on_a_header_policy_transport(
    code: int, header_policy: bool, by_name: bool, expected: bool
) -> None:
    error = McpError(code, "refused")
    assert (
        relists_on_header_mismatch(error, header_policy=header_policy, by_name=by_name) is expected
    )
