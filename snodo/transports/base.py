"""The Transport protocol: what the client needs from a connection, and the per-request options.

A transport moves one JSON-RPC message dict out and brings its response dict back. It decides
nothing the protocol layer could decide: it raises ``McpError(kind="transport")`` for -32000
(closed, unreachable, unusable) and -32001 (timeout) and returns every other answer as is.

Custom transports: a class with a ``connect(init_arg, options)`` class method (see
:class:`TransportClass`) whose instances implement :class:`Transport`, passed to
``snodo.connect((TransportClass, init_arg))``. The rules every transport shares are pure functions
in ``snodo.protocol.exchange`` (a request's :class:`~snodo.protocol.exchange.Deadline`, the
progress-token rule, the replies to server requests); a custom transport can use them too.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from snodo.protocol.dialects import Dialect
from snodo.protocol.errors import McpError

if TYPE_CHECKING:
    from snodo.transports.listening import Listening, SessionFanout, SubscriptionSink

__all__ = [
    "BaseTransport",
    "CacheIdentity",
    "ConnectOptions",
    "EndReportingTransport",
    "Inbox",
    "LendingTransport",
    "ListeningTransport",
    "NotifyingTransport",
    "ProgressSink",
    "RequestOptions",
    "ServerRequestHandler",
    "SessionEndingTransport",
    "SubmittingTransport",
    "Transport",
    "TransportClass",
    "TransportTraits",
    "byte_counts_of",
    "cache_identity_of",
    "named_cache_identity",
    "session_events_of",
    "session_id_of",
    "traits_of",
]

#: Receives each ``notifications/progress`` params dict of the request, in the calling thread.
#: The client sends the request's id as its ``progressToken``: a progress notification belongs to
#: the request whose id is its token (``snodo.protocol.exchange.is_progress_for``).
ProgressSink = Callable[[dict[str, Any]], None]

#: Answers a server-to-client request: ``(method, params) -> result``; raises McpError to refuse.
ServerRequestHandler = Callable[[str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """Per-request options the client hands to a transport.

    ``timeout``, ``reset_timeout_on_progress`` and ``max_total_timeout`` make the request's
    deadline (``snodo.protocol.exchange.Deadline.start(options, now)``). ``on_progress`` gets the
    ``notifications/progress`` whose ``progressToken`` is the request's id (the token the client
    sends is always the id: ``exchange.is_progress_for``).
    """

    dialect: Dialect
    timeout: float | None = 30.0
    on_progress: ProgressSink | None = None
    on_server_request: ServerRequestHandler | None = None
    reset_timeout_on_progress: bool = False
    max_total_timeout: float | None = 600.0
    #: The tool definition when ``call_tool`` was given one (HTTP derives Mcp-Param-* from it).
    tool: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ConnectOptions:
    """What ``snodo.connect`` hands a custom transport's ``connect``: the connect options a
    transport applies itself (timeouts, limits, the input handlers), so that a custom transport
    behaves like the built-in ones."""

    #: The client's default request timeout (seconds, None for none).
    timeout: float | None = 30.0
    #: Answers server-to-client requests that arrive outside a request in flight.
    on_server_request: ServerRequestHandler | None = None


@dataclass(frozen=True, slots=True)
class TransportTraits:
    """What a transport does beyond ``request`` and ``close`` that changes the client's choices."""

    #: It derives ``Mcp-Name``/``Mcp-Param-*`` headers from tool definitions (Streamable HTTP on
    #: 2026-07-28): the client filters listed tools and retries a -32020 once after re-listing.
    header_policy: bool = False
    #: Its ``close()`` ends the server's session itself (HTTP's DELETE): the client does not.
    deletes_session_on_close: bool = False


@dataclass(frozen=True, slots=True)
class CacheIdentity:
    """Which cache partition a connection's results belong to (docs/decisions/0019)."""

    #: Connections with equal namespaces (and the same protocol and client metadata) share public
    #: results; None: the connection has a namespace of its own.
    namespace: Hashable | None = None
    #: A digest of the credential the next request carries (the private partition); None: private
    #: results are never stored (the client cannot identify the credentials).
    credential: Callable[[], str] | None = None


