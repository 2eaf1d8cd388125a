"""Input-handler rules (reference "Input handlers", "Multi round-trip requests", and the
initialize-era server requests)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snodo.protocol import inputs
from snodo.protocol.errors import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    McpError,
)


def _handler(params: dict[str, Any]) -> Any:
    return params


ALL_HANDLERS = {kind: _handler for kind in inputs.KINDS}

FORM = {"method": "elicitation/create", "params": {"message": "ok?", "requestedSchema": {}}}
URL = {
    "method": "elicitation/create",
    "params": {"mode": "url", "message": "go", "url": "https://example.test"},
}
SAMPLING = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
ROOTS = {"method": "roots/list"}

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)

# -- kinds --------------------------------------------------------------------------------------


def test_kinds_and_required_keys() -> None:
    """Handlers are keyed by kind; each kind's params carry its keys."""
    assert inputs.KINDS == ("form", "url", "sampling", "roots")
    assert inputs.REQUIRED_KEYS == {
        "form": ("message", "requestedSchema"),
        "url": ("message", "url"),
        "sampling": ("messages", "maxTokens"),
        "roots": (),
    }


@pytest.mark.parametrize(
    ("method", "params", "kind"),
    [
        ("elicitation/create", {"message": "m"}, "form"),  # no mode: a form
        ("elicitation/create", {"mode": "form"}, "form"),
        ("elicitation/create", {"mode": "url"}, "url"),
        ("elicitation/create", {"mode": "voice"}, None),
        ("elicitation/create", {"mode": None}, None),
        ("elicitation/create", None, "form"),
        ("sampling/createMessage", {}, "sampling"),
        ("roots/list", None, "roots"),
        ("ping", None, None),
        ("tools/call", {}, None),
    ],
)
def test_kind_is_keyed_by_method_and_mode(method: str, params: Any, kind: str | None) -> None:
    """A form elicitation goes to :form, a URL elicitation to :url, sampling to :sampling, roots
    to :roots; a request without a mode counts as a form."""
    assert inputs.kind_of(method, params) == kind


def test_params_must_carry_the_kinds_keys() -> None:
    assert inputs.params_ok("form", {"message": "m", "requestedSchema": {}})
    assert not inputs.params_ok("form", {"message": "m"})
    assert not inputs.params_ok("url", {"message": "m", "mode": "url"})
    assert inputs.params_ok("sampling", {"messages": [], "maxTokens": 1})
    assert not inputs.params_ok("sampling", {"messages": []})
    assert not inputs.params_ok("form", None)
    assert not inputs.params_ok("form", ["message", "requestedSchema"])


def test_roots_params_may_be_absent_and_the_handler_gets_an_empty_dict() -> None:
    """roots: params may be absent, and the handler then gets %{}."""
    assert inputs.params_ok("roots", None)
    assert inputs.params_ok("roots", {"_meta": {}})
    assert not inputs.params_ok("roots", [])
    assert inputs.handler_params("roots", None) == {}


def test_handler_params_is_a_copy() -> None:
    params = {"message": "m", "requestedSchema": {}}
    got = inputs.handler_params("form", params)
    assert got == params
    got["message"] = "changed"
    assert params["message"] == "m"


def test_unknown_kind_is_argument_misuse() -> None:
    with pytest.raises(ValueError):
        inputs.params_ok("voice", {})


# -- validate_handlers --------------------------------------------------------------------------


def test_validate_handlers_accepts_the_four_kinds() -> None:
    assert inputs.validate_handlers(None) == {}
    assert inputs.validate_handlers(ALL_HANDLERS) == ALL_HANDLERS


def test_unknown_handler_kind_raises_naming_it() -> None:
    with pytest.raises(ValueError, match="voice"):
        inputs.validate_handlers({"voice": _handler})


def test_non_callable_handler_raises_naming_it() -> None:
    with pytest.raises(ValueError, match="form"):
        inputs.validate_handlers({"form": "not a function"})


