"""Shared helpers for the server tests (no tests here).

Every response a :class:`Conn` receives is validated against the version's ``schema.json``:
the JSON-RPC envelope (``JSONRPCResultResponse``/``JSONRPCErrorResponse``, or 2025-06-18's
``JSONRPCResponse``/``JSONRPCError``), then the result against the definition its method
returns (``CallToolResult``, ``InputRequiredResult``, ...). The schemas allow extra fields,
so the helpers also check that results carry only fields the version's definitions name
(``defined_fields_only``), which is how "session-era results drop fields their schema does
not define" is tested.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from jsonschema import Draft7Validator, Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.protocols import Validator  # type: ignore[import-untyped]
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7, DRAFT202012

from snodo.server import Peer, Runtime, ServerSession, dispatch

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "tests" / "data" / "schema"
EXAMPLES_DIR = SCHEMA_DIR / "2026-07-28" / "examples"

STATELESS = "2026-07-28"
SESSION_VERSIONS = ("2025-11-25", "2025-06-18")
VERSIONS = (STATELESS, *SESSION_VERSIONS)

PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
CI = "io.modelcontextprotocol/clientInfo"
SI = "io.modelcontextprotocol/serverInfo"

#: The result definition each method answers with.
RESULT_DEFS: dict[str, str] = {
    "server/discover": "DiscoverResult",
    "initialize": "InitializeResult",
    "ping": "Result",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "completion/complete": "CompleteResult",
}

#: Error codes with their own definition in the 2026-07-28 schema.
ERROR_DEFS: dict[int, str] = {
    -32021: "MissingRequiredClientCapabilityError",
    -32022: "UnsupportedProtocolVersionError",
}


# -- schemas -------------------------------------------------------------------------------


@functools.cache
def schema(version: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCHEMA_DIR / version / "schema.json").read_text())
    return data


def _defs_key(version: str) -> str:
    return "definitions" if version == "2025-06-18" else "$defs"


def definition(version: str, name: str) -> dict[str, Any]:
    defs: dict[str, Any] = schema(version)[_defs_key(version)]
    return defs[name]  # type: ignore[no-any-return]


@functools.cache
def _registry(version: str) -> Registry[Any]:
    spec = DRAFT7 if version == "2025-06-18" else DRAFT202012
    resource: Resource[Any] = spec.create_resource(schema(version))
    registry: Registry[Any] = Registry().with_resource(f"urn:mcp:{version}", resource)
    return registry


@functools.cache
def validator(version: str, name: str) -> Validator:
    cls = Draft7Validator if version == "2025-06-18" else Draft202012Validator
    ref = {"$ref": f"urn:mcp:{version}#/{_defs_key(version)}/{name}"}
    v: Validator = cls(ref, registry=_registry(version))
    return v


def validate(version: str, name: str, value: Any) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``value`` is a valid ``name``."""
    validator(version, name).validate(value)


def _resolve(version: str, node: Any) -> Any:
    while isinstance(node, dict) and set(node) == {"$ref"}:
        node = definition(version, node["$ref"].rsplit("/", 1)[1])
    return node


def defined_fields_only(version: str, name: str, value: Any, path: str = "$") -> list[str]:
    """Paths of fields in ``value`` that the version's ``name`` definition does not define.

    Walks ``properties`` (through ``$ref`` and array ``items``); stops at ``anyOf`` and at
    objects that allow additional properties.
    """
    return _undefined(version, definition(version, name), value, path)


def _undefined(version: str, node: Any, value: Any, path: str) -> list[str]:
    node = _resolve(version, node)
    if not isinstance(node, dict):
        return []
    if isinstance(value, list) and "items" in node:
        out: list[str] = []
        for i, item in enumerate(value):
            out += _undefined(version, node["items"], item, f"{path}[{i}]")
        return out
    props = node.get("properties")
    if not isinstance(value, dict) or not isinstance(props, dict):
        return []
    if node.get("additionalProperties") not in (None, False):
        return []
    out = []
    for key, item in value.items():
        if key not in props:
            out.append(f"{path}.{key}")
        else:
            out += _undefined(version, props[key], item, f"{path}.{key}")
    return out


