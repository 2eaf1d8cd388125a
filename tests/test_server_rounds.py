"""``snodo.server.rounds``: the round state of a stateless-era request and its signed
``requestState``, without a transport."""

from __future__ import annotations

from typing import Any

import pytest

from snodo.protocol.errors import McpError
from snodo.protocol.serving.request_state import decode_state
from snodo.server.rounds import Rounds, begin_round, input_required

SECRET = b"secret"


def next_round(rounds: Rounds, requests: dict[str, Any] | None) -> str:
    result = input_required(rounds, SECRET, requests)
    assert result["resultType"] == "input_required"
    token: str = result["requestState"]
    return token


def test_a_first_run_without_state_offers_the_answers_it_carries() -> None:
    rounds = Rounds("tools/call")
    begin_round(rounds, SECRET, {"inputResponses": {"k": 1, 2: "not a key"}}, "t", {"a": 1})
    assert rounds.binding == ("t", {"a": 1}) and dict(rounds.answers) == {"k": 1}
    assert rounds.round == 0


def test_the_state_carries_the_answers_and_the_round_to_the_next_run() -> None:
    first = Rounds("tools/call")
    begin_round(first, SECRET, {}, "t", {"a": 1})
    token = next_round(first, {"ask-1": {"method": "roots/list"}})
    assert decode_state(SECRET, token)["p"] == ["ask-1"]
    second = Rounds("tools/call")
    params = {"requestState": token, "inputResponses": {"ask-1": {"roots": []}, "other": 1}}
    begin_round(second, SECRET, params, "t", {"a": 1})
    assert second.round == 1 and dict(second.answers) == {"ask-1": {"roots": []}}


@pytest.mark.parametrize(
    ("method", "name", "arguments"),
    [("prompts/get", "t", {"a": 1}), ("tools/call", "u", {"a": 1}), ("tools/call", "t", {})],
)
def test_a_state_is_refused_for_another_request(method: str, name: str, arguments: Any) -> None:
    first = Rounds("tools/call")
    begin_round(first, SECRET, {}, "t", {"a": 1})
    token = next_round(first, None)
    with pytest.raises(McpError) as info:
        begin_round(Rounds(method), SECRET, {"requestState": token}, name, arguments)
    assert info.value.code == -32602 and info.value.message == "Invalid requestState"


def test_input_responses_must_be_an_object() -> None:
    with pytest.raises(McpError) as info:
        begin_round(Rounds("tools/call"), SECRET, {"inputResponses": []}, "t", {})
    assert info.value.code == -32602


def test_a_bare_retry_carries_only_the_state() -> None:
    rounds = Rounds("resources/read")
    result = input_required(rounds, SECRET, None)
    assert set(result) == {"resultType", "requestState"}
    assert decode_state(SECRET, result["requestState"])["n"] == "resources/read"


def test_answers_that_are_not_json_are_invalid_params() -> None:
    rounds = Rounds("tools/call")
    begin_round(rounds, SECRET, {"inputResponses": {"k": {1, 2}}}, "t", {})
    with pytest.raises(McpError) as info:
        input_required(rounds, SECRET, {"k2": {"method": "roots/list"}})
    assert info.value.code == -32602
