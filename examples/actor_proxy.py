"""Embedding in an actor application: a connection held by a Pykka actor, called through its
proxy without blocking the calling actor.

    python examples/actor_proxy.py

``snodo.actors.start_client`` opens the connection (here a stdio server running
examples/example_runtime.py) inside a ``ClientActor`` and returns its ``ActorRef``. A planner
actor fans 20 ``add`` calls out through ``ref.proxy()``: each returns a Pykka future at once, all
20 are in flight together on the one connection, and the planner handles its next message
before collecting them. Stopping the client actor closes the connection (the server exits).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pykka

import snodo
from snodo.actors import start_client

EXAMPLES = Path(__file__).resolve().parent
CALLS = 20
WAIT = 30.0


class Planner(pykka.ThreadingActor):
    """An application actor: never waits on a call while it fans them out."""

    def __init__(self, mcp: Any) -> None:
        super().__init__()
        self.mcp = mcp  # the ClientProxy
        self.pending: list[pykka.Future[Any]] = []

    def fan_out(self, n: int) -> int:
        self.pending = [self.mcp.call_tool("add", {"a": i, "b": i}) for i in range(n)]
        return len(self.pending)

    def status(self) -> str:
        return f"handling messages with {len(self.pending)} calls out"

    def collect(self) -> list[int]:
        results = pykka.get_all(self.pending, timeout=WAIT)
        return [int(result["structuredContent"]["sum"]) for result in results]


def main() -> int:
    server = snodo.Stdio(sys.executable, ["-m", "snodo.server", "example_runtime:runtime"])
    ref = start_client(server, cwd=str(EXAMPLES))
    planner = Planner.start(ref.proxy()).proxy()
    try:
        proxy = ref.proxy()
        print(
            f"connected: {proxy.version.get(timeout=WAIT)}, state {proxy.state.get(timeout=WAIT)}"
        )
        print(f"proxy is a pykka.ActorProxy: {isinstance(proxy, pykka.ActorProxy)}")
        print(f"fan-out: {planner.fan_out(CALLS).get(timeout=WAIT)} futures back at once")
        print(f"planner: {planner.status().get(timeout=WAIT)}")
        sums = planner.collect().get(timeout=WAIT)
        expected = [2 * i for i in range(CALLS)]
        print(f"results: {len(sums)} sums, {'all right' if sums == expected else sums}")
        try:
            proxy.call_tool("no-such-tool").get(timeout=WAIT)
        except snodo.McpError as error:
            print(f"errors: the call's McpError {error.code}")
    finally:
        planner.actor_ref.stop()
        ref.stop(timeout=WAIT)
    print(f"closed: client actor alive {ref.is_alive()}")
    return 0 if sums == expected else 1


if __name__ == "__main__":
    raise SystemExit(main())