def test_handlers_must_be_a_mapping() -> None:
    with pytest.raises(TypeError):
        inputs.validate_handlers([("form", _handler)])  # type: ignore[arg-type]


# -- merge_capabilities -------------------------------------------------------------------------


def _merge(declared: Any, *kinds: str) -> dict[str, Any]:
    return inputs.merge_capabilities(declared, {k: _handler for k in kinds})


def test_handlers_add_their_capabilities() -> None:
    """:form adds elicitation.form, :url adds url next to it, :sampling adds sampling: {},
    :roots adds roots: {listChanged: false}."""
    assert _merge(None, "form") == {"elicitation": {"form": {}}}
    assert _merge(None, "form", "url") == {"elicitation": {"form": {}, "url": {}}}
    assert _merge(None, "url") == {"elicitation": {"url": {}}}
    assert _merge(None, "sampling") == {"sampling": {}}
    assert _merge(None, "roots") == {"roots": {"listChanged": False}}


def test_declared_values_win_where_the_two_meet() -> None:
    """sampling: {tools: {}} keeps its setting; a declared listChanged replaces the handler's."""
    assert _merge({"sampling": {"tools": {}}}, "sampling") == {"sampling": {"tools": {}}}
    assert _merge({"roots": {"listChanged": True}}, "roots") == {"roots": {"listChanged": True}}
    assert _merge({"roots": {}}, "roots") == {"roots": {"listChanged": False}}
    assert _merge({"experimental": {"x": 1}}, "form") == {
        "experimental": {"x": 1},
        "elicitation": {"form": {}},
    }


def test_explicit_empty_elicitation_next_to_url_handler_is_kept_as_form() -> None:
    """An explicit "elicitation" => %{} next to a :url handler is kept as form."""
    assert _merge({"elicitation": {}}, "url") == {"elicitation": {"form": {}, "url": {}}}


@pytest.mark.parametrize(
    ("declared", "kind"),
    [
        ({"elicitation": True}, "form"),
        ({"elicitation": True}, "url"),
        ({"roots": True}, "roots"),
        ({"sampling": True}, "sampling"),
    ],
)
def test_declared_entry_to_merge_into_must_be_a_dict(declared: Any, kind: str) -> None:
    """ "elicitation" => true with a form handler, or "roots" => true with a roots handler,
    raises ArgumentError (here ValueError)."""
    with pytest.raises(ValueError):
        _merge(declared, kind)


def test_without_a_handler_nothing_declares_sampling_or_roots() -> None:
    """Without a handler, nothing declares sampling or roots; a declared one is kept as declared."""
    assert _merge(None) == {}
    assert _merge({"roots": True, "sampling": {}}) == {"roots": True, "sampling": {}}
    assert _merge({"elicitation": {}}) == {"elicitation": {}}


def test_merge_never_mutates_its_inputs() -> None:
    declared = {"elicitation": {}, "roots": {"x": {"y": 1}}, "sampling": {"tools": {}}}
    before = copy.deepcopy(declared)
    handlers = {"url": _handler, "roots": _handler, "sampling": _handler}
    merged = inputs.merge_capabilities(declared, handlers)
    merged["roots"]["x"]["y"] = 2
    merged["sampling"]["tools"]["z"] = 1
    assert declared == before
    assert set(handlers) == {"url", "roots", "sampling"}


@given(st.dictionaries(st.sampled_from(["elicitation", "roots", "sampling", "x"]), JSON))
def test_merge_with_untrusted_declared_values_only_raises_value_error(declared: Any) -> None:
    before = copy.deepcopy(declared)
    try:
        merged = inputs.merge_capabilities(declared, ALL_HANDLERS)
    except ValueError:
        assert any(
            k in declared and not isinstance(declared[k], dict)
            for k in ("elicitation", "roots", "sampling")
        )
    else:
        assert isinstance(merged["elicitation"], dict)
        assert "url" in merged["elicitation"]
    assert declared == before


