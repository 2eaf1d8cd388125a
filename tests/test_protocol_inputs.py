"""Input-handler rules (reference "Input handlers", "Multi round-trip requests", and the
session-era server requests), and the driver of a call's input rounds."""

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
from snodo.protocol.results import InputRequired


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


# -- the rounds of one call (next_round) ----------------------------------------------------


def _asks(requests: dict[str, Any] | None = None, state: str | None = "s") -> InputRequired:
    result: dict[str, Any] = {"resultType": "input_required"}
    if requests is not None:
        result["inputRequests"] = requests
    if state is not None:
        result["requestState"] = state
    return InputRequired(requests or {}, state, result)


COMPLETE = {"content": []}


def _drive(
    outcomes: list[dict[str, Any] | InputRequired], max_rounds: int = 10
) -> tuple[inputs.Done, list[inputs.Send]]:
    """Feed scripted outcomes to the driver; the final Done and every Send on the way."""
    state = inputs.start_rounds(max_rounds, ALL_HANDLERS)
    sends: list[inputs.Send] = []
    for outcome in outcomes:
        step = inputs.next_round(state, outcome)
        if isinstance(step, inputs.Done):
            return step, sends
        sends.append(step)
        state = step.state
    raise AssertionError("the driver asked for more rounds than scripted")


def test_a_complete_result_ends_the_call_with_no_rounds() -> None:
    done, sends = _drive([COMPLETE])
    assert done == inputs.Done(COMPLETE, 0)
    assert sends == []


def test_each_input_round_plans_its_tasks_and_carries_the_state() -> None:
    """A round with input requests is answered (tasks in key order) and sent with its state."""
    first = _asks({"b": ROOTS, "a": FORM}, "s1")
    second = _asks({"c": SAMPLING}, "s2")
    done, sends = _drive([first, second, COMPLETE])
    assert done == inputs.Done(COMPLETE, 2)
    assert [[t.key for t in s.tasks] for s in sends] == [["a", "b"], ["c"]]
    assert [s.request_state for s in sends] == ["s1", "s2"]
    assert [s.pause for s in sends] == [0.0, 0.0]
    assert [s.state.last for s in sends] == [first, second]
    assert [s.state.rounds for s in sends] == [1, 2]


def test_a_state_only_round_is_paced_and_sends_no_answers() -> None:
    """A result with only a requestState is sent again after STATE_ONLY_RETRY_DELAY."""
    only_state = _asks(None, "again")
    done, sends = _drive([only_state, COMPLETE])
    assert done.rounds == 1
    (send,) = sends
    assert send.tasks == ()
    assert send.request_state == "again"
    assert send.pause == inputs.STATE_ONLY_RETRY_DELAY > 0


def test_without_handlers_input_required_goes_to_the_caller() -> None:
    asks = _asks({"a": FORM})
    assert inputs.next_round(inputs.start_rounds(10, {}), asks) == inputs.Done(asks, 0)


def test_the_rounds_stop_at_max_rounds_with_32000() -> None:
    """After max_rounds answered rounds, another input_required is -32000 maxInputRounds."""
    asks = _asks({"a": ROOTS})
    with pytest.raises(McpError) as info:
        _drive([asks, asks, asks], max_rounds=2)
    error = info.value
    assert (error.code, error.kind) == (CONNECTION_CLOSED, "transport")
    assert error.message == "Maximum input rounds exceeded (2)"
    assert error.data == {"maxInputRounds": 2}
    assert error.cause == ("max_input_rounds", asks)


def test_zero_max_rounds_refuses_the_first_input_request() -> None:
    with pytest.raises(McpError) as info:
        _drive([_asks({"a": ROOTS})], max_rounds=0)
    assert info.value.data == {"maxInputRounds": 0}


def test_a_round_that_cannot_be_answered_fails_with_the_result_last_in_its_cause() -> None:
    """A kind without a handler is -32602; the result that asked ends the cause."""
    asks = _asks({"a": FORM})
    with pytest.raises(McpError) as info:
        inputs.next_round(inputs.start_rounds(10, {"roots": _handler}), asks)
    assert info.value.code == INVALID_PARAMS
    assert info.value.cause == ("no_input_handler", "form", asks)


@pytest.mark.parametrize(
    ("cause", "expected"),
    [(None, ("LAST",)), (("a", 1), ("a", 1, "LAST")), ("x", ("x", "LAST"))],
)
def test_with_last_appends_the_last_result_to_any_cause(cause: Any, expected: Any) -> None:
    last = _asks({"a": FORM})
    error = McpError(-1, "m", cause=cause)
    assert inputs.with_last(error, last) is error
    assert error.cause == tuple(last if part == "LAST" else part for part in expected)
    untouched = McpError(-1, "m", cause=cause)
    assert inputs.with_last(untouched, None).cause == cause


@given(st.lists(st.sampled_from(["complete", "asks", "state"]), min_size=1, max_size=15))
def test_the_driver_ends_within_max_rounds_plus_one_responses(script: list[str]) -> None:
    """Whatever the server answers, the driver ends (Done or -32000) after at most
    max_rounds + 1 responses, and Done counts exactly the rounds it answered."""
    outcomes: dict[str, dict[str, Any] | InputRequired] = {
        "complete": COMPLETE,
        "asks": _asks({"a": ROOTS}),
        "state": _asks(None, "s"),
    }
    state = inputs.start_rounds(3, ALL_HANDLERS)
    for seen, name in enumerate(script, start=1):
        try:
            step = inputs.next_round(state, outcomes[name])
        except McpError as error:
            assert error.data == {"maxInputRounds": 3}
            assert seen == 4
            return
        if isinstance(step, inputs.Done):
            assert step.rounds == seen - 1
            return
        state = step.state
        assert seen <= 3
