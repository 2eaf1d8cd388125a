"""Tool results checked against the tool's ``outputSchema`` (pure; docs/decisions/0041).

``validate_output=True`` asks the client to check a tool result's ``structuredContent`` against
the ``outputSchema`` of the tool's definition (the specification's SHOULD). This module holds the
rules that need no library: which schema applies (:func:`schema_of`), whether a result is checked
at all (:func:`plan`), the bounds a server's schema must keep before it is compiled
(:func:`schema_bounds`), how a failed rule is said (:func:`json_path`, :func:`rule`) and the
errors a failure raises. The JSON Schema library sits behind ``snodo.output_validation``, which
turns its errors into :class:`Violation` records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson

from snodo.protocol import errors
from snodo.protocol.errors import McpError

__all__ = [
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_NODES",
    "MAX_VIOLATIONS",
    "Plan",
    "Violation",
    "json_path",
    "json_type",
    "mismatch_error",
    "missing_error",
    "plan",
    "rule",
    "schema_bounds",
    "schema_error",
    "schema_of",
]

#: The deepest a schema may nest (objects and arrays) before snodo refuses to compile it: the
#: specification asks validators to bound what a hostile schema can cost.
MAX_SCHEMA_DEPTH: Final = 64
#: The most objects and arrays a schema may hold (the same bound, on its size).
MAX_SCHEMA_NODES: Final = 10_000
#: The most failed rules one error names (in ``cause``; the message names the first).
MAX_VIOLATIONS: Final = 10
#: The longest a value quoted in a rule is (a server's strings can be long).
_QUOTE_MAX: Final = 60

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: What to do with a result: ``"skip"`` it (not a complete result, or ``isError``),
#: fail it as ``"missing"`` its ``structuredContent``, or ``"validate"`` it.
Plan = Literal["skip", "missing", "validate"]


@dataclass(frozen=True, slots=True)
class Violation:
    """One rule a value broke: where (``path`` into ``structuredContent``), which rule
    (``keyword``, as the schema spells it; ``"false"`` for a ``false`` schema), what the rule
    asked (``detail``: the library's fields, such as ``{"types": ["number"]}``), the value that
    broke it, and the library's own words for it (said when snodo has none of its own)."""

    path: tuple[str | int, ...]
    keyword: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    instance: Any = None
    message: str = ""


def schema_of(definition: Mapping[str, Any] | None) -> Any:
    """The ``outputSchema`` of a tool definition, or None when it declares none (not checked)."""
    if definition is None:
        return None
    return definition.get("outputSchema")


def plan(result: Any, schema: Any) -> Plan:
    """Whether a tool result is checked: not without a schema, not an ``InputRequired`` or
    other non-dict outcome, not a result with ``isError: true`` (a tool error carries no
    structured output); a result that lacks ``structuredContent`` while the tool declares an
    ``outputSchema`` is a failure (servers MUST provide it). A ``null`` value is present: on
    2026-07-28 it is a JSON value like any other, for the schema to judge."""
    if schema is None or not isinstance(result, dict) or result.get("isError") is True:
        return "skip"
    if "structuredContent" not in result:
        return "missing"
    return "validate"


def schema_bounds(schema: Any) -> str | None:
    """Why ``schema`` is too deep or too large to compile, or None (within
    :data:`MAX_SCHEMA_DEPTH` and :data:`MAX_SCHEMA_NODES`)."""
    nodes = 0
    pending: list[tuple[Any, int]] = [(schema, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Sequence[Any] = list(value.values())
        elif isinstance(value, (list, tuple)):
            children = value
        else:
            continue
        nodes += 1
        if nodes > MAX_SCHEMA_NODES:
            return f"it has more than {MAX_SCHEMA_NODES} objects and arrays"
        if depth > MAX_SCHEMA_DEPTH:
            return f"it nests deeper than {MAX_SCHEMA_DEPTH} levels"
        pending.extend((child, depth + 1) for child in children)
    return None


def json_path(path: Sequence[str | int]) -> str:
    """The JSONPath of a place in ``structuredContent``: ``$``, ``$.items[2].price``, and
    ``$['two words']`` for a member name that is not an identifier (RFC 9535's quoting)."""
    parts = ["$"]
    for step in path:
        if isinstance(step, int):
            parts.append(f"[{step}]")
            continue
        name = str(step)
        if _IDENTIFIER.match(name):
            parts.append(f".{name}")
        else:
            escaped = name.replace("\\", "\\\\").replace("'", "\\'")
            parts.append(f"['{escaped}']")
    return "".join(parts)


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value (``integer`` for a whole number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _quote(value: Any) -> str:
    """``value`` as JSON text, cut at :data:`_QUOTE_MAX` characters."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= _QUOTE_MAX else text[: _QUOTE_MAX - 3] + "..."


def _names(values: Any) -> str:
    """A list of member names (or values) as ``'a', 'b'``."""
    items = list(values) if isinstance(values, (list, tuple)) else [values]
    shown = ", ".join(f"'{v}'" if isinstance(v, str) else _quote(v) for v in items[:10])
    return shown + (f" and {len(items) - 10} more" if len(items) > 10 else "")


def _first(detail: Mapping[str, Any], *keys: str) -> Any:
    """The first of ``keys`` that ``detail`` has (libraries name a limit differently)."""
    for key in keys:
        if key in detail:
            return detail[key]
    return next(iter(detail.values()), None)


_BOUNDS: Final = {
    "minimum": ">=",
    "maximum": "<=",
    "exclusiveMinimum": ">",
    "exclusiveMaximum": "<",
}
_COUNTS: Final = {
    "minLength": ("at least", "characters"),
    "maxLength": ("at most", "characters"),
    "minItems": ("at least", "items"),
    "maxItems": ("at most", "items"),
    "minProperties": ("at least", "properties"),
    "maxProperties": ("at most", "properties"),
    "minContains": ("at least", "matching items"),
    "maxContains": ("at most", "matching items"),
}


def rule(violation: Violation) -> str:
    """The rule a violation broke, in a few words: ``type: expected number, got string``,
    ``required: 'id'``, ``maximum: expected <= 100``; a keyword snodo has no words for is said
    with the library's message."""
    keyword, detail = violation.keyword, violation.detail
    if keyword == "type":
        types = _first(detail, "types", "type")
        expected = " or ".join(types) if isinstance(types, (list, tuple)) else str(types)
        return f"type: expected {expected}, got {json_type(violation.instance)}"
    if keyword == "required":
        return f"required: {_names(_first(detail, 'property', 'missing'))}"
    if keyword in ("additionalProperties", "unevaluatedProperties"):
        return f"{keyword}: unexpected {_names(_first(detail, 'unexpected'))}"
    if keyword == "enum":
        options = _first(detail, "options")
        listed = options if isinstance(options, (list, tuple)) else [options]
        return "enum: expected one of " + ", ".join(_quote(o) for o in listed[:10])
    if keyword == "const":
        return f"const: expected {_quote(_first(detail, 'expected_value', 'const'))}"
    if keyword in _BOUNDS:
        return f"{keyword}: expected {_BOUNDS[keyword]} {_quote(_first(detail, 'limit'))}"
    if keyword in _COUNTS:
        words, unit = _COUNTS[keyword]
        return f"{keyword}: expected {words} {_quote(_first(detail, 'limit'))} {unit}"
    if keyword == "multipleOf":
        return f"multipleOf: expected a multiple of {_quote(_first(detail, 'multiple_of'))}"
    if keyword == "pattern":
        return f"pattern: expected to match {_quote(_first(detail, 'pattern'))}"
    if keyword == "format":
        return f"format: expected a valid {_first(detail, 'format')}"
    if keyword == "uniqueItems":
        return "uniqueItems: expected no two items alike"
    if keyword == "anyOf":
        return "anyOf: matches none of its schemas"
    if keyword == "oneOf":
        if detail.get("matched") == "several":
            return "oneOf: matches more than one of its schemas"
        return "oneOf: matches none of its schemas"
    if keyword == "not":
        return "not: matches the schema it must not"
    if keyword == "false":
        return "false: the schema allows no value here"
    message = violation.message.splitlines()[0] if violation.message else "failed"
    return f"{keyword}: {message[:200]}"


def mismatch_error(tool: str, violations: Sequence[Violation], result: Any) -> McpError:
    """-32602 for a ``structuredContent`` that breaks its ``outputSchema`` (the code the
    official TypeScript SDK raises): the message names the first path and rule, ``cause`` has
    up to :data:`MAX_VIOLATIONS` of them as ``(path, rule)``, ``data`` is the result."""
    shown = list(violations[:MAX_VIOLATIONS])
    said = [(json_path(v.path), rule(v)) for v in shown]
    first = f"{said[0][0]}: {said[0][1]}" if said else "it does not match"
    more = len(violations) - 1
    extra = f" (and {more} more)" if more > 0 else ""
    return errors.invalid_params(
        f"Tool {tool!r} returned structuredContent that does not match its outputSchema: "
        f"{first}{extra}",
        result,
        cause=("output_schema", "mismatch", tuple(said)),
    )


def missing_error(tool: str, result: Any) -> McpError:
    """-32600 for a result without ``structuredContent`` from a tool that declares an
    ``outputSchema`` (servers MUST provide it; the TypeScript SDK's code); ``data`` is the result."""
    return McpError(
        errors.INVALID_REQUEST,
        f"Tool {tool!r} has an outputSchema but its result has no structuredContent",
        result,
        cause=("output_schema", "missing"),
    )


def schema_error(tool: str, reason: str, result: Any) -> McpError:
    """-32602 for an ``outputSchema`` that cannot be used (invalid for its dialect, a dialect
    not supported, a ``$ref`` that is not resolved, too large): the result is not said to be
    valid; ``data`` is the result, so nothing is lost."""
    return errors.invalid_params(
        f"Tool {tool!r} has an outputSchema snodo cannot check against: {reason}",
        result,
        cause=("output_schema", "schema", reason),
    )
