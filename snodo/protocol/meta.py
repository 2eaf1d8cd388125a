"""Request params and their ``_meta``: what each request carries besides the caller's params.

On 2026-07-28 every request carries the protocol version and the client capabilities (and,
unless configured not to, the client info) in ``params._meta``. Session-era requests carry
none of that. :func:`build_params` merges, in this order, later entries winning: the dialect's
metadata, the client info, ``params["_meta"]``, the ``meta=`` option, the ``trace_context=``
option, and the progress token.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from snodo.protocol.dialects import Dialect

PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY: Final = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_KEY: Final = "io.modelcontextprotocol/subscriptionId"
LOG_LEVEL_KEY: Final = "io.modelcontextprotocol/logLevel"
PROGRESS_TOKEN_KEY: Final = "progressToken"

#: ``LoggingLevel`` (RFC 5424 names), from least to most severe: the values the logLevel key
#: and ``logging/setLevel`` may carry.
LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

#: The standard library's level for each RFC 5424 level of a ``notifications/message``.
STDLIB_LEVELS: Final[Mapping[str, int]] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def stdlib_level(level: object) -> int:
    """The ``logging`` level of a server's log message; an unknown level logs at WARNING
    (a server that sends one still gets heard)."""
    found = STDLIB_LEVELS.get(level) if isinstance(level, str) else None
    return logging.WARNING if found is None else found


def check_log_level(name: str, value: object) -> None:
    """Refuse anything but ``None`` or one of :data:`LOG_LEVELS`."""
    if value is not None and (not isinstance(value, str) or value not in LOG_LEVELS):
        raise ValueError(f"{name} must be one of {', '.join(LOG_LEVELS)} or None, got: {value!r}")


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the ABC check
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a mapping, got: {value!r}")
    return value


def build_params(
    dialect: Dialect,
    params: Mapping[str, Any] | None,
    *,
    client_info: Mapping[str, Any] | None,
    client_capabilities: Mapping[str, Any],
    meta: Mapping[str, Any] | None = None,
    trace: Mapping[str, str] | None = None,
    progress_token: str | int | None = None,
    input_responses: Mapping[str, Any] | None = None,
    request_state: str | None = None,
    log_level: str | None = None,
) -> dict[str, Any] | None:
    """The params to send for one request: a new dict (inputs are never mutated; nested
    values below the top level of each mapping are shared, not copied).

    ``trace`` is already validated (``snodo.protocol.trace``) and wins over duplicate keys in
    ``meta``. A ``progress_token`` next to a ``progressToken`` in ``meta`` or
    ``params["_meta"]`` is a ``ValueError``. An empty ``_meta`` is left out. On 2026-07-28 the
    result is always a dict; on session-era dialects it is ``None`` when nothing is left.
    ``log_level`` (checked already) is the logLevel key, sent on 2026-07-28 only (the session
    era sets the level once, with ``logging/setLevel``); it wins over one in ``meta``.
    """
    given = {} if params is None else _mapping(params, "params")
    params_meta = _mapping(given.get("_meta", {}), 'params["_meta"]')
    extra_meta = {} if meta is None else _mapping(meta, "meta")
    if progress_token is not None:
        if isinstance(progress_token, bool) or not isinstance(progress_token, (str, int)):
            raise TypeError(f"a progress token is a string or an integer, got: {progress_token!r}")
        if PROGRESS_TOKEN_KEY in params_meta or PROGRESS_TOKEN_KEY in extra_meta:
            raise ValueError(
                "progress= sets the progressToken; do not also pass one in meta or params"
            )
    if request_state is not None and not isinstance(request_state, str):
        raise TypeError(f"request_state must be a string, got: {request_state!r}")

    merged: dict[str, Any] = {}
    if dialect.stateless:
        merged[PROTOCOL_VERSION_KEY] = dialect.version
        merged[CLIENT_CAPABILITIES_KEY] = dict(_mapping(client_capabilities, "client_capabilities"))
        if client_info is not None:
            merged[CLIENT_INFO_KEY] = dict(_mapping(client_info, "client_info"))
    merged.update(params_meta)
    merged.update(extra_meta)
    if trace is not None:
        merged.update(_mapping(trace, "trace"))
    if log_level is not None and dialect.stateless:
        merged[LOG_LEVEL_KEY] = log_level
    if progress_token is not None:
        merged[PROGRESS_TOKEN_KEY] = progress_token

    out = {key: value for key, value in given.items() if key != "_meta"}
    if input_responses is not None:
        out["inputResponses"] = dict(_mapping(input_responses, "input_responses"))
    if request_state is not None:
        out["requestState"] = request_state
    if merged:
        out["_meta"] = merged
    if not out and not dialect.stateless:
        return None
    return out


def notification_params(
    params: Mapping[str, Any] | None,
    *,
    meta: Mapping[str, Any] | None = None,
    trace: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """The params of a notification the caller sends (``Client.notify``): a new dict with
    ``params["_meta"]``, then ``meta``, then ``trace`` (validated already) merged into its
    ``_meta``; ``None`` when nothing is left. No version metadata: a notification's
    ``NotificationMetaObject`` carries none, on any version."""
    given = {} if params is None else _mapping(params, "params")
    merged = dict(_mapping(given.get("_meta", {}), 'params["_meta"]'))
    if meta is not None:
        merged.update(_mapping(meta, "meta"))
    if trace is not None:
        merged.update(_mapping(trace, "trace"))
    out = {key: value for key, value in given.items() if key != "_meta"}
    if merged:
        out["_meta"] = merged
    return out or None


__all__ = [
    "CLIENT_CAPABILITIES_KEY",
    "CLIENT_INFO_KEY",
    "LOG_LEVELS",
    "LOG_LEVEL_KEY",
    "PROGRESS_TOKEN_KEY",
    "PROTOCOL_VERSION_KEY",
    "SERVER_INFO_KEY",
    "STDLIB_LEVELS",
    "SUBSCRIPTION_ID_KEY",
    "build_params",
    "check_log_level",
    "notification_params",
    "stdlib_level",
]
