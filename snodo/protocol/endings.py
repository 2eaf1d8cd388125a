"""How a call's error says the connection ended, pure: the input of a restart policy.

A -32000 from the transport that names a lost connection (the server exited, its pipes or
socket broke, it could not be reached, it hung up mid-answer) is an *end*; so is an HTTP 404
for a request that carried a session id (the Streamable HTTP spec: the session is gone, start a
new one with ``initialize``; the request was not processed). A timeout (-32001), a server's
JSON-RPC error or a connection closed by the client are not. An end is *abnormal* unless the
server exited with status 0.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from snodo.protocol.errors import CONNECTION_CLOSED, McpError

__all__ = ["BROKEN_CAUSES", "Ending", "ending_of", "is_abnormal"]

#: broken: the connection is gone; exited: the server process ended; expired: HTTP 404 for the
#: session (the request that got it was not processed, so it may be sent on a new session).
Ending: TypeAlias = Literal["broken", "exited", "expired"]

#: The ``cause`` tags of transport errors that mean the connection itself is lost.
BROKEN_CAUSES = frozenset({"stdout_closed", "port_exit", "write", "http", "sse_ended"})


def ending_of(error: McpError, has_session: bool) -> Ending | None:
    """The end ``error`` reports, or None when the connection may still be fine."""
    cause = error.cause
    tag = cause[0] if isinstance(cause, tuple) and cause else None
    if tag == "http_status":
        return "expired" if has_session and len(cause) > 1 and cause[1] == 404 else None
    if error.kind != "transport" or error.code != CONNECTION_CLOSED:
        return None
    if tag == "exit_status":
        return "exited"
    return "broken" if tag in BROKEN_CAUSES else None


def is_abnormal(error: McpError | None) -> bool:
    """Whether an end restarts a ``"transient"`` connection: anything but a clean exit (0)."""
    if error is None:
        return False
    cause = error.cause
    return not (
        isinstance(cause, tuple) and len(cause) > 1 and cause[0] == "exit_status" and cause[1] == 0
    )
