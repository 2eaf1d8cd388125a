"""What a handler sees (:class:`Context`) and what a transport offers (:class:`Peer`,
:class:`ServerSession`).

Interactive operations (``elicit``, ``sample``, ``list_roots``, ``request_input``) work in both
eras with the same handler code:

- **stateless era** (2026-07-28, multi round-trip): the handler is run again on every retry. Each
  interactive call has a deterministic key (``"elicit-1"``, ``"sample-2"``, ... by call order
  within one run, or the caller's own keys for :meth:`Context.request_input`). When the answer
  for every key of the call is known (from this round's ``inputResponses`` or from earlier
  rounds, carried in the signed ``requestState``; see :mod:`snodo.server.rounds`) the call
  returns it; otherwise it raises a control signal that dispatch turns into an
  ``input_required`` result. Handlers must therefore be deterministic up to their interactive
  calls, and side effects belong after them.
- **session era**: each call is a server-to-client request sent through
  ``Peer.server_request``, one at a time, and returns its result.

The control signals derive from ``BaseException`` so that a handler's ``except Exception``
does not swallow them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import orjson

from snodo.protocol.errors import (
    INTERNAL_ERROR,
    MISSING_CLIENT_CAPABILITY,
    McpError,
    invalid_params,
)
from snodo.protocol.meta import LOG_LEVELS
from snodo.protocol.serving.interaction import (
    ELICIT,
    INPUT_METHODS,
    ROOTS,
    SAMPLE,
    answer_problem,
    capability_object,
    missing_capabilities,
)
from snodo.server.jobs import Inflight, RequestId
from snodo.server.rounds import Rounds

__all__ = [
    "Context",
    "InputRequiredSignal",
    "NotifySink",
    "Peer",
    "ProgressSink",
    "RequestId",
    "RetryLaterSignal",
    "ServerRequest",
    "ServerSession",
]

ProgressSink = Callable[[dict[str, Any]], None]
NotifySink = Callable[[str, dict[str, Any]], None]
ServerRequest = Callable[[str, dict[str, Any]], dict[str, Any]]


@dataclass
class ServerSession:
    """Session-era state a transport keeps per connection.

    stdio: one per process; direct: one per client; HTTP: one per ``Mcp-Session-Id``.
    ``version`` is set by ``initialize``; ``initialized`` by ``notifications/initialized``.
    """

    version: str | None = None
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    client_info: dict[str, Any] | None = None
    initialized: bool = False
    session_id: str | None = None
    #: The session's notification channel (``snodo.server.subscriptions``), once opened.
    channel: Any = None
    #: Set by ``logging/setLevel``; ``None``: every level is sent.
    log_level: str | None = None


@dataclass
class Peer:
    """What the transport offers the server side for one connection.

    ``session`` is ``None`` when the transport cannot hold session-era sessions.
    ``server_request(method, params)`` sends a server-to-client request (session era) and
    blocks for the client's result; it raises ``McpError`` for an error answer.
    ``inflight`` holds the contexts of the requests being served, by id, so that
    ``notifications/cancelled`` can mark them; dispatch registers them
    (:class:`snodo.server.jobs.Inflight`).
    """

    kind: str
    session: ServerSession | None = None
    server_request: ServerRequest | None = None
    inflight: Inflight = field(default_factory=Inflight, repr=False)
    #: Takes a ``subscriptions/listen`` stream (a ``ServerSubscription``) and starts it;
    #: None when the transport cannot serve subscriptions.
    listen: Callable[[Any], None] | None = None


class InputRequiredSignal(BaseException):
    """Raised by an interactive call in the stateless era when an answer is missing."""

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__("input required")
        self.requests = requests


class RetryLaterSignal(BaseException):
    """Raised by :meth:`Context.retry_later` in the stateless era (load shedding)."""


def _copy(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


class Context:
    """The request a handler is serving, and the way back to the client."""

    __slots__ = (
        "_cancelled",
        "_log_level",
        "_notify",
        "_seq",
        "_sink",
        "_stateless",
        "_token",
        "client_capabilities",
        "client_info",
        "meta",
        "method",
        "peer",
        "request_id",
        "rounds",
        "version",
    )

    version: str
    request_id: RequestId
    method: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    meta: dict[str, Any]
    #: The multi round-trip state of this request (``None`` when its method has none); dispatch
    #: owns it (:mod:`snodo.server.rounds`).
    rounds: Rounds | None
    #: The transport's offer for the connection this request came on.
    peer: Peer | None

    def __init__(
        self,
        version: str,
        request_id: RequestId,
        method: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any] | None,
        meta: dict[str, Any],
        stateless: bool,
        rounds: Rounds | None = None,
        peer: Peer | None = None,
        progress: ProgressSink | None = None,
        progress_token: RequestId | None = None,
        notify: NotifySink | None = None,
        log_level: str | None = None,
    ) -> None:
        self.version = version
        self.request_id = request_id
        self.method = method
        self.client_capabilities = client_capabilities
        self.client_info = client_info
        self.meta = meta
        self._stateless = stateless
        self.rounds = rounds
        self.peer = peer
        self._sink = progress if progress_token is not None else None
        self._token = progress_token
        self._seq = 0
        self._cancelled = False
        self._notify = notify
        self._log_level = log_level

    # -- state -----------------------------------------------------------------------------

    @property
    def stateless(self) -> bool:
        """True in the stateless era (multi round-trip), False in the session era."""
        return self._stateless

    @property
    def round(self) -> int:
        """How many ``input_required`` rounds came before this run (stateless era; else 0)."""
        rounds = self.rounds
        return 0 if rounds is None else rounds.round

    @property
    def cancelled(self) -> bool:
        """True once the client sent ``notifications/cancelled`` for this request."""
        return self._cancelled

    def cancel(self) -> None:
        """Mark the request cancelled (the transport's doing: the client cancelled or left)."""
        self._cancelled = True

    # -- progress --------------------------------------------------------------------------

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress; a no-op when the request carries no ``_meta.progressToken``.

        A sink that raises marks the request cancelled (the client stopped waiting); the
        exception does not reach the handler.
        """
        sink = self._sink
        if sink is None:
            return
        params: dict[str, Any] = {"progressToken": self._token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        try:
            sink(params)
        except Exception:
            # The transport's sink failed: the client stopped waiting. Treat the request as
            # cancelled and drop further reports; the handler may look at ``cancelled``.
            self._sink = None
            self._cancelled = True

    # -- logging ---------------------------------------------------------------------------

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` about this request, if the client asked for ``level``.

        Sent only when the Runtime offers logging (``Runtime(logging=True)``) and ``level`` is
        at or above the threshold: in the stateless era the request's ``_meta`` logLevel (none:
        no messages), in the session era the session's ``logging/setLevel`` (none: all). A
        transport that has no way back drops it; a failing sink marks the request cancelled.
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; expected one of {LOG_LEVELS}")
        notify, threshold = self._notify, self._log_level
        if notify is None or threshold not in LOG_LEVELS:
            return
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        try:
            notify("notifications/message", params)
        except Exception:
            self._notify = None
            self._cancelled = True

    # -- interactive operations ------------------------------------------------------------

    def elicit(self, message: str, requested_schema: dict[str, Any]) -> dict[str, Any]:
        """Form elicitation; returns the client's ``ElicitResult``."""
        params = {"mode": "form", "message": message, "requestedSchema": requested_schema}
        return self._ask_one("elicit", ELICIT, params)

    def elicit_url(self, message: str, url: str) -> dict[str, Any]:
        """URL elicitation; returns the client's ``ElicitResult`` (accept means consent only)."""
        return self._ask_one("elicit", ELICIT, {"mode": "url", "message": message, "url": url})

    def sample(self, params: dict[str, Any]) -> dict[str, Any]:
        """``sampling/createMessage`` with ``params``; returns the ``CreateMessageResult``."""
        return self._ask_one("sample", SAMPLE, params)

    def list_roots(self) -> dict[str, Any]:
        """``roots/list``; returns the client's ``ListRootsResult``."""
        return self._ask_one("roots", ROOTS, {})

    def request_input(
        self, requests: Mapping[str, tuple[str, dict[str, Any]]]
    ) -> dict[str, dict[str, Any]]:
        """Several requests at once: ``key -> (method, params)``; returns ``key -> response``.

        In the stateless era every unanswered key goes into one ``input_required`` round. Keys
        must be unique within one run of the handler.
        """
        self._seq += 1
        checked: dict[str, tuple[str, dict[str, Any]]] = {}
        for key, (method, params) in requests.items():
            if not isinstance(key, str) or not key:
                raise ValueError("request_input keys must be non-empty strings")
            if method not in INPUT_METHODS:
                raise ValueError(f"request_input cannot send {method!r}")
            checked[key] = (method, dict(params) if params else {})
        return self._ask(checked)

    def retry_later(self) -> NoReturn:
        """Stateless era: answer ``input_required`` with only a ``requestState`` (load
        shedding); the client retries (after 250 ms) and the handler runs again with ``round``
        advanced.

        The session era has no retry protocol: -32603 "Server busy".
        """
        if self._stateless and self.rounds is not None:
            raise RetryLaterSignal()
        raise McpError(INTERNAL_ERROR, "Server busy; retry later")

    def _ask_one(self, kind: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._seq += 1
        key = f"{kind}-{self._seq}"
        return self._ask({key: (method, params)})[key]

    def _ask(self, requests: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
        if self._stateless:
            return self._ask_stateless(requests)
        return {key: self._ask_session(key, m, p) for key, (m, p) in requests.items()}

    def _ask_stateless(
        self, requests: dict[str, tuple[str, dict[str, Any]]]
    ) -> dict[str, dict[str, Any]]:
        rounds = self.rounds
        if rounds is None:
            raise McpError(INTERNAL_ERROR, f"{self.method} cannot ask the client for input")
        answers = rounds.answers
        missing = [key for key in requests if key not in answers]
        if not missing:
            out: dict[str, dict[str, Any]] = {}
            for key, (method, params) in requests.items():
                out[key] = _checked_answer(key, method, params, answers[key])
            return out
        absent: list[tuple[str, ...]] = []
        for key in missing:
            method, params = requests[key]
            for path in missing_capabilities(self.client_capabilities, method, params):
                if path not in absent:
                    absent.append(path)
        if absent:
            names = ", ".join(".".join(p) for p in absent)
            raise McpError(
                MISSING_CLIENT_CAPABILITY,
                f"Missing required client capability: {names}",
                {"requiredCapabilities": capability_object(absent)},
            )
        embedded: dict[str, dict[str, Any]] = {}
        for key in missing:
            method, params = requests[key]
            embedded[key] = {"method": method, "params": _copy(params)}
        raise InputRequiredSignal(embedded)

    def _ask_session(self, key: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        params = _session_params(self.version, method, params)
        absent = missing_capabilities(self.client_capabilities, method, params)
        if self.version == "2025-06-18":
            # 2025-06-18 has no sampling.context capability (includeContext needs none).
            absent = [p for p in absent if p != ("sampling", "context")]
        if absent:
            names = ", ".join(".".join(p) for p in absent)
            raise invalid_params(
                f"Client does not support {names} (not declared in its initialize capabilities)"
            )
        send = self.peer.server_request if self.peer is not None else None
        if send is None:
            raise McpError(INTERNAL_ERROR, "This transport cannot send server requests")
        return _checked_answer(key, method, params, send(method, params))


def _checked_answer(
    key: str, method: str, params: Mapping[str, Any], answer: Any
) -> dict[str, Any]:
    problem = answer_problem(method, params, answer)
    if problem is not None:
        raise invalid_params(f"Invalid input response {key!r} to {method}: {problem}")
    result: dict[str, Any] = answer
    return result


def _session_params(version: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Copy ``params`` and fit them to a session-era version's schema."""
    params = _copy(params)
    if method == ELICIT:
        url = params.get("mode") == "url"
        if version == "2025-06-18":
            if url:
                raise invalid_params("URL elicitation is not available in protocol 2025-06-18")
            params.pop("mode", None)
        elif url and "elicitationId" not in params:
            params["elicitationId"] = uuid.uuid4().hex
    elif (
        method == SAMPLE
        and version == "2025-06-18"
        and ("tools" in params or "toolChoice" in params)
    ):
        raise invalid_params("Sampling with tools is not available in protocol 2025-06-18")
    return params
