"""validate_output: a tool result's structuredContent checked against the tool's outputSchema
(the specification's "Clients SHOULD validate structured results against this schema"; issue 18
item 6, docs/decisions/0041), on direct, stdio and HTTP, sync and asyncio, and against
server-everything's structured-output tool."""

from __future__ import annotations

import asyncio
import copy
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import snodo
import snodo.aio
from snodo.server import Runtime
from snodo.server.http_server import serve_http
from tests.support import everything_support as everything
from tests.support import stdio_support as support

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "price": {"type": "number"}},
                "required": ["id"],
            },
        }
    },
    "required": ["items"],
}
GOOD = {"items": [{"id": "a", "price": 1}, {"id": "b", "price": 2.5}, {"id": "c", "price": 3}]}


def _bad_type() -> dict[str, Any]:
    bad = copy.deepcopy(GOOD)
    bad["items"][2]["price"] = "free"
    return bad


def _missing_required() -> dict[str, Any]:
    bad = copy.deepcopy(GOOD)
    del bad["items"][1]["id"]
    return bad


def shop(arguments: dict[str, Any], ctx: Any) -> Any:
    mode = arguments.get("mode", "good")
    if mode == "good":
        return GOOD
    if mode == "bad_type":
        return _bad_type()
    if mode == "missing_required":
        return _missing_required()
    if mode == "no_structured":
        return {"content": [{"type": "text", "text": "no structure"}]}
    if mode == "tool_error":
        return {"content": [{"type": "text", "text": "it broke"}], "isError": True}
    raise ValueError(mode)


def build() -> Runtime:
    """A Runtime whose ``shop`` tool declares SCHEMA and returns what ``mode`` says."""
    rt = Runtime("output-schema", "1.0")
    rt.add_tool("shop", shop, description="Items", output_schema=SCHEMA)
    rt.add_tool("plain", lambda args, ctx: {"anything": 1}, description="No outputSchema")
    return rt


def __getattr__(name: str) -> Any:
    """``tests.test_client_output_schema:runtime`` for ``python -m snodo.server``."""
    if name == "runtime":
        return build()
    raise AttributeError(name)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    server = serve_http(build())
    try:
        yield server.url
    finally:
        server.close()


def open_client(transport: str, url: str, **options: Any) -> snodo.Client:
    if transport == "direct":
        return snodo.direct(build(), **options)
    if transport == "stdio":
        stdio = support.snodo_server("tests.test_client_output_schema:runtime")
        return snodo.connect(stdio, cwd=str(support.ROOT), **options)
    return snodo.connect(snodo.Http(url), **options)


def calls(client: Any, *, on_client: bool) -> None:
    """Every acceptance case of item 6 on one client (validate_output on the client or per call)."""
    per_call: dict[str, Any] = {} if on_client else {"validate_output": True}
    assert client.call_tool("shop", {}, **per_call)["structuredContent"] == GOOD

    with pytest.raises(snodo.McpError) as caught:
        client.call_tool("shop", {"mode": "bad_type"}, **per_call)
    error = caught.value
    assert error.code == -32602
    assert "$.items[2].price: type: expected number, got string" in error.message
    assert error.data["structuredContent"] == _bad_type()  # the result is kept
    assert error.cause[:2] == ("output_schema", "mismatch")

    with pytest.raises(snodo.McpError) as caught:
        client.call_tool("shop", {"mode": "missing_required"}, **per_call)
    assert "$.items[1]: required: 'id'" in caught.value.message

    with pytest.raises(snodo.McpError) as caught:
        client.call_tool("shop", {"mode": "no_structured"}, **per_call)
    assert caught.value.code == -32600
    assert caught.value.cause == ("output_schema", "missing")
    assert caught.value.data["content"][0]["text"] == "no structure"

    errored = client.call_tool("shop", {"mode": "tool_error"}, **per_call)
    assert errored["isError"] is True  # isError results are not validated
    assert client.call_tool("plain", {}, **per_call)["structuredContent"] == {"anything": 1}


@pytest.mark.parametrize("transport", ["direct", "stdio", "http"])
def test_validate_output_on_the_client_and_per_call(transport: str, http_url: str) -> None:
    with open_client(transport, http_url, validate_output=True) as client:
        calls(client, on_client=True)
        # Per call, off: the invalid result is returned as it came.
        off = client.call_tool("shop", {"mode": "bad_type"}, validate_output=False)
        assert off["structuredContent"] == _bad_type()
    with open_client(transport, http_url) as client:
        assert client.call_tool("shop", {"mode": "bad_type"})["structuredContent"] == _bad_type()
        calls(client, on_client=False)


def test_a_passed_definition_is_used_without_listing() -> None:
    rt = build()
    client = snodo.direct(rt, validate_output=True)
    stats_before = client.stats()["calls_sent"]
    definition = {"name": "shop", "outputSchema": SCHEMA}
    with pytest.raises(snodo.McpError) as caught:
        client.call_tool(definition, {"mode": "bad_type"})
    assert "$.items[2].price" in caught.value.message
    assert client.stats()["calls_sent"] == stats_before + 1  # the call only, no tools/list
    # A definition whose schema says otherwise is what the result is judged by.
    loose = {"name": "shop", "outputSchema": {"type": "object"}}
    assert client.call_tool(loose, {"mode": "bad_type"})["structuredContent"] == _bad_type()
    # By name: listed once, then remembered (one tools/list for two calls).
    sent = client.stats()["calls_sent"]
    client.call_tool("shop", {})
    client.call_tool("shop", {})
    assert client.stats()["calls_sent"] == sent + 3
    client.close()


