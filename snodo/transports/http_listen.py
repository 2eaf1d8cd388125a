"""``subscriptions/listen`` over Streamable HTTP: one POST whose event-stream response is the
subscription, held open by a reader task of its own until the stream ends.

The reader feeds the subscription's :class:`StreamRoute` one event at a time (each within
``max_response_bytes``). Cancelling shuts the response down, which the server takes as the
cancellation; ``close()`` of the client leaves the stream open. A stream that breaks off
without the listen result ends with -32000. What it needs of the transport is
:class:`EventStreamSource` (``HttpTransport`` is one).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from snodo.interruptible import Task
from snodo.log import get_logger
from snodo.protocol import errors
from snodo.protocol.errors import McpError
from snodo.protocol.sse import EventTooLarge, SseParser
from snodo.protocol.streamable import event_message
from snodo.transports.base import RequestOptions
from snodo.transports.http_wire import Response, WireError
from snodo.transports.listening import Listening, StreamRoute, SubscriptionSink

__all__ = ["LISTEN_READ", "READER_STOP", "EventStreamSource", "open_listen"]

_log = get_logger("snodo.transports.streamable_http")
_T = TypeVar("_T")

#: The most a listen stream reads at once: the buffer is held while the read blocks, for the
#: stream's whole life (an event larger than this just takes more reads).
LISTEN_READ = 4096
#: How long cancel() waits for the reader task to finish.
READER_STOP = 2.0


class EventStreamSource(Protocol):
    """The transport side of a listen stream."""

    @property
    def max_response_bytes(self) -> int:
        """The most one event may hold."""
        ...

    def open_event_stream(self, message: dict[str, Any], options: RequestOptions) -> Response:
        """POST ``message``; its event-stream answer, or the refusal raised."""
        ...

    def redacted(self, value: _T) -> _T:
        """``value`` without any credential the transport sent."""
        ...


def open_listen(
    transport: EventStreamSource,
    message: dict[str, Any],
    options: RequestOptions,
    sink: SubscriptionSink,
) -> Listening:
    """POST the listen request and return once its stream acknowledged it."""
    response = transport.open_event_stream(message, options)
    route = StreamRoute(message["id"], sink)
    limit = transport.max_response_bytes

    def read() -> None:
        parser = SseParser(max_event_bytes=limit)
        error: McpError | None = None
        try:
            while not route.ended:
                chunk = response.read1(LISTEN_READ)
                if not chunk:
                    break
                for event in parser.feed(chunk):
                    item = event_message(event.data)
                    if item is not None:
                        route.on_message(item)
                    elif event.data:
                        _log.info("skipped an event that is not JSON-RPC")
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
            response.discard()
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
        response.discard()
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
