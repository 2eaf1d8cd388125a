"""Reading Streamable HTTP answers (sans-IO): the rules the HTTP transport applies to what the
server sent, with no socket in sight.

- the media type of an answer, parsed once and without case (:func:`media_type`);
- a POST's JSON answer (:func:`read_post_answer`) and the error for an answer that is not one
  (:func:`status_error`), an event's message (:func:`event_message`) and whether it is the
  response to our request (:func:`response_to`);
- the session era's event streams: when a broken one is resumed (:func:`may_resume`, after
  :func:`retry_delay`), and when the standalone GET stream opens
  (:func:`opens_standalone_stream`); the GET's headers are ``headers.stream_headers``;
- a refused ``subscriptions/listen`` POST (:func:`listen_refusal`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from snodo.protocol import errors, jsonrpc, redaction
from snodo.protocol.dialects import Dialect
from snodo.protocol.errors import McpError
from snodo.protocol.exchange import not_acknowledged_error
from snodo.protocol.jsonrpc import RequestId

__all__ = [
    "DEFAULT_RETRY_MS",
    "EVENT_STREAM",
    "MAX_RESUMES",
    "HeaderLookup",
    "decode_body",
    "event_message",
    "is_event_stream",
    "listen_refusal",
    "may_resume",
    "media_type",
    "messages_in",
    "opens_standalone_stream",
    "read_post_answer",
    "response_to",
    "retry_delay",
    "session_expired",
    "status_error",
]

EVENT_STREAM: Final = "text/event-stream"
#: Resumptions of one broken session-era event stream.
MAX_RESUMES: Final = 3
#: The wait before a resumption when the server sent no ``retry`` field (milliseconds).
DEFAULT_RETRY_MS: Final = 1000
#: How much of a refused answer's body an error keeps.
EXCERPT_BYTES: Final = 512


class HeaderLookup(Protocol):
    """Response headers looked up by name without case (``http1.Headers``)."""

    def get(self, name: str, default: str | None = None) -> str | None: ...


def media_type(headers: HeaderLookup) -> str:
    """The ``Content-Type`` without its parameters, lower-cased ("" when there is none)."""
    value = headers.get("content-type")
    if not value:
        return ""
    return value.partition(";")[0].strip().lower()


def is_event_stream(headers: HeaderLookup) -> bool:
    """True when the answer is an event stream (``text/event-stream``, in any case)."""
    return media_type(headers) == EVENT_STREAM


def decode_body(body: bytes | str) -> dict[str, Any] | None:
    """The JSON-RPC 2.0 object ``body`` holds, or None (empty, not JSON, not JSON-RPC)."""
    if not body:
        return None
    try:
        decoded = jsonrpc.decode(body)
    except jsonrpc.DecodeError:
        return None
    if isinstance(decoded, dict) and decoded.get("jsonrpc") == "2.0":
        return decoded
    return None


def event_message(data: str) -> dict[str, Any] | None:
    """The JSON-RPC message an event's data carries; None for a priming event (no data) or
    anything that is not JSON-RPC (``data`` non-empty: worth a log line)."""
    if not data:
        return None
    return decode_body(data)


def messages_in(data: bytes | str) -> tuple[list[dict[str, Any]], str | None]:
    """The JSON-RPC messages a body or an event's data holds (one, or a batch's elements:
    :func:`jsonrpc.unbatch`), and why anything in it was skipped (None when nothing was: also
    for empty data, a priming event). A bad element is skipped alone."""
    if not data:
        return [], None
    try:
        decoded = jsonrpc.decode(data)
        elements = jsonrpc.unbatch(decoded)
    except jsonrpc.DecodeError as exc:
        return [], exc.reason
    kept = [e for e in elements if isinstance(e, dict) and e.get("jsonrpc") == "2.0"]
    if len(kept) == len(elements):
        return kept, None
    if elements is not decoded:
        return kept, "not a JSON-RPC 2.0 object"
    skipped = len(elements) - len(kept)
    return kept, f"{skipped} of the batch's {len(elements)} elements are not JSON-RPC 2.0 objects"


def response_to(item: dict[str, Any], request_id: RequestId) -> dict[str, Any] | None:
    """``item`` when it is the response to ``request_id``; None when it answers nothing of
    ours. A message shaped as our response that ``classify`` refuses (both "result" and
    "error", say) fails the call at once (-32000) instead of leaving it to its timeout."""
    if jsonrpc.refused_response_id(item) != request_id:
        return None
    if "error" not in item and type(item.get("result")) is dict:
        return item  # the usual answer: exactly what classify accepts as a Response
    try:
        jsonrpc.classify(item)
    except jsonrpc.DecodeError as exc:
        raise errors.broken_response_error(
            exc.reason, cause=("broken_response", request_id)
        ) from None
    return item


def status_error(status: int, url: str, body: bytes, secrets: Iterable[str]) -> McpError:
    """The error for an answer that is not the request's response: the server's JSON-RPC error
    if it sent one, else -32000 with the status and the body's first bytes; either way without
    any of ``secrets`` (the credentials sent)."""
    decoded = decode_body(body)
    if decoded is not None and isinstance(decoded.get("error"), dict):
        error = McpError.from_wire(decoded["error"], cause=("http_status", status))
        return redaction.redact_error(error, secrets)
    return errors.connection_error(
        f"HTTP {status} from {url}",
        cause=("http_status", status, redaction.excerpt(body, secrets, EXCERPT_BYTES)),
    )


def session_expired(status: int, session_id: str | None) -> bool:
    """A 404 for a request that carried a session id: the session is gone (the request was not
    processed; the client must ``initialize`` again). Raised as :func:`status_error`, so its
    ``cause`` names the status even when the body is the server's JSON-RPC error."""
    return status == 404 and session_id is not None