def test_a_remembered_schema_that_changed_is_listed_again() -> None:
    """A schema remembered from an earlier listing may be stale: the tools are listed once more
    and the result is judged by the server's current schema."""
    rt = build()
    client = snodo.direct(rt, validate_output=True)
    with pytest.raises(snodo.McpError):  # lists the tools, remembers SCHEMA
        client.call_tool("shop", {"mode": "bad_type"})
    rt.add_tool("shop", shop, description="Items", output_schema={"type": "object"})
    sent = client.stats()["calls_sent"]
    assert client.call_tool("shop", {"mode": "bad_type"})["structuredContent"] == _bad_type()
    assert client.stats()["calls_sent"] == sent + 2  # the call, then one tools/list
    client.close()


def test_a_network_ref_is_never_fetched() -> None:
    """$ref resolution: implementations MUST NOT dereference a network $ref; the schema is
    refused, not treated as permissive."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"type": "string"}')

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ref = f"http://127.0.0.1:{server.server_port}/schema.json"
        rt = Runtime("refs", "1.0")
        schema = {"type": "object", "properties": {"a": {"$ref": ref}}}
        rt.add_tool("t", lambda args, ctx: {"a": 1}, output_schema=schema)
        with snodo.direct(rt, validate_output=True) as client:
            with pytest.raises(snodo.McpError) as caught:
                client.call_tool("t", {})
        assert caught.value.code == -32602
        assert caught.value.cause[:2] == ("output_schema", "schema")
        assert caught.value.data["structuredContent"] == {"a": 1}
        assert hits == []
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_asyncio_client_validates(http_url: str) -> None:
    async def main() -> None:
        async with await snodo.aio.connect(snodo.Http(http_url), validate_output=True) as client:
            assert (await client.call_tool("shop", {}))["structuredContent"] == GOOD
            with pytest.raises(snodo.McpError) as caught:
                await client.call_tool("shop", {"mode": "bad_type"})
            assert "$.items[2].price" in caught.value.message
            off = await client.call_tool("shop", {"mode": "bad_type"}, validate_output=False)
            assert off["structuredContent"] == _bad_type()

    asyncio.run(main())


def test_option_checks() -> None:
    with pytest.raises(TypeError, match="validate_output"):
        snodo.direct(build(), validate_output="yes")  # type: ignore[arg-type]
    with snodo.direct(build()) as client:
        with pytest.raises(TypeError, match="validate_output"):
            client.call_tool("shop", {}, validate_output=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_server_everything_structured_output_validates_cleanly(
    transport: str, tmp_path: Any
) -> None:
    """server-everything (the TypeScript SDK's reference server) has get-structured-content,
    a tool with an outputSchema: its results pass."""
    node = everything.ensure_installed()
    if transport == "stdio":
        client = snodo.connect(
            snodo.Stdio(node, [str(everything.ENTRY), "stdio"]), validate_output=True
        )
        try:
            _everything_calls(client)
        finally:
            client.close()
        return
    with everything.http_server(node, tmp_path) as server:
        with snodo.connect(snodo.Http(server.url), validate_output=True) as client:
            _everything_calls(client)


def _everything_calls(client: snodo.Client) -> None:
    tools = {tool["name"]: tool for tool in client.list_tools()}
    assert "outputSchema" in tools["get-structured-content"]
    for city in ("New York", "Chicago", "Los Angeles"):
        result = client.call_tool("get-structured-content", {"location": city})
        assert isinstance(result["structuredContent"]["temperature"], (int, float))


def test_a_fleet_server_validates_and_forwards_the_call_option() -> None:
    """snodo.Fleet: "validate_output" is a server's key, and Fleet.call_tool forwards the
    per-call keyword to the server's Client."""
    entry = {
        "command": support.PYTHON,
        "args": ["-m", "snodo.server", "tests.test_client_output_schema:runtime"],
        "cwd": str(support.ROOT),
        "validate_output": True,
    }
    with snodo.Fleet({"mcpServers": {"s": entry}}) as fleet:
        assert fleet.call_tool("s_shop", {})["structuredContent"] == GOOD
        with pytest.raises(snodo.McpError) as caught:
            fleet.call_tool("s_shop", {"mode": "bad_type"})
        assert "$.items[2].price: type: expected number" in caught.value.message
        off = fleet.call_tool("s_shop", {"mode": "bad_type"}, validate_output=False)
        assert off["structuredContent"] == _bad_type()


def test_the_actor_proxy_validates() -> None:
    from snodo.actors import start_direct

    ref = start_direct(build(), validate_output=True)
    try:
        mcp = ref.proxy()
        assert mcp.call_tool("shop", {}).get(timeout=10)["structuredContent"] == GOOD
        with pytest.raises(snodo.McpError) as caught:
            mcp.call_tool("shop", {"mode": "missing_required"}).get(timeout=10)
        assert "$.items[1]: required: 'id'" in caught.value.message
        off = mcp.call_tool("shop", {"mode": "bad_type"}, validate_output=False).get(timeout=10)
        assert off["structuredContent"] == _bad_type()
    finally:
        ref.stop()
