"""snodo for asyncio: the same calls as coroutines, many in flight on one connection.

    python examples/aio.py

The server is a stdio process running examples/example_runtime.py. One ``AsyncClient`` per
version: 50 ``add`` calls gathered at once, progress to a coroutine, a coroutine input handler
answering ``deploy``, a cancelled call, and a subscription read with ``async for``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import snodo
import snodo.aio
from snodo.server import Runtime

EXAMPLES = Path(__file__).resolve().parent
VERSIONS = ["2026-07-28", "2025-11-25"]


async def approve(params: dict[str, Any]) -> dict[str, Any]:
    """A form elicitation answered by a coroutine (a real one would ask a person)."""
    await asyncio.sleep(0)
    return {"action": "accept", "content": {"approved": True}}


async def tour(version: str) -> None:
    server = snodo.Stdio(sys.executable, ["-m", "snodo.server", "example_runtime:runtime"])
    client = await snodo.aio.connect(
        server, cwd=str(EXAMPLES), protocol=version, input_handlers={"form": approve}
    )
    async with client:
        print(f"{version}: connected, {len(await client.list_tools())} tools")

        sums = await asyncio.gather(*(client.call_tool("add", {"a": i, "b": i}) for i in range(50)))
        ok = all(s["structuredContent"]["sum"] == 2 * i for i, s in enumerate(sums))
        print(f"{version}: 50 calls at once, all right: {ok}")

        steps: list[str] = []

        async def note(params: dict[str, Any]) -> None:
            steps.append(f"{params['progress']}/{params['total']}")

        counted = await client.call_tool("slow_count", {"n": 3}, progress=note)
        print(f"{version}: progress {steps} then {counted['content'][0]['text']!r}")

        deployed = await client.call_tool("deploy", {"env": "prod"})
        print(f"{version}: deploy (coroutine handler) -> {deployed['structuredContent']['status']}")

        started = asyncio.Event()
        slow = asyncio.ensure_future(
            client.call_tool("slow_count", {"n": 10_000_000}, progress=lambda p: started.set())
        )
        await started.wait()  # it is running on the server: cancel it there
        slow.cancel()
        try:
            await slow
        except asyncio.CancelledError:
            echo = await client.call_tool("echo", {"text": "still here"})
            print(f"{version}: cancelled one call; the next says {echo['content'][0]['text']!r}")


async def subscription() -> None:
    runtime = Runtime("notes", "1.0.0")
    runtime.add_resource("file:///notes.md", lambda ctx: "# notes")
    async with await snodo.aio.direct(runtime, protocol="2026-07-28") as client:
        sub = await client.listen({"resourceSubscriptions": ["file:///notes.md"]})
        for _ in range(3):
            runtime.resource_updated("file:///notes.md")
        seen = []
        async for event in sub:
            if isinstance(event, snodo.Notification):
                seen.append(event.params["uri"])
            if len(seen) == 3:
                break
        await sub.aclose()
        print(f"subscription: async for gave {len(seen)} updates")


async def main() -> None:
    for version in VERSIONS:
        await tour(version)
    await subscription()


if __name__ == "__main__":
    asyncio.run(main())
