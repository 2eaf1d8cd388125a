"""The method handlers :func:`snodo.server.dispatcher` runs: one function per client request,
``handler(runtime, ctx, params) -> result``.

A handler raises ``McpError`` for a JSON-RPC error. What a user function raises is mapped
here: a tool's exception becomes a tool error result (``isError: true``, the model sees it);
a resource's, prompt's or completion's is -32603. In the stateless era the methods with
rounds (``tools/call``, ``prompts/get``, ``resources/read``) bind their ``requestState`` to
what they serve before the user function runs (:func:`snodo.server.rounds.begin_round`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from snodo.protocol import subscriptions
from snodo.protocol.errors import (
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    McpError,
    internal_error,
    invalid_params,
    method_not_found,
)
from snodo.protocol.meta import LOG_LEVELS
from snodo.server.catalog import ListKey
from snodo.server.context import Context
from snodo.server.rounds import begin_round
from snodo.server.runtime import Runtime
from snodo.server.subscriptions import ListenStarted
from snodo.server.tool_runs import run_tool

__all__ = ["HANDLERS", "MAX_COMPLETION_VALUES", "Handler", "Result"]

MAX_COMPLETION_VALUES: Final = 100

Result = dict[str, Any]
Handler = Callable[[Runtime, Context, dict[str, Any]], Result]

_D = TypeVar("_D")


def _not_advertised(method: str, capability: str) -> McpError:
    return McpError(
        METHOD_NOT_FOUND,
        f"Method not found: {method} (the server does not offer {capability})",
        {"method": method},
    )


def _failed(doing: str, exc: Exception) -> McpError:
    """-32603 for a user function that raised something other than ``McpError``."""
    return internal_error(f"Error {doing}: {type(exc).__name__}: {exc}")


def _named(
    table: Mapping[str, _D], ctx: Context, params: dict[str, Any], what: str
) -> tuple[str, _D, dict[str, Any] | None]:
    """The tool or prompt ``params`` name (-32601 when there are none, -32602 for a missing
    or unknown name) and its raw ``arguments`` (``{}`` when absent, ``None`` when not an
    object)."""
    if not table:
        raise _not_advertised(ctx.method, f"{what}s")
    name = params.get("name")
    if type(name) is not str:
        raise invalid_params(f"{ctx.method} needs name (a string)")
    found = table.get(name)
    if found is None:
        raise invalid_params(f"Unknown {what}: {name}")
    arguments = params.get("arguments")
    if arguments is None:
        return name, found, {}
    return name, found, arguments if type(arguments) is dict else None


# -- session era ---------------------------------------------------------------------------


def _set_level(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    """``logging/setLevel`` (session era): the session's threshold for ``ctx.log``."""
    if not rt.logging:
        raise _not_advertised(ctx.method, "logging")
    level = params.get("level")
    if type(level) is not str or level not in LOG_LEVELS:
        raise invalid_params(f"Invalid log level: {level!r}")
    peer = ctx.peer
    session = peer.session if peer is not None else None
    if session is None:
        raise method_not_found(ctx.method)
    session.log_level = level
    return {}


# -- discovery and lists -------------------------------------------------------------------


