"""A server's log messages (``notifications/message``), delivered to ``log_handler=``.

Each message becomes a :class:`LogMessage` naming the server it came from (the connection's
``name=``). ``log_handler=`` is a callable, a ``queue.Queue`` or a Pykka actor ref; without one,
each message is a record of the stdlib logger ``snodo.server.<name>`` at the level mapped from
its RFC 5424 level (``snodo.protocol.meta.STDLIB_LEVELS``).

Delivery runs on the transport's reading thread (the stdio hub, an HTTP stream reader, or the
caller of a direct connection) and never blocks it: a queue gets ``put_nowait`` (full: the
message is dropped and counted, with one warning), an actor gets ``tell``, and a callable runs
in a worker started when messages arrive (it exits once they are handed over), behind a bound
of :data:`MAX_PENDING` messages (beyond it: dropped and counted, one warning). A handler that
raises is logged and the message dropped.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import pykka

from snodo.log import get_logger
from snodo.protocol import jsonrpc
from snodo.protocol.dialects import Dialect
from snodo.protocol.errors import McpError
from snodo.protocol.meta import stdlib_level
from snodo.transports.base import RequestOptions, Transport
from snodo.transports.listening import SessionFanout

__all__ = [
    "LOGGER_PREFIX",
    "MAX_NAME",
    "MAX_PENDING",
    "LogMessage",
    "ServerLogs",
    "check_name",
    "default_name",
    "send_log_level",
    "server_logger_name",
]

#: The parent of every server's logger (``snodo.server.<name>``).
LOGGER_PREFIX: Final = "snodo.server"
#: Messages waiting for a callable ``log_handler`` before new ones are dropped.
MAX_PENDING: Final = 1000
#: Longest server name (a name is for log lines: short).
MAX_NAME: Final = 64

_log = get_logger("snodo.server_logs")


@dataclass(frozen=True, slots=True)
class LogMessage:
    """One ``notifications/message``: its RFC 5424 ``level``, the server's ``logger`` name (if
    it gave one), its ``data`` (any JSON value), and ``server``, the connection's name."""

    level: str
    logger: str | None
    data: Any
    server: str


def check_name(name: object) -> None:
    """Refuse a ``name=`` that is not a short non-empty string."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        raise ValueError(f"name must be a non-empty string of at most {MAX_NAME} characters")


def default_name(target: object) -> str:
    """The server's name when ``name=`` is not given: a stdio command's basename, an HTTP
    URL's ``host:port``, a Runtime's ``serverInfo`` name, else the target's type name."""
    command = getattr(target, "command", None)
    if isinstance(command, str) and command:
        return os.path.basename(command.rstrip("/\\"))[:MAX_NAME] or "stdio"
    url = getattr(target, "url", None)
    if isinstance(url, str):
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return f"{parts.hostname}:{port}"[:MAX_NAME]
    info = getattr(target, "server_info", None)
    if isinstance(info, dict) and isinstance(info.get("name"), str) and info["name"]:
        return str(info["name"])[:MAX_NAME]
    if isinstance(target, tuple) and target:
        return getattr(target[0], "__name__", "custom")[:MAX_NAME]
    return type(target).__name__[:MAX_NAME]


def server_logger_name(name: str) -> str:
    """The stdlib logger of server ``name``: ``snodo.server.<name>``, the name as it is (as
    ``snodo.server.<name>.stderr``, its stderr's logger, has it)."""
    return f"{LOGGER_PREFIX}.{name}"


def send_log_level(
    transport: Transport,
    request_id: int,
    level: str,
    capabilities: dict[str, Any],
    dialect: Dialect,
    timeout: float | None,
) -> None:
    """Session era, after ``notifications/initialized``: ask for ``level`` with
    ``logging/setLevel`` when the server offers ``logging`` (a refusal is logged, not fatal;
    a broken transport raises)."""
    if "logging" not in capabilities:
        _log.info("the server offers no logging: log_level= not sent", level=level)
        return
    message = jsonrpc.request(request_id, "logging/setLevel", {"level": level})
    try:
        response = transport.request(message, RequestOptions(dialect=dialect, timeout=timeout))
    except McpError as failure:
        if failure.kind == "transport":
            raise
        response = {"error": {"message": failure.message}}
    error = response.get("error")
    if error is not None:
        _log.warning(
            "the server refused logging/setLevel",
            level=level,
            error=error.get("message") if isinstance(error, dict) else None,
        )


