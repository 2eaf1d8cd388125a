"""Version negotiation as pure decisions: which versions are allowed, how to connect, what won.

The client (``snodo.connections``) does the I/O; this module only decides. The flow, from the
reference's "Protocol versions":

1. :func:`allowed_versions` turns the ``protocol=`` option into the allowed versions, in the
   client's preference order (newest first). A version snodo does not speak is refused here,
   before anything connects.
2. :func:`plan` says what to do at connect time: speak a stateless version at once (nothing is
   sent), send ``initialize`` at once, or probe with ``server/discover``.
3. :func:`probe_verdict` reads the probe's response: a result with ``supportedVersions`` settles
   the version; any other answer (whatever the error code or shape, or none at all) means
   "reopen the transport and initialize".
4. :func:`initialize_params` builds the ``initialize`` params and :func:`initialize_verdict`
   checks the result and builds the :class:`Session`.

:func:`direct_version` is the ``direct()`` shortcut: the runtime's enabled versions are known,
so no probe is needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from snodo.protocol.dialects import (
    ALL_DIALECTS,
    ALL_VERSIONS,
    OPT_IN_VERSIONS,
    SUPPORTED_VERSIONS,
    V2026_07_28,
)
from snodo.protocol.errors import (
    INVALID_PARAMS,
    UNSUPPORTED_PROTOCOL_VERSION,
    McpError,
    connection_error,
)
from snodo.protocol.results import interpret


@dataclass(frozen=True, slots=True)
class Session:
    """A session-era session: what ``initialize`` negotiated (public as ``snodo.Session``).

    ``session_id`` is the ``Mcp-Session-Id`` the server issued over HTTP, if any.
    """

    version: str
    session_id: str | None
    server_info: dict[str, Any] | None
    capabilities: dict[str, Any]
    instructions: str | None


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do at connect time.

    ``stateless``: speak ``version`` at once and send nothing. ``initialize``: send
    ``initialize`` with ``version``. ``probe``: send ``server/discover`` on the stateless
    ``version`` (:func:`probe_verdict` reads the answer).
    """

    action: Literal["stateless", "initialize", "probe"]
    version: str


@dataclass(frozen=True, slots=True)
class ProbeVerdict:
    """What the ``server/discover`` probe decided.

    ``use``: speak ``version`` statelessly on the same connection. ``initialize``: a listed
    session-era version won; initialize with it on the same connection. ``fallback``: the
    server is not stateless; close and reopen the transport, then initialize with ``version``.
    """

    action: Literal["use", "initialize", "fallback"]
    version: str


def _check_known(versions: Sequence[str]) -> None:
    for version in versions:
        if not isinstance(version, str):
            raise TypeError(f"protocol versions must be strings, got: {version!r}")
        if version not in ALL_DIALECTS:
            raise ValueError(f"snodo does not speak protocol {version!r}")


def _ordered(allowed: Sequence[str]) -> tuple[str, ...]:
    """``allowed`` in the client's preference order, deduplicated; refuses misuse."""
    if isinstance(allowed, str):
        raise TypeError("allowed versions must be a sequence of strings, not a string")
    if not allowed:
        raise ValueError("at least one protocol version must be allowed")
    _check_known(allowed)
    return tuple(v for v in ALL_VERSIONS if v in allowed)


def _is_stateless(version: str) -> bool:
    return ALL_DIALECTS[version].stateless


def allowed_versions(protocol: str | Sequence[str] | None) -> tuple[str, ...]:
    """The versions the ``protocol=`` option allows, newest first (the client's preference).

    ``None`` allows the versions snodo speaks by default (``SUPPORTED_VERSIONS``); the older
    ones (``OPT_IN_VERSIONS``) only when named. A string pins one; a list is deduplicated and
    reordered. A version snodo cannot speak is -32602 with ``requested``/``supported`` data
    (``supported``: every version it can speak).
    """
    if protocol is None:
        return SUPPORTED_VERSIONS
    requested: str | list[str]
    if isinstance(protocol, str):
        requested = protocol
        versions: list[str] = [protocol]
    elif isinstance(protocol, Sequence) and not isinstance(protocol, (bytes, bytearray)):
        versions = list(protocol)
        requested = versions
        if not versions:
            raise ValueError("protocol must be a version string or a non-empty list of them")
        for version in versions:
            if not isinstance(version, str):
                raise TypeError(
                    f"protocol must be a version string or a list of them, got entry {version!r}"
                )
    else:
        raise TypeError(f"protocol must be a version string or a list of them, got: {protocol!r}")
    unknown = [v for v in versions if v not in ALL_DIALECTS]
    if unknown:
        raise McpError(
            INVALID_PARAMS,
            f"snodo does not speak protocol {unknown[0]}",
            {"requested": requested, "supported": list(ALL_VERSIONS)},
        )
    return tuple(v for v in ALL_VERSIONS if v in versions)


def plan(allowed: Sequence[str]) -> Plan:
    """Decide the connect-time step: stateless at once, initialize at once, or probe.

    A pin or a single-era list skips the probe; both eras probe with the newest stateless
    version (the highest session-era one is the fallback :func:`probe_verdict` picks).
    """
    ordered = _ordered(allowed)
    stateless = [v for v in ordered if _is_stateless(v)]
    session = [v for v in ordered if not _is_stateless(v)]
    if not session:
        return Plan("stateless", stateless[0])
    if not stateless:
        return Plan("initialize", session[0])
    return Plan("probe", stateless[0])


