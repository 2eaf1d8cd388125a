"""The decisions of the Streamable HTTP server about a request, as pure functions.

:mod:`snodo.server.http_server` moves bytes; everything it decides about a request's headers
lives here so it can be tested on its own:

- which era serves a POST (:func:`route_post`);
- the stateless era's header rules (:func:`check_stateless_request`): ``MCP-Protocol-Version``
  must equal ``params._meta["io.modelcontextprotocol/protocolVersion"]``, ``Mcp-Method`` the
  method, ``Mcp-Name`` the tool/prompt name or resource URI (after decoding the
  ``=?base64?...?=`` sentinel), and every ``Mcp-Param-<Name>`` the argument its tool's
  ``inputSchema`` annotates with ``"x-mcp-header": "<Name>"``; a failure is -32020
  ``HeaderMismatch``, a malformed ``_meta`` -32602;
- the HTTP status of a stateless-era JSON-RPC error (:func:`stateless_status`);
- the ``Accept``, ``Content-Type``, ``Origin`` and ``Host`` checks, and the session id alphabet.

The header-value codec and the ``x-mcp-header`` walk are ``snodo.protocol.headers``, the
module the client derives its headers from, so client and server check the same declaration
(Elixir notes 1c). The server is stricter than the codec in one way: a received
``Mcp-Name``/``Mcp-Param-*`` value must be visible ASCII, SP or HTAB (the spec's "Value
Encoding"); anything else needed the base64 sentinel.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from snodo.protocol import headers as mcp_headers
from snodo.protocol.dialects import DIALECTS
from snodo.protocol.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    McpError,
)
from snodo.protocol.meta import PROTOCOL_VERSION_KEY
from snodo.protocol.serving.selection import stateless_meta_problem

__all__ = [
    "H_LAST_EVENT_ID",
    "H_METHOD",
    "H_NAME",
    "H_PARAM_PREFIX",
    "H_PROTOCOL_VERSION",
    "H_SESSION_ID",
    "NAME_FIELDS",
    "SESSION_VERSIONS",
    "STATELESS_VERSIONS",
    "Headers",
    "Route",
    "accepts",
    "check_params",
    "check_stateless_request",
    "first",
    "header_map",
    "header_params",
    "host_allowed",
    "is_json_content_type",
    "is_loopback",
    "origin_allowed",
    "render_header_scalar",
    "route_post",
    "stateless_status",
    "visible_ascii",
]

# Header names, lower case (header names compare case-insensitively).
H_PROTOCOL_VERSION: Final = mcp_headers.MCP_PROTOCOL_VERSION.lower()
H_METHOD: Final = mcp_headers.MCP_METHOD.lower()
H_NAME: Final = mcp_headers.MCP_NAME.lower()
H_SESSION_ID: Final = mcp_headers.MCP_SESSION_ID.lower()
H_PARAM_PREFIX: Final = mcp_headers.MCP_PARAM_PREFIX.lower()
H_LAST_EVENT_ID: Final = "last-event-id"

#: The body field ``Mcp-Name`` mirrors, per method.
NAME_FIELDS: Final[Mapping[str, str]] = mcp_headers.NAME_SOURCES

#: Session-era versions: the initialize handshake and sessions (known to snodo, enabled or not).
SESSION_VERSIONS: Final = frozenset(v for v, d in DIALECTS.items() if not d.stateless)
#: Stateless-era versions: the version in every request's ``_meta``.
STATELESS_VERSIONS: Final = frozenset(v for v, d in DIALECTS.items() if d.stateless)

Headers = Mapping[str, Sequence[str]]
"""Request headers: lower-case name -> every value it was sent with (OWS stripped)."""


def header_map(pairs: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Fold raw ``(name, value)`` pairs into :data:`Headers` (values stripped of SP/HTAB)."""
    out: dict[str, list[str]] = {}
    for name, value in pairs:
        out.setdefault(name.lower(), []).append(value.strip(" \t"))
    return out


def first(headers: Headers, name: str) -> str | None:
    values = headers.get(name)
    return values[0] if values else None


# -- header values (SEP-2243) -------------------------------------------------------------------

#: What an MCP header value may hold on the wire: visible ASCII, SP, HTAB.
_FIELD_VALUE: Final = re.compile(r"[\x20-\x7e\t]*")
_DECIMAL: Final = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")

HeaderParam = mcp_headers.ParamHeader


