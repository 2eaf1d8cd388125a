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

from snodo.protocol.dialects.base import Dialect
from snodo.protocol.errors import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
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


#: The notification that tells the server the client's roots changed (session era).
ROOTS_LIST_CHANGED: Final = "notifications/roots/list_changed"


def roots_changed_refusal(capabilities: Mapping[str, Any], dialect: Dialect) -> McpError | None:
    """Why the client may not send ``notifications/roots/list_changed`` now, or ``None``.

    -32601 on a version that has no such notification (2026-07-28: each input request asks
    for the roots afresh); -32021 when the client did not declare ``roots.listChanged: true``
    (a server must not hear of changes it was not told to expect).
    """
    if ROOTS_LIST_CHANGED not in dialect.client_notifications:
        return McpError(
            METHOD_NOT_FOUND,
            f"Protocol {dialect.version} has no {ROOTS_LIST_CHANGED}: its servers ask for the "
            "roots in each request that needs them",
            {"method": ROOTS_LIST_CHANGED, "protocolVersion": dialect.version},
        )
    roots = capabilities.get("roots")
    if isinstance(roots, Mapping) and roots.get("listChanged") is True:
        return None
    return McpError(
        MISSING_CLIENT_CAPABILITY,
        "The client did not declare the capability roots.listChanged, so it may not send "
        f"{ROOTS_LIST_CHANGED}: connect with client_capabilities="
        '{"roots": {"listChanged": True}} next to the roots input handler',
        {"requiredCapabilities": {"roots": {"listChanged": True}}},
        cause=("undeclared_capability", "roots.listChanged"),
    )


# -- what a handler's answer must look like -------------------------------------------------
#
# Each check returns ``None`` or the first problem, named by its path in the answer
# ("roots[1].uri: missing", "content.type: 'foo' is not one of text, image, audio, ..."), so
# the error a handler bug causes says what to fix.

#: The content block types of a sampling answer, and of a tool result inside one.
_SAMPLING_BLOCKS: Final = ("text", "image", "audio", "tool_use", "tool_result")
_CONTENT_BLOCKS: Final = ("text", "image", "audio", "resource_link", "resource")
#: The longest form of a wrong value in a problem (the whole answer is in the error's cause).
_VALUE_CHARS: Final = 60


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _json_type(value: Any) -> str:
    """The JSON name of ``value``'s type (the Python name for what JSON cannot hold)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a Python {type(value).__name__}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def _wrong(path: str, expected: str, value: Any) -> str:
    return f"{path}: must be {expected}, got {_json_type(value)}"


def _needs(obj: dict[str, Any], key: str, path: str, kind: type, expected: str) -> str | None:
    """``obj[key]`` must be there and be a ``kind``."""
    if key not in obj:
        return f"{_at(path, key)}: missing"
    value = obj[key]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        return _wrong(_at(path, key), expected, value)
    return None


def _may(obj: dict[str, Any], key: str, path: str, kind: type, expected: str) -> str | None:
    """``obj[key]``, when there, must be a ``kind``."""
    return _needs(obj, key, path, kind, expected) if key in obj else None


def _one_of(obj: dict[str, Any], key: str, path: str, allowed: tuple[str, ...]) -> str | None:
    """``obj[key]`` must be one of ``allowed`` (untrusted: an unhashable value is not)."""
    if key not in obj:
        return f"{_at(path, key)}: missing"
    value = obj[key]
    if isinstance(value, str) and value in allowed:
        return None
    return f"{_at(path, key)}: {_shown(value)} is not one of {', '.join(allowed)}"


def _first(*problems: str | None) -> str | None:
    return next((p for p in problems if p is not None), None)


def _json_problem(value: Any, path: str, depth: int = 0) -> str | None:
    """Where ``value`` stops being plain JSON data (str-keyed dicts, lists, scalars, bounded
    in depth), or ``None``."""
    where = path or "the response"
    if depth > _MAX_DEPTH:
        return f"{where}: nested deeper than {_MAX_DEPTH} levels"
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        finite = value == value and value not in (float("inf"), float("-inf"))
        return None if finite else f"{where}: {value!r} is not a JSON number"
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where}: the key {_shown(key)} is not a string"
            problem = _json_problem(item, _at(path, key), depth + 1)
            if problem is not None:
                return problem
        return None
    if isinstance(value, list):
        for index, item in enumerate(value):
            problem = _json_problem(item, f"{path}[{index}]", depth + 1)
            if problem is not None:
                return problem
        return None
    return f"{where}: {_json_type(value)} is not JSON data"


def _elicit_problem(x: dict[str, Any], strict: bool) -> str | None:
    problem = _one_of(x, "action", "", ("accept", "decline", "cancel"))
    if problem is None and strict:
        problem = _first(
            _may(x, "content", "", dict, "an object"), _may(x, "_meta", "", dict, "an object")
        )
    return problem


def _block_type(block: Any, path: str, allowed: tuple[str, ...]) -> str | None:
    if not isinstance(block, dict):
        return _wrong(path, "a content block (an object)", block)
    return _one_of(block, "type", path, allowed)


def _media_problem(block: dict[str, Any], path: str) -> str | None:
    if block["type"] == "text":
        problem = _needs(block, "text", path, str, "a string")
    else:
        problem = _first(
            _needs(block, "data", path, str, "a string (base64)"),
            _needs(block, "mimeType", path, str, "a string"),
        )
    return _first(
        problem,
        _may(block, "annotations", path, dict, "an object"),
        _may(block, "_meta", path, dict, "an object"),
    )


def _content_block_problem(block: Any, path: str) -> str | None:
    """A tool result's ``ContentBlock``: text, image, audio, resource link or embedded resource."""
    problem = _block_type(block, path, _CONTENT_BLOCKS)
    if problem is not None:
        return problem
    kind = block["type"]
    if kind in ("text", "image", "audio"):
        return _media_problem(block, path)
    if kind == "resource_link":
        return _first(
            _needs(block, "uri", path, str, "a string"),
            _needs(block, "name", path, str, "a string"),
        )
    problem = _needs(block, "resource", path, dict, "an object")
    if problem is not None:
        return problem
    return _needs(block["resource"], "uri", _at(path, "resource"), str, "a string")


