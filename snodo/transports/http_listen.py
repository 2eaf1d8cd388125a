"""``subscriptions/listen`` over Streamable HTTP: one POST whose event-stream response is the
subscription, held open by a reader task of its own until the stream ends.

The reader feeds the subscription's :class:`StreamRoute` one event at a time (each within
``max_response_bytes``). Cancelling shuts the response down, which the server takes as the
cancellation; ``close()`` of the client leaves the stream open. A stream that breaks off
without the listen result ends with -32000.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from snodo._log import get_logger
from snodo._tasks import Task
from snodo.protocol import errors, jsonrpc
from snodo.protocol.errors import McpError
from snodo.protocol.headers import mcp_headers
from snodo.protocol.sse import EventTooLarge, SseParser
from snodo.transports.base import RequestOptions
from snodo.transports.http_wire import WireError
from snodo.transports.listening import Listening, StreamRoute, SubscriptionSink

if TYPE_CHECKING:
    from snodo.transports.streamable_http import HttpTransport

_log = get_logger("snodo.transports.streamable_http")

#: The most a listen stream reads at once: the buffer is held while the read blocks, for the
#: stream's whole life (an event larger than this just takes more reads).
LISTEN_READ = 4096
#: How long cancel() waits for the reader task to finish.
READER_STOP = 2.0


def open_listen(
    transport: HttpTransport,
    message: dict[str, Any],
    options: RequestOptions,
    sink: SubscriptionSink,
) -> Listening:
    """POST the listen request and return once its stream acknowledged it."""
    from snodo.transports.streamable_http import _discard, _event_message

    transport._check_open()
    body = jsonrpc.encode(message)
    headers = mcp_headers(options.dialect, message, session_id=None)
    try:
        response, _ = transport._send("POST", body, headers, options.timeout, stream=True)
    except McpError as error:
        raise transport.redacted(error) from None
    content_type = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
    if content_type != "text/event-stream" or not 200 <= response.status < 300:
        try:
            raise _refusal(transport, message, response, options.timeout)
        finally:
            _discard(response)
    route = StreamRoute(message["id"], sink)
    limit = transport._limit

    def read() -> None:
        parser = SseParser(max_event_bytes=limit)
        error: McpError | None = None
        try:
            while not route.ended:
                chunk = response.read1(LISTEN_READ)
                if not chunk:
                    break
                for event in parser.feed(chunk):
                    item = _event_message(event.data)
                    if item is not None:
                        route.on_message(item)
        except EventTooLarge:
            error = errors.connection_error(
                "An event is larger than max_response_bytes",
                cause=("max_response_bytes", limit),
            )
        except (WireError, OSError, ValueError) as exc:
            error = errors.connection_error(
                "The subscription stream broke off", cause=("http", transport.redacted(str(exc)))
            )
        except BaseException as exc:  # TaskCancelled, or anything else: the stream is over
            error = errors.connection_error(
                "The subscription stream stopped", cause=("http", transport.redacted(repr(exc)))
            )
        finally:
            _discard(response)
        route.end(
            error
            if error is not None
            else errors.connection_error(
                "The subscription stream ended without a result", cause=("sse_ended",)
            )
        )

    reader = Task(read, f"snodo-http-listen-{message['id']}")

    def cancel() -> None:
        route.silence()
        _discard(response)
        if not reader.is_current():
            reader.join(READER_STOP)

    try:
        accepted = route.wait_ack(options.timeout)
    except McpError as error:
        cancel()
        raise transport.redacted(error) from None
    except BaseException:
        cancel()
        raise
    return Listening(accepted, cancel)


def _refusal(
    transport: HttpTransport, message: dict[str, Any], response: Any, timeout: float | None
) -> McpError:
    """The JSON answer (an error response) or the HTTP status, as an McpError (without any
    credential the transport sent: the server may echo them), read within ``timeout``."""
    from snodo.transports.streamable_http import _json_rpc

    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        body = transport._read_all(response, deadline, timeout)
    except McpError as error:
        return transport.redacted(error)
    decoded = _json_rpc(body)
    if decoded is not None and isinstance(decoded.get("error"), dict):
        return transport.redacted(McpError.from_wire(decoded["error"]))
    if decoded is not None and "result" in decoded:
        return errors.connection_error(
            "The subscription stream ended before its acknowledgement",
            cause=("not_acknowledged",),
        )
    return transport._status_error(response, body)