# -- response shapes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "ok"),
    [
        ({"action": "accept", "content": {"approved": True}}, True),
        ({"action": "decline"}, True),
        ({"action": "cancel"}, True),
        ({"action": "maybe"}, False),
        ({"action": "accept", "content": ["x"]}, False),
        ({}, False),
        ("accept", False),
        ({"action": "accept", "content": {"when": object()}}, False),
    ],
)
def test_elicitation_response_needs_an_action(response: Any, ok: bool) -> None:
    """An elicitation response needs an action of accept, decline, or cancel."""
    assert inputs.valid_elicit_response(response) is ok
    assert inputs.valid_response("form", response) is ok
    assert inputs.valid_response("url", response) is ok


TEXT = {"type": "text", "text": "hi"}


@pytest.mark.parametrize(
    ("response", "ok"),
    [
        ({"role": "assistant", "content": TEXT, "model": "m"}, True),
        ({"role": "assistant", "content": [TEXT, TEXT], "model": "m", "stopReason": "x"}, True),
        (
            {
                "role": "assistant",
                "content": {"type": "tool_use", "id": "1", "name": "t", "input": {}},
                "model": "m",
            },
            True,
        ),
        (
            {
                "role": "user",
                "content": [{"type": "tool_result", "toolUseId": "1", "content": [TEXT]}],
                "model": "m",
            },
            True,
        ),
        ({"role": "assistant", "content": {"type": "image", "data": "x"}, "model": "m"}, False),
        ({"role": "assistant", "content": [], "model": "m"}, False),
        ({"role": "system", "content": TEXT, "model": "m"}, False),
        ({"role": "assistant", "content": TEXT}, False),
        ({"role": "assistant", "content": TEXT, "model": "m", "stopReason": 3}, False),
        ({"role": "assistant", "content": {"type": 1}, "model": "m"}, False),
        ({"role": "assistant", "content": "hi", "model": "m"}, False),
    ],
)
def test_sampling_response_shape(response: Any, ok: bool) -> None:
    """A sampling response is checked with Sampling.valid_response?: role, content, model."""
    assert inputs.valid_sampling_response(response) is ok
    assert inputs.valid_response("sampling", response) is ok


@pytest.mark.parametrize(
    ("response", "ok"),
    [
        ({"roots": []}, True),
        ({"roots": [{"uri": "file:///home/me/project", "name": "project"}]}, True),
        ({"roots": [{"uri": "https://example.test"}]}, False),
        ({"roots": [{"uri": "file:///x", "name": 3}]}, False),
        ({"roots": [{"name": "x"}]}, False),
        ({"roots": {}}, False),
        ([], False),
    ],
)
def test_roots_response_shape(response: Any, ok: bool) -> None:
    """A roots response is checked with Roots.valid_response?: file:// URIs, optional names."""
    assert inputs.valid_roots_response(response) is ok
    assert inputs.valid_response("roots", response) is ok


@given(JSON)
def test_response_checks_never_crash_on_untrusted_values(value: Any) -> None:
    for kind in inputs.KINDS:
        assert inputs.valid_response(kind, value) in (True, False)


def test_a_cyclic_response_is_invalid_not_a_crash() -> None:
    content: dict[str, Any] = {}
    content["self"] = content
    assert not inputs.valid_elicit_response({"action": "accept", "content": content})


# -- plan_round ---------------------------------------------------------------------------------


def test_round_is_matched_and_sorted_by_request_id_string() -> None:
    """Handlers run in the sort order of the request IDs (so "10" before "2")."""
    tasks = inputs.plan_round({"2": FORM, "10": URL, "1": ROOTS, "b": SAMPLING}, ALL_HANDLERS)
    assert [t.key for t in tasks] == ["1", "10", "2", "b"]
    assert [t.kind for t in tasks] == ["roots", "url", "form", "sampling"]
    assert tasks[0] == inputs.InputTask("1", "roots/list", "roots", {})
    assert tasks[2].params == FORM["params"]


def test_absent_input_requests_is_an_empty_round() -> None:
    """A result with only a requestState has nothing to answer."""
    assert inputs.plan_round(None, ALL_HANDLERS) == []
    assert inputs.plan_round({}, ALL_HANDLERS) == []


