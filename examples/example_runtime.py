"""An example server Runtime: small, realistic, and exercising every feature.

The demo and the benchmarks serve it in process (``snodo.direct(runtime)``), over stdio and
over HTTP. Read it as documentation of the server API:

- tools: ``echo`` (text), ``add`` (structured result), ``slow_count`` (progress), ``deploy``
  (form elicitation), ``confirm_both`` (two input requests in one round), ``summarize``
  (sampling), ``roots`` (roots/list), ``busy`` (load shedding on 2026-07-28)
- resources: a text note and a binary blob; a template ``notes://{name}``
- a prompt ``review(name)`` and a completion for its argument
- cache hints: discovery and lists may be cached for a minute by anyone

Interactive tools are written once and work on every version: on 2026-07-28 the handler is run
again on each retry and ``ctx.elicit`` returns once the client's answer has arrived; on the
session-era versions ``ctx.elicit`` sends a server-to-client request and waits.
"""

from __future__ import annotations

from typing import Any

from snodo.server import CacheHint, Context, Runtime

NOTES: dict[str, str] = {
    "welcome": "Welcome to snodo.",
    "todo": "1. write the client\n2. write the server\n3. ship",
}

PUBLIC_MINUTE = CacheHint(ttl_ms=60_000, scope="public")


def build() -> Runtime:
    """A fresh example Runtime (a new one per call, so tests can change it freely)."""
    runtime = Runtime(
        "snodo-example",
        "0.1.0",
        title="snodo example server",
        instructions="Tools to echo, add, count and deploy; notes as resources.",
        cache_hints={
            "discover": PUBLIC_MINUTE,
            "tools": PUBLIC_MINUTE,
            "prompts": PUBLIC_MINUTE,
            "resources": PUBLIC_MINUTE,
        },
    )

    # -- plain tools ---------------------------------------------------------------------

    @runtime.tool(
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        annotations={"readOnlyHint": True},
    )
    def echo(arguments: dict[str, Any], ctx: Context) -> str:
        """Echo the text back."""
        return str(arguments["text"])

    @runtime.tool(
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
        output_schema={
            "type": "object",
            "properties": {"sum": {"type": "number"}},
            "required": ["sum"],
        },
    )
    def add(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Add two numbers (structured result)."""
        return {"sum": arguments["a"] + arguments["b"]}

    @runtime.tool(
        input_schema={
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 0}},
            "required": ["n"],
        }
    )
    def slow_count(arguments: dict[str, Any], ctx: Context) -> str:
        """Count to n, reporting progress at every step."""
        n = int(arguments["n"])
        for i in range(1, n + 1):
            if ctx.cancelled:
                return f"cancelled at {i - 1}"
            ctx.progress(i, n, f"step {i} of {n}")
        return f"counted to {n}"

    # -- interactive tools ---------------------------------------------------------------

    @runtime.tool(
        input_schema={
            "type": "object",
            "properties": {"env": {"type": "string"}},
        },
        annotations={"destructiveHint": True},
    )
    def deploy(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Deploy after the user approves (form elicitation)."""
        env = arguments.get("env", "staging")
        answer = ctx.elicit(
            f"Deploy to {env}?",
            {
                "type": "object",
                "properties": {"approved": {"type": "boolean", "title": "Approve"}},
                "required": ["approved"],
            },
        )
        approved = (
            answer["action"] == "accept" and answer.get("content", {}).get("approved") is True
        )
        # Side effects go after the interactive calls: on 2026-07-28 this line runs once,
        # in the round that has every answer.
        return {"env": env, "status": "deployed" if approved else "declined"}

    @runtime.tool
    def confirm_both(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Ask for a confirmation and a model opinion in one round (two input requests)."""
        answers = ctx.request_input(
            {
                "confirm": (
                    "elicitation/create",
                    {
                        "mode": "form",
                        "message": "Go ahead?",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {"ok": {"type": "boolean"}},
                            "required": ["ok"],
                        },
                    },
                ),
                "opinion": (
                    "sampling/createMessage",
                    {
                        "messages": [
                            {"role": "user", "content": {"type": "text", "text": "Is this wise?"}}
                        ],
                        "maxTokens": 50,
                    },
                ),
            }
        )
        confirm = answers["confirm"]
        opinion = answers["opinion"]["content"]
        return {
            "confirmed": confirm["action"] == "accept"
            and bool(confirm.get("content", {}).get("ok")),
            "opinion": opinion.get("text", "") if isinstance(opinion, dict) else "",
        }

    @runtime.tool(
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }
    )
    def summarize(arguments: dict[str, Any], ctx: Context) -> str:
        """Summarize the text with the client's model (sampling)."""
        result = ctx.sample(
            {
                "messages": [
                    {
                        "role": "user",
                        "content": {"type": "text", "text": f"Summarize: {arguments['text']}"},
                    }
                ],
                "maxTokens": 100,
            }
        )
        content = result["content"]
        return content.get("text", "") if isinstance(content, dict) else ""

    @runtime.tool
    def roots(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """List the client's roots."""
        return {"roots": [r["uri"] for r in ctx.list_roots()["roots"]]}

    @runtime.tool
    def busy(arguments: dict[str, Any], ctx: Context) -> str:
        """Shed load once: on 2026-07-28 the first round asks the client to retry later."""
        if ctx.stateless and ctx.round == 0:
            ctx.retry_later()
        return f"done after {ctx.round} retries"

    # -- resources -----------------------------------------------------------------------

    @runtime.resource("notes://welcome", name="welcome", mime_type="text/plain")
    def welcome(ctx: Context) -> str:
        """The welcome note."""
        return NOTES["welcome"]

    @runtime.resource("blobs://logo", name="logo", mime_type="image/png")
    def logo(ctx: Context) -> bytes:
        """A tiny binary blob."""
        return b"\x89PNG\r\n\x1a\n"

    @runtime.resource_template("notes://{name}", name="note", mime_type="text/plain")
    def note(uri: str, variables: dict[str, str], ctx: Context) -> str:
        """Any note by name."""
        text = NOTES.get(variables["name"])
        if text is None:
            return f"(no note called {variables['name']})"
        return text

    # -- prompts and completion ----------------------------------------------------------

    @runtime.prompt(
        arguments=[{"name": "name", "description": "The note to review", "required": True}]
    )
    def review(arguments: dict[str, str], ctx: Context) -> list[dict[str, Any]]:
        """Review a note."""
        text = NOTES.get(arguments["name"], "")
        return [
            {
                "role": "user",
                "content": {"type": "text", "text": f"Please review {arguments['name']}:\n{text}"},
            }
        ]

    @runtime.completion
    def complete(
        ref: dict[str, Any], argument: dict[str, Any], context: dict[str, Any] | None, ctx: Context
    ) -> list[str]:
        """Complete note names for review(name) and notes://{name}."""
        if argument["name"] != "name":
            return []
        return sorted(n for n in NOTES if n.startswith(argument["value"]))

    return runtime


runtime = build()
