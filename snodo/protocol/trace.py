"""W3C Trace Context (level 1) checks for the ``traceparent``/``tracestate`` a caller sends in _meta.

The client refuses malformed values up front (ValueError, the reference's ArgumentError) so a
bad trace option never reaches a server. Rules: https://www.w3.org/TR/trace-context-1/.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "MAX_TRACEPARENT_LENGTH",
    "MAX_TRACESTATE_BYTES",
    "MAX_TRACESTATE_MEMBERS",
    "valid_traceparent",
    "valid_tracestate",
    "validate_trace_context",
]

#: A longer traceparent is refused (bounds the free-form tail a future version may carry).
MAX_TRACEPARENT_LENGTH: Final = 512
MAX_TRACESTATE_MEMBERS: Final = 32
MAX_TRACESTATE_BYTES: Final = 512

# version "-" trace-id "-" parent-id "-" trace-flags, then (only for versions above 00) more
# fields after a "-" (the spec's forward-compatibility rule), printable ASCII.
_TRACEPARENT: Final = re.compile(
    r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-[\x20-\x7e]*)?"
)
_ZERO_TRACE_ID: Final = "0" * 32
_ZERO_PARENT_ID: Final = "0" * 16

# simple-key / multi-tenant-key (tenant-id "@" system-id).
_STATE_KEY: Final = re.compile(
    r"[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13}"
)
# 0*255(chr) nblk-chr: printable ASCII except "," and "=", not ending in a space.
_STATE_VALUE: Final = re.compile(
    r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
_OWS: Final = " \t"
_KEYS: Final = ("traceparent", "tracestate")


def _traceparent_problem(value: str) -> str | None:
    """What is wrong with ``value`` as a traceparent, or None when it is valid."""
    if len(value) > MAX_TRACEPARENT_LENGTH:
        return f"traceparent is longer than {MAX_TRACEPARENT_LENGTH} characters"
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return (
            "traceparent must be version-traceid-parentid-flags in lowercase hex (2-32-16-2 digits)"
        )
    version, trace_id, parent_id, tail = match.groups()
    if version == "ff":
        return "traceparent version ff is invalid"
    if version == "00" and tail is not None:
        return "traceparent version 00 must be exactly 55 characters"
    if trace_id == _ZERO_TRACE_ID:
        return "traceparent trace-id must not be all zeros"
    if parent_id == _ZERO_PARENT_ID:
        return "traceparent parent-id must not be all zeros"
    return None


def _tracestate_problem(value: str) -> str | None:
    """What is wrong with ``value`` as a tracestate, or None when it is valid."""
    if not value.isascii():
        return "tracestate must be ASCII"
    if len(value) > MAX_TRACESTATE_BYTES:
        return f"tracestate is longer than {MAX_TRACESTATE_BYTES} bytes"
    seen: set[str] = set()
    for raw_member in value.split(","):
        member = raw_member.strip(_OWS)
        if not member:
            continue  # empty and whitespace-only list members are allowed
        key, equals, state = member.partition("=")
        if not equals:
            return f"tracestate member {reprlib.repr(member)} has no '='"
        if _STATE_KEY.fullmatch(key) is None:
            return f"tracestate key {reprlib.repr(key)} is invalid"
        if _STATE_VALUE.fullmatch(state) is None:
            return f"tracestate value for key {reprlib.repr(key)} is invalid"
        if key in seen:
            return f"tracestate key {reprlib.repr(key)} appears more than once"
        seen.add(key)
        if len(seen) > MAX_TRACESTATE_MEMBERS:
            return f"tracestate has more than {MAX_TRACESTATE_MEMBERS} list-members"
    return None


def valid_traceparent(s: str) -> bool:
    """Whether ``s`` is a W3C level 1 traceparent (any non-str is not)."""
    return isinstance(s, str) and _traceparent_problem(s) is None


def valid_tracestate(s: str) -> bool:
    """Whether ``s`` is a W3C level 1 tracestate (the empty string is valid; any non-str is not)."""
    return isinstance(s, str) and _tracestate_problem(s) is None


def validate_trace_context(trace_context: Mapping[str, Any]) -> dict[str, str]:
    """The checked ``{"traceparent": ..., "tracestate": ...}`` (tracestate only if given).

    Raises ValueError naming the problem: not a mapping, unknown keys, missing traceparent,
    non-str values, or a value that breaks W3C Trace Context level 1.
    """
    if not isinstance(trace_context, Mapping):
        raise ValueError(
            "trace_context must be a mapping with 'traceparent' and optional 'tracestate', "
            f"not {type(trace_context).__name__}"
        )
    unknown = [key for key in trace_context if key not in _KEYS]
    if unknown:
        shown = ", ".join(reprlib.repr(key) for key in unknown[:5])
        raise ValueError(
            f"trace_context has unknown keys: {shown} (only 'traceparent' and 'tracestate')"
        )
    if "traceparent" not in trace_context:
        raise ValueError("trace_context needs a 'traceparent'")
    checked: dict[str, str] = {}
    for key, problem_of in (
        ("traceparent", _traceparent_problem),
        ("tracestate", _tracestate_problem),
    ):
        if key not in trace_context:
            continue
        value = trace_context[key]
        if not isinstance(value, str):
            raise ValueError(f"trace_context {key} must be a str, not {type(value).__name__}")
        problem = problem_of(value)
        if problem is not None:
            raise ValueError(f"invalid trace_context: {problem}")
        checked[key] = value
    return checked
