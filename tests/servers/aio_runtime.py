"""A Runtime for the asyncio client's tests: the call-check runtime plus a ``gate`` tool that
holds every call until ``n`` are in at once (so a test knows they were all in flight)."""

from __future__ import annotations

import threading
from typing import Any

from snodo.server import Context, Runtime
from tests.support import client_runtime

_lock = threading.Condition()
_inside = 0
_peak = 0


def build() -> Runtime:
    rt = client_runtime.build()

    @rt.tool(description="Waits until n calls are in at once (or 20 s), returns the peak seen")
    def gate(args: dict[str, Any], ctx: Context) -> dict[str, Any]:
        global _inside, _peak
        n = int(args["n"])
        with _lock:
            _inside += 1
            _peak = max(_peak, _inside)
            _lock.notify_all()
            _lock.wait_for(lambda: _peak >= n, timeout=20.0)
            _inside -= 1
            return {"peak": _peak, "i": args.get("i")}

    return rt
