"""tools/call, resources/read, prompts/get, completion/complete: results, errors, Context,
progress (k) and cancellation (k), for every version."""

from __future__ import annotations

from typing import Any

import pytest

from snodo.protocol.errors import McpError
from snodo.server import Context, Peer, Runtime, ServerSession, dispatch
from tests.support.server_support import (
    CC,
    PV,
    SESSION_VERSIONS,
    STATELESS,
    VERSIONS,
    Conn,
    example_runtime,
    validate,
)


def tool_runtime(fn: Any, **kw: Any) -> Runtime:
    rt = Runtime("calls", "1")
    rt.add_tool("t", fn, **kw)
    return rt


def call(conn: Conn, arguments: Any = None, name: str = "t", **kw: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return conn.send("tools/call", params, **kw)


# -- tools/call results --------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_a_string_becomes_one_text_block(version: str) -> None:
    result = call(Conn(tool_runtime(lambda a, ctx: "hello"), version))["result"]
    assert result["content"] == [{"type": "text", "text": "hello"}]
    assert "structuredContent" not in result and "isError" not in result


@pytest.mark.parametrize("version", VERSIONS)
def test_a_dict_with_content_is_the_call_tool_result(version: str) -> None:
    value = {
        "content": [{"type": "text", "text": "a"}],
        "isError": False,
        "structuredContent": {"k": 1},
    }
    result = call(Conn(tool_runtime(lambda a, ctx: value), version))["result"]
    assert {k: result[k] for k in value} == value
    assert "resultType" not in value, "the handler's own dict is not modified"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_json_object_becomes_structured_content_plus_its_json_text(version: str) -> None:
    result = call(Conn(example_runtime(), version), {"a": 2, "b": 3}, name="add")["result"]
    assert result["structuredContent"] == {"sum": 5}
    assert result["content"] == [{"type": "text", "text": '{"sum":5}'}]


@pytest.mark.parametrize("version", VERSIONS)
def test_non_object_json_values_are_structured_only_where_the_schema_allows(version: str) -> None:
    """2025 schemas type structuredContent as an object; 2026 allows any JSON value."""
    result = call(Conn(tool_runtime(lambda a, ctx: [1, 2]), version))["result"]
    assert result["content"] == [{"type": "text", "text": "[1,2]"}]
    assert ("structuredContent" in result) is (version == STATELESS)
    if version == STATELESS:
        assert result["structuredContent"] == [1, 2]


@pytest.mark.parametrize("version", VERSIONS)
def test_none_is_an_empty_result(version: str) -> None:
    assert call(Conn(tool_runtime(lambda a, ctx: None), version))["result"]["content"] == []


@pytest.mark.parametrize("version", VERSIONS)
def test_arguments_default_to_an_empty_object(version: str) -> None:
    seen: list[Any] = []
    conn = Conn(tool_runtime(lambda a, ctx: seen.append(a)), version)
    call(conn)
    call(conn, {"x": 1})
    assert seen == [{}, {"x": 1}]


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_tool_bad_arguments_and_missing_required_are_32602(version: str) -> None:
    conn = Conn(example_runtime(), version)
    assert conn.err("tools/call", {"name": "nope"}) == {
        "code": -32602,
        "message": "Unknown tool: nope",
    }
    assert conn.err("tools/call", {"arguments": {}})["code"] == -32602
    assert conn.err("tools/call", {"name": "echo", "arguments": ["x"]})["code"] == -32602
    error = conn.err("tools/call", {"name": "add", "arguments": {"a": 1}})
    assert error == {
        "code": -32602,
        "message": "Invalid arguments for tool add: Missing required property 'b'",
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_mcp_error_in_a_tool_is_a_json_rpc_error(version: str) -> None:
    def refuse(a: dict[str, Any], ctx: Context) -> str:
        raise McpError(-32099, "refused", {"why": "test"})

    error = call(Conn(tool_runtime(refuse), version))["error"]
    assert error == {"code": -32099, "message": "refused", "data": {"why": "test"}}


@pytest.mark.parametrize("version", VERSIONS)
def test_other_exceptions_in_a_tool_are_tool_errors(version: str) -> None:
    def broken(a: dict[str, Any], ctx: Context) -> str:
        raise ValueError("boom")

    result = call(Conn(tool_runtime(broken), version))["result"]
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "ValueError: boom"}]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_non_json_tool_value_is_a_tool_error(version: str) -> None:
    result = call(Conn(tool_runtime(lambda a, ctx: {1, 2}), version))["result"]
    assert result["isError"] is True and result["content"][0]["text"].startswith("TypeError")


