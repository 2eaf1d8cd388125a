"""The JSON Schema library behind ``validate_output=True`` (docs/decisions/0041).

The library is ``jsonschema-rs`` (the extra ``snodo[schema]``), imported on the first check and
never by ``import snodo``. It is reached through one declared seam, :class:`CompiledSchema`
(``violations(instance)``), built by :func:`compile_schema`; everything that decides without the
library is in ``snodo.protocol.output_schema``. Compiled schemas are kept per schema text in a
bounded cache shared by every client (:data:`CACHE_MAX`), failures to compile too.

:func:`check` is the whole check of one result; :class:`KnownSchemas` is what a client
remembers of a server's ``outputSchema``\\ s between calls (per connection era).
"""

from __future__ import annotations

import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol, TypeVar, runtime_checkable

import orjson

from snodo.protocol import output_schema
from snodo.protocol.errors import McpError
from snodo.protocol.output_schema import Violation

__all__ = [
    "CACHE_MAX",
    "KNOWN_MAX",
    "LIBRARY",
    "MISSING_LIBRARY",
    "CompiledSchema",
    "KnownSchemas",
    "RedactingTransport",
    "check",
    "compile_schema",
    "require_library",
]

#: The distribution and module snodo validates with.
LIBRARY: Final = "jsonschema-rs"
_MODULE: Final = "jsonschema_rs"
#: What a client with ``validate_output=True`` says when the library is not installed.
MISSING_LIBRARY: Final = (
    "validate_output=True needs the JSON Schema library jsonschema-rs: pip install 'snodo[schema]'"
)
#: Compiled schemas (and refusals) kept, least recently used dropped first.
CACHE_MAX: Final = 256
#: Tools whose ``outputSchema`` one client remembers.
KNOWN_MAX: Final = 10_000
#: The most violations collected from one result (the error counts up to this many).
_COLLECT_MAX: Final = 1000

_T = TypeVar("_T")


class CompiledSchema(Protocol):
    """A schema compiled by the library: the rules a value breaks, in the library's order."""

    def violations(self, instance: Any) -> list[Violation]:
        """Every rule ``instance`` breaks (at most a bounded number), empty when it is valid."""
        ...


@runtime_checkable
class RedactingTransport(Protocol):
    """A transport that can take the credentials it sent out of a value (Streamable HTTP):
    an output error keeps the server's result, so the result is redacted like other answers."""

    def redacted(self, value: _T) -> _T:
        """``value`` with every credential this transport sent replaced (errors in place)."""
        ...


_installed: bool | None = None


def require_library() -> None:
    """ImportError naming the extra when the library is not installed (found without being
    imported: a client checks this at connect time)."""
    global _installed
    if _installed is None:
        _installed = importlib.util.find_spec(_MODULE) is not None
    if not _installed:
        raise ImportError(MISSING_LIBRARY)


class _RsSchema:
    """A ``jsonschema_rs`` validator behind :class:`CompiledSchema`."""

    __slots__ = ("_validator",)

    def __init__(self, validator: Any) -> None:
        self._validator = validator

    def violations(self, instance: Any) -> list[Violation]:
        found: list[Violation] = []
        for error in self._validator.iter_errors(instance):
            found.append(_violation(error))
            if len(found) >= _COLLECT_MAX:
                break
        return found


def _violation(error: Any) -> Violation:
    """A ``jsonschema_rs.ValidationError`` as a :class:`Violation`."""
    kind = error.kind
    keyword = str(kind.name)
    detail = {k: v for k, v in kind.as_dict().items() if k != "context"}
    if keyword == "falseSchema":
        keyword = "false"
    elif keyword == "oneOf":
        detail["matched"] = "several" if type(kind).__name__ == "OneOfMultipleValid" else "none"
    return Violation(
        tuple(error.instance_path), keyword, detail, error.instance, str(error.message)
    )


_cache: OrderedDict[bytes, CompiledSchema | str] = OrderedDict()
_cache_lock = threading.Lock()


def compile_schema(schema: Any) -> CompiledSchema | str:
    """The compiled ``schema``, or why it cannot be used (a reason to quote). Network
    ``$ref``\\ s are never fetched (the specification's MUST NOT): one is a reason too."""
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError as error:
        return f"it is not JSON ({error})"
    with _cache_lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    made = _compile(schema)
    with _cache_lock:
        _cache[key] = made
        while len(_cache) > CACHE_MAX:
            _cache.popitem(last=False)
    return made


def _compile(schema: Any) -> CompiledSchema | str:
    if not isinstance(schema, (dict, bool)):
        return f"it is a JSON {output_schema.json_type(schema)}, not a schema (an object)"
    too_big = output_schema.schema_bounds(schema)
    if too_big is not None:
        return too_big
    require_library()
    import jsonschema_rs  # the extra snodo[schema], loaded on the first check

    try:
        validator = jsonschema_rs.validator_for(schema, offline=True)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as error:
        message = str(getattr(error, "message", None) or error).strip()
        return message.splitlines()[0] if message else type(error).__name__
    return _RsSchema(validator)


def check(tool: str, schema: Any, result: Any) -> McpError | None:
    """The error for a tool result that fails its ``outputSchema`` (``schema``), or None when it
    passes or is not checked (no schema, ``isError``, not a complete result)."""
    plan = output_schema.plan(result, schema)
    if plan == "skip":
        return None
    if plan == "missing":
        return output_schema.missing_error(tool, result)
    compiled = compile_schema(schema)
    if isinstance(compiled, str):
        return output_schema.schema_error(tool, compiled, result)
    try:
        violations = compiled.violations(result["structuredContent"])
    except (ValueError, TypeError) as error:  # a value JSON has no type for (direct)
        return output_schema.schema_error(tool, f"structuredContent is not JSON ({error})", result)
    if not violations:
        return None
    return output_schema.mismatch_error(tool, violations, result)


class KnownSchemas:
    """The ``outputSchema`` of each tool a client has listed on its connection, by name (None:
    listed without one), so that a call by name needs no listing of its own. A new connection
    era (a restart) starts a new one; a ``notifications/tools/list_changed`` empties it."""

    __slots__ = ("_lock", "_schemas")

    def __init__(self) -> None:
        self._schemas: dict[str, Any] = {}
        self._lock = threading.Lock()

    def learn(self, tools: Iterable[Mapping[str, Any]]) -> None:
        """Remember the schemas of listed tools (at most :data:`KNOWN_MAX` tools)."""
        with self._lock:
            schemas = self._schemas
            for tool in tools:
                name = tool.get("name")
                if isinstance(name, str) and (name in schemas or len(schemas) < KNOWN_MAX):
                    schemas[name] = output_schema.schema_of(tool)

    def lookup(self, name: str) -> tuple[bool, Any]:
        """``(listed, schema)``: whether the tool was listed, and its schema."""
        with self._lock:
            if name in self._schemas:
                return True, self._schemas[name]
        return False, None

    def forget(self) -> None:
        """The server's tools changed: forget every schema."""
        with self._lock:
            self._schemas.clear()
