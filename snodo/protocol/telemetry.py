"""The OpenTelemetry semantic conventions for MCP, as pure functions: span names and attributes.

``snodo.telemetry`` starts the spans and records the metrics; this module only says what they
are called and carry, from a request message, the protocol version, the session id and the
transport's facts. Conventions: https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Final
from urllib.parse import urlsplit

__all__ = [
    "CLIENT_OPERATION_DURATION",
    "CLIENT_SESSION_DURATION",
    "DURATION_BUCKETS",
    "ERROR_TYPE",
    "INPUT_ROUND_EVENT",
    "METHOD_NAME",
    "NETWORK_TRANSPORT",
    "PROGRESS_EVENT",
    "PROTOCOL_VERSION",
    "SERVER_OPERATION_DURATION",
    "TRACE_KEYS",
    "Attributes",
    "error_type_of",
    "http_peer",
    "input_round_attributes",
    "metric_attributes",
    "progress_attributes",
    "request_attributes",
    "span_name",
    "target_of",
    "trace_carrier",
    "with_trace",
]

#: An attribute dict as OpenTelemetry takes it.
Attributes = dict[str, str | int | float | bool]

METHOD_NAME: Final = "mcp.method.name"
PROTOCOL_VERSION: Final = "mcp.protocol.version"
SESSION_ID: Final = "mcp.session.id"
REQUEST_ID: Final = "jsonrpc.request.id"
TOOL_NAME: Final = "gen_ai.tool.name"
PROMPT_NAME: Final = "gen_ai.prompt.name"
OPERATION_NAME: Final = "gen_ai.operation.name"
RESOURCE_URI: Final = "mcp.resource.uri"
ERROR_TYPE: Final = "error.type"
NETWORK_TRANSPORT: Final = "network.transport"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"

CLIENT_OPERATION_DURATION: Final = "mcp.client.operation.duration"
CLIENT_SESSION_DURATION: Final = "mcp.client.session.duration"
SERVER_OPERATION_DURATION: Final = "mcp.server.operation.duration"
#: The conventions' advice for the MCP duration histograms (seconds).
DURATION_BUCKETS: Final = (
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)

PROGRESS_EVENT: Final = "mcp.progress"
INPUT_ROUND_EVENT: Final = "mcp.input_required"

#: The ``_meta`` keys that carry W3C trace context.
TRACE_KEYS: Final = ("traceparent", "tracestate")

#: Attributes that name one request or session: on spans, never on metrics (cardinality).
_PER_REQUEST: Final = frozenset((REQUEST_ID, SESSION_ID, RESOURCE_URI))

_NAMED: Final = {"tools/call": TOOL_NAME, "prompts/get": PROMPT_NAME}
_URI_METHODS: Final = frozenset(("resources/read", "resources/subscribe", "resources/unsubscribe"))


def target_of(method: str, params: Mapping[str, Any] | None) -> str | None:
    """The tool name, prompt name or resource URI a request is about, when it has one."""
    if params is None:
        return None
    if method in _NAMED:
        name = params.get("name")
        return name if type(name) is str else None
    if method in _URI_METHODS:
        uri = params.get("uri")
        return uri if type(uri) is str else None
    return None


def span_name(method: str, target: str | None) -> str:
    """``{mcp.method.name} {target}``, or the method alone when there is no target."""
    return method if target is None else f"{method} {target}"


@lru_cache(maxsize=64)
def http_peer(url: str) -> tuple[tuple[str, str | int], ...]:
    """``network.transport``, ``server.address`` and ``server.port`` of an HTTP(S) URL."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return ((NETWORK_TRANSPORT, "tcp"), (SERVER_ADDRESS, parts.hostname or ""), (SERVER_PORT, port))


def request_attributes(
    method: str,
    params: Mapping[str, Any] | None,
    request_id: str | int | None,
    version: str | None,
    session_id: str | None,
    network: tuple[tuple[str, str | int], ...] = (),
) -> Attributes:
    """The span attributes of one request (``network``: the transport's facts, see
    :func:`http_peer`; ``("network.transport", "pipe")`` for stdio)."""
    attrs: Attributes = {METHOD_NAME: method}
    if request_id is not None:
        attrs[REQUEST_ID] = str(request_id)
    if version is not None:
        attrs[PROTOCOL_VERSION] = version
    if session_id is not None:
        attrs[SESSION_ID] = session_id
    target = target_of(method, params)
    if target is not None:
        if method == "tools/call":
            attrs[TOOL_NAME] = target
            attrs[OPERATION_NAME] = "execute_tool"
        elif method == "prompts/get":
            attrs[PROMPT_NAME] = target
        else:
            attrs[RESOURCE_URI] = target
    for key, value in network:
        attrs[key] = value
    return attrs


def metric_attributes(attrs: Mapping[str, Any], error_type: str | None) -> Attributes:
    """The duration histogram's attributes: a span's, without the per-request ones."""
    out: Attributes = {key: value for key, value in attrs.items() if key not in _PER_REQUEST}
    if error_type is not None:
        out[ERROR_TYPE] = error_type
    return out


def error_type_of(response: Mapping[str, Any]) -> str | None:
    """``error.type`` for a JSON-RPC response: its error code as a string, ``"tool_error"`` for
    a ``tools/call`` result with ``isError``, else None."""
    error = response.get("error")
    if isinstance(error, Mapping):
        return str(error.get("code", "_OTHER"))
    result = response.get("result")
    if isinstance(result, Mapping) and result.get("isError") is True:
        return "tool_error"
    return None


def input_round_attributes(response: Mapping[str, Any]) -> Attributes | None:
    """The input round event's attributes when the response asks for input, else None."""
    result = response.get("result")
    if not isinstance(result, Mapping) or result.get("resultType") != "input_required":
        return None
    requests = result.get("inputRequests")
    keys = sorted(requests) if isinstance(requests, Mapping) else []
    return {"mcp.input_requests": ",".join(str(key) for key in keys)}


def progress_attributes(params: Mapping[str, Any]) -> Attributes:
    """A progress event's attributes from ``notifications/progress`` params."""
    attrs: Attributes = {}
    for key in ("progress", "total"):
        value = params.get(key)
        if type(value) is int or type(value) is float:
            attrs[f"mcp.progress.{key}"] = value
    message = params.get("message")
    if type(message) is str:
        attrs["mcp.progress.message"] = message
    return attrs


def trace_carrier(meta: Any) -> dict[str, str]:
    """The ``traceparent``/``tracestate`` strings of a request's ``_meta`` (to extract from)."""
    if not isinstance(meta, Mapping):
        return {}
    return {key: meta[key] for key in TRACE_KEYS if type(meta.get(key)) is str}


def with_trace(message: dict[str, Any], carrier: Mapping[str, str]) -> dict[str, Any]:
    """``message`` with ``carrier`` in ``params._meta``: a new message (the params and
    ``_meta`` copied), or ``message`` itself when the carrier is empty or ``_meta`` already
    has a ``traceparent`` (the caller's ``trace_context=`` wins)."""
    if not carrier:
        return message
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    if isinstance(meta, Mapping) and "traceparent" in meta:
        return message
    new_params = dict(params) if isinstance(params, Mapping) else {}
    new_params["_meta"] = {**(meta if isinstance(meta, Mapping) else {}), **carrier}
    return {**message, "params": new_params}
