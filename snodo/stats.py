"""``Client.stats()``: what one connection has done, from counters the call path already passes.

The counters are plain integers bumped with ``+=`` on the paths that exist (no lock of their
own): under CPython's GIL an ``+=`` of an int attribute is not interrupted (no call or backward
jump between its read and its write), so the counts are exact there; a free-threaded build may
lose one now and then. They survive restarts (a restarted connection keeps its client's
counters); bytes are the transport's own and start again with each new transport.
"""

from __future__ import annotations

from typing import Any

from snodo.protocol.errors import REQUEST_TIMEOUT

__all__ = ["CallStats"]


class CallStats:
    """One client's call and event counters (see the module docstring)."""

    __slots__ = ("abandoned", "completed", "dropped", "events", "failed", "sent")

    def __init__(self) -> None:
        #: Calls sent (a call answered from the cache is not sent), completed, failed by code.
        self.sent = 0
        self.completed = 0
        self.failed: dict[int, int] = {}
        #: Calls whose caller stopped waiting (a cancelled task, an interrupt).
        self.abandoned = 0
        #: Subscription events handed to their owners, and events dropped by full buffers.
        self.events = 0
        self.dropped = 0

    def fail(self, code: int) -> None:
        failed = self.failed
        failed[code] = failed.get(code, 0) + 1

    def snapshot(self, restarts: int, transport_bytes: tuple[int, int] | None) -> dict[str, Any]:
        """The plain dict ``Client.stats()`` returns."""
        failed = dict(self.failed)
        ended = self.completed + sum(failed.values()) + self.abandoned
        return {
            "calls_sent": self.sent,
            "calls_completed": self.completed,
            "calls_failed": failed,
            "calls_timed_out": failed.get(REQUEST_TIMEOUT, 0),
            "calls_abandoned": self.abandoned,
            "calls_in_flight": max(0, self.sent - ended),
            "events_delivered": self.events,
            "events_dropped": self.dropped,
            "restarts": restarts,
            "bytes_in": None if transport_bytes is None else transport_bytes[0],
            "bytes_out": None if transport_bytes is None else transport_bytes[1],
        }