# -- resources/read ------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_text_blob_and_template_resources(version: str) -> None:
    conn = Conn(example_runtime(), version)
    text = conn.ok("resources/read", {"uri": "notes://welcome"})["contents"]
    assert text == [
        {"uri": "notes://welcome", "mimeType": "text/plain", "text": "Welcome to snodo."}
    ]
    blob = conn.ok("resources/read", {"uri": "blobs://logo"})["contents"]
    assert blob == [{"uri": "blobs://logo", "mimeType": "image/png", "blob": "iVBORw0KGgo="}]
    todo = conn.ok("resources/read", {"uri": "notes://todo"})["contents"][0]
    assert todo["text"].startswith("1. write the client") and todo["uri"] == "notes://todo"


@pytest.mark.parametrize("version", VERSIONS)
def test_dict_and_list_contents(version: str) -> None:
    rt = Runtime("r", "1")
    rt.add_resource("a://one", lambda ctx: {"text": "1", "mimeType": "text/x"})
    rt.add_resource(
        "a://two",
        lambda ctx: [{"uri": "a://two#1", "text": "1"}, {"blob": "AA=="}],
        mime_type="m/m",
    )
    conn = Conn(rt, version)
    assert conn.ok("resources/read", {"uri": "a://one"})["contents"] == [
        {"text": "1", "mimeType": "text/x", "uri": "a://one"}
    ]
    assert conn.ok("resources/read", {"uri": "a://two"})["contents"] == [
        {"uri": "a://two#1", "text": "1", "mimeType": "m/m"},
        {"blob": "AA==", "uri": "a://two", "mimeType": "m/m"},
    ]


def test_template_variables_match_one_segment_and_are_percent_decoded() -> None:
    """RFC 6570 level 1: {var} matches [^/]+."""
    seen: list[tuple[str, dict[str, str]]] = []
    rt = Runtime("r", "1")

    def read(uri: str, variables: dict[str, str], ctx: Context) -> str:
        seen.append((uri, variables))
        return "ok"

    rt.add_resource_template("files://{owner}/{name}.txt", read, name="f")
    conn = Conn(rt)
    conn.ok("resources/read", {"uri": "files://me/my%20notes.txt"})
    assert seen == [("files://me/my%20notes.txt", {"owner": "me", "name": "my notes"})]
    assert conn.err("resources/read", {"uri": "files://me/sub/x.txt"})["code"] == -32602
    assert conn.err("resources/read", {"uri": "files://me/x.md"})["code"] == -32602


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_resource_is_32602_on_2026_and_32002_on_session_era(version: str) -> None:
    """(g) resource not found: -32602 in 2026 (MUST NOT emit -32002), -32002 before."""
    error = Conn(example_runtime(), version).err("resources/read", {"uri": "nowhere://x"})
    assert error["code"] == (-32602 if version == STATELESS else -32002)
    assert error["data"] == {"uri": "nowhere://x"}


