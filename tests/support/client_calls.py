"""The call checks every connection must pass (direct, and custom transports): one function."""

from __future__ import annotations

from typing import Any

import snodo


def check_calls(client: Any) -> None:
    """Calls: the lists, a tool call, a read, a prompt and a completion on the test runtime
    (``tests/support/client_runtime.py``), whatever the connection and version."""
    names = [t["name"] for t in client.list_tools()]
    assert "echo" in names
    result = client.call_tool("echo", {"text": "json"})
    assert result["content"] == [{"type": "text", "text": "json"}]
    read = client.read_resource("note://readme")
    assert read["contents"][0]["text"] == "hello from the readme"
    prompt = client.get_prompt("review", {"name": "jason"})
    assert "jason" in prompt["messages"][0]["content"]["text"]
    completion = client.request(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "review"},
            "argument": {"name": "name", "value": "j"},
        },
    )
    assert completion["completion"]["values"] == ["jason", "jq", "json"]
    assert [t["uriTemplate"] for t in client.list_resource_templates()] == ["note://pages/{name}"]
    assert [r["uri"] for r in client.list_resources()] == ["note://readme"]
    assert [p["name"] for p in client.list_prompts()] == ["review"]


def check_errors(client: Any) -> None:
    """Calls: decoded errors keep code, message and data; unknown tool -32602; isError success."""
    try:
        client.call_tool("refuse", {})
    except snodo.McpError as error:
        assert (error.code, error.message, error.data) == (
            -32099,
            "refused on purpose",
            {"why": "test"},
        )
        assert error.kind == "protocol"
    else:
        raise AssertionError("refuse did not fail")
    try:
        client.call_tool("no-such-tool", {})
    except snodo.McpError as error:
        assert error.code == -32602
    else:
        raise AssertionError("an unknown tool did not fail")
    broken = client.call_tool("broken", {})
    assert broken["isError"] is True
