"""The arguments of ``snodo call`` and ``snodo prompt``: ``key=value`` words read against a
tool's input schema (or a prompt's argument list), and ``--args JSON``. Pure functions; a bad
word is a :class:`UsageError` that names the key.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "UsageError",
    "convert",
    "json_object",
    "prompt_arguments",
    "split_pair",
    "tool_arguments",
]

#: The order in which a value is tried against a union of types ("string" always last).
_ORDER = ("null", "boolean", "integer", "number", "object", "array")
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


class UsageError(ValueError):
    """A command line that cannot be run as given (exit status 2)."""


def split_pair(word: str) -> tuple[str, str]:
    """``"key=value"`` as ``("key", "value")`` (the first ``=`` splits; the value may be empty)."""
    key, sep, value = word.partition("=")
    if not sep or not key:
        raise UsageError(f"expected KEY=VALUE, got {word!r}")
    return key, value


def json_object(text: str, what: str = "--args") -> dict[str, Any]:
    """``text`` parsed as a JSON object (``--args``'s value, or what stdin held)."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise UsageError(f"{what}: not JSON: {error}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


def _types(schema: Any) -> list[str]:
    """The JSON types a property schema allows (from ``type``, ``anyOf``/``oneOf`` entries,
    ``enum``/``const`` values); empty when it does not say."""
    if not isinstance(schema, Mapping):
        return []
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str)]
    found: list[str] = []
    for key in ("anyOf", "oneOf"):
        for entry in schema.get(key) or ():
            found.extend(t for t in _types(entry) if t not in found)
    return found


def _one(value: str, kind: str) -> Any:
    """``value`` as one JSON type; ``ValueError`` when it is not one."""
    if kind == "string":
        return value
    if kind == "null":
        if value == "null":
            return None
    elif kind == "boolean":
        lowered = value.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    elif kind == "integer":
        try:
            return int(value)
        except ValueError:
            number = float(value)  # "1e3", "2.0": whole numbers only
            if math.isfinite(number) and number.is_integer():
                return int(number)
    elif kind == "number":
        try:
            return int(value)
        except ValueError:
            number = float(value)
            if math.isfinite(number):
                return number
    elif kind in ("object", "array"):
        parsed = json.loads(value)
        if isinstance(parsed, dict if kind == "object" else list):
            return parsed
    raise ValueError(kind)


def convert(key: str, value: str, schema: Any) -> Any:
    """``value`` converted as the property's schema says: integer, number, boolean, null, JSON
    for objects and arrays, strings as they are; a union tries each type, string last. A
    property that names no type takes JSON when the value parses as JSON, else the string."""
    kinds = _types(schema)
    if not kinds:
        enum = schema.get("enum") if isinstance(schema, Mapping) else None
        if isinstance(enum, list) and value in enum:
            return value
        try:
            return json.loads(value)
        except ValueError:
            return value
    ordered = [k for k in _ORDER if k in kinds] + (["string"] if "string" in kinds else [])
    for kind in ordered:
        try:
            return _one(value, kind)
        except ValueError:
            continue
    wanted = " or ".join(ordered) or "/".join(kinds)
    raise UsageError(f"argument {key!r}: expected {wanted}, got {value!r}")


def tool_arguments(
    words: Sequence[str], schema: Mapping[str, Any] | None, base: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ``arguments`` of a ``tools/call``: ``base`` (from ``--args``), then each
    ``key=value`` word converted against ``schema`` (the tool's ``inputSchema``). A key the
    schema's ``properties`` do not name (unless ``additionalProperties`` allows more; a schema
    without ``properties`` takes any key) and a required property left out are usage errors."""
    schema = schema if isinstance(schema, Mapping) else {}
    properties = schema.get("properties")
    # A schema that declares no properties says nothing of the arguments: any key goes.
    extra = schema.get("additionalProperties", False) if "properties" in schema else True
    properties = properties if isinstance(properties, Mapping) else {}
    arguments = dict(base or {})
    for word in words:
        key, value = split_pair(word)
        if key in properties:
            arguments[key] = convert(key, value, properties[key])
        elif extra is True or isinstance(extra, Mapping):
            arguments[key] = convert(key, value, extra if isinstance(extra, Mapping) else {})
        else:
            raise UsageError(f"unknown argument {key!r} ({_known(properties)})")
    required = schema.get("required")
    _require(arguments, required if isinstance(required, list) else [])
    return arguments


def prompt_arguments(
    words: Sequence[str],
    declared: Iterable[Mapping[str, Any]] | None,
    base: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The string ``arguments`` of a ``prompts/get``: ``base`` (from ``--args``; every value
    must be a string) then each ``key=value`` word, checked against the prompt's ``arguments``
    list (names, required ones)."""
    items = [item for item in declared or () if isinstance(item, Mapping)]
    names = {str(item.get("name")): item for item in items}
    arguments: dict[str, str] = {}
    for key, value in (base or {}).items():
        if not isinstance(value, str):
            raise UsageError(f"argument {key!r}: prompt arguments are strings, got {value!r}")
        arguments[key] = value
    for word in words:
        key, value = split_pair(word)
        if key not in names:
            raise UsageError(f"unknown argument {key!r} ({_known(names)})")
        arguments[key] = value
    _require(arguments, [name for name, item in names.items() if item.get("required")])
    return arguments


def _known(names: Iterable[Any]) -> str:
    listed = sorted(str(name) for name in names)
    return "known: " + ", ".join(listed) if listed else "it takes no arguments"


def _require(arguments: Mapping[str, Any], required: Iterable[Any]) -> None:
    missing = [str(name) for name in required if name not in arguments]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        raise UsageError(f"missing required argument{plural}: {', '.join(missing)}")