@pytest.mark.parametrize("version", VERSIONS)
def test_resource_handler_failures(version: str) -> None:
    rt = Runtime("r", "1")

    def broken(ctx: Context) -> str:
        raise KeyError("secret")

    def refused(ctx: Context) -> str:
        raise McpError(-32050, "no")

    rt.add_resource("a://broken", broken)
    rt.add_resource("a://refused", refused)
    rt.add_resource("a://bad", lambda ctx: 42)
    conn = Conn(rt, version)
    error = conn.err("resources/read", {"uri": "a://broken"})
    assert error["code"] == -32603
    assert "KeyError" in error["message"] and "Traceback" not in error["message"]
    assert conn.err("resources/read", {"uri": "a://refused"}) == {"code": -32050, "message": "no"}
    assert conn.err("resources/read", {"uri": "a://bad"})["code"] == -32603
    assert conn.err("resources/read", {})["code"] == -32602


# -- prompts/get ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_prompt_results(version: str) -> None:
    rt = Runtime("p", "1")
    rt.add_prompt("s", lambda a, ctx: f"hi {a.get('who', 'you')}", description="Say hi")
    rt.add_prompt("d", lambda a, ctx: {"messages": [], "description": "own"})
    conn = Conn(rt, version)
    assert conn.ok("prompts/get", {"name": "s", "arguments": {"who": "me"}})["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "hi me"}}
    ]
    assert conn.ok("prompts/get", {"name": "s"})["description"] == "Say hi"
    assert conn.ok("prompts/get", {"name": "d"})["description"] == "own"
    got = Conn(example_runtime(), version).ok(
        "prompts/get", {"name": "review", "arguments": {"name": "todo"}}
    )
    assert got["messages"][0]["content"]["text"].startswith("Please review todo")


@pytest.mark.parametrize("version", VERSIONS)
def test_prompt_errors(version: str) -> None:
    rt = example_runtime()

    def broken(a: dict[str, str], ctx: Context) -> str:
        raise RuntimeError("bad")

    rt.add_prompt("broken", broken)
    conn = Conn(rt, version)
    assert conn.err("prompts/get", {"name": "nope"}) == {
        "code": -32602,
        "message": "Unknown prompt: nope",
    }
    missing = conn.err("prompts/get", {"name": "review"})
    assert missing["code"] == -32602 and "name" in missing["message"]
    assert conn.err("prompts/get", {"name": "review", "arguments": {"name": 5}})["code"] == -32602
    error = conn.err("prompts/get", {"name": "broken"})
    assert error["code"] == -32603 and "RuntimeError" in error["message"]


# -- completion/complete -------------------------------------------------------------------


def completion_runtime(fn: Any) -> Runtime:
    rt = Runtime("c", "1")
    rt.add_prompt("p", lambda a, ctx: "x", arguments=["lang"])
    rt.add_resource_template("db://{table}", lambda uri, v, ctx: "x", name="db")
    rt.completion(fn)
    return rt


PROMPT_REF = {
    "ref": {"type": "ref/prompt", "name": "p"},
    "argument": {"name": "lang", "value": "py"},
}


@pytest.mark.parametrize("version", VERSIONS)
def test_completion_values_are_capped_at_100(version: str) -> None:
    conn = Conn(
        completion_runtime(lambda ref, arg, context, ctx: [f"v{i}" for i in range(250)]), version
    )
    completion = conn.ok("completion/complete", PROMPT_REF)["completion"]
    assert len(completion["values"]) == 100
    assert completion["total"] == 250 and completion["hasMore"] is True


