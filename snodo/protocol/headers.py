"""MCP HTTP header policy: the headers each message carries, value encoding, ``x-mcp-header``.

Sans-IO rules for the Streamable HTTP transport (reference (f) "Request headers by era", "Value
encoding", "x-mcp-header"; Elixir notes 1c). On 2026-07-28 every POST carries
``MCP-Protocol-Version`` and ``Mcp-Method``, name-bearing requests ``Mcp-Name``, and ``tools/call``
one ``Mcp-Param-<Name>`` per annotated argument. Session-era messages after ``initialize``
carry ``MCP-Protocol-Version`` and, once issued, ``Mcp-Session-Id``; so does the GET that opens
or resumes an event stream (:func:`stream_headers`). Header values this module cannot send
safely are refused with -32000 before anything is sent.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from snodo.protocol.dialects import Dialect
from snodo.protocol.errors import CONNECTION_CLOSED, INVALID_PARAMS, McpError
from snodo.protocol.jsonrpc import MAX_DEPTH
from snodo.protocol.meta import PROTOCOL_VERSION_KEY

__all__ = [
    "LAST_EVENT_ID",
    "MAX_SAFE_INTEGER",
    "MCP_METHOD",
    "MCP_NAME",
    "MCP_PARAM_PREFIX",
    "MCP_PROTOCOL_VERSION",
    "MCP_SESSION_ID",
    "NAME_SOURCES",
    "SENTINEL_PREFIX",
    "SENTINEL_SUFFIX",
    "TRANSPORT_HEADERS",
    "InvalidToolHeaders",
    "ParamHeader",
    "check_user_headers",
    "decode_header_value",
    "encode_header_value",
    "filter_tools",
    "is_token",
    "mcp_headers",
    "safe_header_value",
    "stream_headers",
    "tool_param_headers",
]

SENTINEL_PREFIX: Final = "=?base64?"
SENTINEL_SUFFIX: Final = "?="

MCP_PROTOCOL_VERSION: Final = "MCP-Protocol-Version"
MCP_METHOD: Final = "Mcp-Method"
MCP_NAME: Final = "Mcp-Name"
MCP_PARAM_PREFIX: Final = "Mcp-Param-"
MCP_SESSION_ID: Final = "Mcp-Session-Id"
#: Resumes an event stream after the last event seen (the SSE standard's header).
LAST_EVENT_ID: Final = "Last-Event-ID"

#: The largest integer an ``Mcp-Param-*`` header carries (JSON's exact-integer range).
MAX_SAFE_INTEGER: Final = 2**53 - 1

#: Requests whose ``Mcp-Name`` mirrors a params key (2026-07-28; ``tasks/*`` per SEP-2663).
NAME_SOURCES: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}

#: Lower-cased headers the transport sets itself: framing, content negotiation, the MCP headers,
#: resumption, and the hop-by-hop headers of RFC 9110 §7.6.1. ``mcp-param-*`` is refused too.
TRANSPORT_HEADERS: Final = frozenset(
    {
        "host",
        "content-type",
        "content-length",
        "transfer-encoding",
        "connection",
        "accept",
        "accept-encoding",
        "mcp-protocol-version",
        "mcp-session-id",
        "mcp-method",
        "mcp-name",
        "last-event-id",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    }
)

_ANNOTATION: Final = "x-mcp-header"
_PARAM_TYPES: Final = frozenset({"string", "integer", "boolean"})
#: Schema keywords whose values are JSON data, not subschemas: never searched for annotations.
_DATA_KEYWORDS: Final = frozenset({"const", "default", "enum", "examples", _ANNOTATION})
_TOKEN_RE: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: RFC 9110 field-value characters: HTAB, SP, VCHAR and obs-text (as code points 0x80-0xFF).
_FIELD_VALUE_RE: Final = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
#: Plain (unencoded) MCP header values: printable ASCII, non-empty, no space at either end.
_PLAIN_RE: Final = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")


def is_token(name: object) -> bool:
    """True for an RFC 9110 token (``1*tchar``): the grammar of header names."""
    return isinstance(name, str) and _TOKEN_RE.fullmatch(name) is not None


def _looks_like_sentinel(value: str) -> bool:
    # Case-insensitive and overlap-tolerant on purpose: encoding too often is always safe.
    return value[: len(SENTINEL_PREFIX)].lower() == SENTINEL_PREFIX and value.endswith(
        SENTINEL_SUFFIX
    )


def encode_header_value(value: str | int | bool) -> str:
    """The header form of an ``Mcp-Name`` / ``Mcp-Param-*`` value (reference (f) "Value encoding").

    A string as is, an integer in decimal, a boolean as ``true``/``false``; the base64 sentinel
    form when the text is not plain printable ASCII (tab included), has whitespace at either end,
    or looks like a sentinel. ``""`` stays ``""``. A string that cannot be UTF-8 encoded (a lone
    surrogate) raises ``UnicodeEncodeError``; another type raises ``TypeError``.
    """
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise TypeError(f"a header value is a str, int or bool, got: {type(value).__name__}")
    if not value or (_PLAIN_RE.fullmatch(value) is not None and not _looks_like_sentinel(value)):
        return value
    encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
    return f"{SENTINEL_PREFIX}{encoded}{SENTINEL_SUFFIX}"


def decode_header_value(value: str) -> str:
    """The inverse of :func:`encode_header_value` (what a server reads): a sentinel is decoded
    as standard padded base64 of UTF-8, anything else returned as is; bad or non-canonical
    base64, or bad UTF-8, inside a sentinel raises ``ValueError``."""
    if not (
        len(value) >= len(SENTINEL_PREFIX) + len(SENTINEL_SUFFIX)
        and value.startswith(SENTINEL_PREFIX)
        and value.endswith(SENTINEL_SUFFIX)
    ):
        return value
    inner = value[len(SENTINEL_PREFIX) : -len(SENTINEL_SUFFIX)]
    try:
        raw = base64.b64decode(inner.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error) as exc:
        raise ValueError("invalid base64 in a sentinel-encoded header value") from exc
    if base64.b64encode(raw).decode("ascii") != inner:  # non-zero pad bits: not what we send
        raise ValueError("non-canonical base64 in a sentinel-encoded header value")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError("invalid UTF-8 in a sentinel-encoded header value") from exc


def safe_header_value(value: str) -> bool:
    """True when ``value`` is an RFC 9110 field value: HTAB, SP, VCHAR and obs-text only, so no
    CR, LF, NUL, other control characters or DEL that could split or smuggle a header."""
    return isinstance(value, str) and _FIELD_VALUE_RE.fullmatch(value) is not None


def _describe(name: object) -> str:
    text = repr(name)
    return text if len(text) <= 80 else text[:77] + "..."


def _refused(name: object, why: str) -> McpError:
    return McpError(
        CONNECTION_CLOSED,
        f"header {_describe(name)} refused: {why}",
        kind="transport",
        cause=("invalid_header", name),
    )


def check_user_headers(headers: Mapping[str, str], *, token_provider: bool) -> dict[str, str]:
    """Check the caller's extra headers; the lower-cased-name dict to send.

    Names must be RFC 9110 tokens and values safe field values; headers the transport owns
    (:data:`TRANSPORT_HEADERS`, any ``mcp-param-*``) and, with a token provider,
    ``authorization`` are refused, as is one name given twice in different cases. A violation
    is -32000 (``kind="transport"``, ``cause=("invalid_header", name)``) naming the header,
    never its value, before anything is sent (Elixir notes 1c "Headers the transport owns").
    """
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not is_token(name):
            raise _refused(name, "the name is not an RFC 9110 token")
        lower = name.lower()
        if lower in TRANSPORT_HEADERS or lower.startswith("mcp-param-"):
            raise _refused(name, "the transport sets it")
        if token_provider and lower == "authorization":
            raise _refused(name, "the token provider sets it")
        if not isinstance(value, str) or not safe_header_value(value):
            raise _refused(name, "the value is not a safe header value")
        if lower in checked:
            raise _refused(name, "it is given more than once")
        checked[lower] = value
    return checked


class InvalidToolHeaders(ValueError):
    """A tool's ``x-mcp-header`` annotations are invalid; ``reason`` says why (for the log)."""

    reason: str

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ParamHeader:
    """One ``x-mcp-header`` annotation: the header ``Mcp-Param-<name>`` mirrors the argument at
    ``path`` (property names from ``arguments`` down), whose schema type is ``type``."""

    name: str
    path: tuple[str, ...]
    type: Literal["string", "integer", "boolean"]

    @property
    def header(self) -> str:
        """The header name as sent."""
        return MCP_PARAM_PREFIX + self.name