@pytest.mark.parametrize(
    ("requests", "key"),
    [
        (["x"], None),
        ({"a": "not an object"}, "a"),
        ({"a": {"params": {}}}, "a"),
        ({"a": {"method": 5}}, "a"),
        ({"a": {"method": "tools/call", "params": {}}}, "a"),
        ({"a": {"method": "elicitation/create", "params": {"message": "m"}}}, "a"),
        ({"a": {"method": "sampling/createMessage", "params": {"messages": []}}}, "a"),
        ({"a": {"method": "roots/list", "params": []}}, "a"),
        ({"1": FORM, "2": {"method": "elicitation/create"}}, "2"),
    ],
)
def test_malformed_requests_stop_the_round_with_32000(requests: Any, key: Any) -> None:
    """Params lacking the kind's keys give -32000 before any handler runs."""
    with pytest.raises(McpError) as info:
        inputs.plan_round(requests, ALL_HANDLERS)
    assert info.value.code == CONNECTION_CLOSED
    assert info.value.kind == "transport"
    assert info.value.cause == ("malformed_input_request", key)


def test_a_kind_without_a_handler_is_32602_naming_the_kind() -> None:
    """A missing handler gives -32602 with cause {:no_input_handler, kind}."""
    with pytest.raises(McpError) as info:
        inputs.plan_round({"a": FORM, "b": URL}, {"form": _handler})
    assert info.value.code == INVALID_PARAMS
    assert info.value.cause == ("no_input_handler", "url")
    assert "URL elicitation" in info.value.message


@given(JSON)
def test_plan_round_on_untrusted_input_only_raises_mcp_errors(requests: Any) -> None:
    """Untrusted inputRequests: a plan, or an McpError, never another exception."""
    try:
        tasks = inputs.plan_round(requests, ALL_HANDLERS)
    except McpError as error:
        assert error.code in (CONNECTION_CLOSED, INVALID_PARAMS)
    else:
        assert all(t.kind in inputs.KINDS for t in tasks)


# -- server requests ----------------------------------------------------------------------------


def test_server_ping_is_answered_without_a_handler() -> None:
    """A server ping is answered without a handler."""
    assert inputs.check_server_request("ping", None, {}) is None


def test_server_requests_go_to_the_kinds_handler() -> None:
    assert inputs.check_server_request("elicitation/create", FORM["params"], ALL_HANDLERS) == (
        "form",
        FORM["params"],
    )
    assert inputs.check_server_request("roots/list", None, ALL_HANDLERS) == ("roots", {})


@pytest.mark.parametrize(
    ("method", "params", "handlers"),
    [
        ("elicitation/create", FORM["params"], {"url": _handler}),
        ("elicitation/create", URL["params"], {"form": _handler}),
        ("elicitation/create", {"mode": "voice", "message": "m"}, ALL_HANDLERS),
        ("sampling/createMessage", SAMPLING["params"], {}),
        ("tasks/get", {"taskId": "t"}, ALL_HANDLERS),
    ],
)
def test_a_server_request_without_a_handler_is_32601(
    method: str, params: Any, handlers: dict[str, Any]
) -> None:
    """A request of a kind with no handler is answered -32601."""
    with pytest.raises(McpError) as info:
        inputs.check_server_request(method, params, handlers)
    assert info.value.code == METHOD_NOT_FOUND


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("elicitation/create", {"message": "m"}),
        ("elicitation/create", {"mode": "url", "message": "m"}),
        ("sampling/createMessage", {"maxTokens": 3}),
        ("sampling/createMessage", None),
        ("roots/list", "x"),
    ],
)
def test_a_server_request_lacking_the_kinds_keys_is_32602(method: str, params: Any) -> None:
    """One whose params lack the kind's keys is answered -32602."""
    with pytest.raises(McpError) as info:
        inputs.check_server_request(method, params, ALL_HANDLERS)
    assert info.value.code == INVALID_PARAMS
