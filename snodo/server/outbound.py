"""Server-to-client requests waiting for the client's answer (shared by the stdio and HTTP
servers): the pending record and how an answer reaches it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from snodo.protocol.errors import McpError


class Asking(Protocol):
    """A client request being served, with the server requests it is waiting on."""

    asking: set[str]


@dataclass(eq=False)
class PendingAnswer:
    """A server-to-client request waiting for the client's answer."""

    job: Asking | None
    done: threading.Event = field(default_factory=threading.Event)
    result: dict[str, Any] | None = None
    error: McpError | None = None


def deliver_answer(
    lock: Any,
    table: dict[str, PendingAnswer],
    sid: Any,
    result: dict[str, Any] | None,
    error: McpError | None,
) -> bool:
    """Deliver the client's answer to server request ``sid``; False if none is waiting."""
    if type(sid) is not str:
        return False
    with lock:
        pending = table.pop(sid, None)
        if pending is None:
            return False
        if pending.job is not None:
            pending.job.asking.discard(sid)
        pending.result = result
        pending.error = error
    pending.done.set()
    return True
