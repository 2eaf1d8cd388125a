"""Interactive operations on the session-era versions: the same handler code sends
server-to-client requests through ``Peer.server_request`` (client-digest (a) server requests,
(m); the seed's session-era bullet on server requests)."""

from __future__ import annotations

from typing import Any

import pytest

from snodo.protocol.errors import McpError
from snodo.server import Context, Runtime
from tests.support.server_support import SESSION_VERSIONS, Conn, example_runtime, validate

ALL_CAPS: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {},
}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}
REQUEST_DEFS = {
    "elicitation/create": "ElicitRequest",
    "sampling/createMessage": "CreateMessageRequest",
    "roots/list": "ListRootsRequest",
}


class Client:
    """A scripted client answering server requests, validating each against the version's schema."""

    def __init__(self, version: str, answers: dict[str, Any]) -> None:
        self.version = version
        self.answers = answers
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.seen.append((method, params))
        request = {"jsonrpc": "2.0", "id": len(self.seen), "method": method, "params": params}
        validate(self.version, REQUEST_DEFS[method], request)
        answer = self.answers[method]
        if isinstance(answer, BaseException):
            raise answer
        result: dict[str, Any] = answer(params) if callable(answer) else answer
        return result


def conn_with(
    version: str,
    answers: dict[str, Any],
    caps: dict[str, Any] | None = None,
    rt: Runtime | None = None,
) -> tuple[Conn, Client]:
    client = Client(version, answers)
    caps = ALL_CAPS if caps is None else caps
    if version == "2025-06-18":
        caps = {k: {} for k in caps}  # 2025-06-18 capabilities have no sub-keys
    return Conn(
        rt or example_runtime(), version, caps=caps, server_request=client, kind="stdio"
    ), client


@pytest.mark.parametrize("version", SESSION_VERSIONS)
def test_form_elicitation_is_a_server_request(version: str) -> None:
    conn, client = conn_with(
        version, {"elicitation/create": {"action": "accept", "content": {"approved": True}}}
    )
    result = conn.ok("tools/call", {"name": "deploy", "arguments": {"env": "prod"}})
    assert result["structuredContent"] == {"env": "prod", "status": "deployed"}
    [(method, params)] = client.seen
    assert method == "elicitation/create" and params["message"] == "Deploy to prod?"
    # 2025-06-18 has no elicitation mode; 2025-11-25 keeps "form".
    assert params.get("mode") == (None if version == "2025-06-18" else "form")


@pytest.mark.parametrize("version", SESSION_VERSIONS)
def test_request_input_sends_each_request_in_order(version: str) -> None:
    conn, client = conn_with(
        version,
        {
            "elicitation/create": {"action": "accept", "content": {"ok": True}},
            "sampling/createMessage": SAMPLED,
        },
    )
    result = conn.ok("tools/call", {"name": "confirm_both"})
    assert result["structuredContent"] == {"confirmed": True, "opinion": "Paris"}
    assert [m for m, _ in client.seen] == ["elicitation/create", "sampling/createMessage"]


@pytest.mark.parametrize("version", SESSION_VERSIONS)
def test_sampling_and_roots_are_server_requests(version: str) -> None:
    conn, client = conn_with(
        version,
        {"sampling/createMessage": SAMPLED, "roots/list": {"roots": [{"uri": "file:///a"}]}},
    )
    assert (
        conn.ok("tools/call", {"name": "summarize", "arguments": {"text": "t"}})["content"][0][
            "text"
        ]
        == "Paris"
    )
    assert conn.ok("tools/call", {"name": "roots"})["structuredContent"] == {"roots": ["file:///a"]}
    assert [m for m, _ in client.seen] == ["sampling/createMessage", "roots/list"]


def _url_runtime() -> Runtime:
    rt = Runtime("u", "1")
    rt.add_tool(
        "login", lambda a, ctx: ctx.elicit_url("Sign in", "https://example.test/login")["action"]
    )
    return rt


def test_url_elicitation_on_2025_11_25_carries_an_elicitation_id() -> None:
    """2025-11-25 ElicitRequestURLParams require elicitationId (2026 removed it)."""
    conn, client = conn_with(
        "2025-11-25", {"elicitation/create": {"action": "accept"}}, rt=_url_runtime()
    )
    assert conn.ok("tools/call", {"name": "login"})["content"][0]["text"] == "accept"
    params = client.seen[0][1]
    assert params["mode"] == "url" and params["url"] == "https://example.test/login"
    assert isinstance(params["elicitationId"], str) and params["elicitationId"]


def test_url_elicitation_does_not_exist_in_2025_06_18() -> None:
    conn, client = conn_with(
        "2025-06-18", {"elicitation/create": {"action": "accept"}}, rt=_url_runtime()
    )
    error = conn.err("tools/call", {"name": "login"})
    assert error["code"] == -32602 and "2025-06-18" in error["message"]
    assert client.seen == []


def _sampling_runtime(params: dict[str, Any]) -> Runtime:
    rt = Runtime("s", "1")
    rt.add_tool("t", lambda a, ctx: ctx.sample(params)["model"])
    return rt


SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}


def test_sampling_with_tools_needs_2025_11_25_and_sampling_tools() -> None:
    params = {**SAMPLE, "tools": [{"name": "x", "inputSchema": {"type": "object"}}]}
    old, _ = conn_with(
        "2025-06-18", {"sampling/createMessage": SAMPLED}, rt=_sampling_runtime(params)
    )
    assert old.err("tools/call", {"name": "t"})["code"] == -32602
    new, client = conn_with(
        "2025-11-25",
        {"sampling/createMessage": SAMPLED},
        caps={"sampling": {}},
        rt=_sampling_runtime(params),
    )
    error = new.err("tools/call", {"name": "t"})
    assert error["code"] == -32602 and "sampling.tools" in error["message"]
    assert client.seen == []
    ok, _ = conn_with(
        "2025-11-25", {"sampling/createMessage": SAMPLED}, rt=_sampling_runtime(params)
    )
    assert ok.ok("tools/call", {"name": "t"})["content"][0]["text"] == "m"


def test_include_context_needs_sampling_context_only_from_2025_11_25() -> None:
    params = {**SAMPLE, "includeContext": "thisServer"}
    old, _ = conn_with(
        "2025-06-18",
        {"sampling/createMessage": SAMPLED},
        caps={"sampling": {}},
        rt=_sampling_runtime(params),
    )
    assert old.ok("tools/call", {"name": "t"})["content"][0]["text"] == "m"
    new, _ = conn_with(
        "2025-11-25",
        {"sampling/createMessage": SAMPLED},
        caps={"sampling": {}},
        rt=_sampling_runtime(params),
    )
    assert "sampling.context" in new.err("tools/call", {"name": "t"})["message"]


@pytest.mark.parametrize("version", SESSION_VERSIONS)
@pytest.mark.parametrize(
    ("tool", "capability"),
    [("deploy", "elicitation"), ("summarize", "sampling"), ("roots", "roots")],
)
def test_capabilities_come_from_initialize_and_missing_ones_are_32602(
    version: str, tool: str, capability: str
) -> None:
    conn, client = conn_with(version, {}, caps={})
    error = conn.err("tools/call", {"name": tool, "arguments": {"text": "x"}})
    assert error["code"] == -32602 and capability in error["message"]
    assert client.seen == []


@pytest.mark.parametrize("version", SESSION_VERSIONS)
def test_a_transport_without_server_requests_is_32603(version: str) -> None:
    conn = Conn(example_runtime(), version, caps={"elicitation": {}})
    error = conn.err("tools/call", {"name": "deploy"})
    assert error == {"code": -32603, "message": "This transport cannot send server requests"}


@pytest.mark.parametrize("version", SESSION_VERSIONS)
def test_an_error_answer_from_the_client_fails_the_request(version: str) -> None:
    """server_request raises McpError for an error answer; it becomes the request's error."""
    conn, _ = conn_with(
        version, {"sampling/createMessage": McpError(-1, "User rejected sampling request")}
    )
    error = conn.err("tools/call", {"name": "summarize", "arguments": {"text": "x"}})
    assert error == {"code": -1, "message": "User rejected sampling request"}


@pytest.mark.parametrize("version", SESSION_VERSIONS)
def test_invalid_answers_from_the_client_are_32602(version: str) -> None:
    conn, _ = conn_with(
        version, {"elicitation/create": {"action": "accept", "content": {"approved": "yes"}}}
    )
    error = conn.err("tools/call", {"name": "deploy"})
    assert error["code"] == -32602 and "approved" in error["message"]


@pytest.mark.parametrize("version", SESSION_VERSIONS)
def test_retry_later_has_no_session_era_equivalent(version: str) -> None:
    def shed(arguments: dict[str, Any], ctx: Context) -> str:
        ctx.retry_later()

    rt = Runtime("b", "1")
    rt.add_tool("t", shed)
    error = Conn(rt, version).err("tools/call", {"name": "t"})
    assert error["code"] == -32603
    # The example's busy tool only sheds load on 2026-07-28.
    assert (
        Conn(example_runtime(), version).ok("tools/call", {"name": "busy"})["content"][0]["text"]
        == "done after 0 retries"
    )


@pytest.mark.parametrize("version", SESSION_VERSIONS)
def test_server_request_params_are_copies(version: str) -> None:
    """A client mutating what it received cannot change the handler's own objects."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}

    def mutate(params: dict[str, Any]) -> dict[str, Any]:
        params["requestedSchema"]["properties"].clear()
        return {"action": "decline"}

    rt = Runtime("c", "1")
    rt.add_tool("t", lambda a, ctx: ctx.elicit("?", schema)["action"])
    conn, _ = conn_with(version, {"elicitation/create": mutate}, rt=rt)
    assert conn.ok("tools/call", {"name": "t"})["content"][0]["text"] == "decline"
    assert schema["properties"] == {"ok": {"type": "boolean"}}