def _annotation(
    node: Mapping[str, Any], path: tuple[str, ...], reachable: bool
) -> ParamHeader | None:
    if _ANNOTATION not in node:
        return None
    name = node[_ANNOTATION]
    where = "/".join(path) or "the schema root"
    if not reachable or not path:
        raise InvalidToolHeaders(
            f"x-mcp-header at {where} is not on a property reached through properties only"
        )
    if not isinstance(name, str):
        raise InvalidToolHeaders(f"x-mcp-header at {where} is not a string")
    if not name:
        raise InvalidToolHeaders(f"x-mcp-header at {where} is empty")
    if not is_token(name):
        raise InvalidToolHeaders(f"x-mcp-header {name!r} at {where} is not an RFC 9110 token")
    kind = node.get("type")
    if not isinstance(kind, str) or kind not in _PARAM_TYPES:
        raise InvalidToolHeaders(
            f"x-mcp-header {name!r} at {where} needs type string, integer or boolean"
        )
    typed: Literal["string", "integer", "boolean"] = (
        "string" if kind == "string" else "integer" if kind == "integer" else "boolean"
    )
    return ParamHeader(name, path, typed)


def tool_param_headers(tool: Mapping[str, Any]) -> tuple[ParamHeader, ...]:
    """The ``x-mcp-header`` annotations of a tool's ``inputSchema``, in document order.

    Valid (reference (f) "x-mcp-header"): a non-empty RFC 9110 token, unique ignoring case, on a
    property typed exactly ``"string"``, ``"integer"`` or ``"boolean"``, reached from the root
    through ``properties`` only (an annotation under ``items``, ``anyOf``, ``$ref`` targets in
    ``$defs``, ... is invalid). Anything else raises :class:`InvalidToolHeaders`. The schema is
    walked iteratively, at most ``jsonrpc.MAX_DEPTH`` levels deep.
    """
    schema = tool.get("inputSchema")
    if not isinstance(schema, Mapping):
        return ()
    found: list[ParamHeader] = []
    # (node, path of property names, reachable through properties only, depth)
    stack: list[tuple[Any, tuple[str, ...], bool, int]] = [(schema, (), True, 0)]
    while stack:
        node, path, reachable, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidToolHeaders(f"inputSchema is nested deeper than {MAX_DEPTH} levels")
        children: list[tuple[Any, tuple[str, ...], bool, int]] = []
        if isinstance(node, Mapping):
            param = _annotation(node, path, reachable)
            if param is not None:
                found.append(param)
            for key, value in node.items():
                if key == "properties" and isinstance(value, Mapping):
                    children.extend(
                        (sub, (*path, str(name)), reachable, depth + 1)
                        for name, sub in value.items()
                    )
                elif key not in _DATA_KEYWORDS and isinstance(value, (Mapping, list)):
                    children.append((value, (), False, depth + 1))
        elif isinstance(node, list):
            children.extend((item, (), False, depth + 1) for item in node)
        stack.extend(reversed(children))
    seen: dict[str, str] = {}
    for param in found:
        folded = param.name.lower()
        if folded in seen:
            raise InvalidToolHeaders(
                f"x-mcp-header {param.name!r} repeats {seen[folded]!r} (names ignore case)"
            )
        seen[folded] = param.name
    return tuple(found)


