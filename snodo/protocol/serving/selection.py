"""What :func:`snodo.server.dispatcher` decides before a handler runs, as pure verdicts.

- :func:`check_envelope`: the JSON-RPC envelope of one decoded message (dispatch also serves
  the direct client, whose messages never went through :func:`snodo.protocol.jsonrpc.classify`,
  and its refusals are its own: -32600 without an id for a bad id, -32602 for params that are
  not an object);
- :func:`select_version`: which protocol version serves a request:

  1. ``initialize`` runs the session-era lifecycle (a stateless-era request, one whose
     ``_meta`` names an enabled stateless version, is -32601: initialize was removed);
  2. a peer whose session completed ``initialize`` is served by the session's version;
  3. otherwise ``_meta["io.modelcontextprotocol/protocolVersion"]`` names the version: an
     enabled stateless version serves it, any other value is -32022 with ``data {"supported",
     "requested"}``; a runtime that enables a stateless version answers a request without
     that key -32602 (a bare ``ping`` excepted when it also serves the session era: it is the
     one request the session era allows before ``initialize``);
  4. a session-era-only runtime without a session answers like a session-era server:
     ``ping`` gets ``{}``, a method its catalogs define -32600 "Server not initialized",
     anything else (``server/discover`` among them) -32601;

- the stateless era's ``_meta`` rules (:func:`meta_keys_problem`,
  :func:`stateless_meta_problem`), shared with the HTTP header checks, and the progress token
  rule of both eras (:func:`progress_token_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from snodo.protocol.dialects import DIALECTS, Dialect
from snodo.protocol.errors import (
    INVALID_REQUEST,
    UNSUPPORTED_PROTOCOL_VERSION,
    McpError,
    invalid_params,
    method_not_found,
)
from snodo.protocol.meta import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    LOG_LEVEL_KEY,
    LOG_LEVELS,
    PROGRESS_TOKEN_KEY,
    PROTOCOL_VERSION_KEY,
)

__all__ = [
    "CAPABILITIES_PROBLEM",
    "INITIALIZE",
    "PONG",
    "EnvelopeKind",
    "Refused",
    "Selection",
    "check_envelope",
    "error_reply",
    "meta_keys_problem",
    "progress_token_problem",
    "select_version",
    "stateless_meta_problem",
    "unsupported_version",
]


# -- the envelope ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Refused:
    """A message dispatch answers with ``error`` (and ``id``, when it had a valid one)."""

    id: str | int | None
    error: McpError


def error_reply(rid: str | int | None, error: McpError) -> dict[str, Any]:
    """The server's error response: without an ``id`` when none could be read (the HTTP
    transport's "a JSON-RPC error response that has no id")."""
    response: dict[str, Any] = {"jsonrpc": "2.0"}
    if rid is not None:
        response["id"] = rid
    response["error"] = error.to_wire()
    return response


EnvelopeKind = Literal["notification", "response"]