class ServerLogs:
    """Where one client's server log messages go (see the module docstring); the transports'
    ``SessionFanout.on_log`` calls it with each message's params."""

    __slots__ = (
        "_deliver",
        "_handler",
        "_lock",
        "_logger",
        "_pending",
        "_stdlib",
        "_warned",
        "_worker",
        "delivered",
        "dropped",
        "server",
    )

    def __init__(self, handler: Any, server: str) -> None:
        self._deliver: Callable[[LogMessage], None]
        if handler is None:
            self._deliver = self._to_logging
        elif isinstance(handler, pykka.ActorRef):
            self._deliver = self._to_actor
        elif callable(getattr(handler, "put_nowait", None)):
            self._deliver = self._to_queue
        elif callable(handler):
            self._deliver = self._hand_off
        else:
            raise TypeError("log_handler must be a callable, a queue.Queue or a Pykka ActorRef")
        self.server = server
        self._handler = handler
        self._stdlib = logging.getLogger(server_logger_name(server))
        self._logger = get_logger(self._stdlib.name, server=server)
        self._lock = threading.Lock()
        self._pending: deque[LogMessage] = deque()
        self._worker = False
        self._warned = False
        #: Messages handed to the handler (or logged), and messages dropped (full or slow).
        self.delivered = 0
        self.dropped = 0

    def attach(self, transport: Any) -> Any:
        """Receive ``transport``'s log messages (one without ``session_events``, a custom
        transport, delivers none); returns ``transport``."""
        events = getattr(transport, "session_events", None)
        if isinstance(events, SessionFanout):
            events.on_log = self
        return transport

    def __call__(self, params: object) -> None:
        """One ``notifications/message``'s params (never raises, never blocks). A level that
        is not a string is taken as ``"info"``; a logger that is not one as None."""
        given = params if isinstance(params, dict) else {}
        level = given.get("level")
        logger = given.get("logger")
        message = LogMessage(
            level if isinstance(level, str) else "info",
            logger if isinstance(logger, str) else None,
            given.get("data"),
            self.server,
        )
        try:
            self._deliver(message)
        except Exception:
            _log.exception("log_handler failed", server=self.server)

    def _to_logging(self, message: LogMessage) -> None:
        level = stdlib_level(message.level)
        if not self._stdlib.isEnabledFor(level):
            return
        self._logger.log(
            level,
            "server log message",
            severity=message.level,
            logger=message.logger,
            data=message.data,
        )
        self.delivered += 1

    def _to_actor(self, message: LogMessage) -> None:
        try:
            self._handler.tell(message)
        except pykka.ActorDeadError:
            self.dropped += 1
            return
        self.delivered += 1

    def _to_queue(self, message: LogMessage) -> None:
        try:
            self._handler.put_nowait(message)
        except queue.Full:
            self._drop("log_handler queue is full: server log messages are dropped")
            return
        self.delivered += 1

    def _drop(self, warning: str) -> None:
        self.dropped += 1
        if not self._warned:  # once per connection, not once per message
            self._warned = True
            _log.warning(warning, server=self.server)

    def _hand_off(self, message: LogMessage) -> None:
        with self._lock:
            if len(self._pending) >= MAX_PENDING:
                full = True
            else:
                full = False
                self._pending.append(message)
                start = not self._worker
                self._worker = True
        if full:
            self._drop("log_handler is slow: server log messages are dropped")
            return
        if start:
            threading.Thread(target=self._drain, name="snodo-server-logs", daemon=True).start()

    def _drain(self) -> None:
        handler: Callable[[LogMessage], Any] = self._handler
        while True:
            with self._lock:
                if not self._pending:
                    self._worker = False
                    return
                message = self._pending.popleft()
            try:
                handler(message)
                self.delivered += 1
            except Exception:
                _log.exception("log_handler failed", server=self.server)