def probe_verdict(response: Mapping[str, Any] | None, allowed: Sequence[str]) -> ProbeVerdict:
    """Read the JSON-RPC response to the ``server/discover`` probe (``None``: no answer).

    A complete result with a ``supportedVersions`` list is a stateless server's answer: the
    highest allowed version it lists wins, and none in common is -32602 with
    ``requested``/``supported``. Any other answer means the server is not stateless; the
    reference deliberately does not special-case any error code (not even -32022).
    """
    ordered = _ordered(allowed)
    session = [v for v in ordered if not _is_stateless(v)]
    if not session:
        raise ValueError("probe_verdict needs an allowed session-era version to fall back to")
    fallback = ProbeVerdict("fallback", session[0])
    if response is None or not isinstance(response, Mapping):
        return fallback
    try:
        result = interpret(V2026_07_28, "server/discover", response)
    except McpError:
        return fallback
    if not isinstance(result, dict):
        return fallback
    supported = result.get("supportedVersions")
    if not isinstance(supported, list):
        return fallback
    for version in ordered:
        if version in supported:
            if _is_stateless(version):
                return ProbeVerdict("use", version)
            return ProbeVerdict("initialize", version)
    opt_in = next((v for v in ALL_VERSIONS if v in supported and v in OPT_IN_VERSIONS), None)
    raise McpError(
        INVALID_PARAMS,
        "The server supports none of the protocol versions the client allows"
        + ("" if opt_in is None else _how_to_allow(opt_in, ordered)),
        {"requested": list(ordered), "supported": supported},
    )


def retries_unsupported_version(version: str, allowed: Sequence[str], error: McpError) -> bool:
    """True when a stateless request refused with -32022 should be sent once more as it was.

    The spec: on ``UnsupportedProtocolVersion`` the client SHOULD choose a mutually supported
    version and retry. A stateless connection speaks one version (there is one stateless
    dialect), so the retry is possible only when ``data.supported`` lists that version and the
    client allows it; otherwise the error stands.
    """
    if error.code != UNSUPPORTED_PROTOCOL_VERSION or error.kind != "protocol":
        return False
    if not _is_stateless(version) or version not in allowed:
        return False
    data = error.data
    supported = data.get("supported") if isinstance(data, Mapping) else None
    return isinstance(supported, list) and version in supported


def announces_standard_headers(allowed: Sequence[str]) -> bool:
    """Whether a Streamable HTTP client sends the SEP-2243 ``Mcp-Method``/``Mcp-Name`` headers
    on session-era POSTs too: when it also allows a stateless version (and so may have fallen
    back), a server routing on those headers sees them on every POST."""
    return any(_is_stateless(version) for version in allowed)


def direct_version(allowed: Sequence[str], enabled: Sequence[str]) -> str:
    """The highest allowed version among a runtime's enabled ones (``direct()`` needs no probe).

    None in common is -32602 with ``requested`` (the allowed versions) and ``supported`` (the
    runtime's enabled versions).
    """
    ordered = _ordered(allowed)
    enabled_list = list(enabled)
    for version in ordered:
        if version in enabled_list:
            return version
    raise McpError(
        INVALID_PARAMS,
        "The runtime enables none of the protocol versions the client allows",
        {"requested": list(ordered), "supported": enabled_list},
    )


def initialize_params(
    version: str, client_capabilities: Mapping[str, Any], client_info: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``initialize`` params: the proposed version, the client's capabilities (those the
    version defines: no ``elicitation`` before 2025-06-18) and info."""
    return {
        "protocolVersion": version,
        "capabilities": ALL_DIALECTS[version].declared_capabilities(client_capabilities),
        "clientInfo": dict(client_info),
    }


def _invalid_initialize(message: str, result: Any) -> McpError:
    return connection_error(message, cause=("invalid_initialize_result", result))


def _how_to_allow(version: str, allowed: Sequence[str]) -> str:
    """The hint for a server that speaks only an opt-in version: how to allow it."""
    if version not in OPT_IN_VERSIONS:
        return ""
    listed = ", ".join(repr(v) for v in (*allowed, version))
    return (
        f"; the server speaks {version}: to allow it, pass protocol=[{listed}] "
        "or protocol=snodo.ALL_VERSIONS"
    )


def initialize_verdict(
    result: Any, allowed: Sequence[str], *, session_id: str | None = None
) -> Session:
    """Check an ``initialize`` result and build the :class:`Session`.

    A result that is not an object, asks for input, or has no string ``protocolVersion`` is
    -32000 (the connection is unusable). A version the client does not allow is -32602 with
    ``negotiated`` and ``requested``; the caller closes the connection in both cases.
    """
    ordered = _ordered(allowed)
    if not isinstance(result, dict):
        raise _invalid_initialize("The initialize result is not an object", result)
    if result.get("resultType") == "input_required":
        raise _invalid_initialize("The server answered initialize with an input request", result)
    version = result.get("protocolVersion")
    if not isinstance(version, str):
        raise _invalid_initialize("The initialize result has no protocolVersion", result)
    if version not in ordered:
        raise McpError(
            INVALID_PARAMS,
            f"The server negotiated protocol {version}, which the client does not allow"
            + _how_to_allow(version, ordered),
            {"negotiated": version, "requested": list(ordered)},
        )
    server_info = result.get("serverInfo")
    capabilities = result.get("capabilities")
    instructions = result.get("instructions")
    return Session(
        version=version,
        session_id=session_id,
        server_info=server_info if isinstance(server_info, dict) else None,
        capabilities=capabilities if isinstance(capabilities, dict) else {},
        instructions=instructions if isinstance(instructions, str) else None,
    )


__all__ = [
    "Plan",
    "ProbeVerdict",
    "Session",
    "allowed_versions",
    "announces_standard_headers",
    "direct_version",
    "initialize_params",
    "initialize_verdict",
    "plan",
    "probe_verdict",
    "retries_unsupported_version",
]