def check_response(version: str, method: str | None, response: dict[str, Any]) -> None:
    """Validate a JSON-RPC response for ``method`` against ``version``'s schema."""
    is_2025_06_18 = version == "2025-06-18"
    if "error" in response:
        validate(version, "JSONRPCError" if is_2025_06_18 else "JSONRPCErrorResponse", response)
        code = response["error"]["code"]
        if version == STATELESS and code in ERROR_DEFS:
            validate(version, ERROR_DEFS[code], response)
        return
    validate(version, "JSONRPCResponse" if is_2025_06_18 else "JSONRPCResultResponse", response)
    result = response["result"]
    if method is None or method not in RESULT_DEFS:
        return
    name = RESULT_DEFS[method]
    if version == STATELESS and result.get("resultType") == "input_required":
        name = "InputRequiredResult"
        assert "ttlMs" not in result and "cacheScope" not in result, (
            "input_required is not cacheable"
        )
    if version == STATELESS and method == "ping":
        return
    validate(version, name, result)
    extra = defined_fields_only(version, name, result)
    assert not extra, f"{version} {name} carries fields its schema does not define: {extra}"


# -- the example runtime -------------------------------------------------------------------


@functools.cache
def example_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "example_runtime", ROOT / "examples" / "example_runtime.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def example_runtime() -> Runtime:
    """A fresh example Runtime (``examples/example_runtime.build()``)."""
    runtime: Runtime = example_module().build()
    return runtime


# -- a connection driving dispatch ----------------------------------------------------------

_ids = itertools.count(1)


class Conn:
    """One client connection served by ``dispatch``, speaking ``version``.

    Session-era versions run ``initialize`` + ``notifications/initialized`` on creation.
    Every response is schema-checked; ``ok`` returns the result, ``err`` the error object.
    """

    def __init__(
        self,
        runtime: Runtime,
        version: str = STATELESS,
        *,
        caps: dict[str, Any] | None = None,
        client_info: dict[str, Any] | None = None,
        server_request: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
        kind: str = "direct",
        initialize: bool = True,
    ) -> None:
        self.runtime = runtime
        self.version = version
        self.caps: dict[str, Any] = caps if caps is not None else {}
        self.client_info = client_info or {"name": "test-client", "version": "1.0.0"}
        self.peer = Peer(kind, session=ServerSession(), server_request=server_request)
        self.init_result: dict[str, Any] | None = None
        if version != STATELESS and initialize:
            self.init_result = self.ok(
                "initialize",
                {
                    "protocolVersion": version,
                    "capabilities": self.caps,
                    "clientInfo": self.client_info,
                },
            )
            assert self.init_result["protocolVersion"] == version
            assert self.notify("notifications/initialized") is None

    def meta(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.version != STATELESS:
            return dict(extra or {})
        meta: dict[str, Any] = {PV: self.version, CC: self.caps, CI: self.client_info}
        meta.update(extra or {})
        return meta

    def message(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        meta: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        params = dict(params or {})
        if method != "initialize":
            built = self.meta(meta)
            if built:
                params["_meta"] = built
        return {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        meta: dict[str, Any] | None = None,
        progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        message = self.message(method, params, meta=meta)
        response = dispatch(self.runtime, message, self.peer, progress=progress)
        assert response is not None
        assert response["id"] == message["id"]
        check_response(self.version, method, response)
        return response

    def ok(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        response = self.send(method, params, **kw)
        assert "error" not in response, response
        result: dict[str, Any] = response["result"]
        return result

    def err(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        response = self.send(method, params, **kw)
        assert "result" not in response, response
        error: dict[str, Any] = response["error"]
        return error

    def notify(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any] | None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return dispatch(self.runtime, message, self.peer)


def raw(runtime: Runtime, message: Any, peer: Peer | None = None) -> dict[str, Any] | None:
    """Dispatch an arbitrary message on a fresh direct peer."""
    return dispatch(runtime, message, peer or Peer("direct", session=ServerSession()))
