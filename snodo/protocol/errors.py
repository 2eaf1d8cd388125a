"""McpError and the JSON-RPC / MCP error-code table.

Codes, messages and ``data`` keys follow the reference: -32000 for a closed, unreachable or
unusable connection and -32001 for a timeout (the official TypeScript SDK's codes), and the
server's own code, message and data for decoded JSON-RPC errors.
"""

from __future__ import annotations

from typing import Any, Final, Literal

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
CONNECTION_CLOSED: Final = -32000
REQUEST_TIMEOUT: Final = -32001
RESOURCE_NOT_FOUND: Final = -32002
HEADER_MISMATCH: Final = -32020
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
URL_ELICITATION_REQUIRED: Final = -32042

ErrorKind = Literal["transport", "protocol", "authorization"]

#: Default messages for the codes snodo itself produces.
MESSAGES: Final[dict[int, str]] = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
    CONNECTION_CLOSED: "Connection closed",
    REQUEST_TIMEOUT: "Request timed out",
    HEADER_MISMATCH: "Header mismatch",
    MISSING_CLIENT_CAPABILITY: "Missing required client capability",
    UNSUPPORTED_PROTOCOL_VERSION: "Unsupported protocol version",
}


class McpError(Exception):
    """An MCP call failed: a decoded JSON-RPC error, or a local transport/protocol failure.

    ``kind`` is ``"transport"`` for connection failures (-32000) and timeouts (-32001),
    ``"protocol"`` for decoded JSON-RPC errors and local protocol refusals, and
    ``"authorization"`` for OAuth failures. ``cause`` carries machine-readable detail that is
    not part of the wire error (for instance ``("max_response_bytes", limit)``); by convention
    the last input_required result of a multi round-trip call is its last element.
    """

    code: int
    message: str
    data: Any
    kind: ErrorKind
    cause: Any

    def __init__(
        self,
        code: int,
        message: str | None = None,
        data: Any = None,
        *,
        kind: ErrorKind = "protocol",
        cause: Any = None,
    ) -> None:
        self.code = code
        self.message = message if message is not None else MESSAGES.get(code, "Error")
        self.data = data
        self.kind = kind
        self.cause = cause
        super().__init__(code, self.message)

    def __str__(self) -> str:
        text = f"[{self.code}] {self.message}"
        if self.data is not None:
            text += f" data={self.data!r}"
        return text

    def __repr__(self) -> str:
        return (
            f"McpError(code={self.code}, message={self.message!r}, data={self.data!r}, "
            f"kind={self.kind!r}, cause={self.cause!r})"
        )

    def __reduce__(self) -> Any:
        return (_rebuild, (self.code, self.message, self.data, self.kind, self.cause))

    def to_wire(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` object for this error (``cause`` never goes on the wire)."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @classmethod
    def from_wire(cls, error: Any, *, cause: Any = None) -> McpError:
        """Build the error a peer sent, keeping its code, message and data."""
        if not isinstance(error, dict):
            return connection_error(
                "Malformed JSON-RPC error object", cause=("malformed_error", error)
            )
        code = error.get("code")
        message = error.get("message")
        if not isinstance(code, int) or isinstance(code, bool):
            return connection_error(
                "Malformed JSON-RPC error object", cause=("malformed_error", error)
            )
        return cls(
            code,
            message if isinstance(message, str) else MESSAGES.get(code, "Error"),
            error.get("data"),
            kind="protocol",
            cause=cause,
        )


def _rebuild(code: int, message: str, data: Any, kind: ErrorKind, cause: Any) -> McpError:
    return McpError(code, message, data, kind=kind, cause=cause)


class HandlerError(Exception):
    """Raised by an input handler to fail without crashing (the reference's ``{:error, reason}``)."""

    def __init__(self, reason: Any = None) -> None:
        self.reason = reason
        super().__init__(reason)


def connection_error(message: str = "Connection closed", *, cause: Any = None) -> McpError:
    """-32000: the connection is closed, unreachable or unusable."""
    return McpError(CONNECTION_CLOSED, message, kind="transport", cause=cause)


def timeout_error(timeout: float, *, cause: Any = None) -> McpError:
    """-32001: no response within ``timeout`` seconds; data carries ``timeoutMs``."""
    return McpError(
        REQUEST_TIMEOUT,
        "Request timed out",
        {"timeoutMs": round(timeout * 1000)},
        kind="transport",
        cause=cause,
    )


def max_total_timeout_error(max_total: float, *, cause: Any = None) -> McpError:
    """-32001 for a request stopped by ``max_total_timeout``."""
    return McpError(
        REQUEST_TIMEOUT,
        "Maximum total timeout exceeded",
        {"maxTotalTimeoutMs": round(max_total * 1000)},
        kind="transport",
        cause=cause,
    )


def method_not_found(method: str, **data: Any) -> McpError:
    """-32601 for ``method``, with ``method`` (and any extra keys) in data."""
    return McpError(METHOD_NOT_FOUND, f"Method not found: {method}", {"method": method, **data})


def invalid_params(message: str, data: Any = None, *, cause: Any = None) -> McpError:
    """-32602 with a message saying what was wrong."""
    return McpError(INVALID_PARAMS, message, data, cause=cause)


def internal_error(
    message: str = "Internal error", data: Any = None, *, cause: Any = None
) -> McpError:
    """-32603."""
    return McpError(INTERNAL_ERROR, message, data, cause=cause)


def outcome_unknown_error(message: str, *, cause: Any = None) -> McpError:
    """-32000 for a request that was written but never answered: the server may have acted on
    it, so it is not sent again. ``data`` says ``{"outcome": "unknown"}`` so a caller can tell
    it from a request that never left (which is safe to retry)."""
    return McpError(
        CONNECTION_CLOSED, message, {"outcome": "unknown"}, kind="transport", cause=cause
    )


def with_outcome(error: McpError, outcome: str) -> McpError:
    """A copy of the -32000 ``error`` whose ``data`` says ``{"outcome": outcome}``:
    ``"unknown"`` (the request was written; the server may have acted on it) or ``"not_sent"``
    (it never left, so a retry is safe). An error that already says its outcome keeps it."""
    data = error.data
    if isinstance(data, dict) and "outcome" in data:
        marked = data
    elif isinstance(data, dict):
        marked = {**data, "outcome": outcome}
    elif data is None:
        marked = {"outcome": outcome}
    else:
        marked = data
    return McpError(error.code, error.message, marked, kind=error.kind, cause=error.cause)


def too_large_error(limit: int, what: str = "The response") -> McpError:
    """-32000 for an answer (or ``what``) over ``max_response_bytes``: HTTP and stdio alike."""
    return connection_error(
        f"{what} is larger than max_response_bytes ({limit})",
        cause=("max_response_bytes", limit),
    )


def exit_message(status: int) -> str:
    """How a server's end reads: "exited with status N", or "was killed by signal N (NAME)"
    for a negative status (the signal number, as ``subprocess`` reports it)."""
    if status >= 0:
        return f"The server exited with status {status}"
    import signal  # stdlib data only; loaded when a server has died, not with snodo

    try:
        name = f" ({signal.Signals(-status).name})"
    except ValueError:
        name = ""
    return f"The server was killed by signal {-status}{name}"


def server_exit_error(status: int) -> McpError:
    """-32000 for a server process that ended with ``status`` (``cause=("exit_status", status)``)."""
    return connection_error(exit_message(status), cause=("exit_status", status))


def exited_at_start(error: McpError) -> McpError:
    """``error`` saying the server ended at start, before it answered ``initialize`` ("The server
    exited with status 3 at start: <its last stderr line>"), when it is a
    :func:`server_exit_error`; any other error as it is."""
    cause = error.cause
    if not (
        isinstance(cause, tuple)
        and len(cause) == 2
        and cause[0] == "exit_status"
        and type(cause[1]) is int
    ):
        return error
    said = exit_message(cause[1])
    if not error.message.startswith(said) or error.message.startswith(f"{said} at start"):
        return error
    message = f"{said} at start{error.message[len(said) :]}"
    return McpError(error.code, message, error.data, kind=error.kind, cause=error.cause)


def broken_response_error(reason: str, *, cause: Any = None) -> McpError:
    """-32000 for an answer to our request that is not a valid JSON-RPC response (for instance
    both "result" and "error"): the call fails at once instead of waiting for its timeout."""
    return McpError(
        CONNECTION_CLOSED,
        f"The server sent an invalid response: {reason}",
        kind="transport",
        cause=cause,
    )


__all__ = [
    "CONNECTION_CLOSED",
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MESSAGES",
    "METHOD_NOT_FOUND",
    "MISSING_CLIENT_CAPABILITY",
    "PARSE_ERROR",
    "REQUEST_TIMEOUT",
    "RESOURCE_NOT_FOUND",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "URL_ELICITATION_REQUIRED",
    "ErrorKind",
    "HandlerError",
    "McpError",
    "broken_response_error",
    "connection_error",
    "exit_message",
    "exited_at_start",
    "internal_error",
    "invalid_params",
    "max_total_timeout_error",
    "method_not_found",
    "outcome_unknown_error",
    "server_exit_error",
    "timeout_error",
    "too_large_error",
    "with_outcome",
]
