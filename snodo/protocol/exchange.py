"""One request exchange, the rules every transport shares (sans-IO: time is an argument).

- :class:`Deadline`: when a request times out, what progress does to that, and which -32001
  error it ends with (in the manner of urllib3's ``Timeout``);
- the progress-token rule: the client sends a request's id as its ``progressToken``, so a
  ``notifications/progress`` reports on the request whose id is its token
  (:func:`progress_token`, :func:`progress_request_id`, :func:`is_progress_for`);
- the replies to requests the server sends the client (:func:`server_request_reply`): the
  client's handler answers them; a transport with no handler answers as the client's rule
  (``snodo.protocol.inputs.check_server_request``) does;
- a subscription that ended before its acknowledgement (:func:`not_acknowledged_error`).

Transports call these; a custom transport can too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from snodo.protocol import errors, jsonrpc
from snodo.protocol.errors import McpError
from snodo.protocol.inputs import check_server_request
from snodo.protocol.jsonrpc import RequestId

__all__ = [
    "Deadline",
    "Timing",
    "Within",
    "answered_without_handler",
    "busy_reply",
    "handler_raised_reply",
    "is_progress_for",
    "not_acknowledged_error",
    "progress_request_id",
    "progress_token",
    "server_request_reply",
    "server_request_result",
]

#: Answers a server-to-client request: ``(method, params) -> result``; raises McpError to refuse.
Answer = Callable[[str, dict[str, Any]], dict[str, Any]]

_NO_HANDLERS: Mapping[str, Callable[..., Any]] = {}


class Timing(Protocol):
    """What a deadline is made from (``snodo.transports.base.RequestOptions`` is one)."""

    @property
    def timeout(self) -> float | None: ...

    @property
    def reset_timeout_on_progress(self) -> bool: ...

    @property
    def max_total_timeout(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class Within:
    """A plain timeout, for a :class:`Deadline` with no progress rule and no cap."""

    timeout: float | None
    reset_timeout_on_progress: bool = False
    max_total_timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Deadline:
    """When a request in flight times out, as monotonic times (None: never).

    ``expires`` is the end of ``timing.timeout``; with ``reset_timeout_on_progress`` each
    progress report moves it (:meth:`after_progress`) and ``cap`` (``max_total_timeout`` after
    the start) bounds the whole request. Built once per request (three fields: it is on the
    request hot path).
    """

    expires: float | None
    cap: float | None
    timing: Timing

    @classmethod
    def start(cls, timing: Timing, now: float) -> Deadline:
        """The deadline of a request sent at ``now`` with ``timing``'s options."""
        timeout = timing.timeout
        expires = None if timeout is None else now + timeout
        if not timing.reset_timeout_on_progress:
            return cls(expires, None, timing)
        total = timing.max_total_timeout
        return cls(expires, None if total is None else now + total, timing)

    @classmethod
    def within(cls, timeout: float | None, now: float) -> Deadline:
        """A plain ``timeout`` from ``now`` (no progress rule, no cap)."""
        return cls(None if timeout is None else now + timeout, None, Within(timeout))

    @property
    def resets(self) -> bool:
        """Progress moves ``expires`` (reset_timeout_on_progress, with a timeout)."""
        timing = self.timing
        return timing.reset_timeout_on_progress and timing.timeout is not None

    def after_progress(self, now: float) -> Deadline:
        """The deadline after a progress report at ``now`` (itself unless progress resets it)."""
        timing = self.timing
        timeout = timing.timeout
        if timeout is None or not timing.reset_timeout_on_progress:
            return self
        return Deadline(now + timeout, self.cap, timing)

    def ends(self) -> float | None:
        """The earlier of ``expires`` and ``cap`` (None: never)."""
        expires, cap = self.expires, self.cap
        if expires is None:
            return cap
        return expires if cap is None or expires < cap else cap

    def remaining(self, now: float) -> float | None:
        """Seconds left at ``now`` (zero or less: expired; None: no deadline)."""
        expires, cap = self.expires, self.cap
        if cap is None:
            return None if expires is None else expires - now
        if expires is None or cap < expires:
            return cap - now
        return expires - now

    def expired(self, now: float) -> bool:
        """True once ``now`` is at or past the deadline."""
        return (self.expires is not None and now >= self.expires) or (
            self.cap is not None and now >= self.cap
        )

    def error(self, *, cause: Any = None) -> McpError:
        """The -32001 the request ends with: "Maximum total timeout exceeded" when the cap came
        first, else "Request timed out" (with ``cause``)."""
        cap = self.cap
        if cap is not None and (self.expires is None or cap <= self.expires):
            return errors.max_total_timeout_error(self.timing.max_total_timeout or 0.0)
        return errors.timeout_error(self.timing.timeout or 0.0, cause=cause)


# -- progress ----------------------------------------------------------------------------------


def progress_token(request_id: RequestId) -> RequestId:
    """The ``progressToken`` the client sends with a request: the request's own id."""
    return request_id


def progress_request_id(params: object) -> RequestId | None:
    """The id of the request a ``notifications/progress`` reports on (its token), or None."""
    if not isinstance(params, dict):
        return None
    token = params.get("progressToken")
    return token if jsonrpc.is_valid_id(token) else None


def is_progress_for(params: object, request_id: RequestId) -> TypeGuard[dict[str, Any]]:
    """True when a ``notifications/progress`` with ``params`` reports on ``request_id``."""
    token = progress_request_id(params)
    return token is not None and token == request_id


# -- requests the server sends the client ---------------------------------------------------------


def answered_without_handler(method: str, params: object) -> bool:
    """True for a server request the client's rule answers without running a handler (``ping``):
    a transport may reply at once instead of scheduling the handler."""
    try:
        return check_server_request(method, params, _NO_HANDLERS) is None
    except McpError:
        return False


def server_request_result(method: str, params: object, answer: Answer | None) -> dict[str, Any]:
    """The result of a server request: ``{}`` for ping without asking the handler; else
    ``answer``'s, or with no handler at all the client's rule (-32601). An McpError is the
    error answer; any other exception ``answer`` raises propagates (the transport decides what
    it becomes)."""
    if answer is not None and not answered_without_handler(method, params):
        return answer(method, params if isinstance(params, dict) else {})
    check_server_request(method, params, _NO_HANDLERS)  # None for ping, else raises -32601
    return {}


def server_request_reply(
    request_id: RequestId, method: str, params: object, answer: Answer | None
) -> dict[str, Any]:
    """The reply message to a server request (see :func:`server_request_result`)."""
    try:
        result = server_request_result(method, params, answer)
    except McpError as error:
        return jsonrpc.error_response(request_id, error)
    return jsonrpc.result_response(request_id, result)


def handler_raised_reply(request_id: RequestId, exc: BaseException) -> dict[str, Any]:
    """-32603 for a handler that raised (stdio's answer; over HTTP the exception propagates)."""
    return jsonrpc.error_response(
        request_id, errors.internal_error(f"Input handler raised: {type(exc).__name__}")
    )


def busy_reply(request_id: RequestId) -> dict[str, Any]:
    """-32603 for a server request over the transport's bound on handlers running at once."""
    return jsonrpc.error_response(
        request_id, errors.internal_error("Too many server requests in flight")
    )


def not_acknowledged_error() -> McpError:
    """-32000 for a subscription whose stream ended before its acknowledgement."""
    return errors.connection_error(
        "The subscription stream ended before its acknowledgement", cause=("not_acknowledged",)
    )