@runtime_checkable
class Transport(Protocol):
    """A connection to one MCP server: ``request`` and ``close`` are required.

    Optional methods, each declared by a protocol the client checks with ``isinstance``:

    - :class:`NotifyingTransport`: ``notify(message, options) -> None`` sends a notification
      (``notifications/initialized``). Without it only 2026-07-28 connections can open
      (session-era ones are -32602).
    - :class:`ListeningTransport`: ``listen(message, options, sink) -> Listening`` opens a
      ``subscriptions/listen`` stream (2026-07-28; ``snodo.transports.listening`` has the sink
      and the handle); without it ``Client.listen()`` raises TypeError there.
    - :class:`SessionEndingTransport`: ``delete_session(timeout) -> None`` ends the session the
      server identified; the client calls it on close when the session has an id.

    A session-era session is carried by the transport, not by the client: after
    ``initialize`` the client reads the transport's ``session_id`` attribute through
    :func:`session_id_of` (the ``Mcp-Session-Id`` response header an HTTP-like transport
    captured; absent or None if none);
    the transport adds the session headers (``MCP-Protocol-Version`` from
    ``options.dialect.version`` and the session id) to later requests itself; and a request the
    server sends during a call is answered with
    ``exchange.server_request_reply(id, method, params, options.on_server_request)`` (the
    handler's result, its ``McpError`` as the error answer, ping without the handler).
    ``options.on_progress`` receives each ``notifications/progress`` params whose
    ``progressToken`` is the request's id (``exchange.is_progress_for``); a transport that
    ignores it delivers no progress.

    Declared optional members (:class:`BaseTransport` has the defaults; read them through
    :func:`traits_of`, :func:`cache_identity_of` and :func:`session_events_of`):

    - ``traits: TransportTraits``;
    - ``cache_identity() -> CacheIdentity``; a custom transport may instead expose a hashable
      ``cache_namespace`` attribute naming its endpoint (public results only);
    - ``session_events: SessionFanout``: the fan-out a session-era transport feeds with the
      session's notifications (``subscriptions`` on the session era need it).
    """

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        """Send a request and return its JSON-RPC response dict (``result`` or ``error``)."""
        ...

    def close(self) -> None:
        """Release everything the connection holds; idempotent. A ``request`` blocked in
        another thread must fail at once with -32000 (snodo's transports all do: only the
        transport can wake its callers)."""
        ...


class TransportClass(Protocol):
    """A custom transport class: ``connect`` opens a connection and returns the transport."""

    def connect(self, init_arg: Any, options: ConnectOptions) -> Transport:
        """Open a connection to the server ``init_arg`` names (a class method on the class)."""
        ...


@runtime_checkable
class NotifyingTransport(Transport, Protocol):
    """A transport that can send notifications: session-era sessions need it."""

    def notify(self, message: dict[str, Any], options: RequestOptions) -> None:
        """Send a notification (``notifications/initialized``, ``notifications/cancelled``)."""
        ...


@runtime_checkable
class SessionEndingTransport(Transport, Protocol):
    """A transport that can end a session the server identified."""

    def delete_session(self, timeout: float | None) -> None:
        """End the session (HTTP: DELETE with the session id), waiting at most ``timeout``."""
        ...


@runtime_checkable
class ListeningTransport(Transport, Protocol):
    """A transport that can open ``subscriptions/listen`` streams (2026-07-28)."""

    def listen(
        self, message: dict[str, Any], options: RequestOptions, sink: SubscriptionSink
    ) -> Listening:
        """Send the listen request; stream its notifications into ``sink`` until closed."""
        ...


@runtime_checkable
class EndReportingTransport(Transport, Protocol):
    """A transport that notices by itself when its connection ends (a stdio server exits).

    Without it a connection's end is learnt from the calls that fail on it.
    """

    def on_end(self, callback: Callable[[McpError], None]) -> None:
        """Call ``callback(error)`` once when the connection ends other than by ``close()``,
        from a thread that must not block; at once if it has ended already."""
        ...


