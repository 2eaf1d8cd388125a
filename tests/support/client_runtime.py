"""A Runtime built for the client tests: every behaviour the client rules need to observe."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from snodo.protocol.dialects import SUPPORTED_VERSIONS
from snodo.protocol.errors import McpError
from snodo.server import CacheHint, Context, Runtime


class Observed:
    """What the runtime's handlers saw, for assertions."""

    def __init__(self) -> None:
        self.metas: list[dict[str, Any]] = []
        self.threads: list[int] = []
        self.cancelled = threading.Event()
        self.release = threading.Event()


def build(
    versions: Sequence[str] = SUPPORTED_VERSIONS,
    *,
    page_size: int = 100,
    tools: int = 0,
    observed: Observed | None = None,
    instructions: str | None = "Use the tools.",
) -> Runtime:
    """The test runtime; ``tools`` adds that many filler tools for paging tests."""
    seen = observed if observed is not None else Observed()
    rt = Runtime(
        "client-test",
        "1.2.3",
        versions=versions,
        page_size=page_size,
        instructions=instructions,
        cache_hints={"tools": CacheHint(60_000, "public")},
    )

    @rt.tool(
        description="Echo the text back",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    )
    def echo(args: dict[str, Any], ctx: Context) -> str:
        seen.metas.append(dict(ctx.meta))
        seen.threads.append(threading.get_ident())
        return str(args["text"])

    @rt.tool(description="Fails as a tool error")
    def broken(args: dict[str, Any], ctx: Context) -> str:
        raise RuntimeError("the tool broke")

    @rt.tool(description="Fails with a JSON-RPC error")
    def refuse(args: dict[str, Any], ctx: Context) -> str:
        raise McpError(-32099, "refused on purpose", {"why": "test"})

    @rt.tool(description="Reports progress n times")
    def count(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        n = int(args.get("n", 3))
        seen.threads.append(threading.get_ident())
        for i in range(1, n + 1):
            ctx.progress(i, n, f"step {i}")
        return {"counted": n}

    @rt.tool(description="Reports progress until cancelled")
    def forever(args: dict[str, Any], ctx: Context) -> str:
        for i in range(1, 10_000):
            try:
                ctx.progress(i)
            except Exception:
                seen.cancelled.set()
                raise
            if ctx.cancelled:
                seen.cancelled.set()
                return "cancelled"
            seen.release.wait(0.01)
        return "done"

    @rt.tool(description="Asks for approval with a form")
    def deploy(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        answer = ctx.elicit(
            "Deploy?",
            {"type": "object", "properties": {"approved": {"type": "boolean"}}},
        )
        return {"action": answer["action"], "given": answer.get("content")}

    @rt.tool(description="Asks for a URL visit")
    def visit(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return ctx.elicit_url("Visit", "https://example.test/consent")

    @rt.tool(description="Asks the client's model")
    def summarize(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return {
            "sampled": ctx.sample(
                {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "sum"}}],
                    "maxTokens": 10,
                }
            )
        }

    @rt.tool(description="Asks for the client's roots")
    def roots(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return ctx.list_roots()

    @rt.tool(description="Asks for several inputs in one round")
    def several(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        keys = args.get("keys", ["2", "10", "1"])
        requests = {
            k: (
                "elicitation/create",
                {"message": f"q{k}", "requestedSchema": {"type": "object", "properties": {}}},
            )
            for k in keys
        }
        if args.get("with_sampling"):
            requests["s"] = (
                "sampling/createMessage",
                {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "x"}}],
                    "maxTokens": 5,
                },
            )
        return {"answers": ctx.request_input(requests)}

    @rt.tool(description="Asks twice, in two rounds, reporting progress in each")
    def two_rounds(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        ctx.progress(ctx.round + 1, 3)
        first = ctx.elicit("first?", {"type": "object", "properties": {}})
        ctx.progress(ctx.round + 1, 3)
        second = ctx.elicit("second?", {"type": "object", "properties": {}})
        return {"first": first["action"], "second": second["action"], "round": ctx.round}

    @rt.tool(description="Never satisfied: asks again every round")
    def insatiable(args: dict[str, Any], ctx: Context) -> str:
        for i in range(1000):
            ctx.request_input(
                {
                    f"ask-{i}": (
                        "elicitation/create",
                        {
                            "message": "again",
                            "requestedSchema": {"type": "object", "properties": {}},
                        },
                    )
                }
            )
        return "unreachable"

    @rt.tool(description="Sheds load on its first round")
    def busy(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        if ctx.round < int(args.get("rounds", 1)):
            ctx.retry_later()
        return {"round": ctx.round}

    @rt.tool(description="Asks for any input request given in the arguments")
    def ask_raw(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return ctx.request_input({"k": (args["method"], args["params"])})

    @rt.tool(description="Shows the request's _meta")
    def show_meta(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return {"meta": dict(ctx.meta)}

    for i in range(tools):
        rt.add_tool(f"filler-{i:03}", lambda args, ctx: "filler", description="filler")

    @rt.resource("note://readme", name="readme", mime_type="text/plain")
    def readme(ctx: Context) -> str:
        return "hello from the readme"

    @rt.resource_template("note://pages/{name}", name="page")
    def page(uri: str, variables: dict[str, str], ctx: Context) -> str:
        return f"page {variables['name']}"

    @rt.prompt(description="Review something", arguments=[{"name": "name", "required": True}])
    def review(args: dict[str, str], ctx: Context) -> str:
        return f"Please review {args['name']}"

    @rt.completion
    def complete(
        ref: dict[str, Any], argument: dict[str, Any], context: dict[str, Any] | None, ctx: Context
    ) -> list[str]:
        return [v for v in ("jason", "jq", "json") if v.startswith(argument.get("value", ""))]

    return rt
