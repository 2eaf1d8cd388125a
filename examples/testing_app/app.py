"""A small application that holds one MCP connection: a notebook kept on a notes server.

``Notebook(target)`` connects once with ``restart="transient"``: when the server crashes or the
stream breaks, snodo starts a new connection (a new server process over stdio) and the notebook
goes on. What the notebook promises its own callers:

* ``add(text)`` keeps a note and returns how many the server holds; ``notes()`` lists them.
* A call that cannot be served raises :class:`Unavailable` with a ``kind``: ``"lost"`` (the
  connection broke while the call was out: it may or may not have been done), ``"restarting"``
  (not sent: the connection is being replaced; try again), ``"timeout"`` or ``"closed"`` (for
  good: the server is gone or the notebook's owner ended).
* ``states`` is every state the connection went through (``connecting``, ``ready``,
  ``restarting``, ``closed``); ``wait_for(state)`` waits for the next one.

``examples/testing_app/test_app.py`` tests it with ``snodo.testing``.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import snodo

__all__ = ["Notebook", "Unavailable"]


class Unavailable(Exception):
    """The notes server could not serve a call; ``kind`` says why (see the module docstring)."""

    def __init__(self, kind: str, error: snodo.McpError) -> None:
        super().__init__(f"notes unavailable ({kind}): {error.message}")
        self.kind = kind
        self.error = error


def _kind(error: snodo.McpError, closed: bool) -> str:
    if closed:
        return "closed"
    if error.code == -32001:
        return "timeout"
    outcome = error.data.get("outcome") if isinstance(error.data, dict) else None
    return "lost" if outcome == "unknown" else "restarting"


class Notebook:
    """Notes on a notes server over one supervised connection."""

    def __init__(self, target: Any, *, timeout: float = 5.0, **options: Any) -> None:
        self.timeout = timeout
        self.states: list[str] = []
        self._changes: queue.Queue[snodo.StateChange] = queue.Queue(maxsize=1000)
        self._lock = threading.Lock()
        self.client = snodo.connect(
            target,
            restart="transient",
            backoff={"initial": 0.01, "factor": 2.0, "cap": 0.2},
            max_restarts=10,
            timeout=timeout,
            on_state=self._on_state,
            **options,
        )

    def _on_state(self, change: snodo.StateChange) -> None:
        with self._lock:
            self.states.append(change.state)
        self._changes.put_nowait(change)

    def _call(self, tool: str, arguments: dict[str, Any], timeout: float | None) -> Any:
        try:
            answer: Any = self.client.call_tool(tool, arguments, timeout=timeout or self.timeout)
        except snodo.McpError as error:
            raise Unavailable(_kind(error, self.client.closed), error) from None
        return answer["structuredContent"]

    def add(self, text: str, *, timeout: float | None = None) -> int:
        """Keep a note; how many notes the server holds now."""
        return int(self._call("add_note", {"text": text}, timeout)["count"])

    def notes(self, *, timeout: float | None = None) -> list[str]:
        """Every note the server holds."""
        return list(self._call("list_notes", {}, timeout)["notes"])

    @property
    def closed(self) -> bool:
        return self.client.closed

    def wait_for(self, state: str, timeout: float = 10.0) -> snodo.StateChange:
        """The next state change to ``state`` (others before it are skipped), within timeout."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"the connection did not become {state!r} in {timeout}s")
            try:
                change = self._changes.get(timeout=remaining)
            except queue.Empty:
                continue
            if change.state == state:
                return change

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Notebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
