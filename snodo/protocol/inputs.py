"""Input-handler rules: which kind a request is, what it must carry, what a handler may answer.

The same ``input_handlers`` answer 2026-07-28 input requests (embedded in ``input_required``
results) and the server-to-client requests of session-era connections. Kinds are keyed by
method and mode: a form elicitation is ``"form"``, a URL elicitation ``"url"``, a sampling
request ``"sampling"`` and a roots request ``"roots"``.

Nothing here calls a handler. :func:`plan_round` matches and checks every request of a round
first, so that the caller runs handlers only when all of them can be answered;
:func:`check_server_request` does the same for one server request. :func:`valid_response`
checks what a handler returned before it is sent.

The rounds of one call are a small immutable state machine, in the manner of
``protocol/paging.py``::

    state = inputs.start_rounds(max_input_rounds, handlers)
    while True:
        step = inputs.next_round(state, interpret(send(responses, request_state)))
        if isinstance(step, inputs.Done):
            return step.outcome                     # step.rounds: the rounds answered
        state = step.state
        responses = run(step.tasks) if step.tasks else None   # the handlers, in order
        request_state = step.request_state
        wait(step.pause)                            # a state-only round is paced
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import Any, Final

from snodo.protocol.errors import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    McpError,
    connection_error,
)
from snodo.protocol.results import InputRequired

#: The input-request kinds a handler can be installed for.
KINDS: Final = ("form", "url", "sampling", "roots")

#: The params keys each kind's request must carry.
REQUIRED_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "form": ("message", "requestedSchema"),
    "url": ("message", "url"),
    "sampling": ("messages", "maxTokens"),
    "roots": (),
}

_DESCRIPTIONS: Final[dict[str, str]] = {
    "form": "form elicitation",
    "url": "URL elicitation",
    "sampling": "sampling",
    "roots": "roots",
}

#: The pause before re-sending a result that carried only a requestState (as the TS client does).
STATE_ONLY_RETRY_DELAY: Final = 0.25

_ELICITATION_ACTIONS: Final = frozenset({"accept", "decline", "cancel"})
_ROLES: Final = frozenset({"user", "assistant"})
_MAX_DEPTH: Final = 64


def kind_of(method: str, params: Any) -> str | None:
    """The kind a request is, from its method and (for elicitation) its mode; ``None`` if none.

    An elicitation without a ``mode`` is a form, as the protocol says.
    """
    if method == "elicitation/create":
        mode = params.get("mode", "form") if isinstance(params, dict) else "form"
        if mode == "form":
            return "form"
        if mode == "url":
            return "url"
        return None
    if method == "sampling/createMessage":
        return "sampling"
    if method == "roots/list":
        return "roots"
    return None


def _check_kind(kind: str) -> None:
    if kind not in REQUIRED_KEYS:
        raise ValueError(f"unknown input kind {kind!r}; the kinds are {list(KINDS)}")


def _missing_keys(kind: str, params: Any) -> list[str] | None:
    """The kind's keys ``params`` lacks (``None`` when params is not usable at all)."""
    _check_kind(kind)
    if kind == "roots":
        return [] if params is None or isinstance(params, dict) else None
    if not isinstance(params, dict):
        return None
    return [key for key in REQUIRED_KEYS[kind] if key not in params]


def params_ok(kind: str, params: Any) -> bool:
    """Whether ``params`` carries the kind's keys (roots params may be absent or any object)."""
    return _missing_keys(kind, params) == []


def handler_params(kind: str, params: Any) -> dict[str, Any]:
    """What the kind's handler receives: a copy of ``params``, ``{}`` for absent roots params."""
    if not params_ok(kind, params):
        raise ValueError(f"params do not fit a {_DESCRIPTIONS[kind]} request: {params!r}")
    return {} if params is None else dict(params)