def filter_tools(tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Split a ``tools/list`` result: the tools with valid annotations, and ``(tool name,
    reason)`` for each one left out (an HTTP client MUST leave them out and SHOULD warn)."""
    kept: list[dict[str, Any]] = []
    dropped: list[tuple[str, str]] = []
    for tool in tools:
        if not isinstance(tool, Mapping):
            kept.append(tool)  # not a tool shape this module judges
            continue
        try:
            tool_param_headers(tool)
        except InvalidToolHeaders as exc:
            name = tool.get("name")
            dropped.append((name if isinstance(name, str) else repr(name), exc.reason))
        else:
            kept.append(tool)
    return kept, dropped


#: Protocol versions, methods and tool names already checked and sent as they are: a
#: connection sends the same few on every request, so each is checked once, not per request
#: (docs/decisions/0052). Only these headers' values (no session id, no argument: nothing
#: secret is kept), at most ``_SEEN_LENGTH`` characters, at most ``_SEEN_MAX`` of them; past
#: that the checks run each time.
_PLAIN_SEEN: set[str] = set()
_AS_IS_SEEN: set[str] = set()
_SEEN_MAX: Final = 1024
_SEEN_LENGTH: Final = 128


def _memo(seen: set[str], value: str) -> None:
    if type(value) is str and len(value) <= _SEEN_LENGTH and len(seen) < _SEEN_MAX:
        seen.add(value)


def _plain(header: str, value: Any) -> str:
    """A header value sent as is: printable ASCII with no space at either end, else -32000."""
    if type(value) is str and value in _PLAIN_SEEN and header in (MCP_PROTOCOL_VERSION, MCP_METHOD):
        return value
    if not isinstance(value, str) or _PLAIN_RE.fullmatch(value) is None:
        raise _refused(header, "the value cannot be sent as a plain header value")
    if header in (MCP_PROTOCOL_VERSION, MCP_METHOD):
        _memo(_PLAIN_SEEN, value)
    return value


def _encoded(header: str, value: str | int | bool, what: str) -> str:
    if header == MCP_NAME and type(value) is str and value in _AS_IS_SEEN:
        return value  # checked before: it is sent as it is
    try:
        encoded = encode_header_value(value)
    except UnicodeEncodeError as exc:
        raise McpError(
            INVALID_PARAMS, f"{what} is not valid Unicode text", {"header": header}
        ) from exc
    if not safe_header_value(encoded):  # cannot happen by construction; refuse, never send
        raise _refused(header, "the encoded value is not a safe header value")
    if encoded is value and header == MCP_NAME:
        _memo(_AS_IS_SEEN, encoded)
    return encoded


def _argument(arguments: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = arguments
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _param_value(param: ParamHeader, value: Any) -> str | int | bool:
    where = ".".join(param.path)
    if param.type == "boolean" and isinstance(value, bool):
        return value
    if param.type == "string" and isinstance(value, str):
        return value
    if param.type == "integer" and isinstance(value, int) and not isinstance(value, bool):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        raise McpError(
            INVALID_PARAMS,
            f"argument {where!r} is outside ±(2**53-1) for header {param.header}",
            {"argument": where, "header": param.header},
        )
    raise McpError(
        INVALID_PARAMS,
        f"argument {where!r} must be {'an' if param.type == 'integer' else 'a'} {param.type} "
        f"for header {param.header}",
        {"argument": where, "header": param.header},
    )


def _param_headers(tool: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, str]:
    try:
        annotated = tool_param_headers(tool)
    except InvalidToolHeaders as exc:
        raise McpError(
            INVALID_PARAMS,
            f"tool {_describe(tool.get('name'))} has an invalid x-mcp-header: {exc.reason}",
        ) from exc
    arguments = params.get("arguments")
    if not annotated or not isinstance(arguments, Mapping):
        return {}
    headers: dict[str, str] = {}
    for param in annotated:
        value = _argument(arguments, param.path)
        if value is None:
            continue
        headers[param.header] = _encoded(
            param.header, _param_value(param, value), f"argument {'.'.join(param.path)!r}"
        )
    return headers


def mcp_headers(
    dialect: Dialect,
    message: Mapping[str, Any],
    *,
    tool: Mapping[str, Any] | None = None,
    session_id: str | None = None,
    standard_headers: bool = False,
) -> dict[str, str]:
    """The MCP headers for one POSTed message, in the spec's canonical case.

    2026-07-28: ``MCP-Protocol-Version`` (mirroring ``params._meta`` protocolVersion, else the
    dialect's version) on every message, ``Mcp-Method`` on requests and notifications,
    ``Mcp-Name`` per :data:`NAME_SOURCES` (encoded), and for ``tools/call`` with ``tool`` one
    ``Mcp-Param-<Name>`` per annotated argument present and not null. Session era: nothing
    for ``initialize``, else ``MCP-Protocol-Version`` (2025-06-18 on: the dialect's
    ``protocol_version_header``) and ``Mcp-Session-Id`` when given; with
    ``standard_headers`` (a client that also speaks 2026-07-28 and fell back) ``Mcp-Method`` and
    ``Mcp-Name`` too, so a server routing on SEP-2243 headers sees them on every POST.

    A missing or mistyped name or argument is -32602 naming it; a value that cannot be sent
    safely is -32000 (``kind="transport"``); both before anything is sent.
    """
    method = message.get("method")
    params = message.get("params")
    if type(params) is not dict and not isinstance(params, Mapping):
        params = {}
    if not dialect.stateless:
        headers = {}
        if method != "initialize":
            if dialect.protocol_version_header:
                headers[MCP_PROTOCOL_VERSION] = _plain(MCP_PROTOCOL_VERSION, dialect.version)
            if session_id is not None:
                headers[MCP_SESSION_ID] = _plain(MCP_SESSION_ID, session_id)
        if standard_headers and method is not None:
            _add_standard(headers, message, method, params)
        return headers
    meta = params.get("_meta")
    version = dialect.version
    if (type(meta) is dict or isinstance(meta, Mapping)) and PROTOCOL_VERSION_KEY in meta:
        version = meta[PROTOCOL_VERSION_KEY]
    headers = {MCP_PROTOCOL_VERSION: _plain(MCP_PROTOCOL_VERSION, version)}
    if method is None:  # a response (an answer to a server request)
        return headers
    _add_standard(headers, message, method, params)
    if method == "tools/call" and tool is not None and "id" in message:
        headers.update(_param_headers(tool, params))
    return headers


def stream_headers(
    dialect: Dialect, session_id: str | None = None, last_event_id: str | None = None
) -> dict[str, str]:
    """The MCP headers of a GET that opens or resumes an event stream: ``MCP-Protocol-Version``
    (when the dialect sends it), ``Mcp-Session-Id`` once issued (session era), and ``Last-Event-ID`` to resume after it."""
    headers = {}
    if dialect.protocol_version_header:
        headers[MCP_PROTOCOL_VERSION] = _plain(MCP_PROTOCOL_VERSION, dialect.version)
    if session_id is not None and not dialect.stateless:
        headers[MCP_SESSION_ID] = _plain(MCP_SESSION_ID, session_id)
    if last_event_id:
        headers[LAST_EVENT_ID] = last_event_id
    return headers


def _add_standard(
    headers: dict[str, str], message: Mapping[str, Any], method: Any, params: Mapping[str, Any]
) -> None:
    """``Mcp-Method`` on requests and notifications; ``Mcp-Name`` per :data:`NAME_SOURCES`."""
    headers[MCP_METHOD] = _plain(MCP_METHOD, method)
    if "id" not in message:  # a notification
        return
    source = NAME_SOURCES.get(method)
    if source is not None:
        name = params.get(source)
        if not isinstance(name, str):
            raise McpError(
                INVALID_PARAMS,
                f"{method} needs params.{source} as a string for the {MCP_NAME} header",
                {"header": MCP_NAME},
            )
        headers[MCP_NAME] = _encoded(MCP_NAME, name, f"params.{source}")