def read_post_answer(request_id: RequestId, body: bytes) -> dict[str, Any] | None:
    """The response a POST's JSON answer carries for ``request_id``; None when the body is no
    JSON-RPC response (the caller raises :func:`status_error`).

    An error without an id is taken as ours (it gets ``request_id``); a response to another id
    is -32000 ``unexpected_id``. A batch (2025-03-26) is searched for ``request_id``'s response.
    """
    if not body:
        return None
    try:
        whole = jsonrpc.decode(body)
    except jsonrpc.DecodeError:
        return None
    if (
        type(whole) is dict
        and whole.get("jsonrpc") == "2.0"
        and "error" not in whole
        and type(whole.get("result")) is dict
        and jsonrpc.refused_response_id(whole) == request_id
    ):
        return whole  # the usual answer, decoded once: what the steps below would return
    try:
        elements = jsonrpc.unbatch(whole)
    except jsonrpc.DecodeError:
        return None
    answers = [
        m
        for m in elements
        if isinstance(m, dict) and m.get("jsonrpc") == "2.0" and "method" not in m
    ]
    decoded = next(
        (m for m in answers if jsonrpc.refused_response_id(m) == request_id),
        answers[0] if len(answers) == 1 else None,
    )
    if decoded is None:
        return None
    answer = response_to(decoded, request_id)
    if answer is not None:
        return answer
    if "error" in decoded and decoded.get("id") is None:
        return {**decoded, "id": request_id}
    if "result" in decoded or "error" in decoded:
        raise errors.connection_error(
            "The server answered another request id",
            cause=("unexpected_id", decoded.get("id")),
        )
    return None


def listen_refusal(status: int, body: bytes, url: str, secrets: Iterable[str]) -> McpError:
    """The error for a ``subscriptions/listen`` POST answered without an event stream: the
    server's JSON-RPC error, a result before any acknowledgement, or the HTTP status."""
    decoded = decode_body(body)
    if decoded is not None and isinstance(decoded.get("error"), dict):
        return redaction.redact_error(McpError.from_wire(decoded["error"]), secrets)
    if decoded is not None and "result" in decoded:
        return not_acknowledged_error()
    return status_error(status, url, body, secrets)


def may_resume(
    dialect: Dialect, last_event_id: str | None, resumes: int, session_id: str | None
) -> bool:
    """True when a POST's event stream that broke off is resumed with a GET: a session-era
    session whose stream gave events ids, fewer than ``MAX_RESUMES`` times."""
    return (
        not dialect.stateless
        and bool(last_event_id)
        and resumes < MAX_RESUMES
        and session_id is not None
    )


def retry_delay(retry_ms: int | None) -> float:
    """Seconds to wait before a resumption: the server's ``retry`` field, else the default."""
    return (retry_ms if retry_ms is not None else DEFAULT_RETRY_MS) / 1000.0


def opens_standalone_stream(
    message: Mapping[str, Any], dialect: Dialect, session_id: str | None
) -> bool:
    """True when sending ``message`` opens the session's standalone GET stream: the session
    era's ``notifications/initialized`` on a session the server identified."""
    return (
        message.get("method") == "notifications/initialized"
        and not dialect.stateless
        and session_id is not None
    )
