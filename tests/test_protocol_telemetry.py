"""snodo.protocol.telemetry: span names and attributes from the MCP semantic conventions."""

from __future__ import annotations

from snodo.protocol import telemetry as conv


def test_span_name_is_the_method_and_its_target() -> None:
    assert conv.span_name("tools/call", conv.target_of("tools/call", {"name": "echo"})) == (
        "tools/call echo"
    )
    assert conv.span_name("prompts/get", conv.target_of("prompts/get", {"name": "p"})) == (
        "prompts/get p"
    )
    uri = conv.target_of("resources/read", {"uri": "note://x"})
    assert conv.span_name("resources/read", uri) == "resources/read note://x"
    assert conv.span_name("tools/list", conv.target_of("tools/list", {"cursor": "c"})) == (
        "tools/list"
    )
    assert conv.target_of("tools/call", None) is None
    assert conv.target_of("tools/call", {"name": 3}) is None  # not a str: no target


def test_request_attributes_per_method() -> None:
    called = conv.request_attributes(
        "tools/call", {"name": "echo"}, 7, "2025-11-25", "sid", (("network.transport", "pipe"),)
    )
    assert called == {
        "mcp.method.name": "tools/call",
        "jsonrpc.request.id": "7",
        "mcp.protocol.version": "2025-11-25",
        "mcp.session.id": "sid",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "network.transport": "pipe",
    }
    prompt = conv.request_attributes("prompts/get", {"name": "p"}, "a", None, None)
    assert prompt == {
        "mcp.method.name": "prompts/get",
        "jsonrpc.request.id": "a",
        "gen_ai.prompt.name": "p",
    }
    read = conv.request_attributes("resources/read", {"uri": "u://1"}, None, "2026-07-28", None)
    assert read == {
        "mcp.method.name": "resources/read",
        "mcp.protocol.version": "2026-07-28",
        "mcp.resource.uri": "u://1",
    }


def test_http_peer_with_and_without_a_port() -> None:
    assert conv.http_peer("http://127.0.0.1:8123/mcp") == (
        ("network.transport", "tcp"),
        ("server.address", "127.0.0.1"),
        ("server.port", 8123),
    )
    assert dict(conv.http_peer("https://example.test/mcp"))["server.port"] == 443
    assert dict(conv.http_peer("http://example.test/mcp"))["server.port"] == 80


def test_metric_attributes_leave_out_what_names_one_request() -> None:
    attrs = conv.request_attributes("resources/read", {"uri": "u://1"}, 1, "v", "sid")
    assert conv.metric_attributes(attrs, "-32002") == {
        "mcp.method.name": "resources/read",
        "mcp.protocol.version": "v",
        "error.type": "-32002",
    }
    assert "error.type" not in conv.metric_attributes(attrs, None)


def test_error_type_of_a_response() -> None:
    assert conv.error_type_of({"error": {"code": -32601, "message": "x"}}) == "-32601"
    assert conv.error_type_of({"result": {"isError": True, "content": []}}) == "tool_error"
    assert conv.error_type_of({"result": {"content": []}}) is None
    assert conv.error_type_of({"error": {}}) == "_OTHER"


def test_input_round_and_progress_attributes() -> None:
    asked = {"result": {"resultType": "input_required", "inputRequests": {"b": {}, "a": {}}}}
    assert conv.input_round_attributes(asked) == {"mcp.input_requests": "a,b"}
    assert conv.input_round_attributes({"result": {"resultType": "complete"}}) is None
    assert conv.input_round_attributes({"error": {"code": 1}}) is None
    assert conv.progress_attributes({"progress": 1, "total": 2.5, "message": "m"}) == {
        "mcp.progress.progress": 1,
        "mcp.progress.total": 2.5,
        "mcp.progress.message": "m",
    }
    assert conv.progress_attributes({"progress": "x"}) == {}


def test_trace_carrier_takes_only_the_trace_strings() -> None:
    meta = {"traceparent": "tp", "tracestate": 5, "other": "x"}
    assert conv.trace_carrier(meta) == {"traceparent": "tp"}
    assert conv.trace_carrier(None) == {}


def test_with_trace_copies_and_never_overrides_a_given_traceparent() -> None:
    carrier = {"traceparent": "new"}
    message = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    traced = conv.with_trace(message, carrier)
    assert traced == {**message, "params": {"_meta": {"traceparent": "new"}}}
    assert "params" not in message  # not mutated
    inner = {"jsonrpc": "2.0", "id": 2, "method": "m", "params": {"a": 1, "_meta": {"k": "v"}}}
    traced = conv.with_trace(inner, carrier)
    assert traced["params"] == {"a": 1, "_meta": {"k": "v", "traceparent": "new"}}
    assert inner["params"]["_meta"] == {"k": "v"}
    given = {"jsonrpc": "2.0", "id": 3, "method": "m", "params": {"_meta": {"traceparent": "old"}}}
    assert conv.with_trace(given, carrier) is given
    assert conv.with_trace(message, {}) is message
