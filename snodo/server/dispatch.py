"""``dispatch``: serve one decoded JSON-RPC message against a :class:`Runtime`, for any of the
three protocol versions. The direct client, the stdio server and the HTTP server all call it.

Which version serves a request:

1. ``initialize`` runs the initialize lifecycle (only when the runtime enables an
   initialize-era version; otherwise -32601).
2. A peer whose session has completed ``initialize`` is served by the session's version.
3. Otherwise ``params._meta["io.modelcontextprotocol/protocolVersion"]`` names the version: a
   stateless version the runtime enables serves it; any other value is -32022 with
   ``data {"supported", "requested"}``. A runtime that enables a stateless version answers a
   request without that key with -32602 (a bare ``ping`` excepted: it is the one request the
   initialize era allows before ``initialize``).
4. A legacy-only runtime without a session answers like a legacy server: ``ping`` gets ``{}``,
   a method the enabled legacy catalogs define gets -32600 "Server not initialized", and any
   other method (``server/discover`` among them) gets -32601.

dispatch never raises for bad client input: it returns a JSON-RPC error response. Handler
exceptions never escape either (see the handlers below for the mapping).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, Final

import orjson

from snodo.protocol import subscriptions
from snodo.protocol.dialects import DIALECTS, Dialect
from snodo.protocol.errors import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    McpError,
    internal_error,
    invalid_params,
    method_not_found,
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
from snodo.server.request_state import INVALID_STATE, arguments_digest, decode_state, encode_state
from snodo.server.runtime import HINT_FOR_METHOD, Runtime
from snodo.server.shaping import ANY_STRUCTURED_CONTENT
from snodo.server.subscriptions import ListenStarted

# The 2026-07-28 _meta keys (kept private here; snodo.protocol.meta is the public home).
PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"

LOG_LEVELS: Final = frozenset(
    {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
)
MAX_COMPLETION_VALUES: Final = 100

Result = dict[str, Any]
Handler = Callable[[Runtime, Context, dict[str, Any]], Result]


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
    if type(message) is not dict:
        return _error(
            None, McpError(INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
        )
    method = message.get("method")
    if method is None and ("result" in message or "error" in message):
        return None  # a response to a server request: the transport routes those itself
    if "id" not in message:
        if isinstance(method, str):
            _notification(method, message.get("params"), peer)
        return None
    rid = message["id"]
    if type(rid) is not str and type(rid) is not int:
        return _error(
            None, McpError(INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
        )
    if message.get("jsonrpc") != "2.0" or type(method) is not str:
        return _error(
            rid,
            McpError(INVALID_REQUEST, "Invalid Request: jsonrpc must be '2.0' and method a string"),
        )
    params = message.get("params")
    if params is None:
        params = {}
    elif type(params) is not dict:
        return _error(rid, invalid_params("params must be an object"))
    try:
        result = _serve(runtime, rid, method, params, peer, progress, notify)
    except McpError as exc:
        return {"jsonrpc": "2.0", "id": rid, "error": exc.to_wire()}
    except ListenStarted:
        return None  # the transport streams the subscription; its end is the response
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _error(rid: str | int | None, exc: McpError) -> dict[str, Any]:
    response: dict[str, Any] = {"jsonrpc": "2.0"}
    if rid is not None:
        response["id"] = rid
    response["error"] = exc.to_wire()
    return response


# -- notifications -------------------------------------------------------------------------


def _notification(method: str, params: object, peer: Peer) -> None:
    if method == "notifications/cancelled":
        if type(params) is dict:
            rid = params.get("requestId")
            if type(rid) is str or type(rid) is int:
                ctx = peer.inflight.get(rid)
                if ctx is not None:
                    ctx._cancel()
    elif method == "notifications/initialized":
        session = peer.session
        if session is not None and session.version is not None:
            session.initialized = True
    # Every other notification is ignored.


# -- version selection ---------------------------------------------------------------------


def _serve(
    rt: Runtime,
    rid: str | int,
    method: str,
    params: dict[str, Any],
    peer: Peer,
    sink: ProgressSink | None,
    notify: NotifySink | None = None,
) -> Result:
    if method == "initialize":
        meta = params.get("_meta")
        if type(meta) is dict and meta.get(PROTOCOL_VERSION) in rt._stateless:
            raise method_not_found(method)  # a 2026-07-28 request: initialize was removed
        return _initialize(rt, params, peer)
    session = peer.session
    if session is not None and session.version is not None:
        return _serve_session(
            rt, DIALECTS[session.version], session, rid, method, params, peer, sink, notify
        )
    meta = params.get("_meta")
    if rt._stateless:
        version = meta.get(PROTOCOL_VERSION) if type(meta) is dict else None
        if version is None:
            if method == "ping" and rt._session:
                return {}
            raise invalid_params(f"Missing required _meta key {PROTOCOL_VERSION}")
        if type(version) is not str:
            raise invalid_params(f"_meta {PROTOCOL_VERSION} must be a string")
        dialect = rt._stateless.get(version)
        if dialect is None:
            raise _unsupported_version(rt, version)
        assert type(meta) is dict
        return _serve_stateless(rt, dialect, rid, method, params, meta, peer, sink, notify)
    if method == "ping":
        return {}
    if any(method in d.client_requests for d in rt._session.values()):
        raise McpError(INVALID_REQUEST, "Server not initialized: send initialize first")
    raise method_not_found(method)


def _unsupported_version(rt: Runtime, version: str) -> McpError:
    if version in rt._session:
        message = f"Protocol version {version} needs the initialize handshake"
    else:
        message = f"Unsupported protocol version: {version}"
    return McpError(
        UNSUPPORTED_PROTOCOL_VERSION,
        message,
        {"supported": list(rt.enabled_versions), "requested": version},
    )


def _serve_stateless(
    rt: Runtime,
    dialect: Dialect,
    rid: str | int,
    method: str,
    params: dict[str, Any],
    meta: dict[str, Any],
    peer: Peer,
    sink: ProgressSink | None,
    notify: NotifySink | None = None,
) -> Result:
    caps = meta.get(CLIENT_CAPABILITIES)
    if type(caps) is not dict:
        raise invalid_params(f"Missing required _meta key {CLIENT_CAPABILITIES} (an object)")
    if method not in dialect.client_requests:
        raise method_not_found(method)
    handler = _HANDLERS.get(method)
    if handler is None:
        raise method_not_found(method)
    info = meta.get(CLIENT_INFO)
    if info is not None and type(info) is not dict:
        raise invalid_params(f"_meta {CLIENT_INFO} must be an object")
    level = meta.get(LOG_LEVEL)
    if level is not None and (type(level) is not str or level not in LOG_LEVELS):
        raise invalid_params(f"Invalid log level: {level!r}")
    token = meta.get("progressToken")
    if token is not None and type(token) is not str and type(token) is not int:
        raise invalid_params("progressToken must be a string or an integer")
    ctx = Context(
        dialect.version,
        rid,
        method,
        caps,
        info,
        meta,
        stateless=True,
        mrtr=method in dialect.mrtr_methods,
        peer=peer,
        progress=sink,
        progress_token=token,
        notify=notify if rt.logging else None,
        log_level=level,
    )
    inflight = peer.inflight
    inflight[rid] = ctx
    try:
        result = handler(rt, ctx, params)
        result["resultType"] = "complete"
        if method in dialect.cacheable_methods:
            hint = rt.cache_hints[HINT_FOR_METHOD[method]]
            result["ttlMs"] = hint.ttl_ms
            result["cacheScope"] = hint.scope
    except InputRequiredSignal as signal:
        result = _input_required(rt, ctx, signal.requests)
    except RetryLaterSignal:
        result = _input_required(rt, ctx, None)
    finally:
        if inflight.get(rid) is ctx:
            del inflight[rid]
    result_meta = result.get("_meta")
    server_info = rt.server_info_for(dialect.version)
    if result_meta is None:
        result["_meta"] = {SERVER_INFO: server_info}
    else:
        result["_meta"] = (
            {**result_meta, SERVER_INFO: server_info}
            if type(result_meta) is dict
            else {SERVER_INFO: server_info}
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
    notify: NotifySink | None = None,
) -> Result:
    if method not in dialect.client_requests:
        raise method_not_found(method)
    if method == "ping":
        return {}
    handler = _HANDLERS.get(method)
    if handler is None:
        raise method_not_found(method)
    meta = params.get("_meta")
    if meta is None:
        meta = {}
    elif type(meta) is not dict:
        raise invalid_params("_meta must be an object")
    token = meta.get("progressToken")
    if token is not None and type(token) is not str and type(token) is not int:
        raise invalid_params("progressToken must be a string or an integer")
    ctx = Context(
        dialect.version,
        rid,
        method,
        session.client_capabilities,
        session.client_info,
        meta,
        stateless=False,
        peer=peer,
        progress=sink,
        progress_token=token,
        notify=notify if rt.logging else None,
        log_level=session.log_level or "debug",
    )
    inflight = peer.inflight
    inflight[rid] = ctx
    try:
        return handler(rt, ctx, params)
    finally:
        if inflight.get(rid) is ctx:
            del inflight[rid]


# -- initialize ----------------------------------------------------------------------------


def _initialize(rt: Runtime, params: dict[str, Any], peer: Peer) -> Result:
    if not rt._session or rt._latest_session is None:
        raise method_not_found("initialize")
    session = peer.session
    if session is None:
        raise internal_error("This transport cannot hold an initialize-era session")
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
    version = requested if requested in rt._session else rt._latest_session
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


# -- multi round-trip ----------------------------------------------------------------------


def _prepare_rounds(
    rt: Runtime, ctx: Context, params: dict[str, Any], name: str, arguments: object
) -> None:
    """Bind the request's identity and load the answers a ``requestState`` carries.

    With a ``requestState``, ``inputResponses`` are accepted only for the keys the previous round
    asked (listed in that valid state). Without one (a first request that already carries
    answers), they are offered for the keys this run asks. Either way other keys are ignored,
    every answer is validated when the handler takes it, and a missing answer is asked again.
    """
    ctx._binding = (name, arguments)
    responses = params.get("inputResponses")
    if responses is not None and type(responses) is not dict:
        raise invalid_params("inputResponses must be an object")
    token = params.get("requestState")
    if token is None:
        if responses:
            ctx._answers = {key: value for key, value in responses.items() if type(key) is str}
        return
    state = decode_state(rt.state_secret, token)
    rounds = state.get("r")
    answers = state.get("a")
    pending = state.get("p")
    if (
        state.get("m") != ctx.method
        or state.get("n") != name
        or state.get("h") != arguments_digest(arguments)
        or type(rounds) is not int
        or type(answers) is not dict
        or type(pending) is not list
    ):
        raise invalid_params(INVALID_STATE)
    if responses:
        for key in pending:
            if type(key) is str and key in responses:
                answers[key] = responses[key]
    ctx.round = rounds
    ctx._answers = answers


def _input_required(
    rt: Runtime, ctx: Context, requests: dict[str, dict[str, Any]] | None
) -> Result:
    name, arguments = ctx._binding
    state = {
        "m": ctx.method,
        "n": name,
        "h": arguments_digest(arguments),
        "r": ctx.round + 1,
        "a": ctx._answers,
        "p": list(requests or ()),
    }
    result: Result = {"resultType": "input_required"}
    if requests:
        result["inputRequests"] = requests
    try:
        result["requestState"] = encode_state(rt.state_secret, state)
    except (TypeError, ValueError):
        raise invalid_params("inputResponses must hold JSON values") from None
    return result


# -- handlers ------------------------------------------------------------------------------


def _not_advertised(method: str, capability: str) -> McpError:
    return McpError(
        METHOD_NOT_FOUND,
        f"Method not found: {method} (the server does not offer {capability})",
        {"method": method},
    )


def _set_level(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    """``logging/setLevel`` (initialize era): the session's threshold for ``ctx.log``."""
    if not rt.logging:
        raise _not_advertised(ctx.method, "logging")
    level = params.get("level")
    if type(level) is not str or level not in LOG_LEVELS:
        raise invalid_params(f"Invalid log level: {level!r}")
    session = ctx._peer.session if ctx._peer is not None else None
    if session is None:
        raise method_not_found(ctx.method)
    session.log_level = level
    return {}