@pytest.mark.parametrize("version", VERSIONS)
def test_completion_handler_sees_ref_argument_and_context(version: str) -> None:
    seen: list[Any] = []

    def complete(
        ref: dict[str, Any], arg: dict[str, Any], context: Any, ctx: Context
    ) -> dict[str, Any]:
        seen.append((ref, arg, context))
        return {"values": ["python"], "hasMore": False}

    conn = Conn(completion_runtime(complete), version)
    params = {**PROMPT_REF, "context": {"arguments": {"x": "y"}}}
    assert conn.ok("completion/complete", params)["completion"] == {
        "values": ["python"],
        "hasMore": False,
    }
    resource_ref = {
        "ref": {"type": "ref/resource", "uri": "db://{table}"},
        "argument": {"name": "table", "value": ""},
    }
    conn.ok("completion/complete", resource_ref)
    assert seen[0] == (PROMPT_REF["ref"], PROMPT_REF["argument"], {"arguments": {"x": "y"}})
    assert seen[1][2] is None


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "params",
    [
        {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}},
        {"ref": {"type": "ref/resource", "uri": "x://{y}"}, "argument": {"name": "a", "value": ""}},
        {"ref": {"type": "ref/other"}, "argument": {"name": "a", "value": ""}},
        {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a"}},
        {
            "ref": {"type": "ref/prompt", "name": "p"},
            "argument": {"name": "a", "value": ""},
            "context": 3,
        },
        {"argument": {"name": "a", "value": ""}},
    ],
)
def test_completion_bad_params_are_32602(version: str, params: dict[str, Any]) -> None:
    conn = Conn(completion_runtime(lambda *a: []), version)
    assert conn.err("completion/complete", params)["code"] == -32602


@pytest.mark.parametrize("version", VERSIONS)
def test_completion_handler_failures_are_32603(version: str) -> None:
    conn = Conn(completion_runtime(lambda *a: [1, 2]), version)
    assert conn.err("completion/complete", PROMPT_REF)["code"] == -32603


# -- Context -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_context_describes_the_request(version: str) -> None:
    seen: list[Context] = []
    caps: dict[str, Any] = {"roots": {}}
    conn = Conn(tool_runtime(lambda a, ctx: seen.append(ctx)), version, caps=caps)
    response = call(conn, meta={"progressToken": "tok", "custom": 1})
    ctx = seen[0]
    assert ctx.version == version
    assert ctx.request_id == response["id"]
    assert ctx.method == "tools/call"
    assert ctx.client_capabilities == caps
    assert ctx.client_info == {"name": "test-client", "version": "1.0.0"}
    assert ctx.meta["custom"] == 1 and ctx.meta["progressToken"] == "tok"
    assert ctx.round == 0
    assert ctx.stateless is (version == STATELESS)
    assert ctx.cancelled is False


def test_2026_capabilities_come_from_each_request_not_earlier_ones() -> None:
    """(b) Servers MUST NOT infer capabilities from earlier requests."""
    seen: list[dict[str, Any]] = []
    conn = Conn(tool_runtime(lambda a, ctx: seen.append(ctx.client_capabilities)))
    call(conn, meta={CC: {"sampling": {}}})
    call(conn, meta={CC: {}})
    assert seen == [{"sampling": {}}, {}]


# -- progress ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("token", ["tok-1", 7])
def test_progress_reaches_the_sink_with_the_request_token(version: str, token: Any) -> None:
    """(k) notifications/progress params: progressToken, progress, total?, message?."""
    reports: list[dict[str, Any]] = []
    conn = Conn(example_runtime(), version)
    result = conn.ok(
        "tools/call",
        {"name": "slow_count", "arguments": {"n": 3}},
        meta={"progressToken": token},
        progress=reports.append,
    )
    assert result["content"][0]["text"] == "counted to 3"
    assert reports == [
        {"progressToken": token, "progress": i, "total": 3, "message": f"step {i} of 3"}
        for i in (1, 2, 3)
    ]
    for params in reports:
        validate(
            version,
            "ProgressNotification",
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": params},
        )


@pytest.mark.parametrize("version", VERSIONS)
def test_no_progress_without_a_token(version: str) -> None:
    reports: list[dict[str, Any]] = []
    Conn(example_runtime(), version).ok(
        "tools/call", {"name": "slow_count", "arguments": {"n": 2}}, progress=reports.append
    )
    assert reports == []


def test_progress_without_a_sink_is_a_no_op() -> None:
    result = Conn(example_runtime()).ok(
        "tools/call", {"name": "slow_count", "arguments": {"n": 2}}, meta={"progressToken": 1}
    )
    assert result["content"][0]["text"] == "counted to 2"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("token", [True, 1.5, None, {"a": 1}])
