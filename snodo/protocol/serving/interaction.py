"""The server's interactive operations as pure functions: what an input request needs from
the client, and whether the client's answer fits it.

Used for both eras: in the stateless era the requests travel embedded in ``input_required``
results and the answers come back in ``inputResponses``; in the session era they are real
server-to-client requests and the answers are their results.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from snodo.protocol.inputs import response_problem

__all__ = [
    "ELICIT",
    "INPUT_METHODS",
    "ROOTS",
    "SAMPLE",
    "answer_problem",
    "capability_object",
    "declared",
    "form_problem",
    "missing_capabilities",
    "needed_capabilities",
]

ELICIT: Final = "elicitation/create"
SAMPLE: Final = "sampling/createMessage"
ROOTS: Final = "roots/list"
INPUT_METHODS: Final = frozenset({ELICIT, SAMPLE, ROOTS})


def needed_capabilities(method: str, params: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The capability paths a request needs, e.g. ``[("sampling",), ("sampling", "tools")]``."""
    if method == ELICIT:
        return [("elicitation", "url" if params.get("mode") == "url" else "form")]
    if method == SAMPLE:
        paths: list[tuple[str, ...]] = [("sampling",)]
        if "tools" in params or "toolChoice" in params:
            paths.append(("sampling", "tools"))
        if params.get("includeContext") not in (None, "none"):
            paths.append(("sampling", "context"))
        return paths
    return [("roots",)]


def declared(capabilities: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    """Whether ``capabilities`` declares ``path``. ``elicitation: {}`` means form only."""
    top = capabilities.get(path[0])
    if not isinstance(top, dict):
        return False
    if len(path) == 1:
        return True
    if path == ("elicitation", "form"):
        return "form" in top or "url" not in top
    return isinstance(top.get(path[1]), dict)


def missing_capabilities(
    capabilities: Mapping[str, Any], method: str, params: Mapping[str, Any]
) -> list[tuple[str, ...]]:
    """The capability paths the request needs that ``capabilities`` does not declare."""
    return [p for p in needed_capabilities(method, params) if not declared(capabilities, p)]


def capability_object(paths: list[tuple[str, ...]]) -> dict[str, Any]:
    """``[("elicitation", "url"), ("sampling",)]`` -> ``{"elicitation": {"url": {}}, "sampling": {}}``."""
    out: dict[str, Any] = {}
    for path in paths:
        node = out.setdefault(path[0], {})
        for part in path[1:]:
            node = node.setdefault(part, {})
    return out


def answer_problem(method: str, params: Mapping[str, Any], answer: object) -> str | None:
    """Why ``answer`` is not a valid result for the request, or ``None`` when it is.

    The shape is :func:`snodo.protocol.inputs.response_problem`'s, read leniently (the client
    may send more than the server uses); an accepted form is also checked against its
    ``requestedSchema``.
    """
    if method == ELICIT:
        kind = "url" if params.get("mode") == "url" else "form"
    else:
        kind = "sampling" if method == SAMPLE else "roots"
    problem = response_problem(kind, answer, strict=False)
    if problem is None and kind == "form":
        assert isinstance(answer, dict)
        if answer.get("action") == "accept":
            schema = params.get("requestedSchema")
            return form_problem(schema if isinstance(schema, dict) else {}, answer.get("content"))
    return problem


def form_problem(schema: Mapping[str, Any], content: object) -> str | None:
    """Check accepted form content against a flat elicitation ``requestedSchema``."""
    if content is None:
        content = {}
    if not isinstance(content, dict):
        return "content must be an object"
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    for name in required if isinstance(required, list) else ():
        if name not in content:
            return f"missing required field {name!r}"
    for name, value in content.items():
        prop = properties.get(name)
        if isinstance(prop, dict):
            problem = _value_problem(prop, value)
            if problem is not None:
                return f"field {name!r}: {problem}"
    return None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _choices(prop: Mapping[str, Any]) -> list[Any] | None:
    if isinstance(prop.get("enum"), list):
        return list(prop["enum"])
    for key in ("oneOf", "anyOf"):
        options = prop.get(key)
        if isinstance(options, list):
            return [o.get("const") for o in options if isinstance(o, dict)]
    return None


def _value_problem(prop: Mapping[str, Any], value: object) -> str | None:
    kind = prop.get("type")
    if kind == "string":
        if not isinstance(value, str):
            return "must be a string"
        if isinstance(prop.get("minLength"), int) and len(value) < prop["minLength"]:
            return "too short"
        if isinstance(prop.get("maxLength"), int) and len(value) > prop["maxLength"]:
            return "too long"
        choices = _choices(prop)
        if choices is not None and value not in choices:
            return "not one of the allowed values"
    elif kind in ("number", "integer"):
        if not _is_number(value) or (kind == "integer" and not isinstance(value, int)):
            return f"must be an {kind}" if kind == "integer" else "must be a number"
        assert isinstance(value, (int, float))
        if _is_number(prop.get("minimum")) and value < prop["minimum"]:
            return "below the minimum"
        if _is_number(prop.get("maximum")) and value > prop["maximum"]:
            return "above the maximum"
    elif kind == "boolean":
        if not isinstance(value, bool):
            return "must be a boolean"
    elif kind == "array":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return "must be a list of strings"
        items = prop.get("items")
        choices = _choices(items) if isinstance(items, dict) else None
        if choices is not None and any(v not in choices for v in value):
            return "not one of the allowed values"
        if isinstance(prop.get("minItems"), int) and len(value) < prop["minItems"]:
            return "too few items"
        if isinstance(prop.get("maxItems"), int) and len(value) > prop["maxItems"]:
            return "too many items"
    return None
