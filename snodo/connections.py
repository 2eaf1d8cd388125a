"""Opening clients: ``direct`` for a Runtime in this process, ``connect`` for stdio, HTTP and
custom transports, and the connect-time steps they share (the probe and the ``initialize``
handshake), driven by the pure decisions of ``snodo.protocol.negotiation``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from snodo.actors.connection_owner import StateChange
from snodo.calls import answer_server_request, next_request_id
from snodo.client import Client
from snodo.lifecycle import Negotiated, Supervision, deliver_state
from snodo.options import (
    ClientOptions,
    build_options,
    check_positive_int,
    check_timeout,
    client_keywords,
)
from snodo.protocol import dialects, jsonrpc, legacy_sse, negotiation, results
from snodo.protocol import meta as meta_rules
from snodo.protocol.dialects import Dialect
from snodo.protocol.errors import McpError, exited_at_start, invalid_params
from snodo.protocol.negotiation import Session
from snodo.server_logs import ServerLogs, check_name, default_name, send_log_level
from snodo.supervision import Owner, current_owner, owner_of
from snodo.supervision.restarts import Backoff, RestartPolicy
from snodo.transports.base import (
    ConnectOptions,
    NotifyingTransport,
    RequestOptions,
    ServerRequestHandler,
    Transport,
    session_id_of,
)

if TYPE_CHECKING:
    from snodo.cache import ResponseStore
    from snodo.server import Runtime


def direct(
    runtime: Runtime,
    *,
    protocol: str | Sequence[str] | None = None,
    client_info: Mapping[str, Any] | None = None,
    client_capabilities: Mapping[str, Any] | None = None,
    input_handlers: Mapping[str, Any] | None = None,
    timeout: float | None = 30.0,
    max_input_rounds: int = 10,
    max_pages: int = 1000,
    reset_timeout_on_progress: bool = False,
    max_total_timeout: float | None = 600.0,
    cache: bool | ResponseStore = False,
    validate_output: bool = False,
    name: str | None = None,
    log_level: str | None = None,
    log_handler: Any = None,
    owner: Any = None,
    restart: str = "temporary",
    backoff: Backoff | Mapping[str, Any] | None = None,
    max_restarts: int = 5,
    restart_window: float = 60.0,
    on_state: Any = None,
    supervisor: Any = None,
) -> Client:
    """A client for ``runtime`` in this process: no transport, no JSON text in between.

    No probe: the highest allowed version the runtime enables wins, and a session-era version
    is negotiated through the runtime exactly as over a wire. ``owner``, ``restart`` and the
    rest: as for :func:`connect` (a restart opens a new in-process connection); ``name``
    defaults to the runtime's name.
    """
    from snodo.transports.direct import DirectTransport

    name = default_name(runtime) if name is None else name
    check_name(name)
    options = build_options(**client_keywords(locals()))
    logs = ServerLogs(log_handler, name)
    policy = restart_policy(restart, backoff, max_restarts, restart_window)
    watched = _owner(owner)
    version = negotiation.direct_version(options.protocol, runtime.enabled_versions)

    def open_direct() -> Negotiated:
        dialect = dialects.get(version)
        transport = logs.attach(DirectTransport(runtime))
        if dialect.stateless:
            return Negotiated(transport, dialect, None)
        try:
            session = initialize_session(transport, options, version, dialect)
        except BaseException:
            transport.close()
            raise
        return Negotiated(transport, dialects.get(session.version), session)

    supervision = Supervision(policy, watched, open_direct, None, on_state, supervisor)
    return _client(open_direct(), options, None, supervision)


def connect(
    target: Any,
    *,
    env: Mapping[str, str | None] | None = None,
    cwd: str | None = None,
    stderr: Any = None,
    protocol: str | Sequence[str] | None = None,
    client_info: Mapping[str, Any] | None = None,
    client_capabilities: Mapping[str, Any] | None = None,
    input_handlers: Mapping[str, Any] | None = None,
    timeout: float | None = 30.0,
    probe_timeout: float = 10.0,
    max_input_rounds: int = 10,
    max_pages: int = 1000,
    max_server_requests: int = 16,
    max_response_bytes: int = 16 * 1024 * 1024,
    reset_timeout_on_progress: bool = False,
    max_total_timeout: float | None = 600.0,
    owner: Any = None,
    headers: Mapping[str, str] | None = None,
    token_provider: Any = None,
    verify: bool = True,
    ca_certs: str | None = None,
    client_cert: str | tuple[str, str] | None = None,
    cache: bool | ResponseStore = False,
    validate_output: bool = False,
    name: str | None = None,
    log_level: str | None = None,
    log_handler: Any = None,
    restart: str = "temporary",
    backoff: Backoff | Mapping[str, Any] | None = None,
    max_restarts: int = 5,
    restart_window: float = 60.0,
    ping_interval: float | None = None,
    on_state: Any = None,
    supervisor: Any = None,
) -> Client:
    """Connect to a server and settle the protocol version before returning.

    ``target`` is ``snodo.Stdio(command, args)``, ``snodo.Http(url)``, ``snodo.Sse(url)`` (the
    HTTP+SSE transport of 2024-11-05, which it implies: a ``protocol=`` without that version is
    -32602), or ``(TransportClass, init_arg)`` for a custom transport (``snodo.Transport``).
    ``snodo.Http`` with 2024-11-05 allowed falls back to HTTP+SSE when its POST of
    ``initialize`` is refused with 400, 404 or 405 (docs/decisions/0040). Allowed versions from both eras are
    probed with ``server/discover`` (``probe_timeout``); any answer but a discovery result
    reopens the transport — on stdio that starts the server again — and sends ``initialize``. A
    pin, or a list from one era, skips the probe.

    ``owner`` (the calling thread, greenlet or actor by default) owns the connection: when it
    ends, the connection closes. ``restart`` ("temporary", "transient" or "permanent"),
    ``backoff``, ``max_restarts`` within ``restart_window`` seconds and ``ping_interval``
    (session era) decide what follows an end; ``on_state`` (a callable, queue or actor ref)
    receives every ``StateChange``; ``supervisor`` (a ``snodo.supervision.Supervisor`` ref; the
    process's connections supervisor by default) is where the connection's owner runs, as a
    ``snodo.Fleet`` puts its servers under its own. See "Long-running programs" in the API tour.
    ``name``
    (derived from ``target`` by default), ``log_level`` and ``log_handler``: the server's log
    messages (``snodo.server_logs``; "Server log messages" in the API tour).
    """
    from snodo.transports.targets import Http, Sse, Stdio

    name = default_name(target) if name is None else name
    check_name(name)
    if isinstance(target, Sse):  # the transport carries 2024-11-05 only
        allowed = None if protocol is None else negotiation.allowed_versions(protocol)
        protocol = legacy_sse.sse_versions(allowed)
    if stderr is not None and not isinstance(target, Stdio):
        raise ValueError("stderr= applies to stdio servers only")
    options = build_options(**client_keywords(locals()))
    check_timeout("probe_timeout", probe_timeout, optional=False)
    check_positive_int("max_server_requests", max_server_requests)
    check_positive_int("max_response_bytes", max_response_bytes)
    check_timeout("ping_interval", ping_interval)
    policy = restart_policy(restart, backoff, max_restarts, restart_window)
    watched = _owner(owner)
    answer = partial(answer_server_request, options.input_handlers)
    logs = ServerLogs(log_handler, name)

    def supervised(
        open_transport: Callable[[], Any], legacy: Callable[[], Any] | None = None
    ) -> Client:
        def reopen() -> Negotiated:
            return negotiate(
                lambda: logs.attach(open_transport()),
                options,
                probe_timeout,
                None if legacy is None else lambda: logs.attach(legacy()),
            )

        supervision = Supervision(policy, watched, reopen, ping_interval, on_state, supervisor)
        deliver_state(on_state, StateChange("connecting", "opening"))
        return _client(reopen(), options, answer, supervision)

    if isinstance(target, (Http, Sse)):
        from snodo.transports.streamable_http import HttpTransport

        if env is not None or cwd is not None:
            raise ValueError("env= and cwd= apply to stdio servers only")

        def open_sse() -> Any:
            from snodo.transports.http_sse import SseTransport

            return SseTransport(
                Sse(target.url),
                headers=headers,
                token_provider=token_provider,
                max_response_bytes=max_response_bytes,
                verify=verify,
                ca_certs=ca_certs,
                client_cert=client_cert,
                on_server_request=answer,
                max_server_requests=max_server_requests,
                connect_timeout=options.timeout,
            )

        if isinstance(target, Sse):
            return supervised(open_sse)

        def open_http() -> HttpTransport:
            return HttpTransport(
                target,
                headers=headers,
                token_provider=token_provider,
                max_response_bytes=max_response_bytes,
                verify=verify,
                ca_certs=ca_certs,
                client_cert=client_cert,
                on_server_request=answer,
                standard_headers=negotiation.announces_standard_headers(options.protocol),
            )

        return supervised(
            open_http, open_sse if legacy_sse.LEGACY_VERSION in options.protocol else None
        )
    if isinstance(target, tuple):
        if env is not None or cwd is not None or headers is not None or token_provider is not None:
            raise ValueError(
                "env=, cwd=, headers= and token_provider= apply to built-in transports only"
            )
        return supervised(custom_opener(target, options, answer))
    if not isinstance(target, Stdio):
        raise TypeError(
            f"cannot connect to {target!r}: expected snodo.Stdio(...), snodo.Http(...) "
            "or (TransportClass, init_arg)"
        )
    if headers is not None or token_provider is not None:
        raise ValueError("headers= and token_provider= apply to HTTP servers only")
    from snodo.transports.stdio import StdioTransport, stderr_mode

    stderr_mode(stderr)  # checked once here, before any server starts

    def open_transport() -> StdioTransport:
        return StdioTransport(
            target,
            env=env,
            cwd=cwd,
            max_line_bytes=max_response_bytes,
            max_server_requests=max_server_requests,
            on_server_request=answer,
            stderr=stderr,
            server_name=name,
        )

    return supervised(open_transport)


def custom_opener(
    target: tuple[Any, ...], options: ClientOptions, answer: ServerRequestHandler
) -> Callable[[], Any]:
    """Check ``(TransportClass, init_arg)`` and return what opens (and reopens) the transport."""
    if len(target) != 2:
        raise TypeError("a custom transport target is (TransportClass, init_arg)")
    transport_class, init_arg = target
    opener = getattr(transport_class, "connect", None)
    if not callable(opener) or not callable(getattr(transport_class, "request", None)):
        raise TypeError(
            f"{transport_class!r} is not a snodo.Transport class: it needs connect() and request()"
        )
    connect_options = ConnectOptions(
        timeout=options.timeout,
        on_server_request=answer,
    )

    def open_custom() -> Any:
        transport = opener(init_arg, connect_options)
        if not callable(getattr(transport, "request", None)) or not callable(
            getattr(transport, "close", None)
        ):
            raise TypeError(f"{transport_class!r}.connect() did not return a snodo.Transport")
        return transport

    return open_custom


def negotiate(
    open_transport: Callable[[], Any],
    options: ClientOptions,
    probe_timeout: float,
    legacy: Callable[[], Any] | None = None,
) -> Negotiated:
    """Open a transport and settle the version as the reference's "Protocol versions" says.

    ``legacy`` opens the HTTP+SSE transport that ``snodo.Http`` falls back to when its POST of
    ``initialize`` is refused (``legacy_sse.falls_back``; None: no fallback)."""
    plan = negotiation.plan(options.protocol)
    transport = open_transport()
    try:
        if plan.action == "stateless":
            return Negotiated(transport, dialects.get(plan.version), None)
        if plan.action == "initialize":
            return _initialized(transport, options, plan.version, legacy)
        verdict = negotiation.probe_verdict(
            _probe(transport, options, probe_timeout), options.protocol
        )
        if verdict.action == "use":
            return Negotiated(transport, dialects.get(verdict.version), None)
        if verdict.action == "initialize":
            return _initialized(transport, options, verdict.version, legacy)
        transport.close()
        transport = open_transport()
        return _initialized(transport, options, verdict.version, legacy)
    except BaseException:
        transport.close()
        raise


def restart_policy(
    restart: str,
    backoff: Backoff | Mapping[str, Any] | None,
    max_restarts: int,
    restart_window: float,
) -> RestartPolicy:
    """The checked ``restart=``, ``backoff=``, ``max_restarts=`` and ``restart_window=``."""
    if backoff is None:
        backoff = Backoff()
    elif isinstance(backoff, Mapping):
        backoff = Backoff(**backoff)
    elif not isinstance(backoff, Backoff):
        raise TypeError("backoff must be a snodo.Backoff or a mapping of its fields")
    return RestartPolicy(restart, backoff, max_restarts, restart_window)  # type: ignore[arg-type]


def _owner(owner: Any) -> Owner:
    return current_owner() if owner is None else owner_of(owner)


def _client(
    negotiated: Negotiated,
    options: ClientOptions,
    answer: ServerRequestHandler | None,
    supervision: Supervision,
) -> Client:
    try:
        return Client(
            negotiated.transport,
            negotiated.dialect,
            options,
            session=negotiated.session,
            on_server_request=answer,
            supervision=supervision,
        )
    except BaseException:
        negotiated.transport.close()
        raise


def initialize_session(
    transport: Transport, options: ClientOptions, version: str, dialect: Dialect
) -> Session:
    """Run ``initialize`` + ``notifications/initialized`` on ``transport`` and check the verdict."""
    if not isinstance(transport, NotifyingTransport):
        raise invalid_params(
            "This transport cannot send notifications, so it cannot open a session-era session",
            {"requested": version},
        )
    request_options = RequestOptions(dialect=dialect, timeout=options.timeout)
    params = negotiation.initialize_params(
        version, options.client_capabilities, options.client_info or {}
    )
    try:
        response = transport.request(
            jsonrpc.request(next_request_id(), "initialize", params), request_options
        )
    except McpError as error:  # a server that exits at start says so
        raise exited_at_start(error) from None
    if "error" in response:
        if "result" in response:  # neither can be trusted: -32000, as for any other call
            results.interpret(dialect, "initialize", response)
        raise McpError.from_wire(response["error"])
    session = negotiation.initialize_verdict(
        response.get("result"),
        options.protocol,
        session_id=session_id_of(transport),  # Mcp-Session-Id, when the transport captured one
    )
    transport.notify(
        jsonrpc.notification("notifications/initialized"),
        RequestOptions(dialect=dialects.get(session.version), timeout=options.timeout),
    )
    if options.log_level is not None:
        send_log_level(
            transport,
            next_request_id(),
            options.log_level,
            session.capabilities,
            dialects.get(session.version),
            options.timeout,
        )
    return session


def _initialized(
    transport: Any,
    options: ClientOptions,
    version: str,
    legacy: Callable[[], Any] | None = None,
) -> Negotiated:
    try:
        session = initialize_session(transport, options, version, dialects.get(version))
    except McpError as error:
        if legacy is None or not legacy_sse.falls_back(error, options.protocol):
            raise
        transport.close()
        return _fell_back(legacy, options, error)
    return Negotiated(transport, dialects.get(session.version), session)


def _fell_back(legacy: Callable[[], Any], options: ClientOptions, refused: McpError) -> Negotiated:
    """The spec's backwards compatibility (2025-03-26): after the POST of ``initialize`` was
    refused, GET the same URL for an HTTP+SSE stream and initialize there with 2024-11-05."""
    try:
        transport = legacy()
    except McpError as error:
        raise legacy_sse.fallback_error(refused, error) from None
    try:
        version = legacy_sse.LEGACY_VERSION
        return _initialized(transport, replace(options, protocol=(version,)), version)
    except BaseException:
        transport.close()
        raise


def _probe(transport: Any, options: ClientOptions, probe_timeout: float) -> dict[str, Any] | None:
    """Send ``server/discover`` on the newest stateless dialect; None for a timeout or failure."""
    dialect = dialects.get(dialects.LATEST)
    params = meta_rules.build_params(
        dialect,
        None,
        client_info=options.client_info,
        client_capabilities=options.client_capabilities,
    )
    message = jsonrpc.request(next_request_id(), "server/discover", params)
    try:
        response: dict[str, Any] = transport.request(
            message, RequestOptions(dialect=dialect, timeout=probe_timeout)
        )
    except McpError as error:
        if error.kind != "transport":
            raise
        return None
    return response


__all__ = [
    "connect",
    "custom_opener",
    "direct",
    "initialize_session",
    "negotiate",
    "restart_policy",
]