def test_malformed_progress_tokens_are_32602(version: str, token: Any) -> None:
    conn = Conn(example_runtime(), version)
    if token is None:
        assert "error" not in conn.send(
            "tools/call", {"name": "echo", "arguments": {"text": "x"}}, meta={"progressToken": None}
        )
        return
    error = conn.err(
        "tools/call", {"name": "echo", "arguments": {"text": "x"}}, meta={"progressToken": token}
    )
    assert error["code"] == -32602


def test_a_failing_sink_cancels_the_request_instead_of_raising() -> None:
    """A sink that raises means the client stopped waiting: ctx.cancelled, no exception escapes."""
    calls: list[dict[str, Any]] = []

    def sink(params: dict[str, Any]) -> None:
        calls.append(params)
        raise RuntimeError("caller gone")

    result = Conn(example_runtime()).ok(
        "tools/call",
        {"name": "slow_count", "arguments": {"n": 5}},
        meta={"progressToken": "t"},
        progress=sink,
    )
    assert len(calls) == 1
    assert result["content"][0]["text"] == "cancelled at 1"


# -- cancellation --------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_cancelled_notification_marks_the_running_request(version: str) -> None:
    """(k) notifications/cancelled {requestId} reaches the in-flight request's ctx.cancelled."""
    conn: Conn
    states: list[tuple[bool, bool]] = []

    def waits(a: dict[str, Any], ctx: Context) -> str:
        before = ctx.cancelled
        assert ctx.request_id in conn.peer.inflight
        assert conn.notify("notifications/cancelled", {"requestId": "other", "reason": "x"}) is None
        assert (
            conn.notify("notifications/cancelled", {"requestId": ctx.request_id, "reason": "stop"})
            is None
        )
        states.append((before, ctx.cancelled))
        return "done"

    conn = Conn(tool_runtime(waits), version)
    call(conn)
    assert states == [(False, True)]
    assert len(conn.peer.inflight) == 0


def test_cancelling_unknown_or_finished_requests_is_ignored() -> None:
    conn = Conn(example_runtime())
    rid = conn.send("tools/call", {"name": "echo", "arguments": {"text": "x"}})["id"]
    assert conn.notify("notifications/cancelled", {"requestId": rid}) is None
    assert conn.notify("notifications/cancelled", {"requestId": 999_999}) is None
    assert len(conn.peer.inflight) == 0


def test_requests_on_a_shared_peer_are_tracked_by_id() -> None:
    rt = Runtime("c", "1")
    peer = Peer("stdio", session=ServerSession())
    inner: list[Any] = []

    def outer(a: dict[str, Any], ctx: Context) -> str:
        message = {
            "jsonrpc": "2.0",
            "id": "inner",
            "method": "tools/call",
            "params": {"name": "probe", "_meta": ctx.meta},
        }
        inner.append(dispatch(rt, message, peer))
        return ",".join(sorted(str(k) for k in peer.inflight))

    rt.add_tool("outer", outer)
    rt.add_tool("probe", lambda a, ctx: ",".join(sorted(str(k) for k in peer.inflight)))
    meta = {PV: STATELESS, CC: {}}
    response = dispatch(
        rt,
        {
            "jsonrpc": "2.0",
            "id": "o",
            "method": "tools/call",
            "params": {"name": "outer", "_meta": meta},
        },
        peer,
    )
    assert response is not None
    assert inner[0]["result"]["content"][0]["text"] == "inner,o"
    assert response["result"]["content"][0]["text"] == "o"
    assert len(peer.inflight) == 0


@pytest.mark.parametrize("version", SESSION_VERSIONS)
def test_session_era_requests_ignore_stateless_retry_params(version: str) -> None:
    """requestState / inputResponses do not exist before 2026: they are ignored, not checked."""
    result = Conn(example_runtime(), version).ok(
        "tools/call",
        {"name": "echo", "arguments": {"text": "x"}, "requestState": "junk", "inputResponses": 5},
    )
    assert result["content"][0]["text"] == "x"
