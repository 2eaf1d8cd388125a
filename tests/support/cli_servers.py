"""The Runtime the ``snodo`` command's terminal tests talk to (``tests/test_cli_terminal.py``).

Served with ``python -m snodo.server tests.support.cli_servers:build`` (stdio) or with
``--http``: a tool that elicits a form, one that reports progress slowly, and one that waits
until it is cancelled and records the cancellation in a file the test reads.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from snodo.server import Context, Runtime

__all__ = ["FORM_SCHEMA", "build"]

#: The form ``survey`` asks for: every kind of field a person answers at the terminal.
FORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "description": "Who deploys"},
        "count": {"type": "integer", "minimum": 1, "maximum": 9, "default": 2},
        "ratio": {"type": "number"},
        "env": {
            "type": "string",
            "enum": ["dev", "staging", "prod"],
            "enumNames": ["Development", "Staging", "Production"],
        },
        "notify": {"type": "boolean", "default": False},
    },
    "required": ["name", "ratio", "env"],
}


def _record(path: str, line: str) -> None:
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(line + "\n")


def build() -> Runtime:
    """The terminal tests' Runtime (every supported version)."""
    rt = Runtime("cli-terminal-test", "0.1.0")

    @rt.tool(description="Asks for a form and returns what was answered")
    def survey(args: dict[str, Any], ctx: Context) -> str:
        return json.dumps(ctx.elicit("Deployment details", FORM_SCHEMA))

    @rt.tool(
        description="Reports progress n times, delay seconds apart (no total with open=true)",
        input_schema={
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "delay": {"type": "number"},
                "open": {"type": "boolean"},
            },
        },
    )
    def slow(args: dict[str, Any], ctx: Context) -> str:
        n = int(args.get("n", 5))
        delay = float(args.get("delay", 0.2))
        pause = threading.Event()
        for i in range(1, n + 1):
            ctx.progress(i, None if args.get("open") else n, f"step {i}")
            pause.wait(delay)  # the pace of the reports, for a person to see the bar move
        return f"done after {n} steps"

    @rt.tool(
        description="Waits until cancelled; writes 'started' then 'cancelled' to the record file",
        input_schema={
            "type": "object",
            "properties": {"record": {"type": "string"}},
            "required": ["record"],
        },
    )
    def wait(args: dict[str, Any], ctx: Context) -> str:
        record = str(args["record"])
        _record(record, json.dumps({"event": "started", "stateless": ctx.stateless}))
        pause = threading.Event()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if ctx.cancelled:
                _record(record, json.dumps({"event": "cancelled"}))
                return "cancelled"
            pause.wait(0.02)
        _record(record, json.dumps({"event": "gave up"}))
        return "never cancelled"

    @rt.tool(description="Asks the client's model (sampling) and returns its answer")
    def ask_model(args: dict[str, Any], ctx: Context) -> str:
        return json.dumps(
            ctx.sample(
                {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
                    "maxTokens": 20,
                }
            )
        )

    @rt.tool(description="Asks the person to visit a URL")
    def visit(args: dict[str, Any], ctx: Context) -> str:
        return json.dumps(ctx.elicit_url("Sign in to continue", "https://example.test/consent"))

    return rt
