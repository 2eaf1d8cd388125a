"""Tasks: long tool calls as tasks the client follows (the Tasks extension, 2026-07-28).

    python examples/tasks.py

A snodo Runtime serves task-capable tools over Streamable HTTP on 127.0.0.1 (the same calls
work over ``snodo.direct`` and ``snodo.Stdio``). ``call_tool_task`` returns a ``snodo.Task``: a
build followed to its result (the wait wakes on the server's status notifications), a deploy
that needs a confirmation (answered by hand, then by an input handler), a job cancelled, a wait
that times out, and a task-only tool refused to a plain ``call_tool`` with the hint.
"""

from __future__ import annotations

import threading
from typing import Any

import snodo
from snodo.server import Context, Runtime
from snodo.server.http_server import serve_http

CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def build_runtime() -> Runtime:
    runtime = Runtime("builds", "1.0.0")

    @runtime.tool(task="optional")
    def build(args: dict[str, Any], ctx: Context) -> str:
        """Builds for a moment (a long job in real life)"""
        threading.Event().wait(0.2)
        return f"built {args.get('target', 'all')}"

    @runtime.tool(task="optional")
    def deploy(args: dict[str, Any], ctx: Context) -> str:
        """Asks for a confirmation, then deploys"""
        answer = ctx.elicit(f"Deploy to {args.get('env', 'prod')}?", CONFIRM)
        ok = answer.get("action") == "accept" and answer.get("content", {}).get("ok")
        return "deployed" if ok else "not deployed"

    @runtime.tool(task="optional")
    def crunch(args: dict[str, Any], ctx: Context) -> str:
        """Works until cancelled"""
        while not ctx.cancelled:
            threading.Event().wait(0.02)
        return "stopped"

    @runtime.tool(task="required")
    def migrate(args: dict[str, Any], ctx: Context) -> str:
        """Runs only as a task"""
        return "migrated"

    runtime.enable_tasks(ttl=600.0, poll_interval=1.0)
    return runtime


def main() -> None:
    runtime = build_runtime()
    with serve_http(runtime) as server:
        # Declaring elicitation without a form handler: input comes back for answering by hand.
        caps = {"elicitation": {"form": {}}}
        with snodo.connect(snodo.Http(server.url), client_capabilities=caps) as client:
            task = client.call_tool_task("build", {"target": "docs"})
            print(f"build: a task ({bool(task.id)}), {task.record.status}")
            result = task.result(timeout=30)
            assert isinstance(result, dict)
            print(f"build: {task.status}: {result['content'][0]['text']}")

            deploy = client.call_tool_task("deploy", {"env": "staging"})
            pending = deploy.result(timeout=30)
            assert isinstance(pending, snodo.InputRequired)
            (key, request), *_ = pending.input_requests.items()
            print(f"deploy asks: {request['params']['message']}")
            deploy.answer({key: {"action": "accept", "content": {"ok": True}}})
            done = deploy.result(timeout=30)
            assert isinstance(done, dict)
            print(f"deploy by hand: {done['content'][0]['text']}")

            job = client.call_tool_task("crunch", {})
            try:
                job.wait(timeout=0.3)
            except snodo.McpError as error:
                print(f"crunch: wait timed out ({error.code}), still {job.status}")
            job.cancel()
            print(f"crunch: after cancel(), {job.status}")

            try:
                client.call_tool("migrate", {})
            except snodo.McpError as error:
                print(f"migrate refused ({error.code}): hint names call_tool_task:", end=" ")
                print("call_tool_task" in error.message)
            migrated = client.call_tool_task("migrate", {}).result(timeout=30)
            assert isinstance(migrated, dict)
            print(f"migrate as a task: {migrated['content'][0]['text']}")

        handlers = {"form": lambda params: {"action": "accept", "content": {"ok": True}}}
        with snodo.connect(snodo.Http(server.url), input_handlers=handlers) as client:
            done = client.call_tool_task("deploy", {"env": "prod"}).result(timeout=30)
            assert isinstance(done, dict)
            print(f"deploy with a handler: {done['content'][0]['text']}")
    runtime.close_tasks()


if __name__ == "__main__":
    main()