_NOT_AN_OBJECT: Final = Refused(
    None, McpError(INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
)


def check_envelope(message: object) -> EnvelopeKind | Refused | None:
    """What a decoded message is, as dispatch reads it.

    ``None``: a request (a string or integer ``id``, ``"jsonrpc": "2.0"``, a string ``method``
    and ``params`` that are an object or absent). "notification": no ``id`` (dispatch ignores
    one whose method is not a string). "response": an answer to a server request (the
    transport routes those itself). Anything else is :class:`Refused`.
    """
    if type(message) is not dict:
        return _NOT_AN_OBJECT
    method = message.get("method")
    if method is None and ("result" in message or "error" in message):
        return "response"
    if "id" not in message:
        return "notification"
    rid = message["id"]
    if type(rid) is not str and type(rid) is not int:
        return Refused(
            None, McpError(INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
        )
    if message.get("jsonrpc") != "2.0" or type(method) is not str:
        return Refused(
            rid,
            McpError(INVALID_REQUEST, "Invalid Request: jsonrpc must be '2.0' and method a string"),
        )
    params = message.get("params")
    if params is not None and type(params) is not dict:
        return Refused(rid, invalid_params("params must be an object"))
    return None


# -- the version -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Selection:
    """How to serve a request: run ``initialize``, answer a bare ``ping`` with ``{}``, or
    serve it with ``dialect`` (the action names its era)."""

    action: Literal["initialize", "pong", "stateless", "session"]
    dialect: Dialect | None = None


INITIALIZE: Final = Selection("initialize")
PONG: Final = Selection("pong")
_SERVE: Final = {version: Selection(dialect.era, dialect) for version, dialect in DIALECTS.items()}


def select_version(
    method: str,
    meta: object,
    session_version: str | None,
    stateless: Mapping[str, Dialect],
    session: Mapping[str, Dialect],
    enabled: Sequence[str],
) -> Selection:
    """Which version serves ``method`` (see the module docstring); raises the ``McpError``
    to answer.

    ``meta`` is the request's ``params._meta`` as received; ``session_version`` the version of
    the peer's session once ``initialize`` completed; ``stateless``/``session`` the enabled
    dialects of each era and ``enabled`` every enabled version, in preference order.
    """
    if method == "initialize":
        named = meta.get(PROTOCOL_VERSION_KEY) if type(meta) is dict else None
        if type(named) is str and named in stateless:
            raise method_not_found(method)
        return INITIALIZE
    if session_version is not None:
        return _SERVE[session_version]
    if stateless:
        version = meta.get(PROTOCOL_VERSION_KEY) if type(meta) is dict else None
        if version is None:
            if method == "ping" and session:
                return PONG
            raise invalid_params(f"Missing required _meta key {PROTOCOL_VERSION_KEY}")
        if type(version) is not str:
            raise invalid_params(f"_meta {PROTOCOL_VERSION_KEY} must be a string")
        if version not in stateless:
            raise unsupported_version(version, session, enabled)
        return _SERVE[version]
    if method == "ping":
        return PONG
    if any(method in d.client_requests for d in session.values()):
        raise McpError(INVALID_REQUEST, "Server not initialized: send initialize first")
    raise method_not_found(method)


def unsupported_version(
    version: str, session: Mapping[str, Dialect], enabled: Sequence[str]
) -> McpError:
    """-32022 for a stateless-era request naming ``version``, which the server does not serve
    without a session (a session-era version it enables) or at all."""
    if version in session:
        message = f"Protocol version {version} needs the initialize handshake"
    else:
        message = f"Unsupported protocol version: {version}"
    return McpError(
        UNSUPPORTED_PROTOCOL_VERSION, message, {"supported": list(enabled), "requested": version}
    )


# -- the stateless era's _meta ---------------------------------------------------------------


#: The problem of a stateless-era ``_meta`` without client capabilities (an object).
CAPABILITIES_PROBLEM: Final = f"Missing required _meta key {CLIENT_CAPABILITIES_KEY} (an object)"


def meta_keys_problem(meta: Mapping[str, Any]) -> str | None:
    """The stateless era's ``_meta`` keys besides the version, in the order dispatch reports
    them: the client capabilities (an object: :data:`CAPABILITIES_PROBLEM`, reported before an
    unknown method), then the optional client info (an object), log level (a known one) and
    progress token (see :func:`progress_token_problem`)."""
    if type(meta.get(CLIENT_CAPABILITIES_KEY)) is not dict:
        return CAPABILITIES_PROBLEM
    info = meta.get(CLIENT_INFO_KEY)
    if info is not None and type(info) is not dict:
        return f"_meta {CLIENT_INFO_KEY} must be an object"
    level = meta.get(LOG_LEVEL_KEY)
    if level is not None and (type(level) is not str or level not in LOG_LEVELS):
        return f"Invalid log level: {level!r}"
    token = meta.get(PROGRESS_TOKEN_KEY)
    if token is not None and type(token) is not str and type(token) is not int:
        return _TOKEN_PROBLEM
    return None


_TOKEN_PROBLEM: Final = "progressToken must be a string or an integer"


def progress_token_problem(meta: Mapping[str, Any]) -> str | None:
    """A progress token, when sent, is a string or an integer (both eras)."""
    token = meta.get(PROGRESS_TOKEN_KEY)
    if token is not None and type(token) is not str and type(token) is not int:
        return _TOKEN_PROBLEM
    return None


def stateless_meta_problem(params: Mapping[str, Any] | None) -> str | None:
    """What is wrong with a stateless-era request's ``_meta`` (answered -32602), or ``None``."""
    meta = params.get("_meta") if params is not None else None
    if type(meta) is not dict:
        return f"Missing required params._meta (with {PROTOCOL_VERSION_KEY})"
    version = meta.get(PROTOCOL_VERSION_KEY)
    if version is None:
        return f"Missing required _meta key {PROTOCOL_VERSION_KEY}"
    if type(version) is not str:
        return f"_meta {PROTOCOL_VERSION_KEY} must be a string"
    return meta_keys_problem(meta)
