"""An MCP server built with the official Python SDK (``mcp`` 2.3.0), served over stdio.

    python tests/servers/sdk_server.py            # both eras (the SDK's default for stdio)
    python tests/servers/sdk_legacy_server.py     # the session era only

``MCPServer.run("stdio")`` drives the SDK's dual-era loop: the client's first request decides the
connection's era once. A request carrying the 2026-07-28 ``_meta`` envelope (``server/discover``
or any other) opens a stateless 2026-07-28 connection; anything else (``initialize``) opens a
session-era one, which negotiates 2024-11-05 .. 2025-11-25.

The interactive tools use the SDK's resolvers (``Resolve`` with ``Elicit``, ``Sample`` and
``ListRoots``): on 2026-07-28 the SDK answers with an ``input_required`` result and completes on
the retry that carries ``inputResponses``/``requestState``; on the session era it sends
``elicitation/create``, ``sampling/createMessage`` and ``roots/list`` to the client mid-call.

The interop tests (tests/test_interop_sdk_stdio.py) import nothing from here; they read the
names below through the wire.
"""

from __future__ import annotations

import os
from typing import Annotated

from mcp.server.mcpserver import (
    Context,
    Elicit,
    ListRoots,
    MCPServer,
    Resolve,
    Sample,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageResult,
    ListRootsResult,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

NAME = "snodo-interop-sdk"
LANGUAGES = ["python", "pypy", "perl", "rust", "ruby"]
#: The bytes of the binary resource: every byte value once (not valid UTF-8).
BINARY = bytes(range(256))
CITIES = ["berlin", "bern", "boston", "paris"]


class Approval(BaseModel):
    """The form the ``deploy`` tool asks the client to fill in."""

    approved: bool
    reason: str = ""


def ask_approval(target: str) -> Elicit[Approval]:
    return Elicit(f"Deploy to {target}?", Approval)


def ask_summary(text: str) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))],
        max_tokens=50,
    )


def ask_roots() -> ListRoots:
    return ListRoots()


def build(name: str = NAME) -> MCPServer:
    """The interop server: tools, resources and a template, a prompt, completion."""
    server = MCPServer(name, version="2.3.0-interop", instructions="An SDK server for snodo.")

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Add two integers (structured output).")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Always fails with a tool error.")
    def fail(reason: str) -> str:
        raise ToolError(f"failed: {reason}")

    @server.tool(description="Report `steps` progress notifications, then finish.")
    async def count(steps: int, ctx: Context) -> str:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        return f"counted {steps}"

    @server.tool(description="Ask the client for approval (form elicitation).")
    def deploy(target: str, approval: Annotated[Approval, Resolve(ask_approval)]) -> str:
        verdict = "approved" if approval.approved else "refused"
        return f"{target}: {verdict} ({approval.reason})"

    @server.tool(description="Ask the client's model for a summary (sampling).")
    def summarize(text: str, sampled: Annotated[CreateMessageResult, Resolve(ask_summary)]) -> str:
        content = sampled.content
        said = content.text if isinstance(content, TextContent) else repr(content)
        return f"{sampled.model}: {said}"

    @server.tool(description="List the client's roots.")
    def roots(listed: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
        return ",".join(str(root.uri) for root in listed.roots)

    @server.tool(description="Publish a subscription event: tools, prompts, resources or a URI.")
    async def announce(what: str, ctx: Context) -> str:
        if what == "tools":
            await ctx.notify_tools_changed()
        elif what == "prompts":
            await ctx.notify_prompts_changed()
        elif what == "resources":
            await ctx.notify_resources_changed()
        else:
            await ctx.notify_resource_updated(what)
        return what

    @server.tool(description="The server process id (for checks from outside).")
    def pid() -> int:
        return os.getpid()

    @server.resource("info://server", mime_type="text/plain", description="About this server.")
    def info() -> str:
        return f"{NAME} on mcp 2.3.0"

    @server.resource(
        "bytes://all", mime_type="application/octet-stream", description="Every byte value."
    )
    def all_bytes() -> bytes:
        return BINARY

    @server.resource("weather://{city}", mime_type="text/plain", description="Weather by city.")
    def weather(city: str) -> str:
        return f"sunny in {city}"

    @server.prompt(description="Review code in a language.")
    def review(code: str, language: str = "python") -> str:
        return f"Review this {language} code:\n{code}"

    @server.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        if (
            isinstance(ref, PromptReference)
            and ref.name == "review"
            and argument.name == "language"
        ):
            values = [v for v in LANGUAGES if v.startswith(argument.value)]
            return Completion(values=values, total=len(values), has_more=False)
        if isinstance(ref, ResourceTemplateReference) and ref.uri == "weather://{city}":
            values = [v for v in CITIES if v.startswith(argument.value)]
            return Completion(values=values, total=len(values), has_more=False)
        return None

    return server


if __name__ == "__main__":
    build().run("stdio")