def _discover(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    result: Result = {
        "supportedVersions": list(rt.enabled_versions),
        "capabilities": rt.capabilities,
    }
    if rt.instructions is not None:
        result["instructions"] = rt.instructions
    return result


def _lister(key: str, present: Callable[[Runtime], bool], capability: str) -> Handler:
    def handle(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
        if not present(rt):
            raise _not_advertised(ctx.method, capability)
        items, next_cursor = rt._page(key, ctx.version, params.get("cursor"))
        result: Result = {key: items}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return result

    return handle


def _has_resources(rt: Runtime) -> bool:
    return bool(rt._resources or rt._templates)


def _tools_call(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    tools = rt._tools
    if not tools:
        raise _not_advertised(ctx.method, "tools")
    name = params.get("name")
    if type(name) is not str:
        raise invalid_params("tools/call needs name (a string)")
    tool = tools.get(name)
    if tool is None:
        raise invalid_params(f"Unknown tool: {name}")
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    elif type(arguments) is not dict:
        raise invalid_params(f"Invalid arguments for tool {name}: arguments must be an object")
    for required in tool.required:
        if required not in arguments:
            raise invalid_params(
                f"Invalid arguments for tool {name}: Missing required property '{required}'"
            )
    if ctx._mrtr:
        _prepare_rounds(rt, ctx, params, name, arguments)
    try:
        value = tool.fn(arguments, ctx)
        if type(value) is str:
            return {"content": [{"type": "text", "text": value}]}
        if isinstance(value, dict) and "content" in value:
            return dict(value)
        if value is None:
            return {"content": []}
        result: Result = {"content": [{"type": "text", "text": orjson.dumps(value).decode()}]}
        if isinstance(value, dict) or ctx.version in ANY_STRUCTURED_CONTENT:
            result["structuredContent"] = value
        return result
    except McpError:
        raise
    except Exception as exc:
        return {
            "content": [{"type": "text", "text": f"{type(exc).__name__}: {exc}"}],
            "isError": True,
        }


def _resources_read(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    if not _has_resources(rt):
        raise _not_advertised(ctx.method, "resources")
    uri = params.get("uri")
    if type(uri) is not str:
        raise invalid_params("resources/read needs uri (a string)")
    resource = rt._resources.get(uri)
    variables: dict[str, str] | None = None
    template = None
    if resource is None:
        for candidate in list(rt._templates.values()):
            variables = candidate.match(uri)
            if variables is not None:
                template = candidate
                break
        if template is None:
            if ctx.stateless:
                raise invalid_params(f"Resource not found: {uri}", {"uri": uri})
            raise McpError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})
    if ctx._mrtr:
        _prepare_rounds(rt, ctx, params, uri, None)
    try:
        if resource is not None:
            value = resource.fn(ctx)
            mime_type = resource.mime_type
        else:
            assert template is not None and variables is not None
            value = template.fn(uri, variables, ctx)
            mime_type = template.mime_type
        return {"contents": _contents(uri, mime_type, value)}
    except McpError:
        raise
    except Exception as exc:
        raise internal_error(f"Error reading resource {uri}: {type(exc).__name__}: {exc}") from None


def _contents(uri: str, mime_type: str | None, value: object) -> list[dict[str, Any]]:
    if isinstance(value, str):
        item: dict[str, Any] = {"uri": uri, "text": value}
    elif isinstance(value, (bytes, bytearray)):
        item = {"uri": uri, "blob": base64.b64encode(value).decode("ascii")}
    elif isinstance(value, dict):
        item = dict(value)
        item.setdefault("uri", uri)
    elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return [_contents(uri, mime_type, v)[0] for v in value]
    else:
        raise TypeError(
            f"a resource handler must return str, bytes, dict or list[dict], not {type(value).__name__}"
        )
    if mime_type is not None:
        item.setdefault("mimeType", mime_type)
    return [item]


def _prompts_get(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    prompts = rt._prompts
    if not prompts:
        raise _not_advertised(ctx.method, "prompts")
    name = params.get("name")
    if type(name) is not str:
        raise invalid_params("prompts/get needs name (a string)")
    prompt = prompts.get(name)
    if prompt is None:
        raise invalid_params(f"Unknown prompt: {name}")
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    elif type(arguments) is not dict or not all(type(v) is str for v in arguments.values()):
        raise invalid_params(
            f"Invalid arguments for prompt {name}: arguments must map names to strings"
        )
    missing = [a for a in prompt.required if a not in arguments]
    if missing:
        raise invalid_params(
            f"Invalid arguments for prompt {name}: Missing required argument(s) {', '.join(missing)}"
        )
    if ctx._mrtr:
        _prepare_rounds(rt, ctx, params, name, arguments)
    try:
        value = prompt.fn(arguments, ctx)
        if isinstance(value, str):
            result: Result = {
                "messages": [{"role": "user", "content": {"type": "text", "text": value}}]
            }
        elif isinstance(value, list):
            result = {"messages": value}
        elif isinstance(value, dict) and isinstance(value.get("messages"), list):
            result = dict(value)
        else:
            raise TypeError(
                f"a prompt handler must return str, list or a GetPromptResult dict, not {type(value).__name__}"
            )
    except McpError:
        raise
    except Exception as exc:
        raise internal_error(f"Error getting prompt {name}: {type(exc).__name__}: {exc}") from None
    description = prompt.definition.get("description")
    if description is not None and "description" not in result:
        result["description"] = description
    return result


def _complete(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    fn = rt._completion
    if fn is None:
        raise _not_advertised(ctx.method, "completions")
    ref = params.get("ref")
    argument = params.get("argument")
    context = params.get("context")
    if type(ref) is not dict:
        raise invalid_params("completion/complete needs ref (an object)")
    kind = ref.get("type")
    if kind == "ref/prompt":
        if type(ref.get("name")) is not str:
            raise invalid_params("ref/prompt needs name (a string)")
        if ref["name"] not in rt._prompts:
            raise invalid_params(f"Unknown prompt: {ref['name']}")
    elif kind == "ref/resource":
        uri = ref.get("uri")
        if type(uri) is not str:
            raise invalid_params("ref/resource needs uri (a string)")
        if uri not in rt._templates and uri not in rt._resources:
            raise invalid_params(f"Unknown resource reference: {uri}")
    else:
        raise invalid_params("ref.type must be ref/prompt or ref/resource")
    if (
        type(argument) is not dict
        or type(argument.get("name")) is not str
        or type(argument.get("value")) is not str
    ):
        raise invalid_params("completion/complete needs argument {name, value} (strings)")
    if context is not None and type(context) is not dict:
        raise invalid_params("completion/complete context must be an object")
    try:
        value = fn(ref, argument, context, ctx)
        completion: dict[str, Any] = {}
        if isinstance(value, dict):
            values = value.get("values")
            for key in ("total", "hasMore"):
                if key in value:
                    completion[key] = value[key]
        else:
            values = value
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise TypeError(
                "a completion handler must return a list of strings or {'values': [...]}"
            )
    except McpError:
        raise
    except Exception as exc:
        raise internal_error(
            f"Error completing {argument['name']}: {type(exc).__name__}: {exc}"
        ) from None
    if len(values) > MAX_COMPLETION_VALUES:
        completion.setdefault("total", len(values))
        completion["hasMore"] = True
        values = values[:MAX_COMPLETION_VALUES]
    elif not isinstance(value, dict):
        completion["total"] = len(values)
        completion["hasMore"] = False
    return {"completion": {"values": values, **completion}}


def _listen(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    """``subscriptions/listen``: acknowledge the honoured subset and hand the stream to the
    transport (``Peer.listen``); no response until the stream ends."""
    source = rt.subscription_source
    if source is None:
        raise method_not_found(ctx.method)
    requested = subscriptions.validate_filter(params.get("notifications"))
    start = ctx._peer.listen if ctx._peer is not None else None
    if start is None:
        raise McpError(
            METHOD_NOT_FOUND,
            "Method not found: subscriptions/listen (this transport cannot stream it)",
            {"method": ctx.method},
        )
    # Every core kind is honoured (a list may gain its first item later); extension keys
    # (the tasks extension's taskIds) are not: they are left out of the acknowledgement.
    start(source.open(ctx.request_id, subscriptions.honoured(requested)))
    raise ListenStarted()


def _resource_subscription(subscribe: bool) -> Handler:
    def handle(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
        if rt.subscription_source is None or not _has_resources(rt):
            raise _not_advertised(ctx.method, "resources.subscribe")
        uri = params.get("uri")
        if type(uri) is not str:
            raise invalid_params(f"{ctx.method} needs uri (a string)")
        session = ctx._peer.session if ctx._peer is not None else None
        channel = session.channel if session is not None else None
        if channel is None:
            raise McpError(
                METHOD_NOT_FOUND,
                f"Method not found: {ctx.method} (this transport cannot send notifications)",
                {"method": ctx.method},
            )
        if subscribe:
            channel.add_uri(uri)
        else:
            channel.remove_uri(uri)
        return {}

    return handle


_HANDLERS: Final[dict[str, Handler]] = {
    "subscriptions/listen": _listen,
    "resources/subscribe": _resource_subscription(True),
    "resources/unsubscribe": _resource_subscription(False),
    "server/discover": _discover,
    "tools/list": _lister("tools", lambda rt: bool(rt._tools), "tools"),
    "tools/call": _tools_call,
    "resources/list": _lister("resources", _has_resources, "resources"),
    "resources/templates/list": _lister("resourceTemplates", _has_resources, "resources"),
    "resources/read": _resources_read,
    "prompts/list": _lister("prompts", lambda rt: bool(rt._prompts), "prompts"),
    "prompts/get": _prompts_get,
    "completion/complete": _complete,
    "logging/setLevel": _set_level,
}
