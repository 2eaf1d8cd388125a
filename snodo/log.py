"""snodo's loggers: structlog on top of the standard library's logging.

A library must never write to stdout (a stdio server's stdout is its protocol stream), and must
not configure structlog for the application. Each logger wraps ``logging.getLogger(name)`` and
renders ``key=value`` pairs, so output goes wherever the application routes ``logging``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

__all__ = ["WarningLimiter", "get_logger"]

_PROCESSORS: list[Any] = [
    structlog.processors.format_exc_info,
    structlog.processors.KeyValueRenderer(key_order=["event"], drop_missing=True),
]


def get_logger(name: str, **context: Any) -> Any:
    """A structlog logger named ``name`` that logs through ``logging`` (never stdout)."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=_PROCESSORS,
        wrapper_class=structlog.stdlib.BoundLogger,
        **context,
    )


class WarningLimiter:
    """Rate limit of repeated log records, per kind, for one source (one connection each).

    A hostile or broken peer must not turn each bad line into a log record (700 garbage lines
    would be 700 warnings). The first ``burst`` records of a kind pass (5 by default); after that
    at most one per ``interval`` seconds (10 s by default) passes, carrying ``suppressed``: how
    many of that kind were dropped since the last one that passed. ``summary()`` reports what is
    still unreported (the connection logs it when it closes). ``clock`` is ``time.monotonic``
    unless a test injects one.
    """

    __slots__ = ("_burst", "_clock", "_interval", "_kinds", "_lock")

    def __init__(
        self,
        burst: int = 5,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._burst = burst
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        # kind -> [records passed, suppressed since the last one passed, when the last passed]
        self._kinds: dict[str, list[Any]] = {}

    def admit(self, kind: str) -> int | None:
        """None: drop this record; else log it, with the number of records of ``kind``
        suppressed since the last one that passed (0 while within the burst)."""
        now = self._clock()
        with self._lock:
            state = self._kinds.get(kind)
            if state is None:
                state = self._kinds[kind] = [0, 0, now]
            passed, suppressed, last = state
            if passed < self._burst or now - last >= self._interval:
                state[0] = passed + 1
                state[1] = 0
                state[2] = now
                return int(suppressed)
            state[1] = suppressed + 1
            return None

    def log(self, emit: Callable[..., Any], kind: str, event: str, **fields: Any) -> bool:
        """``emit(event, **fields)`` if ``admit(kind)`` lets it pass, with ``suppressed=N`` when
        records were dropped before it; True when it was emitted."""
        suppressed = self.admit(kind)
        if suppressed is None:
            return False
        if suppressed:
            fields["suppressed"] = suppressed
        emit(event, **fields)
        return True

    def summary(self) -> dict[str, int]:
        """The kinds with records suppressed since their last one passed, and how many; the
        counts are reset (each suppressed record is reported once)."""
        with self._lock:
            pending = {kind: int(s[1]) for kind, s in self._kinds.items() if s[1]}
            for kind in pending:
                self._kinds[kind][1] = 0
            return pending