class Inbox(Protocol):
    """Where a submitted request's outcome arrives: ``("response", message)``,
    ``("progress", params)`` and ``("error", McpError)``, put from the transport's reading side
    (a thread that must not block)."""

    def put(self, item: tuple[str, Any]) -> None:
        """Take one item; never blocks."""
        ...


@runtime_checkable
class SubmittingTransport(Transport, Protocol):
    """A transport that can send a request without a thread waiting for it (``snodo.aio``)."""

    def submit(self, requests: Sequence[tuple[dict[str, Any], RequestOptions, Inbox]]) -> None:
        """Write ``requests`` (message, options, inbox) at once; each one's response, progress
        or error arrives in its inbox, a failure to send them too (outcome ``not_sent`` when
        nothing was written)."""
        ...

    def withdraw(self, request_id: Any, reason: str) -> None:
        """Stop waiting for ``request_id`` (timed out, cancelled): the server is told."""
        ...


@runtime_checkable
class LendingTransport(Protocol):
    """A transport whose reading an event loop can take over while it has calls out (stdio):
    the loop reads the descriptor itself, so no thread hands it the responses."""

    def lend_reading(self, on_exit: Callable[[], None]) -> int | None:
        """Lend the reading role: the descriptor to watch, or None when it cannot be lent now.
        ``on_exit`` (called from another thread, never blocking) says the loop must give it
        back."""
        ...

    def read_lent(self) -> bool:
        """Read once, the descriptor being readable; False when the role is over."""
        ...

    def return_reading(self) -> None:
        """Give the role back."""
        ...


class BaseTransport:
    """Optional base class for transports: the declared optional members with their defaults."""

    traits = TransportTraits()
    session_events: SessionFanout | None = None
    session_id: str | None = None
    #: A hashable name of the endpoint: connections naming the same one share public results.
    cache_namespace: Hashable | None = None

    def cache_identity(self) -> CacheIdentity:
        """Public results only, in ``cache_namespace`` (or a namespace of its own)."""
        return named_cache_identity(self)


def traits_of(transport: object) -> TransportTraits:
    """The transport's declared traits (none for a transport that declares none)."""
    traits = getattr(transport, "traits", None)
    return traits if isinstance(traits, TransportTraits) else TransportTraits()


def named_cache_identity(transport: object) -> CacheIdentity:
    """Public results only, under the transport's ``cache_namespace`` attribute when it has one.

    The namespace is qualified by the transport's class, so two kinds of transport never share.
    """
    named = getattr(transport, "cache_namespace", None)
    if named is None:
        return CacheIdentity()
    kind = type(transport)
    return CacheIdentity(namespace=(f"custom:{kind.__module__}.{kind.__qualname__}", named))


def cache_identity_of(transport: object) -> CacheIdentity:
    """The transport's cache identity: its ``cache_identity()``, else its ``cache_namespace``."""
    identity = getattr(transport, "cache_identity", None)
    if callable(identity):
        value = identity()
        if isinstance(value, CacheIdentity):
            return value
    return named_cache_identity(transport)


def session_events_of(transport: object) -> SessionFanout | None:
    """The fan-out the transport feeds with session notifications, when it has one."""
    return getattr(transport, "session_events", None)


def byte_counts_of(transport: object) -> tuple[int, int] | None:
    """``(bytes_in, bytes_out)`` the transport has moved, when it counts them
    (``byte_counts()``: stdio and HTTP do; None for direct and transports that do not)."""
    counts = getattr(transport, "byte_counts", None)
    if not callable(counts):
        return None
    value = counts()
    if isinstance(value, tuple) and len(value) == 2:
        return value
    return None


def session_id_of(transport: object) -> str | None:
    """The session id the server issued to the transport (``Mcp-Session-Id``), if any."""
    value = getattr(transport, "session_id", None)
    return value if isinstance(value, str) else None
