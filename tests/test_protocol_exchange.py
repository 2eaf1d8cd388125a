"""snodo.protocol.exchange: a request's deadline (seed "Progress": reset_timeout_on_progress and
max_total_timeout; "Errors": -32001), the progress-token rule, the replies to server requests
(seed "Input handlers": ping without a handler, -32601 for a kind with no handler, -32602 for
params lacking the kind's keys) and the unacknowledged subscription. Pure: time is an argument."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from snodo.protocol import exchange
from snodo.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, McpError
from snodo.protocol.exchange import Deadline


@dataclass(frozen=True)
class Timing:
    timeout: float | None = 30.0
    reset_timeout_on_progress: bool = False
    max_total_timeout: float | None = 600.0


# -- Deadline ----------------------------------------------------------------------------------


def test_a_plain_timeout_expires_after_it_and_says_request_timed_out() -> None:
    """timeout=2 from t=100: 2 s remain, expired at 102, -32001 "Request timed out" with
    timeoutMs and the cause given."""
    deadline = Deadline.start(Timing(timeout=2.0), 100.0)
    assert deadline.remaining(100.0) == 2.0
    assert not deadline.expired(101.999)
    assert deadline.expired(102.0)
    error = deadline.error(cause=("http", "deadline"))
    assert (error.code, error.message, error.data) == (
        -32001,
        "Request timed out",
        {"timeoutMs": 2000},
    )
    assert error.kind == "transport" and error.cause == ("http", "deadline")


def test_no_timeout_never_expires() -> None:
    deadline = Deadline.start(Timing(timeout=None), 100.0)
    assert deadline.remaining(1e9) is None
    assert deadline.ends() is None
    assert not deadline.expired(1e9)
    assert deadline.error().data == {"timeoutMs": 0}


def test_without_reset_progress_leaves_the_deadline_and_max_total_does_not_apply() -> None:
    """reset_timeout_on_progress off: progress changes nothing; max_total_timeout is no cap."""
    deadline = Deadline.start(Timing(timeout=2.0, max_total_timeout=1.0), 100.0)
    assert deadline.after_progress(101.5) is deadline
    assert deadline.cap is None
    assert deadline.remaining(100.0) == 2.0


def test_with_reset_each_progress_report_restarts_the_timeout() -> None:
    deadline = Deadline.start(Timing(timeout=2.0, reset_timeout_on_progress=True), 100.0)
    assert deadline.resets
    moved = deadline.after_progress(101.5)
    assert moved.expires == 103.5
    assert moved.remaining(102.0) == 1.5
    assert not moved.expired(103.0)
    assert moved.error().message == "Request timed out"


def test_max_total_timeout_bounds_a_request_whose_progress_keeps_resetting_it() -> None:
    """The cap is max_total_timeout after the start; once it comes before the moved timeout the
    request ends with "Maximum total timeout exceeded" and maxTotalTimeoutMs."""
    timing = Timing(timeout=2.0, reset_timeout_on_progress=True, max_total_timeout=5.0)
    deadline = Deadline.start(timing, 100.0)
    assert deadline.cap == 105.0
    for now in (101.0, 102.5, 104.0):
        deadline = deadline.after_progress(now)
    assert deadline.expires == 106.0
    assert deadline.remaining(104.0) == 1.0  # the cap comes first
    assert deadline.ends() == 105.0
    assert deadline.expired(105.0)
    error = deadline.error()
    assert (error.code, error.message) == (-32001, "Maximum total timeout exceeded")
    assert error.data == {"maxTotalTimeoutMs": 5000}


def test_the_timeout_error_wins_while_the_timeout_comes_first() -> None:
    timing = Timing(timeout=2.0, reset_timeout_on_progress=True, max_total_timeout=5.0)
    deadline = Deadline.start(timing, 100.0)
    assert deadline.remaining(100.5) == 1.5
    assert deadline.error().message == "Request timed out"


def test_a_cap_equal_to_the_timeout_is_the_max_total_error() -> None:
    timing = Timing(timeout=5.0, reset_timeout_on_progress=True, max_total_timeout=5.0)
    assert Deadline.start(timing, 0.0).error().message == "Maximum total timeout exceeded"


def test_reset_without_a_timeout_is_bounded_by_the_cap_alone() -> None:
    """No timeout, reset on progress: max_total_timeout still bounds the whole request."""
    timing = Timing(timeout=None, reset_timeout_on_progress=True, max_total_timeout=5.0)
    deadline = Deadline.start(timing, 100.0)
    assert not deadline.resets
    assert deadline.after_progress(101.0) is deadline
    assert deadline.remaining(101.0) == 4.0
    assert deadline.expired(105.0)
    assert deadline.error().message == "Maximum total timeout exceeded"


def test_reset_without_max_total_timeout_has_no_cap() -> None:
    timing = Timing(timeout=1.0, reset_timeout_on_progress=True, max_total_timeout=None)
    deadline = Deadline.start(timing, 0.0).after_progress(1000.0)
    assert deadline.cap is None and deadline.remaining(1000.5) == 0.5


def test_within_is_a_plain_timeout() -> None:
    deadline = Deadline.within(0.5, 10.0)
    assert deadline.remaining(10.0) == 0.5 and deadline.cap is None
    assert deadline.after_progress(10.2) is deadline
    assert Deadline.within(None, 10.0).remaining(99.0) is None


def test_a_deadline_is_a_frozen_value() -> None:
    deadline = Deadline.within(1.0, 0.0)
    with pytest.raises(AttributeError):
        deadline.expires = 5.0  # type: ignore[misc]
    assert deadline == Deadline.within(1.0, 0.0)


# -- the progress-token rule ---------------------------------------------------------------------


def test_the_progress_token_is_the_request_id() -> None:
    assert exchange.progress_token(7) == 7
    assert exchange.progress_token("r-1") == "r-1"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"progressToken": 7, "progress": 1}, 7),
        ({"progressToken": "r-1"}, "r-1"),
        ({"progress": 1}, None),
        ({"progressToken": True}, None),  # not a JSON-RPC id
        ({"progressToken": 1.5}, None),
        ({"progressToken": None}, None),
        (None, None),
        ([7], None),
    ],
)
def test_progress_reports_on_the_request_whose_id_is_its_token(params: Any, expected: Any) -> None:
    assert exchange.progress_request_id(params) == expected


def test_is_progress_for_compares_the_token_with_the_request_id() -> None:
    assert exchange.is_progress_for({"progressToken": 3}, 3)
    assert not exchange.is_progress_for({"progressToken": 3}, 4)
    assert not exchange.is_progress_for({"progressToken": "3"}, 3)
    assert not exchange.is_progress_for(None, 3)


# -- replies to server requests --------------------------------------------------------------------


def _echo(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"method": method, "params": params}


def test_ping_is_answered_without_a_handler() -> None:
    assert exchange.answered_without_handler("ping", None)
    assert exchange.server_request_reply(1, "ping", None, None) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {},
    }
    seen: list[str] = []

    def handler(method: str, params: dict[str, Any]) -> dict[str, Any]:
        seen.append(method)
        return {"from": "handler"}

    assert exchange.server_request_reply(2, "ping", {}, handler)["result"] == {}
    assert seen == []  # the handler is not asked


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("sampling/createMessage", {"messages": [], "maxTokens": 5}),
        ("roots/list", {}),
        ("no/such/method", {}),
    ],
)
def test_without_a_handler_anything_but_ping_is_method_not_found(method: str, params: Any) -> None:
    """The client's rule (inputs.check_server_request with no handlers): -32601 naming the
    method in data."""
    assert not exchange.answered_without_handler(method, params)
    reply = exchange.server_request_reply("srv-1", method, params, None)
    assert reply["id"] == "srv-1" and "result" not in reply
    assert reply["error"]["code"] == METHOD_NOT_FOUND
    assert reply["error"]["data"] == {"method": method}
    with pytest.raises(McpError) as caught:
        exchange.server_request_result(method, params, None)
    assert caught.value.code == METHOD_NOT_FOUND


def test_a_handler_answers_with_its_result_or_its_mcp_error() -> None:
    reply = exchange.server_request_reply(3, "roots/list", {"x": 1}, _echo)
    assert reply == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"method": "roots/list", "params": {"x": 1}},
    }

    def refuse(method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise McpError(INVALID_PARAMS, "lacks message", cause=("secret",))

    refused = exchange.server_request_reply(4, "elicitation/create", {}, refuse)
    assert refused["error"] == {"code": INVALID_PARAMS, "message": "lacks message"}


def test_params_that_are_not_an_object_reach_the_handler_as_empty() -> None:
    assert exchange.server_request_result("roots/list", None, _echo)["params"] == {}


def test_another_exception_of_the_handler_propagates() -> None:
    """The transport decides: stdio answers -32603, HTTP lets it reach the caller."""

    def broken(method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("oops")

    with pytest.raises(KeyError):
        exchange.server_request_reply(5, "roots/list", {}, broken)
    reply = exchange.handler_raised_reply(5, KeyError("oops"))
    assert reply["error"]["code"] == INTERNAL_ERROR
    assert reply["error"]["message"] == "Input handler raised: KeyError"


def test_a_request_over_the_handler_bound_is_an_internal_error() -> None:
    reply = exchange.busy_reply(9)
    assert reply["id"] == 9
    assert reply["error"] == {
        "code": INTERNAL_ERROR,
        "message": "Too many server requests in flight",
    }


def test_an_unacknowledged_subscription_is_a_connection_error() -> None:
    error = exchange.not_acknowledged_error()
    assert error.code == -32000 and error.kind == "transport"
    assert error.cause == ("not_acknowledged",)