def _discover(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    result: Result = {
        "supportedVersions": list(rt.enabled_versions),
        "capabilities": rt.capabilities,
    }
    if rt.instructions is not None:
        result["instructions"] = rt.instructions
    return result


def _lister(key: ListKey, present: Callable[[Runtime], bool], capability: str) -> Handler:
    def handle(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
        if not present(rt):
            raise _not_advertised(ctx.method, capability)
        items, next_cursor = rt.catalog.page(key, ctx.version, params.get("cursor"))
        result: Result = {key: items}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return result

    return handle


def _has_resources(rt: Runtime) -> bool:
    return rt.serves_resources


# -- tools, resources, prompts -------------------------------------------------------------


def _tools_call(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    name, tool, arguments = _named(rt.catalog.tools, ctx, params, "tool")
    if arguments is None:
        raise invalid_params(f"Invalid arguments for tool {name}: arguments must be an object")
    for required in tool.required:
        if required not in arguments:
            raise invalid_params(
                f"Invalid arguments for tool {name}: Missing required property '{required}'"
            )
    rounds = ctx.rounds
    if rounds is not None:
        begin_round(rounds, rt.state_secret, params, name, arguments)
    tasks = rt.tasks
    if tasks is not None and name in tasks.modes:
        return tasks.call(ctx, tool, arguments)
    return run_tool(tool, arguments, ctx)


def _resources_read(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    if not rt.serves_resources:
        raise _not_advertised(ctx.method, "resources")
    uri = params.get("uri")
    if type(uri) is not str:
        raise invalid_params("resources/read needs uri (a string)")
    catalog = rt.catalog
    resource = catalog.resources.get(uri)
    matched = None
    if resource is None:
        matched = catalog.match_template(uri)
        if matched is None:
            if ctx.stateless:
                raise invalid_params(f"Resource not found: {uri}", {"uri": uri})
            raise McpError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})
    rounds = ctx.rounds
    if rounds is not None:
        begin_round(rounds, rt.state_secret, params, uri, None)
    try:
        if resource is not None:
            value = resource.fn(ctx)
            mime_type = resource.mime_type
        else:
            assert matched is not None
            template, variables = matched
            value = template.fn(uri, variables, ctx)
            mime_type = template.mime_type
        return {"contents": _contents(uri, mime_type, value)}
    except McpError:
        raise
    except Exception as exc:
        raise _failed(f"reading resource {uri}", exc) from None


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
    name, prompt, arguments = _named(rt.catalog.prompts, ctx, params, "prompt")
    if arguments is None or not all(type(v) is str for v in arguments.values()):
        raise invalid_params(
            f"Invalid arguments for prompt {name}: arguments must map names to strings"
        )
    missing = [a for a in prompt.required if a not in arguments]
    if missing:
        raise invalid_params(
            f"Invalid arguments for prompt {name}: Missing required argument(s) {', '.join(missing)}"
        )
    rounds = ctx.rounds
    if rounds is not None:
        begin_round(rounds, rt.state_secret, params, name, arguments)
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
        raise _failed(f"getting prompt {name}", exc) from None
    description = prompt.definition.get("description")
    if description is not None and "description" not in result:
        result["description"] = description
    return result


def _complete(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    catalog = rt.catalog
    fn = catalog.completion
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
        if ref["name"] not in catalog.prompts:
            raise invalid_params(f"Unknown prompt: {ref['name']}")
    elif kind == "ref/resource":
        uri = ref.get("uri")
        if type(uri) is not str:
            raise invalid_params("ref/resource needs uri (a string)")
        if uri not in catalog.templates and uri not in catalog.resources:
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
        raise _failed(f"completing {argument['name']}", exc) from None
    if len(values) > MAX_COMPLETION_VALUES:
        completion.setdefault("total", len(values))
        completion["hasMore"] = True
        values = values[:MAX_COMPLETION_VALUES]
    elif not isinstance(value, dict):
        completion["total"] = len(values)
        completion["hasMore"] = False
    return {"completion": {"values": values, **completion}}


# -- subscriptions -------------------------------------------------------------------------


def _listen(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
    """``subscriptions/listen``: acknowledge the honoured subset and hand the stream to the
    transport (``Peer.listen``); no response until the stream ends."""
    source = rt.subscription_source
    if source is None:
        raise method_not_found(ctx.method)
    requested = subscriptions.validate_filter(params.get("notifications"))
    peer = ctx.peer
    start = peer.listen if peer is not None else None
    if start is None:
        raise McpError(
            METHOD_NOT_FOUND,
            "Method not found: subscriptions/listen (this transport cannot stream it)",
            {"method": ctx.method},
        )
    # Every core kind is honoured (a list may gain its first item later); of the extension
    # keys, the tasks extension's taskIds when the runtime serves tasks (others are left out).
    accepted = subscriptions.honoured(requested)
    task_ids = requested.get("taskIds")
    if rt.tasks is not None and type(task_ids) is list and task_ids:
        accepted["taskIds"] = [t for t in dict.fromkeys(task_ids) if type(t) is str]
    start(source.open(ctx.request_id, accepted))
    raise ListenStarted()


def _resource_subscription(subscribe: bool) -> Handler:
    def handle(rt: Runtime, ctx: Context, params: dict[str, Any]) -> Result:
        if rt.subscription_source is None or not rt.serves_resources:
            raise _not_advertised(ctx.method, "resources.subscribe")
        uri = params.get("uri")
        if type(uri) is not str:
            raise invalid_params(f"{ctx.method} needs uri (a string)")
        peer = ctx.peer
        session = peer.session if peer is not None else None
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


HANDLERS: Final[dict[str, Handler]] = {
    "subscriptions/listen": _listen,
    "resources/subscribe": _resource_subscription(True),
    "resources/unsubscribe": _resource_subscription(False),
    "server/discover": _discover,
    "tools/list": _lister("tools", lambda rt: bool(rt.catalog.tools), "tools"),
    "tools/call": _tools_call,
    "resources/list": _lister("resources", _has_resources, "resources"),
    "resources/templates/list": _lister("resourceTemplates", _has_resources, "resources"),
    "resources/read": _resources_read,
    "prompts/list": _lister("prompts", lambda rt: bool(rt.catalog.prompts), "prompts"),
    "prompts/get": _prompts_get,
    "completion/complete": _complete,
    "logging/setLevel": _set_level,
}
