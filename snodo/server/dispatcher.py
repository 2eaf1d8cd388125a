"""``dispatch``: serve one decoded JSON-RPC message against a :class:`Runtime`, for any of the
three protocol versions. The direct client, the stdio server and the HTTP server all call it.

The envelope check and the choice of version are pure verdicts
(:mod:`snodo.protocol.serving.selection`); this module applies them: it answers refusals,
marks cancelled requests, runs ``initialize``, builds the request's :class:`Context` and runs
its handler (:mod:`snodo.server.handlers`), turning the stateless era's control signals into
``input_required`` results (:mod:`snodo.server.rounds`).

dispatch never raises for bad client input: it returns a JSON-RPC error response. Handler
exceptions never escape either (see :mod:`snodo.server.handlers` for the mapping).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from snodo import telemetry
from snodo.protocol.dialects import Dialect
from snodo.protocol.errors import (
    INVALID_REQUEST,
    McpError,
    internal_error,
    invalid_params,
    method_not_found,
)
from snodo.protocol.meta import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    LOG_LEVEL_KEY,
    PROGRESS_TOKEN_KEY,
    SERVER_INFO_KEY,
)
from snodo.protocol.serving.selection import (
    CAPABILITIES_PROBLEM,
    Refused,
    check_envelope,
    error_reply,
    meta_keys_problem,
    progress_token_problem,
    select_version,
)
from snodo.server.context import (
    Context,
    InputRequiredSignal,
    NotifySink,
    Peer,
    ProgressSink,
    RetryLaterSignal,
    ServerSession,
)
from snodo.server.handlers import HANDLERS, Result
from snodo.server.rounds import Rounds, input_required
from snodo.server.runtime import HINT_FOR_METHOD, Runtime
from snodo.server.subscriptions import ListenStarted

__all__ = ["dispatch"]


def dispatch(
    runtime: Runtime,
    message: dict[str, Any],
    peer: Peer,
    *,
    progress: ProgressSink | None = None,
    notify: NotifySink | None = None,
) -> dict[str, Any] | None:
    """Serve one decoded JSON-RPC message; the response dict, or ``None`` when none is due.

    ``progress(params)`` receives this request's ``notifications/progress`` params when the
    request carries ``_meta.progressToken``; ``notify(method, params)`` sends any other
    notification about the request on its way back (``notifications/message`` from
    ``ctx.log``). Notifications and responses return ``None``.
    """
    kind = check_envelope(message)
    if kind is not None:
        if kind == "notification":
            method = message.get("method")
            if type(method) is str:
                _notification(method, message.get("params"), peer)
        elif isinstance(kind, Refused):
            return error_reply(kind.id, kind.error)
        return None  # a response to a server request: the transport routes those itself
    rid = message["id"]
    method = message["method"]
    params = message.get("params")
    if params is None:
        params = {}
    if telemetry.enabled is not False and telemetry.live():  # an SDK records spans
        session = peer.session
        return telemetry.serve(
            partial(_request, runtime, rid, method, params, peer, progress, notify),
            rid,
            method,
            params,
            session.version if session is not None else None,
        )
    return _request(runtime, rid, method, params, peer, progress, notify)


def _request(
    runtime: Runtime,
    rid: str | int,
    method: str,
    params: dict[str, Any],
    peer: Peer,
    progress: ProgressSink | None,
    notify: NotifySink | None,
) -> dict[str, Any] | None:
    """Serve one request (``dispatch`` past the envelope check)."""
    session = peer.session
    meta = params.get("_meta")
    try:
        selection = select_version(
            method,
            meta,
            session.version if session is not None else None,
            runtime.stateless_dialects,
            runtime.session_dialects,
            runtime.enabled_versions,
        )
        action = selection.action
        if action == "stateless":
            assert selection.dialect is not None and type(meta) is dict
            result = _serve_stateless(
                runtime, selection.dialect, rid, method, params, meta, peer, progress, notify
            )
        elif action == "session":
            assert selection.dialect is not None and session is not None
            result = _serve_session(
                runtime, selection.dialect, session, rid, method, params, peer, progress, notify
            )
        elif action == "initialize":
            result = _initialize(runtime, params, peer)
        else:
            result = {}  # a bare ping before initialize
    except McpError as exc:
        return {"jsonrpc": "2.0", "id": rid, "error": exc.to_wire()}
    except ListenStarted:
        return None  # the transport streams the subscription; its end is the response
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _notification(method: str, params: object, peer: Peer) -> None:
    if method == "notifications/cancelled":
        if type(params) is dict:
            rid = params.get("requestId")
            if type(rid) is str or type(rid) is int:
                peer.inflight.cancel(rid)
    elif method == "notifications/initialized":
        session = peer.session
        if session is not None and session.version is not None:
            session.initialized = True
    # Every other notification is ignored.


def _serve_stateless(
    rt: Runtime,
    dialect: Dialect,
    rid: str | int,
    method: str,
    params: dict[str, Any],
    meta: dict[str, Any],
    peer: Peer,
    sink: ProgressSink | None,
    notify: NotifySink | None,
) -> Result:
    problem = meta_keys_problem(meta)
    if problem is CAPABILITIES_PROBLEM:
        raise invalid_params(problem)
    handler = HANDLERS.get(method) if method in dialect.client_requests else None
    if handler is None:
        handler = rt.extension_handlers.get(method)
    if handler is None:
        raise method_not_found(method)
    if problem is not None:
        raise invalid_params(problem)
    rounds = Rounds(method) if method in dialect.mrtr_methods else None
    ctx = Context(  # positional: keyword arguments cost on this per-request path
        dialect.version,
        rid,
        method,
        meta[CLIENT_CAPABILITIES_KEY],
        meta.get(CLIENT_INFO_KEY),
        meta,
        True,
        rounds,
        peer,
        sink,
        meta.get(PROGRESS_TOKEN_KEY),
        notify if rt.logging else None,
        meta.get(LOG_LEVEL_KEY),
    )
    inflight = peer.inflight
    inflight.register(rid, ctx)
    try:
        result = handler(rt, ctx, params)
        if result.get("resultType") != "task":  # a task-creating call keeps its own
            result["resultType"] = "complete"
        if method in dialect.cacheable_methods:
            hint = rt.cache_hints[HINT_FOR_METHOD[method]]
            result["ttlMs"] = hint.ttl_ms
            result["cacheScope"] = hint.scope
    except InputRequiredSignal as signal:
        assert rounds is not None
        result = input_required(rounds, rt.state_secret, signal.requests)
    except RetryLaterSignal:
        assert rounds is not None
        result = input_required(rounds, rt.state_secret, None)
    finally:
        inflight.release(rid, ctx)
    result_meta = result.get("_meta")
    server_info = rt.server_info_for(dialect.version)
    if result_meta is None:
        result["_meta"] = {SERVER_INFO_KEY: server_info}
    else:
        result["_meta"] = (
            {**result_meta, SERVER_INFO_KEY: server_info}
            if type(result_meta) is dict
            else {SERVER_INFO_KEY: server_info}
        )
    return result


def _serve_session(
    rt: Runtime,
    dialect: Dialect,
    session: ServerSession,
    rid: str | int,
    method: str,
    params: dict[str, Any],
    peer: Peer,
    sink: ProgressSink | None,
    notify: NotifySink | None,
) -> Result:
    known = method in dialect.client_requests
    if known and method == "ping":
        return {}
    # The version's own methods, then the extensions' (2025-11-25 names tasks/* itself).
    handler = HANDLERS.get(method) if known else None
    if handler is None:
        handler = rt.extension_handlers.get(method)
    if handler is None:
        raise method_not_found(method)
    meta = params.get("_meta")
    if meta is None:
        meta = {}
    elif type(meta) is not dict:
        raise invalid_params("_meta must be an object")
    problem = progress_token_problem(meta)
    if problem is not None:
        raise invalid_params(problem)
    ctx = Context(  # positional: keyword arguments cost on this per-request path
        dialect.version,
        rid,
        method,
        session.client_capabilities,
        session.client_info,
        meta,
        False,
        None,
        peer,
        sink,
        meta.get(PROGRESS_TOKEN_KEY),
        notify if rt.logging else None,
        session.log_level or "debug",
    )
    inflight = peer.inflight
    inflight.register(rid, ctx)
    try:
        return handler(rt, ctx, params)
    finally:
        inflight.release(rid, ctx)


def _initialize(rt: Runtime, params: dict[str, Any], peer: Peer) -> Result:
    """``initialize``: open the peer's session on the version it asked for, or the newest
    enabled session-era version when it asked for another."""
    latest = rt.latest_session_version
    if latest is None:
        raise method_not_found("initialize")
    session = peer.session
    if session is None:
        raise internal_error("This transport cannot hold a session-era session")
    requested = params.get("protocolVersion")
    caps = params.get("capabilities")
    info = params.get("clientInfo")
    if type(requested) is not str:
        raise invalid_params("initialize needs protocolVersion (a string)")
    if type(caps) is not dict:
        raise invalid_params("initialize needs capabilities (an object)")
    if (
        type(info) is not dict
        or type(info.get("name")) is not str
        or type(info.get("version")) is not str
    ):
        raise invalid_params("initialize needs clientInfo (an object with name and version)")
    if session.version is not None:
        raise McpError(INVALID_REQUEST, "Session already initialized")
    version = requested if requested in rt.session_dialects else latest
    session.version = version
    session.client_capabilities = caps
    session.client_info = info
    session.initialized = False
    result: Result = {
        "protocolVersion": version,
        "capabilities": rt.capabilities,
        "serverInfo": rt.server_info_for(version),
    }
    if rt.instructions is not None:
        result["instructions"] = rt.instructions
    return result