def validate_handlers(
    handlers: Mapping[str, Any] | None,
) -> dict[str, Callable[[dict[str, Any]], Any]]:
    """Check the ``input_handlers`` option: known kinds only, each a callable; returns a copy."""
    if handlers is None:
        return {}
    if not isinstance(handlers, Mapping):
        raise TypeError(
            f"input_handlers must be a mapping from kind to callable, got: {handlers!r}"
        )
    checked: dict[str, Callable[[dict[str, Any]], Any]] = {}
    for kind, handler in handlers.items():
        if kind not in REQUIRED_KEYS:
            raise ValueError(f"unknown input handler kind {kind!r}; the kinds are {list(KINDS)}")
        if not callable(handler):
            raise ValueError(f"input handler {kind!r} must be callable, got: {handler!r}")
        checked[kind] = handler
    return checked


def _derived_capabilities(handlers: Mapping[str, Any]) -> dict[str, Any]:
    derived: dict[str, Any] = {}
    for kind in handlers:
        _check_kind(kind)
        if kind in ("form", "url"):
            derived.setdefault("elicitation", {})[kind] = {}
        elif kind == "sampling":
            derived["sampling"] = {}
        else:
            derived["roots"] = {"listChanged": False}
    return derived


def _deep_merge(derived: dict[str, Any], declared: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``declared`` over ``derived``: both dicts recurse, otherwise ``declared`` wins."""
    merged = dict(derived)
    for key, given in declared.items():
        ours = merged.get(key)
        if isinstance(ours, dict) and isinstance(given, Mapping):
            merged[key] = _deep_merge(ours, given)
        else:
            merged[key] = copy.deepcopy(given)
    return merged


def merge_capabilities(
    declared: Mapping[str, Any] | None, handlers: Mapping[str, Any]
) -> dict[str, Any]:
    """The client capabilities to declare: the handlers' entries merged with ``declared``.

    ``form`` adds ``elicitation.form``, ``url`` adds ``elicitation.url``, ``sampling`` adds
    ``sampling: {}`` and ``roots`` adds ``roots: {"listChanged": False}``. Declared values win
    at the leaves; an explicit ``"elicitation": {}`` next to an elicitation handler is kept as
    form. A declared entry a handler merges into must be a dict (``ValueError`` otherwise).
    Neither argument is mutated.
    """
    if declared is None:
        declared = {}
    if not isinstance(declared, Mapping):
        raise TypeError(f"client_capabilities must be a mapping, got: {declared!r}")
    derived = _derived_capabilities(handlers)
    given = dict(declared)
    for key in derived:
        if key in given and not isinstance(given[key], Mapping):
            raise ValueError(
                f"client_capabilities[{key!r}] must be an object to merge the input handlers' "
                f"capability into, got: {given[key]!r}"
            )
    elicitation = given.get("elicitation")
    if "elicitation" in derived and isinstance(elicitation, Mapping) and not elicitation:
        # An empty elicitation capability means form mode alone; spelling that out keeps form
        # when a URL handler adds its own entry next to it.
        given["elicitation"] = {"form": {}}
    return _deep_merge(derived, given)


def _json_value(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is plain JSON data (str-keyed dicts, lists, scalars), bounded in depth."""
    if depth > _MAX_DEPTH:
        return False
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_value(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_value(v, depth + 1) for v in value)
    return False


def _optional(obj: dict[str, Any], key: str, check: Callable[[Any], bool]) -> bool:
    return key not in obj or check(obj[key])


def _is_dict(value: Any) -> bool:
    return isinstance(value, dict)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _one_of(value: Any, allowed: frozenset[str]) -> bool:
    """``value in allowed`` for untrusted values (an unhashable one is simply not in it)."""
    return isinstance(value, str) and value in allowed


def valid_elicit_response(x: Any) -> bool:
    """An ``ElicitResult``: an ``action`` of accept/decline/cancel and an object ``content``."""
    return response_problem("form", x) is None


def _elicit_problem(x: dict[str, Any], strict: bool) -> str | None:
    if not _one_of(x.get("action"), _ELICITATION_ACTIONS):
        return "action must be accept, decline or cancel"
    if strict and not (_optional(x, "content", _is_dict) and _optional(x, "_meta", _is_dict)):
        return "content and _meta must be objects"
    return None


def _content_block(block: Any) -> bool:
    """A tool result's ``ContentBlock``: text, image, audio, resource link or embedded resource."""
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return False
    kind = block["type"]
    if kind in ("text", "image", "audio"):
        return _media_block(block)
    if kind == "resource_link":
        return isinstance(block.get("uri"), str) and isinstance(block.get("name"), str)
    if kind == "resource":
        resource = block.get("resource")
        return isinstance(resource, dict) and isinstance(resource.get("uri"), str)
    return False


def _media_block(block: dict[str, Any]) -> bool:
    if block["type"] == "text":
        ok = isinstance(block.get("text"), str)
    else:
        ok = isinstance(block.get("data"), str) and isinstance(block.get("mimeType"), str)
    return ok and _optional(block, "annotations", _is_dict) and _optional(block, "_meta", _is_dict)


def _sampling_block(block: Any) -> bool:
    """A ``SamplingMessageContentBlock``: text, image, audio, tool_use or tool_result."""
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return False
    kind = block["type"]
    if kind in ("text", "image", "audio"):
        return _media_block(block)
    if kind == "tool_use":
        return (
            isinstance(block.get("id"), str)
            and isinstance(block.get("name"), str)
            and isinstance(block.get("input"), dict)
            and _optional(block, "_meta", _is_dict)
        )
    if kind == "tool_result":
        content = block.get("content")
        return (
            isinstance(block.get("toolUseId"), str)
            and isinstance(content, list)
            and all(_content_block(c) for c in content)
            and _optional(block, "isError", lambda v: isinstance(v, bool))
            and _optional(block, "_meta", _is_dict)
        )
    return False


def valid_sampling_response(x: Any) -> bool:
    """A ``CreateMessageResult``: role, one content block or a non-empty list, model, stopReason."""
    return response_problem("sampling", x) is None


def _sampling_problem(x: dict[str, Any], strict: bool) -> str | None:
    if not _one_of(x.get("role"), _ROLES):
        return "role must be user or assistant"
    content = x.get("content")
    if strict:
        if isinstance(content, list):
            content_ok = bool(content) and all(_sampling_block(b) for b in content)
        else:
            content_ok = _sampling_block(content)
    else:
        content_ok = isinstance(content, dict) or (
            isinstance(content, list) and all(isinstance(c, dict) for c in content)
        )
    if not content_ok:
        return "content must be a content block or a list of them"
    if not isinstance(x.get("model"), str):
        return "model must be a string"
    if strict and not (_optional(x, "stopReason", _is_str) and _optional(x, "_meta", _is_dict)):
        return "stopReason must be a string and _meta an object"
    return None


def _root(root: Any) -> bool:
    return (
        isinstance(root, dict)
        and isinstance(root.get("uri"), str)
        and root["uri"].startswith("file://")
        and _optional(root, "name", _is_str)
        and _optional(root, "_meta", _is_dict)
    )


def valid_roots_response(x: Any) -> bool:
    """A ``ListRootsResult``: a ``roots`` list of ``file://`` URIs with optional string names."""
    return response_problem("roots", x) is None


def _roots_problem(x: dict[str, Any], strict: bool) -> str | None:
    roots = x.get("roots")
    if not isinstance(roots, list) or not all(
        isinstance(r, dict) and isinstance(r.get("uri"), str) for r in roots
    ):
        return "roots must be a list of objects with a uri"
    if strict and not (all(_root(r) for r in roots) and _optional(x, "_meta", _is_dict)):
        return "roots must be file:// URIs with string names, _meta an object"
    return None


def response_problem(kind: str, x: Any, *, strict: bool = True) -> str | None:
    """What is wrong with ``x`` as the result of a ``kind`` input request, or ``None``.

    Client and server check the same shapes. ``strict`` (the client, before it sends what its
    handler returned) checks all the schema says: object ``content`` and ``_meta``, typed
    sampling content blocks, a string ``stopReason``, ``file://`` roots with string names, plain
    JSON throughout. Without it (the server, reading a client's answer) only what the server
    relies on is checked: the action, the role, content blocks that are objects, the model,
    roots with a string uri.
    """
    _check_kind(kind)
    if not isinstance(x, dict):
        return "not an object"
    if kind in ("form", "url"):
        problem = _elicit_problem(x, strict)
    elif kind == "sampling":
        problem = _sampling_problem(x, strict)
    else:
        problem = _roots_problem(x, strict)
    if problem is None and strict and not _json_value(x):
        return "not plain JSON data"
    return problem


def valid_response(kind: str, x: Any) -> bool:
    """Whether ``x`` is a response of the shape ``kind`` expects (checked before it is sent)."""
    return response_problem(kind, x) is None


@dataclass(frozen=True, slots=True)
class InputTask:
    """One input request of a round, matched and checked: run ``handlers[kind](params)``."""

    key: str
    method: str
    kind: str
    params: dict[str, Any]


def _malformed(message: str, key: Any) -> McpError:
    return connection_error(message, cause=("malformed_input_request", key))


def plan_round(input_requests: Any, handlers: Container[str]) -> list[InputTask]:
    """Match every input request of a round to a handler, in the sort order of the keys.

    ``handlers`` is what holds the kinds with a handler (the handlers mapping, or its keys).

    Raises before any handler could run: -32000 (``kind="transport"``) for a malformed request
    and -32602 for a kind without a handler. ``None`` (no ``inputRequests``) is an empty round.
    """
    if input_requests is None:
        return []
    if not isinstance(input_requests, dict):
        raise _malformed(
            "The server sent an input_required result whose inputRequests is not an object", None
        )
    tasks: list[InputTask] = []
    for key in sorted(input_requests, key=str):
        request = input_requests[key]
        if not isinstance(request, dict):
            raise _malformed(f"Input request {key!r} is not an object", key)
        method = request.get("method")
        if not isinstance(method, str):
            raise _malformed(f"Input request {key!r} has no method", key)
        params = request.get("params")
        kind = kind_of(method, params)
        if kind is None:
            raise _malformed(f"Input request {key!r} has an unknown method or mode: {method}", key)
        missing = _missing_keys(kind, params)
        if missing is None:
            raise _malformed(
                f"Input request {key!r} ({_DESCRIPTIONS[kind]}) has params that are not an object",
                key,
            )
        if missing:
            raise _malformed(
                f"Input request {key!r} ({_DESCRIPTIONS[kind]}) lacks {', '.join(missing)}", key
            )
        if kind not in handlers:
            raise McpError(
                INVALID_PARAMS,
                f"No input handler for {_DESCRIPTIONS[kind]} (input request {key!r})",
                {"inputRequest": key},
                cause=("no_input_handler", kind),
            )
        tasks.append(InputTask(str(key), method, kind, handler_params(kind, params)))
    return tasks


def check_server_request(
    method: str, params: Any, handlers: Mapping[str, Callable[..., Any]]
) -> tuple[str, dict[str, Any]] | None:
    """Decide how to answer a request the server sent the client (not an embedded one).

    ``None`` for ``ping`` (answer ``{}`` without a handler); otherwise the kind and the
    handler's params. -32601 when the method or mode has no kind or no handler, -32602 when the
    params lack the kind's keys.
    """
    if method == "ping":
        return None
    kind = kind_of(method, params)
    if kind is None or kind not in handlers:
        what = method if kind is None else f"{method} ({_DESCRIPTIONS[kind]})"
        raise McpError(
            METHOD_NOT_FOUND,
            f"Method not found: {what} has no input handler",
            {"method": method},
        )
    missing = _missing_keys(kind, params)
    if missing is None:
        raise McpError(INVALID_PARAMS, f"{method} params must be an object")
    if missing:
        raise McpError(INVALID_PARAMS, f"{method} params lack {', '.join(missing)}")
    return kind, handler_params(kind, params)


# -- the rounds of one call ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RoundState:
    """Where a multi round-trip call stands: the rounds answered and the last input request."""

    #: Rounds the client answers at most (``max_input_rounds``).
    max_rounds: int
    #: The kinds with an input handler; none: an ``input_required`` result goes to the caller.
    kinds: frozenset[str]
    #: Rounds answered so far.
    rounds: int = 0
    #: The last ``input_required`` result answered (errors after it carry it in their cause).
    last: InputRequired | None = None


@dataclass(frozen=True, slots=True)
class Send:
    """Answer a round: run ``tasks`` (none for a state-only round), wait ``pause`` seconds, then
    send the request again with the answers and ``request_state``."""

    state: RoundState
    tasks: tuple[InputTask, ...]
    request_state: str | None
    pause: float


@dataclass(frozen=True, slots=True)
class Done:
    """The call's outcome (a complete result, or an ``input_required`` one for the caller) and
    the rounds answered to get it."""

    outcome: dict[str, Any] | InputRequired
    rounds: int


def start_rounds(max_rounds: int, handlers: Mapping[str, Any]) -> RoundState:
    """The state before the first response of a call (one shared value per limit and kinds:
    every connection keeps one)."""
    return _start_rounds(max_rounds, frozenset(handlers))


@functools.lru_cache(maxsize=64)
def _start_rounds(max_rounds: int, kinds: frozenset[str]) -> RoundState:
    return RoundState(max_rounds, kinds)


def next_round(state: RoundState, outcome: dict[str, Any] | InputRequired) -> Send | Done:
    """Take in one interpreted response; return the round to answer next, or the outcome.

    Raises before any handler could run: -32000 (``kind="transport"``) once ``max_rounds``
    rounds were answered and the server still asks, and :func:`plan_round`'s errors (with the
    result that asked at the end of their cause).
    """
    if not isinstance(outcome, InputRequired) or not state.kinds:
        return Done(outcome, state.rounds)
    if state.rounds >= state.max_rounds:
        raise McpError(
            CONNECTION_CLOSED,
            f"Maximum input rounds exceeded ({state.max_rounds})",
            {"maxInputRounds": state.max_rounds},
            kind="transport",
            cause=("max_input_rounds", outcome),
        )
    try:
        tasks = tuple(plan_round(outcome.input_requests, state.kinds))
    except McpError as error:
        raise with_last(error, outcome) from None
    following = RoundState(state.max_rounds, state.kinds, state.rounds + 1, outcome)
    pause = 0.0 if tasks else STATE_ONLY_RETRY_DELAY
    return Send(following, tasks, outcome.request_state, pause)


def with_last(error: McpError, last: InputRequired | None) -> McpError:
    """``error`` with the last ``input_required`` result at the end of its cause (in place)."""
    if last is None:
        return error
    cause = error.cause
    if isinstance(cause, tuple):
        error.cause = (*cause, last)
    elif cause is None:
        error.cause = (last,)
    else:
        error.cause = (cause, last)
    return error


__all__ = [
    "KINDS",
    "REQUIRED_KEYS",
    "STATE_ONLY_RETRY_DELAY",
    "Done",
    "InputTask",
    "RoundState",
    "Send",
    "check_server_request",
    "handler_params",
    "kind_of",
    "merge_capabilities",
    "next_round",
    "params_ok",
    "plan_round",
    "response_problem",
    "start_rounds",
    "valid_elicit_response",
    "valid_response",
    "valid_roots_response",
    "valid_sampling_response",
    "validate_handlers",
    "with_last",
]
