"""The call checks every connection must pass (direct, stdio, HTTP, custom transports), for
both clients: each check is a coroutine that awaits what a call returns when it is awaitable,
so the same checks run on a ``snodo.Client`` (``check_calls``: calls block, no loop needed
but the one ``asyncio.run`` makes) and on a ``snodo.aio.AsyncClient`` (``await
calls_checks(client)``)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import snodo


async def _(value: Any) -> Any:
    """A call's result: awaited for an AsyncClient, as returned for a Client."""
    return await value if inspect.isawaitable(value) else value


def check_calls(client: Any) -> None:
    """``calls_checks`` on a sync client."""
    asyncio.run(calls_checks(client))


def check_errors(client: Any) -> None:
    """``errors_checks`` on a sync client."""
    asyncio.run(errors_checks(client))


async def calls_checks(client: Any) -> None:
    """Calls: the lists, a tool call, a read, a prompt and a completion on the test runtime
    (``tests/support/client_runtime.py``), whatever the connection and version."""
    names = [t["name"] for t in await _(client.list_tools())]
    assert "echo" in names
    result = await _(client.call_tool("echo", {"text": "json"}))
    assert result["content"] == [{"type": "text", "text": "json"}]
    read = await _(client.read_resource("note://readme"))
    assert read["contents"][0]["text"] == "hello from the readme"
    prompt = await _(client.get_prompt("review", {"name": "jason"}))
    assert "jason" in prompt["messages"][0]["content"]["text"]
    completion = await _(
        client.request(
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "review"},
                "argument": {"name": "name", "value": "j"},
            },
        )
    )
    assert completion["completion"]["values"] == ["jason", "jq", "json"]
    templates = await _(client.list_resource_templates())
    assert [t["uriTemplate"] for t in templates] == ["note://pages/{name}"]
    assert [r["uri"] for r in await _(client.list_resources())] == ["note://readme"]
    assert [p["name"] for p in await _(client.list_prompts())] == ["review"]
    page = await _(client.list_page("tools"))
    assert {t["name"] for t in page.items} == set(names)


async def errors_checks(client: Any) -> None:
    """Calls: decoded errors keep code, message and data; unknown tool -32602; isError success."""
    try:
        await _(client.call_tool("refuse", {}))
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
        await _(client.call_tool("no-such-tool", {}))
    except snodo.McpError as error:
        assert error.code == -32602
    else:
        raise AssertionError("an unknown tool did not fail")
    broken = await _(client.call_tool("broken", {}))
    assert broken["isError"] is True