def render_header_scalar(value: Any, schema_type: object = None) -> str | None:
    """How a client mirrors an argument into a header: ``true``/``false``, decimal integers,
    strings as they are; ``None`` for anything it cannot mirror."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    if type(value) is str:
        return value
    if type(value) is float and schema_type == "integer" and value.is_integer():
        return str(int(value))
    return None


def header_params(input_schema: Any) -> list[HeaderParam] | None:
    """The ``x-mcp-header`` annotations of a tool's ``inputSchema``; ``None`` when any of them
    is invalid (a conforming HTTP client leaves such a tool out, so nothing is checked)."""
    try:
        return list(mcp_headers.tool_param_headers({"inputSchema": input_schema}))
    except mcp_headers.InvalidToolHeaders:
        return None


def _decoded(header: str, raw: str) -> str | McpError:
    """The value a received ``Mcp-Name``/``Mcp-Param-*`` header carries, or the -32020 error."""
    if not _FIELD_VALUE.fullmatch(raw):
        return _mismatch(f"{header} header holds characters a header value cannot")
    try:
        return mcp_headers.decode_header_value(raw)
    except ValueError:
        return _mismatch(f"{header} header holds a malformed base64 value")


def _value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _integer_matches(decoded: str, value: Any) -> bool:
    if not _DECIMAL.fullmatch(decoded):
        return False
    whole, _, fraction = decoded.partition(".")
    if fraction.strip("0") or len(whole) > 40:  # beyond any integer a header may carry
        return False
    return int(whole) == int(value)


def _mismatch(message: str) -> McpError:
    return McpError(HEADER_MISMATCH, f"Header mismatch: {message}")


def check_params(
    params: Sequence[HeaderParam], arguments: Any, headers: Headers
) -> McpError | None:
    """Every annotated argument against its ``Mcp-Param-<Name>`` header (-32020 on failure)."""
    for param in params:
        header = f"Mcp-Param-{param.name}"
        values = headers.get(H_PARAM_PREFIX + param.name.lower())
        raw = values[0] if values else None
        if values is not None and len(values) > 1:
            return _mismatch(f"{header} header appears more than once")
        value = _value_at(arguments, param.path)
        argument = ".".join(param.path)
        if value is None:
            if raw is not None:
                return _mismatch(f"{header} header is present but argument {argument!r} is not")
            continue
        rendered = render_header_scalar(value, param.type)
        if rendered is None:
            if raw is not None:
                return _mismatch(f"{header} header does not match argument {argument!r}")
            continue
        if raw is None:
            return _mismatch(f"{header} header is missing (argument {argument!r} is present)")
        decoded = _decoded(header, raw)
        if isinstance(decoded, McpError):
            return decoded
        if param.type == "integer" and type(value) in (int, float) and type(value) is not bool:
            if not _integer_matches(decoded, value):
                return _mismatch(f"{header} header does not match argument {argument!r}")
        elif decoded != rendered:
            return _mismatch(f"{header} header does not match argument {argument!r}")
    return None


# -- the stateless era's request rules------------------------------------------------------------


def check_stateless_request(
    method: str,
    params: Mapping[str, Any] | None,
    headers: Headers,
    input_schema: Any = None,
) -> McpError | None:
    """The stateless era's header rules for one request; the error to answer (HTTP 400) or
    ``None``.

    ``input_schema`` is the called tool's ``inputSchema`` (``tools/call`` only), for the
    ``Mcp-Param-*`` rules.
    """
    for name in (H_PROTOCOL_VERSION, H_METHOD, H_NAME):
        values = headers.get(name)
        if values is not None and len(values) > 1:
            return _mismatch(f"{_spelled(name)} header appears more than once")
    header_version = first(headers, H_PROTOCOL_VERSION)
    if header_version is None:
        return _mismatch("Missing MCP-Protocol-Version header")
    problem = stateless_meta_problem(params)
    if problem is not None:
        return McpError(INVALID_PARAMS, f"Invalid params: {problem}")
    assert params is not None
    meta = params["_meta"]
    if header_version != meta[PROTOCOL_VERSION_KEY]:
        return _mismatch(
            f"MCP-Protocol-Version header {header_version!r} does not match _meta "
            f"{PROTOCOL_VERSION_KEY} {meta[PROTOCOL_VERSION_KEY]!r}"
        )
    header_method = first(headers, H_METHOD)
    if header_method is None:
        return _mismatch("Missing Mcp-Method header")
    if header_method != method:
        return _mismatch(f"Mcp-Method header {header_method!r} does not match method {method!r}")
    field = NAME_FIELDS.get(method)
    if field is not None:
        body_value = params.get(field)
        if type(body_value) is str:
            raw = first(headers, H_NAME)
            if raw is None:
                return _mismatch(f"Missing Mcp-Name header (params.{field} is {body_value!r})")
            decoded = _decoded("Mcp-Name", raw)
            if isinstance(decoded, McpError):
                return decoded
            if decoded != body_value:
                return _mismatch(
                    f"Mcp-Name header {decoded!r} does not match params.{field} {body_value!r}"
                )
    if method == "tools/call" and input_schema is not None:
        annotated = header_params(input_schema)
        if annotated:
            arguments = params.get("arguments")
            return check_params(
                annotated, arguments if isinstance(arguments, dict) else {}, headers
            )
    return None


def _spelled(name: str) -> str:
    return {H_PROTOCOL_VERSION: "MCP-Protocol-Version", H_METHOD: "Mcp-Method"}.get(
        name, "Mcp-Name"
    )


#: HTTP status of a stateless-era JSON-RPC error answered as ``application/json``.
_STATELESS_STATUS: Final[Mapping[int, int]] = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


def stateless_status(response: Mapping[str, Any]) -> int:
    """The HTTP status of a stateless-era JSON response: 400 for -32700/-32600/-32020/-32021/-32022,
    404 for -32601, 200 otherwise (results, and errors such as -32602 for an unknown tool; the
    -32602 of a malformed ``_meta`` is refused with 400 before dispatch)."""
    error = response.get("error")
    if not isinstance(error, dict):
        return 200
    code = error.get("code")
    return _STATELESS_STATUS.get(code, 200) if type(code) is int else 200


# -- routing --------------------------------------------------------------------------------------

Route = Literal["stateless", "session", "initialize"]
"""Who serves a POSTed message: the stateless era, the session era, or ``initialize`` (which
opens a session)."""


def route_post(
    kind: Literal["request", "notification", "response"],
    method: str | None,
    params: Mapping[str, Any] | None,
    headers: Headers,
    *,
    serves_stateless: bool,
    serves_session: bool,
) -> Route:
    """Which era serves a POSTed message.

    The body decides first: a request whose ``_meta`` names a protocol version belongs to the
    stateless era (its headers are then checked against it) when the runtime serves that era;
    ``initialize`` without one opens a session. A runtime without the stateless era answers
    everything as a session-era server does (a stateless-era probe gets 400 for its missing
    session, which a client that speaks both eras reads as "fall back to initialize").
    Otherwise a session id, or an ``MCP-Protocol-Version`` naming a session-era version, means
    the session era; anything else goes to the stateless era when the runtime serves it. A
    client's response (to a server request) exists only in the session era.
    """
    header_version = first(headers, H_PROTOCOL_VERSION)
    has_session = first(headers, H_SESSION_ID) is not None
    if kind == "response":
        return "session" if serves_session else "stateless"
    if kind == "request":
        meta = params.get("_meta") if params is not None else None
        if serves_stateless and isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta:
            return "stateless"
        if method == "initialize" and serves_session:
            return "initialize"
    elif header_version in STATELESS_VERSIONS and serves_stateless:
        return "stateless"  # a notification names its era only by header
    if serves_session and (
        has_session or header_version in SESSION_VERSIONS or not serves_stateless
    ):
        return "session"
    return "stateless" if serves_stateless else "session"


# -- content negotiation, origin, host ----------------------------------------------------------


def accepts(accept: str | None, media: str) -> bool:
    """True when the ``Accept`` header lists ``media`` (or a wildcard covering it) with q > 0.
    A missing header accepts nothing: MCP clients must list what they take."""
    if accept is None:
        return False
    kind = media.split("/", 1)[0]
    for item in accept.split(","):
        parts = [p.strip() for p in item.split(";")]
        rng = parts[0].lower()
        if rng not in (media, f"{kind}/*", "*/*"):
            continue
        quality = 1.0
        for param in parts[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value.strip())
                except ValueError:
                    quality = 0.0
        if quality > 0:
            return True
    return False


def is_json_content_type(content_type: str | None) -> bool:
    """``application/json``, with or without parameters such as ``charset``."""
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


_LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "[::1]"})


def _split_host(authority: str) -> str:
    """The host of ``host[:port]`` (IPv6 literals keep their brackets), lower case."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        end = authority.find("]")
        return authority[: end + 1] if end != -1 else authority
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


def origin_allowed(origin: str, allowed: frozenset[str] | None) -> bool:
    """``allowed`` (exact origins, lower case) when given; by default any port of
    ``http(s)://localhost``, ``127.0.0.1`` or ``[::1]``."""
    value = origin.strip().lower().rstrip("/")
    if allowed is not None:
        return value in allowed
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in ("http", "https") or "/" in rest or "@" in rest:
        return False
    return _split_host(rest) in _LOCAL_HOSTS


def host_allowed(host: str | None, allowed: frozenset[str] | None) -> bool:
    """The ``Host`` check against DNS rebinding: ``allowed`` holds host names (any port) or
    ``host:port`` pairs, lower case. ``None`` means the loopback names."""
    if host is None:
        return False
    value = host.strip().lower()
    names = allowed if allowed is not None else _LOCAL_HOSTS
    return value in names or _split_host(value) in names


def is_loopback(address: str) -> bool:
    return address in ("127.0.0.1", "::1", "localhost") or address.startswith("127.")


def visible_ascii(value: str) -> bool:
    """A session id's alphabet (0x21-0x7E), non-empty."""
    return bool(value) and all("\x21" <= c <= "\x7e" for c in value)
