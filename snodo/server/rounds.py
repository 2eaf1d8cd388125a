"""Multi round-trip requests (stateless era): the round state dispatch keeps for one request,
and how it becomes, or comes back from, a signed ``requestState``.

A handler that asks the client for input without an answer at hand ends its run with an
``input_required`` result: the input requests and a ``requestState`` holding the answers
collected so far, the round count and what the state belongs to (method, tool/prompt name or
resource URI, a digest of the arguments). The client retries with the state and its new
``inputResponses``; :func:`begin_round` checks the state against the retried request and loads
the answers, and the handler runs again from the start.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from snodo.protocol.errors import invalid_params
from snodo.protocol.serving.request_state import (
    INVALID_STATE,
    arguments_digest,
    decode_state,
    encode_state,
)

__all__ = ["Rounds", "begin_round", "input_required"]


class Rounds:
    """The round state of one request: dispatch writes it, the request's Context reads the
    answers from it."""

    __slots__ = ("answers", "binding", "method", "round")

    def __init__(self, method: str) -> None:
        self.method = method
        #: What a ``requestState`` issued for this request is bound to: (name or URI,
        #: arguments); ``None`` until the handler names it (then it is ``(method, None)``).
        self.binding: tuple[str, Any] | None = None
        #: The answers known so far, by input-request key (not mutated in place).
        self.answers: Mapping[str, Any] = _NO_ANSWERS
        #: How many ``input_required`` rounds came before this run.
        self.round = 0


_NO_ANSWERS: Final[Mapping[str, Any]] = MappingProxyType({})


def begin_round(
    rounds: Rounds, secret: bytes, params: dict[str, Any], name: str, arguments: object
) -> None:
    """Bind the request's identity and load the answers a ``requestState`` carries.

    With a ``requestState``, ``inputResponses`` are accepted only for the keys the previous
    round asked (listed in that valid state). Without one (a first request that already carries
    answers), they are offered for the keys this run asks. Either way other keys are ignored,
    every answer is validated when the handler takes it, and a missing answer is asked again.
    """
    rounds.binding = (name, arguments)
    responses = params.get("inputResponses")
    if responses is not None and type(responses) is not dict:
        raise invalid_params("inputResponses must be an object")
    token = params.get("requestState")
    if token is None:
        if responses:
            rounds.answers = {key: value for key, value in responses.items() if type(key) is str}
        return
    state = decode_state(secret, token)
    count = state.get("r")
    answers = state.get("a")
    pending = state.get("p")
    if (
        state.get("m") != rounds.method
        or state.get("n") != name
        or state.get("h") != arguments_digest(arguments)
        or type(count) is not int
        or type(answers) is not dict
        or type(pending) is not list
    ):
        raise invalid_params(INVALID_STATE)
    if responses:
        for key in pending:
            if type(key) is str and key in responses:
                answers[key] = responses[key]
    rounds.round = count
    rounds.answers = answers


def input_required(
    rounds: Rounds, secret: bytes, requests: dict[str, dict[str, Any]] | None
) -> dict[str, Any]:
    """The ``input_required`` result that ends this run: ``requests`` (none: a bare retry,
    ``Context.retry_later``) and the signed state of the next round."""
    name, arguments = rounds.binding or (rounds.method, None)
    state = {
        "m": rounds.method,
        "n": name,
        "h": arguments_digest(arguments),
        "r": rounds.round + 1,
        "a": dict(rounds.answers),
        "p": list(requests or ()),
    }
    result: dict[str, Any] = {"resultType": "input_required"}
    if requests:
        result["inputRequests"] = requests
    try:
        result["requestState"] = encode_state(secret, state)
    except (TypeError, ValueError):
        raise invalid_params("inputResponses must hold JSON values") from None
    return result
