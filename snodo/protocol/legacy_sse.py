"""The HTTP+SSE transport of 2024-11-05 as pure rules (docs/decisions/0040).

That transport (spec 2024-11-05 ``basic/transports``) opens one event stream with a GET; its
first event, ``endpoint``, names the URL where the client POSTs every message, and the server's
messages arrive as ``message`` events on the stream. ``snodo.Sse`` speaks it, and
``snodo.Http`` falls back to it when 2024-11-05 is allowed (spec 2025-03-26 ``basic/transports``,
"Backwards Compatibility"). The transports move the bytes; this module decides:

- which versions an ``Sse`` connection allows (:func:`sse_versions`: 2024-11-05 only);
- the endpoint an ``endpoint`` event names (:func:`endpoint_url`: resolved against the stream
  URL, on the stream's own origin) and what each event of the stream is (:func:`event_role`);
- whether a refused POST of ``initialize`` falls back to the legacy stream
  (:func:`falls_back`), and the error when that stream is not there either
  (:func:`fallback_error`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal
from urllib.parse import parse_qsl, urljoin, urlsplit, urlunsplit

from snodo.protocol import errors
from snodo.protocol.errors import INVALID_PARAMS, McpError

__all__ = [
    "ENDPOINT_EVENT",
    "FALLBACK_STATUSES",
    "LEGACY_VERSION",
    "MESSAGE_EVENT",
    "MIN_SECRET_CHARS",
    "EventRole",
    "endpoint_secrets",
    "endpoint_url",
    "event_role",
    "fallback_error",
    "falls_back",
    "refused_status",
    "sse_versions",
]

#: The one version the HTTP+SSE transport carries.
LEGACY_VERSION: Final = "2024-11-05"
#: The event that names the POST endpoint, and the event that carries a JSON-RPC message.
ENDPOINT_EVENT: Final = "endpoint"
MESSAGE_EVENT: Final = "message"
#: The statuses of a refused POST of ``initialize`` that send ``snodo.Http`` to the legacy
#: stream: 404 (no such route: an express app with ``GET /sse`` only), 405 (the route takes GET
#: only: Starlette, node's http) and 400 (a legacy server that reads a POST there as a message
#: without its session id). Others (401/403 are the token provider's, 5xx a failing server)
#: stay the error they are.
FALLBACK_STATUSES: Final = frozenset({400, 404, 405})
#: A query value of the endpoint at least this long is taken as the session's secret (the
#: TypeScript SDK's ``sessionId`` UUID, the Python SDK's ``session_id`` hex): kept out of errors.
MIN_SECRET_CHARS: Final = 16

#: What an event of the legacy stream is to the client: the endpoint, a message, or nothing.
EventRole = Literal["endpoint", "message", "skip"]


def sse_versions(allowed: Sequence[str] | None) -> tuple[str, ...]:
    """The versions an ``snodo.Sse`` connection allows: 2024-11-05, the only one that transport
    carries. ``allowed`` is what ``protocol=`` allows (None: not given, and the target implies
    the version). Allowed versions without it are -32602 before anything connects, with
    ``requested``/``supported`` data as for a version snodo does not speak."""
    if allowed is None or LEGACY_VERSION in allowed:
        return (LEGACY_VERSION,)
    raise McpError(
        INVALID_PARAMS,
        f"snodo.Sse speaks protocol {LEGACY_VERSION} only (the HTTP+SSE transport of that "
        f"version), and protocol= allows {', '.join(allowed)}: allow {LEGACY_VERSION} "
        "(or leave protocol= out), or use snodo.Http for a Streamable HTTP server",
        {"requested": list(allowed), "supported": [LEGACY_VERSION]},
    )


def _origin(scheme: str, host: str | None, port: int | None) -> str:
    default = 443 if scheme == "https" else 80
    shown = host if host is None or ":" not in host else f"[{host}]"
    return f"{scheme}://{shown}" + ("" if port in (None, default) else f":{port}")


def _endpoint_error(reason: str, detail: str) -> McpError:
    return errors.connection_error(
        f"The HTTP+SSE endpoint event is unusable: {reason}", cause=("sse_endpoint", detail)
    )


def endpoint_url(stream_url: str, data: str) -> str:
    """The URL an ``endpoint`` event's data names, where every message is POSTed.

    A relative URL is resolved against the stream's URL (the TypeScript SDK sends a path with
    the session in its query). The endpoint must stay on the stream's origin (scheme, host,
    port): the client's headers and tokens were meant for that server, so another origin is
    -32000 naming both origins (never the paths, which carry sessions). The fragment is dropped.
    """
    text = data.strip()
    if not text:
        raise _endpoint_error("it names no URL", "empty")
    if any(ch in text for ch in "\r\n\x00 \t"):
        raise _endpoint_error("its URL holds whitespace or control characters", "malformed")
    base = urlsplit(stream_url)
    try:
        parts = urlsplit(urljoin(stream_url, text))
        port = parts.port
        base_port = base.port
    except ValueError:
        raise _endpoint_error("its URL cannot be read", "malformed") from None
    if parts.username is not None or parts.password is not None:
        raise _endpoint_error("its URL carries user information", "userinfo")
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    base_scheme, base_host = base.scheme.lower(), (base.hostname or "")
    default = {"http": 80, "https": 443}
    if (
        scheme != base_scheme
        or host != base_host
        or (port or default.get(scheme)) != (base_port or default.get(base_scheme))
    ):
        there = _origin(scheme, host or None, port)
        here = _origin(base_scheme, base_host or None, base_port)
        raise errors.connection_error(
            f"The HTTP+SSE server named an endpoint on another origin ({there}); snodo posts "
            f"only to the stream's own origin ({here})",
            cause=("sse_endpoint", "cross_origin", there),
        )
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", parts.query, ""))


def endpoint_secrets(url: str) -> tuple[str, ...]:
    """The query values of an endpoint URL long enough to be a session's secret
    (:data:`MIN_SECRET_CHARS`): whoever holds one can post into the session, so errors
    redact them, as they redact ``Mcp-Session-Id``."""
    query = urlsplit(url).query
    return tuple(value for _, value in parse_qsl(query) if len(value) >= MIN_SECRET_CHARS)


def event_role(event_type: str, endpoint_known: bool) -> EventRole:
    """What one event of the legacy stream is: the ``endpoint`` (the first one only: the POST
    target never moves within a session), a ``message`` (once the endpoint is known), or
    something to skip (other event types, later endpoint events). A ``message`` before the
    endpoint is -32000: the server is not speaking the HTTP+SSE transport."""
    if event_type == ENDPOINT_EVENT:
        return "skip" if endpoint_known else "endpoint"
    if event_type == MESSAGE_EVENT:
        if not endpoint_known:
            raise _endpoint_error("a message event came before it", "message_first")
        return "message"
    return "skip"


def refused_status(error: McpError) -> int | None:
    """The HTTP status of an error that is a refused answer (``streamable.status_error``:
    ``cause`` ``("http_status", status, ...)``); None for any other error."""
    cause = error.cause
    if isinstance(cause, tuple) and len(cause) >= 2 and cause[0] == "http_status":
        status = cause[1]
        if isinstance(status, int) and not isinstance(status, bool):
            return status
    return None


def falls_back(error: McpError, allowed: Sequence[str]) -> bool:
    """True when ``snodo.Http`` goes to the legacy HTTP+SSE stream after its POST of
    ``initialize`` failed with ``error``: 2024-11-05 is allowed and the POST was refused with
    one of :data:`FALLBACK_STATUSES`. Without 2024-11-05 allowed nothing changes."""
    return LEGACY_VERSION in allowed and refused_status(error) in FALLBACK_STATUSES


def fallback_error(post_error: McpError, get_error: McpError) -> McpError:
    """The error when the fallback found no legacy stream either: both answers in one -32000,
    the POST's refusal first (the server may be a Streamable HTTP one refusing initialize)."""
    status = refused_status(post_error)
    return errors.connection_error(
        f"The server refused the POST of initialize (HTTP {status}: {post_error.message}), and "
        f"the GET for an HTTP+SSE ({LEGACY_VERSION}) stream failed too: {get_error.message}",
        cause=("sse_fallback", post_error.cause, get_error.cause),
    )
