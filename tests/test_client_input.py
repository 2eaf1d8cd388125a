"""The reference's "Multi round-trip requests" and "Input handlers", over direct, and the
session-era server requests answered by the same handlers. Each test names its rule.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import snodo
from tests.support import client_runtime
from tests.support.client_support import Wire

SESSION_ERA = ["2025-11-25", "2025-06-18"]
FORM_CAPS = {"elicitation": {"form": {}}}


@pytest.fixture
def runtime() -> Any:
    return client_runtime.build()


def accept(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"approved": True}}


def sampler(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": "summary"},
        "model": "test-model",
    }


def rooter(params: dict[str, Any]) -> dict[str, Any]:
    return {"roots": [{"uri": "file:///home/me/project", "name": "project"}]}


# -- Manual flow -------------------------------------------------------------------------------


def test_input_required_is_returned_without_handlers(runtime: Any) -> None:
    """A client without input handlers does not answer: call_tool returns snodo.InputRequired."""
    with snodo.direct(runtime, client_capabilities=FORM_CAPS) as client:
        pending = client.call_tool("deploy", {})
    assert isinstance(pending, snodo.InputRequired)
    assert len(pending.input_requests) == 1
    (request,) = pending.input_requests.values()
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "Deploy?"
    assert pending.result["resultType"] == "input_required"


def test_manual_retry_with_input_responses_and_request_state(runtime: Any, wire: Wire) -> None:
    """Call again with input_responses and request_state: the server completes the call."""
    with snodo.direct(runtime, client_capabilities=FORM_CAPS) as client:
        pending = client.call_tool("deploy", {})
        assert isinstance(pending, snodo.InputRequired)
        (key,) = pending.input_requests
        answers = {key: {"action": "accept", "content": {"approved": True}}}
        result = client.call_tool(
            "deploy", {}, input_responses=answers, request_state=pending.request_state
        )
    assert result["structuredContent"] == {"action": "accept", "given": {"approved": True}}
    retry = wire.requests("tools/call")[-1]["params"]
    assert retry["inputResponses"] == answers
    assert retry["requestState"] == pending.request_state


# -- Handlers ----------------------------------------------------------------------------------


def test_form_handler_answers_inside_the_call(runtime: Any, wire: Wire) -> None:
    """input_handlers answer input requests inside the call; the retry uses a fresh request id."""
    with snodo.direct(runtime, input_handlers={"form": accept}) as client:
        result = client.call_tool("deploy", {})
    assert result["structuredContent"]["action"] == "accept"
    calls = wire.requests("tools/call")
    assert len(calls) == 2
    assert calls[0]["id"] != calls[1]["id"]
    assert calls[1]["params"]["requestState"]


@pytest.mark.parametrize(
    ("tool", "handlers", "check"),
    [
        ("visit", {"url": lambda p: {"action": "accept"}}, lambda r: r["action"] == "accept"),
        ("summarize", {"sampling": sampler}, lambda r: r["sampled"]["model"] == "test-model"),
        ("roots", {"roots": rooter}, lambda r: r["roots"][0]["name"] == "project"),
    ],
)
def test_each_kind_goes_to_its_handler(runtime: Any, tool: str, handlers: Any, check: Any) -> None:
    """Handlers are keyed by kind: url elicitation -> :url, sampling -> :sampling, roots -> :roots."""
    with snodo.direct(runtime, input_handlers=handlers) as client:
        result = client.call_tool(tool, {})
    assert check(result["structuredContent"])


def test_declared_capabilities_follow_the_handlers(runtime: Any, wire: Wire) -> None:
    """The declared client capabilities follow the handlers, merged with client_capabilities."""
    handlers = {"form": accept, "url": accept, "sampling": sampler, "roots": rooter}
    declared = {"sampling": {"tools": {}}, "roots": {"listChanged": True}}
    with snodo.direct(runtime, input_handlers=handlers, client_capabilities=declared) as client:
        client.call_tool("echo", {"text": "x"})
    caps = wire.sent[0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert caps == {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {"tools": {}},
        "roots": {"listChanged": True},
    }


def test_non_map_capability_next_to_a_handler_raises(runtime: Any) -> None:
    """ "elicitation" => true with a form handler installed raises ArgumentError."""
    with pytest.raises(ValueError):
        snodo.direct(
            runtime, input_handlers={"form": accept}, client_capabilities={"elicitation": True}
        )


def test_without_a_handler_a_server_does_not_ask(runtime: Any) -> None:
    """Without a handler nothing declares sampling: the server refuses to ask (-32021)."""
    with snodo.direct(runtime) as client, pytest.raises(snodo.McpError) as caught:
        client.call_tool("summarize", {})
    assert caught.value.code == -32021


def test_handlers_run_one_at_a_time_in_request_id_sort_order(runtime: Any) -> None:
    """Handlers run one at a time in the calling thread, in the sort order of the request IDs."""
    order: list[str] = []
    threads: set[int] = set()
    active = threading.Semaphore(1)

    def form(params: dict[str, Any]) -> dict[str, Any]:
        assert active.acquire(blocking=False), "handlers overlapped"
        try:
            order.append(params["message"])
            threads.add(threading.get_ident())
            return {"action": "accept", "content": {}}
        finally:
            active.release()

    with snodo.direct(runtime, input_handlers={"form": form}) as client:
        result = client.call_tool("several", {"keys": ["2", "10", "1"]})
    assert order == ["q1", "q10", "q2"]  # string order: "10" before "2"
    assert threads == {threading.get_ident()}
    assert set(result["structuredContent"]["answers"]) == {"1", "2", "10"}


def test_every_request_is_checked_before_any_handler_runs(runtime: Any) -> None:
    """The client matches every request to a handler first; a missing one means none runs."""
    called: list[str] = []

    def form(params: dict[str, Any]) -> dict[str, Any]:
        called.append(params["message"])
        return {"action": "accept", "content": {}}

    caps = {"sampling": {}}
    with snodo.direct(runtime, input_handlers={"form": form}, client_capabilities=caps) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("several", {"keys": ["1"], "with_sampling": True})
    assert called == []
    assert caught.value.code == -32602
    assert isinstance(caught.value.cause[-1], snodo.InputRequired)


def test_max_input_rounds_stops_the_loop(runtime: Any, wire: Wire) -> None:
    """:max_input_rounds results answered -> -32000 with maxInputRounds; cause ends with the last result."""
    with snodo.direct(runtime, input_handlers={"form": accept}, max_input_rounds=3) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("insatiable", {})
    assert caught.value.code == -32000
    assert caught.value.data == {"maxInputRounds": 3}
    assert isinstance(caught.value.cause[-1], snodo.InputRequired)
    assert len(wire.requests("tools/call")) == 4  # the first call and three answered rounds


def test_default_max_input_rounds_is_ten(runtime: Any, wire: Wire) -> None:
    """:max_input_rounds defaults to 10."""
    with snodo.direct(runtime, input_handlers={"form": accept}) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("insatiable", {})
    assert caught.value.data == {"maxInputRounds": 10}
    assert len(wire.requests("tools/call")) == 11


def test_state_only_result_is_resent_after_250ms_and_counts_as_a_round(
    runtime: Any, wire: Wire
) -> None:
    """A result carrying only a requestState is sent again with it after 250 ms; it is a round."""
    with snodo.direct(runtime, input_handlers={"form": accept}) as client:
        started = time.monotonic()
        result = client.call_tool("busy", {"rounds": 2})
        elapsed = time.monotonic() - started
    assert result["structuredContent"] == {"round": 2}
    assert elapsed >= 0.5
    calls = wire.requests("tools/call")
    assert len(calls) == 3
    assert "inputResponses" not in calls[1]["params"]
    assert calls[1]["params"]["requestState"]
    with snodo.direct(runtime, input_handlers={"form": accept}, max_input_rounds=1) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("busy", {"rounds": 2})
    assert caught.value.data == {"maxInputRounds": 1}


def test_a_handler_that_raises_stops_the_call_with_that_exception(runtime: Any) -> None:
    """A handler that raises stops the call with that exception."""

    class Boom(Exception):
        pass

    def form(params: dict[str, Any]) -> dict[str, Any]:
        raise Boom("no")

    with snodo.direct(runtime, input_handlers={"form": form}) as client, pytest.raises(Boom):
        client.call_tool("deploy", {})


def test_handler_error_is_internal_error_with_last_result(runtime: Any) -> None:
    """A handler that fails (HandlerError) gives -32603; the cause ends with the last result."""

    def form(params: dict[str, Any]) -> dict[str, Any]:
        raise snodo.HandlerError("user went away")

    with snodo.direct(runtime, input_handlers={"form": form}) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("deploy", {})
    assert caught.value.code == -32603
    assert "user went away" in caught.value.cause
    pending = caught.value.cause[-1]
    assert isinstance(pending, snodo.InputRequired)
    # ... so the caller can finish the flow by hand.
    (key,) = pending.input_requests
    with snodo.direct(runtime, client_capabilities=FORM_CAPS) as client:
        done = client.call_tool(
            "deploy",
            {},
            input_responses={key: {"action": "decline"}},
            request_state=pending.request_state,
        )
    assert done["structuredContent"]["action"] == "decline"


@pytest.mark.parametrize(
    ("tool", "handlers"),
    [
        ("summarize", {"sampling": lambda p: {"role": "assistant", "content": "not a block"}}),
        ("roots", {"roots": lambda p: {"roots": [{"uri": "http://not-a-file"}]}}),
        ("deploy", {"form": lambda p: {"action": "maybe"}}),
    ],
)
def test_invalid_handler_responses_are_internal_errors(
    runtime: Any, tool: str, handlers: Any, wire: Wire
) -> None:
    """Sampling and roots responses are checked before sending: a handler bug is -32603."""
    with snodo.direct(runtime, input_handlers=handlers) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool(tool, {})
    assert caught.value.code == -32603
    assert len(wire.requests("tools/call")) == 1  # nothing was sent back


def test_elicitation_content_is_not_checked_against_the_schema(runtime: Any, wire: Wire) -> None:
    """Elicitation responses are not checked against requestedSchema on the client; the server
    validates them and answers -32602 for an invalid one."""

    def form(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"approved": "not-a-boolean"}}

    with snodo.direct(runtime, input_handlers={"form": form}) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("deploy", {})
    sent = wire.requests("tools/call")[-1]["params"]["inputResponses"]
    assert list(sent.values()) == [{"action": "accept", "content": {"approved": "not-a-boolean"}}]
    assert caught.value.code == -32602
    assert isinstance(caught.value.cause[-1], snodo.InputRequired)


def test_each_round_delivers_progress(runtime: Any, wire: Wire) -> None:
    """progress: is delivered for every round, each round with its own request id as token."""
    reports: list[dict[str, Any]] = []
    with snodo.direct(runtime, input_handlers={"form": accept}) as client:
        result = client.call_tool("two_rounds", {}, progress=reports.append)
    assert result["structuredContent"]["round"] == 2
    calls = wire.requests("tools/call")
    tokens = [c["params"]["_meta"]["progressToken"] for c in calls]
    assert tokens == [c["id"] for c in calls]
    assert {r["progressToken"] for r in reports} == set(tokens)


# -- Session-era server requests --------------------------------------------------------------


@pytest.mark.parametrize("session_version", SESSION_ERA)
def test_session_era_server_requests_use_the_same_handlers(
    session_version: str, runtime: Any
) -> None:
    """elicitation/create, sampling/createMessage and roots/list go to the same input handlers."""
    handlers = {"form": accept, "sampling": sampler, "roots": rooter}
    with snodo.direct(runtime, protocol=session_version, input_handlers=handlers) as client:
        assert client.call_tool("deploy", {})["structuredContent"]["action"] == "accept"
        assert (
            client.call_tool("summarize", {})["structuredContent"]["sampled"]["model"]
            == "test-model"
        )
        assert client.call_tool("roots", {})["structuredContent"]["roots"][0]["name"] == "project"


@pytest.mark.parametrize("session_version", SESSION_ERA)
def test_session_era_handler_failure_is_answered_internal_error(
    session_version: str, runtime: Any
) -> None:
    """Session era: a handler that fails is answered -32603 (the tool passes it on)."""

    def form(params: dict[str, Any]) -> dict[str, Any]:
        raise snodo.HandlerError("nope")

    with snodo.direct(runtime, protocol=session_version, input_handlers={"form": form}) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("deploy", {})
    assert caught.value.code == -32603


@pytest.mark.parametrize("session_version", SESSION_ERA)
@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("elicitation/create", {"message": "m"}, -32602),  # lacks requestedSchema
        ("sampling/createMessage", {"messages": [], "maxTokens": 5}, -32601),  # no sampling handler
        ("roots/list", {}, -32601),  # no roots handler installed
    ],
)
def test_session_era_server_request_refusals(
    session_version: str, runtime: Any, method: str, params: dict[str, Any], code: int
) -> None:
    """Session era: no handler for the kind -> -32601; params lacking the kind's keys -> -32602."""
    caps = {"elicitation": {"form": {}}, "roots": {}, "sampling": {}}
    with snodo.direct(
        runtime, protocol=session_version, input_handlers={"form": accept}, client_capabilities=caps
    ) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool("ask_raw", {"method": method, "params": params})
    assert caught.value.code == code


def test_malformed_input_request_is_connection_error_before_handlers(runtime: Any) -> None:
    """2026: params lacking the kind's keys -> -32000 and no handler runs."""
    called: list[Any] = []
    with snodo.direct(runtime, input_handlers={"form": called.append}) as client:
        with pytest.raises(snodo.McpError) as caught:
            client.call_tool(
                "ask_raw", {"method": "elicitation/create", "params": {"message": "m"}}
            )
    assert caught.value.code == -32000
    assert called == []
    assert isinstance(caught.value.cause[-1], snodo.InputRequired)


@pytest.mark.parametrize("session_version", SESSION_ERA)
def test_session_era_handler_that_raises_propagates(session_version: str, runtime: Any) -> None:
    """Session era, in process: an exception raised by a handler propagates to the caller."""

    class Boom(Exception):
        pass

    def form(params: dict[str, Any]) -> dict[str, Any]:
        raise Boom("raised")

    with snodo.direct(runtime, protocol=session_version, input_handlers={"form": form}) as client:
        with pytest.raises(Boom):
            client.call_tool("deploy", {})