def _sampling_block_problem(block: Any, path: str) -> str | None:
    """A ``SamplingMessageContentBlock``: text, image, audio, tool_use or tool_result."""
    problem = _block_type(block, path, _SAMPLING_BLOCKS)
    if problem is not None:
        return problem
    kind = block["type"]
    if kind in ("text", "image", "audio"):
        return _media_problem(block, path)
    if kind == "tool_use":
        return _first(
            _needs(block, "id", path, str, "a string"),
            _needs(block, "name", path, str, "a string"),
            _needs(block, "input", path, dict, "an object"),
            _may(block, "_meta", path, dict, "an object"),
        )
    problem = _first(
        _needs(block, "toolUseId", path, str, "a string"),
        _needs(block, "content", path, list, "an array of content blocks"),
    )
    if problem is not None:
        return problem
    inner = _at(path, "content")
    return _first(
        *(_content_block_problem(c, f"{inner}[{i}]") for i, c in enumerate(block["content"])),
        _may(block, "isError", path, bool, "a boolean"),
        _may(block, "_meta", path, dict, "an object"),
    )


def _sampling_content_problem(x: dict[str, Any], strict: bool) -> str | None:
    if "content" not in x:
        return "content: missing"
    content = x["content"]
    if isinstance(content, dict):
        return _sampling_block_problem(content, "content") if strict else None
    if not isinstance(content, list):
        return _wrong("content", "a content block or an array of them", content)
    if strict and not content:
        return "content: must not be an empty array"
    for index, block in enumerate(content):
        path = f"content[{index}]"
        problem = (
            _sampling_block_problem(block, path)
            if strict
            else (None if isinstance(block, dict) else _wrong(path, "an object", block))
        )
        if problem is not None:
            return problem
    return None


def _sampling_problem(x: dict[str, Any], strict: bool) -> str | None:
    problem = _first(
        _one_of(x, "role", "", ("user", "assistant")),
        _sampling_content_problem(x, strict),
        _needs(x, "model", "", str, "a string"),
    )
    if problem is None and strict:
        problem = _first(
            _may(x, "stopReason", "", str, "a string"), _may(x, "_meta", "", dict, "an object")
        )
    return problem


def _root_problem(root: Any, path: str, strict: bool) -> str | None:
    if not isinstance(root, dict):
        return _wrong(path, "an object", root)
    problem = _needs(root, "uri", path, str, "a string")
    if problem is not None or not strict:
        return problem
    if not root["uri"].startswith("file://"):
        return f"{_at(path, 'uri')}: {_shown(root['uri'])} is not a file:// URI"
    return _first(
        _may(root, "name", path, str, "a string"), _may(root, "_meta", path, dict, "an object")
    )


def _roots_problem(x: dict[str, Any], strict: bool) -> str | None:
    problem = _needs(x, "roots", "", list, "an array")
    if problem is not None:
        return problem
    for index, root in enumerate(x["roots"]):
        problem = _root_problem(root, f"roots[{index}]", strict)
        if problem is not None:
            return problem
    return _may(x, "_meta", "", dict, "an object") if strict else None


def valid_elicit_response(x: Any) -> bool:
    """An ``ElicitResult``: an ``action`` of accept/decline/cancel and an object ``content``."""
    return response_problem("form", x) is None


def valid_sampling_response(x: Any) -> bool:
    """A ``CreateMessageResult``: role, one content block or a non-empty list, model, stopReason."""
    return response_problem("sampling", x) is None


def valid_roots_response(x: Any) -> bool:
    """A ``ListRootsResult``: a ``roots`` list of ``file://`` URIs with optional string names."""
    return response_problem("roots", x) is None


def response_problem(kind: str, x: Any, *, strict: bool = True) -> str | None:
    """What is wrong with ``x`` as the result of a ``kind`` input request, or ``None``: the
    first problem, named by its path (``roots[1].uri: missing``).

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
    if problem is None and strict:
        problem = _json_problem(x, "")
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
    "ROOTS_LIST_CHANGED",
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
    "roots_changed_refusal",
    "start_rounds",
    "valid_elicit_response",
    "valid_response",
    "valid_roots_response",
    "valid_sampling_response",
    "validate_handlers",
    "with_last",
]
