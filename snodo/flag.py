"""``Flag``: a one-way ``threading.Event`` that costs ~56 bytes until somebody waits on it.

Every connection holds a few "closed" or "stopped" events that are almost never waited on;
a real ``threading.Event`` (a condition, a lock, a deque: ~1.2 KiB) for each would be most of
an idle connection's memory.
"""

from __future__ import annotations

import threading

__all__ = ["Flag"]

_first_waiter_lock = threading.Lock()  # only taken by the first waiter of a flag


class Flag:
    """``set``, ``is_set`` and ``wait`` of ``threading.Event``; there is no ``clear``.

    The real event is made only when somebody waits before the flag is set. ``set`` writes the
    flag and then reads the event; ``wait`` installs the event and then reads the flag: under
    the GIL one of the two sees the other, so no wake-up is lost. The event is dropped again
    once it has been set and waited through.
    """

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        if self._set:
            return True
        with _first_waiter_lock:
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        if self._set:
            return True
        if not event.wait(timeout):
            return False
        self._event = None  # set, and every waiter on it woken: drop the ~1.2 KiB
        return True
