"""The stdio transport: an MCP server as a child process speaking JSON-RPC lines.

Per connection: the child process (its own process group) and a bounded pool for the requests
the server sends the client; the client's ``ConnectionOwner`` (``snodo.actors``) owns its lifetime
and hears its end through ``on_end``. Reading is done by the process-wide
I/O hub (``io_hub``): an idle connection holds no thread of its own.

The hot path: the caller writes its request line itself, then reads the server's stdout itself
when no one else is (the *leader*; other callers wait on their own inbox, and the leader puts
their responses there). With no caller waiting, the hub reads (architecture §3 allows a reader to
complete a pending request directly; see docs/decisions/0008-stdio-io-hub.md and
0023-stdio-leader-reading.md). Under gevent the same, on gevent's loop (0053).

The server's stderr is read by the hub too, line by line, to the ``stderr=`` sink (by default
the logger ``snodo.server.<name>.stderr``); its last lines (``snodo.protocol.stderr_tail``) go
into the -32000 error for a server that exited.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import pykka

from snodo.actors.handler_pool import HandlerPool, HandlerTasks, RunHandler
from snodo.flag import Flag
from snodo.log import WarningLimiter, get_logger
from snodo.protocol import errors, jsonrpc
from snodo.protocol import subscriptions as subs
from snodo.protocol.errors import McpError, too_large_error
from snodo.protocol.exchange import (
    Deadline,
    answered_without_handler,
    busy_reply,
    handler_raised_reply,
    progress_request_id,
    server_request_reply,
)
from snodo.protocol.framing import LineFramer, Oversized
from snodo.protocol.oversized import answered_id, timeout_after_dropped_line
from snodo.protocol.stderr_tail import StderrTail, is_exit_error, oversized_line, with_tail
from snodo.server_logs import default_name
from snodo.supervision import ChildSpec, connections, start_child, terminate_child
from snodo.transports import process
from snodo.transports.base import (
    BaseTransport,
    CacheIdentity,
    Inbox,
    RequestOptions,
    ServerRequestHandler,
    TransportTraits,
)
from snodo.transports.io_hub import READ_SIZE, Poller, hub
from snodo.transports.listening import (
    Listening,
    SessionFanout,
    StreamRoute,
    SubscriptionSink,
)
from snodo.transports.stdio_outbox import Outbox
from snodo.transports.targets import Stdio

__all__ = [
    "CLOSE_GRACE",
    "EXIT_WAIT",
    "HANDLERS_STOP",
    "LEAD_POLL_MS",
    "LEAD_SPIN",
    "MAX_QUEUED_PROGRESS",
    "STDERR_LINE_BYTES",
    "STDERR_SETTLE",
    "TERM_WAIT",
    "WRITE_TIMEOUT",
    "StdioTransport",
    "stderr_mode",
]

_log = get_logger("snodo.transports.stdio")

#: Largest stderr line passed on (longer ones are dropped; the tail says so).
STDERR_LINE_BYTES = 8 * 1024
#: Progress reports waiting for a slow caller; beyond this they are dropped (and logged).
MAX_QUEUED_PROGRESS = 1024
#: How long a write of one message may block on a server that does not read its stdin.
WRITE_TIMEOUT = 30.0
#: Bounds on close(): graceful exit after stdin closes, then after SIGTERM (then SIGKILL).
CLOSE_GRACE = 2.0
TERM_WAIT = 2.0
#: After stdout closes, how long to wait for the exit that usually follows (to report its status).
EXIT_WAIT = 0.5

_connection_ids = itertools.count(1)

#: The reader role held by the hub (else a ``_Call`` holds it, or no one: None).
_HUB = "hub"
#: The reader role lent to an event loop (``lend_reading``).
_LOOP = "loop"
#: Put in a waiting caller's inbox when it is handed the reader role.
_LEAD = ("lead", None)
#: Longest single wait of the reading caller before it looks at its inbox again (ms).
LEAD_POLL_MS = 200.0
#: How long a lone reading caller polls without sleeping before it blocks (seconds).
LEAD_SPIN = 50e-6
#: How long close waits for the handler pool to stop, and then for its tasks (seconds).
HANDLERS_STOP = 2.0
#: The handler pool after close: no new one starts.
_STOPPED = "stopped"


class _Waiting:
    """How many callers wait in ``_await_leading`` in the process (counted under gevent)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    @property
    def lone(self) -> bool:
        return self.count == 1


_GREEN_WAITING = _Waiting()


#: The queue of a submitted request: none (nothing reads it).
_NO_QUEUE: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()


class _Call:
    """One request waiting for its response; the hub fills ``inbox``. A submitted request's
    inbox is its submitter's, which bounds its own progress (``counted`` False)."""

    __slots__ = ("counted", "dropped_progress", "inbox", "queue", "queued_progress")

    def __init__(self, inbox: Inbox | None = None) -> None:
        #: What the waiting caller reads (a submitted request has no waiting caller).
        self.queue: queue.SimpleQueue[tuple[str, Any]] = (
            _NO_QUEUE if inbox is not None else (queue.SimpleQueue())
        )
        #: Where the reading side puts what arrives.
        self.inbox: Inbox = self.queue if inbox is None else inbox
        self.counted = inbox is None
        self.queued_progress = 0
        self.dropped_progress = 0


class StdioTransport(BaseTransport):
    """A running stdio server and the client's side of its JSON-RPC stream."""

    traits = TransportTraits()

    def __init__(
        self,
        target: Stdio,
        *,
        env: Mapping[str, str | None] | None = None,
        cwd: str | None = None,
        max_line_bytes: int = 16 * 1024 * 1024,
        max_server_requests: int = 16,
        on_server_request: ServerRequestHandler | None = None,
        stderr: Any = None,
        server_name: str | None = None,
    ) -> None:
        self.target = target
        mode = stderr_mode(stderr)
        #: The server's name in log records (``snodo.server.<name>.stderr``).
        self.server_name = default_name(target) if server_name is None else server_name
        #: The session-era notifications of this connection, fanned out to subscriptions.
        self.session_events: SessionFanout = SessionFanout()
        self._framer = LineFramer(max_line_bytes)
        self._stderr_framer = LineFramer(STDERR_LINE_BYTES)
        self._pending: dict[Any, _Call] = {}
        self._listens: dict[Any, StreamRoute] = {}  # open subscriptions by listen id
        self._lock = threading.Lock()
        self._warnings = WarningLimiter()
        #: The requests waiting when an oversized line whose id could not be read was dropped,
        #: with its size (their timeout says so; replaced at each such line).
        self._dropped_for: dict[Any, int] = {}
        self._lost: McpError | None = None
        self._closed = False
        self._close_started = False
        self._close_done = Flag()
        self._answer = on_server_request
        #: Server-request handlers: a pool actor under the connections supervisor.
        self._handler_tasks = HandlerTasks()
        self._handler_pool: Any = None
        self._max_server_requests = max_server_requests
        self._child = process.spawn(target.command, target.args, env=env, cwd=cwd, stderr=mode)
        # Leader reading (docs/decisions/0023): who reads stdout now, and the callers waiting.
        self._lead = hub().supports_oneshot and self._child.pidfd is not None
        self._green = hub().green
        self._reader: Any = None
        self._followers: set[_Call] = set()
        self._stdout_done = False
        self._exit_pending = False
        self._poller: Poller | None = None
        self._reader_free: threading.Condition | None = None  # made by close, if it waits
        self._bytes_in = 0
        #: Told when the server exits while an event loop holds the reader role.
        self._on_lent_exit: Callable[[], None] | None = None
        self.name = f"stdio-{next(_connection_ids)}-{self._child.pid}"
        # stderr: the lines go to ``_stderr_line``; the last ones are kept for the exit error.
        self._stderr_lock = threading.RLock()  # a sink may close the connection
        self._stderr_eof = False
        self._stderr_fd = self._child.stderr
        self._stderr_line = self._stderr_sink(stderr)
        self._stderr_tail: StderrTail | None = None if mode != "pipe" else StderrTail()
        self._stderr_failed = False
        #: stdin: write combining and replies that never wait (docs/decisions/0027).
        self._outbox = Outbox(self._child, self.name, self._lose, self._exit_status)
        self._on_end: Callable[[McpError], None] | None = None
        self._reported_end = False
        try:
            io = hub()
            if self._lead:
                io.watch_oneshot(self._child.stdout, self._on_stdout_ready)
            else:
                io.watch(self._child.stdout, self._on_stdout, self._on_stdout_eof)
            if self._child.stderr is not None:
                io.watch(self._child.stderr, self._on_stderr, self._on_stderr_eof)
            if self._child.pidfd is not None:
                io.watch_ready(self._child.pidfd, self._on_exit)
            self._start_handlers()
        except BaseException:
            self.close()
            raise

    # -- what it is ------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        """The server's process id (also its process group id)."""
        return self._child.pid

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"<StdioTransport {self.name} {' '.join(self._child.argv)}>"

    def byte_counts(self) -> tuple[int, int]:
        """Bytes read from stdout and written to stdin (``Client.stats()``)."""
        return self._bytes_in, self._outbox.bytes_out

    def cache_identity(self) -> CacheIdentity:
        """Each server process is a namespace of its own (``name`` is unique) and one private
        partition: stdio carries no credentials or session id."""
        return CacheIdentity(("stdio", self.name), _stdio_partition)

    # -- Transport protocol ------------------------------------------------------------------

    def request(self, message: dict[str, Any], options: RequestOptions) -> dict[str, Any]:
        """Write ``message`` and wait for its response, delivering progress on the way."""
        request_id = message["id"]
        call = _Call()
        with self._lock:
            if self._lost is not None:
                raise errors.with_outcome(self._lost, "not_sent")
            self._pending[request_id] = call
        started = time.monotonic()
        limit = WRITE_TIMEOUT if options.timeout is None else min(WRITE_TIMEOUT, options.timeout)
        on_block = None
        if self._lead and self._take_reader_first(call):
            # Reading before the response can arrive keeps the hub from reading it (a thread
            # hop); a write that has to wait for room gives the role up, so stdout is read.
            on_block = partial(self._leave, call)
        try:
            try:
                self._outbox.write(jsonrpc.encode_line(message), started + limit, on_block)
            except TimeoutError:
                raise errors.timeout_error(limit, cause=("write_timeout",)) from None
            deadline = Deadline.start(options, started)
            try:
                if self._lead:
                    return self._await_leading(request_id, call, options, deadline)
                return self._await(request_id, call, options, deadline)
            except McpError:
                raise
            except BaseException:
                # Interrupted from outside (a gevent.Timeout, KeyboardInterrupt, a progress
                # function that raised): the server may stop working on it.
                self._cancel(request_id, "The client stopped waiting")
                raise
        finally:
            self._pending.pop(request_id, None)  # atomic; the lock orders only _lost with it
            if self._reader is call:  # the write failed while holding the role
                self._release_reader()

    def submit(self, requests: Sequence[tuple[dict[str, Any], RequestOptions, Inbox]]) -> None:
        """Write ``requests`` in one write; the hub puts each one's response, progress or error
        into its inbox (``snodo.aio``: no thread waits, and the requests an event loop turn
        made share one system call)."""
        limit = WRITE_TIMEOUT
        lines: list[bytes] = []
        sent: list[tuple[Any, Inbox]] = []
        for message, options, inbox in requests:
            try:
                lines.append(jsonrpc.encode_line(message))
            except Exception as exc:  # not encodable: that request fails, the others go
                inbox.put(("error", exc))
                continue
            sent.append((message["id"], inbox))
            if options.timeout is not None and options.timeout < limit:
                limit = options.timeout
        with self._lock:
            lost = self._lost
            if lost is None:
                for request_id, inbox in sent:
                    self._pending[request_id] = _Call(inbox)
        if lost is not None:
            error = errors.with_outcome(lost, "not_sent")
            for _, inbox in sent:
                inbox.put(("error", error))
            return
        if not lines:
            return
        try:
            self._outbox.write(b"".join(lines), time.monotonic() + limit, None)
        except TimeoutError:
            failure = errors.timeout_error(limit, cause=("write_timeout",))
        except McpError as error:
            failure = error
        else:
            return
        for request_id, inbox in sent:
            if self._pending.pop(request_id, None) is not None:
                inbox.put(("error", failure))

    def withdraw(self, request_id: Any, reason: str) -> None:
        """Stop waiting for a submitted request: the server gets ``notifications/cancelled``
        (unless its response has arrived already)."""
        with self._lock:
            waiting = self._pending.pop(request_id, None) is not None
        if waiting:
            self._cancel(request_id, reason)

    def lend_reading(self, on_exit: Callable[[], None]) -> int | None:
        """Lend the reader role to an event loop that reads stdout itself (``read_lent`` when
        the fd it returns is readable) until ``return_reading``: no thread hop per response.
        None when it cannot have it now (another reader holds it, no leader reading, the end).
        ``on_exit`` is called (from the hub; it must not block) when the server exits while
        lent: the loop then gives the role back, which handles the exit."""
        if not self._lead:
            return None
        with self._lock:
            if (
                self._reader is not None
                or self._stdout_done
                or self._lost is not None
                or self._close_started
            ):
                return None
            self._reader = _LOOP
            self._on_lent_exit = on_exit
            hub().disarm(self._child.stdout)
        return self._child.stdout

    def read_lent(self) -> bool:
        """Read one chunk of stdout as the loop holding the role; False when the role is over
        (stdout ended, or it was given back)."""
        if self._reader is not _LOOP:
            return False
        if self._read_stdout():
            return True
        self._release_reader()  # at EOF: no one reads again
        return False

    def return_reading(self) -> None:
        """The loop gives the reader role back (to a waiting caller, or the hub)."""
        with self._lock:
            lent = self._reader is _LOOP
        if lent:
            self._release_reader()

    def listen(
        self, message: dict[str, Any], options: RequestOptions, sink: SubscriptionSink
    ) -> Listening:
        """Write a ``subscriptions/listen`` request and wait for its acknowledgement; its
        events are routed by ``_meta`` subscription id on the shared connection."""
        request_id = message["id"]
        route = StreamRoute(request_id, sink)
        with self._lock:
            if self._lost is not None:
                raise errors.with_outcome(self._lost, "not_sent")
            self._listens[request_id] = route
        try:
            try:
                self._outbox.write(jsonrpc.encode_line(message), time.monotonic() + WRITE_TIMEOUT)
            except TimeoutError:
                raise errors.timeout_error(WRITE_TIMEOUT, cause=("write_timeout",)) from None
            accepted = route.wait_ack(options.timeout)
        except BaseException:
            self._end_listen(request_id, "The client stopped waiting")
            raise
        return Listening(accepted, lambda: self._end_listen(request_id, "Subscription closed"))

    def _end_listen(self, request_id: Any, reason: str) -> None:
        """Cancel a subscription: no more events reach it; the server is told."""
        with self._lock:
            route = self._listens.pop(request_id, None)
        if route is not None:
            route.silence()
            self._cancel(request_id, reason)

    def _route_listen(self, method: str, params: dict[str, Any] | None) -> bool:
        """A notification for an open subscription (by ``_meta`` id, or a server's
        ``notifications/cancelled`` for the listen id); False if it is not one."""
        sid = subs.subscription_id(params)
        if sid is None and method == subs.CANCELLED:
            sid = subs.cancelled_id(params)
        route = self._listens.get(sid) if sid is not None else None
        if route is None:
            return False
        route.on_notification(method, params)
        if route.ended:
            with self._lock:
                if self._listens.get(sid) is route:
                    del self._listens[sid]
        return True

    def _end_listens(self, error: McpError) -> None:
        with self._lock:
            routes = list(self._listens.values())
            self._listens.clear()
        for route in routes:
            route.end(_copy(error))
        self.session_events.end_all(_copy(error))

    def notify(self, message: dict[str, Any], options: RequestOptions) -> None:
        """Write a notification."""
        with self._lock:
            if self._lost is not None:
                raise errors.with_outcome(self._lost, "not_sent")
        try:
            self._outbox.write(jsonrpc.encode_line(message), time.monotonic() + WRITE_TIMEOUT)
        except TimeoutError:
            raise errors.connection_error(
                "The server does not read its stdin", cause=("write_timeout",)
            ) from None

    def close(self) -> None:
        """Close stdin, then end the process group (SIGTERM, then SIGKILL), within a bound.

        From inside one of this connection's own server-request handlers (which closing stops)
        the close runs on a thread of its own and this returns at once.
        """
        if self._handler_tasks.is_running_here():
            self._close_async("closed from a server-request handler")
            return
        with self._lock:
            starting = not self._close_started
            self._close_started = True
            self._closed = True
            if self._lost is None:
                self._lost = errors.connection_error("Connection closed", cause=("closed",))
            calls = list(self._pending.values())
        if not starting:
            self._close_done.wait(CLOSE_GRACE + 2 * TERM_WAIT + 5.0)
            return
        try:
            for call in calls:
                call.inbox.put(("error", self._lost))
            self._end_listens(self._lost)
            self._outbox.seal()
            self._stop_handlers()
            io = hub()
            io.unwatch(self._child.stdout)
            with self._stderr_lock:
                self._stderr_fd = None  # no late drain reads a closed (reused) number
            if self._child.stderr is not None:
                io.unwatch(self._child.stderr)
            if self._child.pidfd is not None:
                io.unwatch(self._child.pidfd)
            if self._outbox.watch_used:
                io.unwatch(self._child.stdin)
            self._report_suppressed()
            process.terminate(self._child, grace=CLOSE_GRACE, term_wait=TERM_WAIT)
            self._await_reader_gone(2.0)
            process.close_fds(self._child)
        finally:
            self._close_done.set()

    # -- internals: writing and waiting -------------------------------------------------------

    def _report_suppressed(self) -> None:
        """On close: the replies dropped and the warnings suppressed that were not reported."""
        self._outbox.report_dropped()
        for kind, count in self._warnings.summary().items():
            emit = _log.info if kind == "unknown_id" else _log.warning  # as the records were
            emit("suppressed repeated records", connection=self.name, kind=kind, suppressed=count)

    def _await(
        self, request_id: Any, call: _Call, options: RequestOptions, deadline: Deadline
    ) -> dict[str, Any]:
        while True:
            remaining = deadline.remaining(time.monotonic())
            if remaining is not None and remaining <= 0:
                return self._timed_out(request_id, deadline)
            try:
                kind, value = call.queue.get(timeout=remaining)
            except queue.Empty:
                continue  # the loop turns the deadline into the timeout error
            response = _inbox_item(call, kind, value, options)
            if response is not None:
                return response
            deadline = deadline.after_progress(time.monotonic())

    def _await_leading(
        self, request_id: Any, call: _Call, options: RequestOptions, deadline: Deadline
    ) -> dict[str, Any]:
        """``_await`` with leader reading: read stdout while no one else does, else wait on
        the inbox (where the leader puts the response, or the reader role when it is handed
        over). The role is given up before any user code runs and before returning."""
        green = self._green
        if green:
            _GREEN_WAITING.count += 1  # greenlets do not preempt one another: no lock
        try:
            while True:
                if not call.queue.empty():
                    kind, value = call.queue.get_nowait()
                else:
                    remaining = deadline.remaining(time.monotonic())
                    if remaining is not None and remaining <= 0:
                        self._leave(call)
                        return self._timed_out(request_id, deadline)
                    if self._take_reader(call):
                        self._read_leading(call, remaining)
                        continue
                    try:
                        kind, value = call.queue.get(timeout=remaining)
                    except queue.Empty:
                        continue  # the loop turns the deadline into the timeout error
                    finally:
                        if call in self._followers:  # only this caller adds it
                            with self._lock:
                                self._followers.discard(call)
                if kind == "lead":
                    continue  # handed the reader role: the loop reads
                if self._reader is call:
                    self._release_reader()
                response = _inbox_item(call, kind, value, options)
                if response is not None:
                    return response
                deadline = deadline.after_progress(time.monotonic())
        finally:
            if green:
                _GREEN_WAITING.count -= 1
            self._leave(call)

    def _take_reader(self, call: _Call) -> bool:
        """True when ``call`` holds the reader role (taken now or handed over); else it is
        entered as a follower, to wait on its inbox."""
        if self._reader is call:  # handed over: only its holder takes the role away
            return True
        with self._lock:
            if self._reader is None and not self._stdout_done and self._lost is None:
                self._reader = call
                hub().disarm(self._child.stdout)
                return True
            self._followers.add(call)
            return False

    def _take_reader_first(self, call: _Call) -> bool:
        """Before writing: take the reader role if no one holds it (else wait as usual)."""
        if self._reader is not None or len(self._pending) > 1:
            return False  # with others waiting, the role usually passes between them
        with self._lock:
            if self._reader is None and not self._stdout_done and self._lost is None:
                self._reader = call
                hub().disarm(self._child.stdout)
                return True
            return False

    def _leave(self, call: _Call) -> None:
        """``call`` stops waiting: it is no follower, and gives the role up if it holds it."""
        # Only a follower can be handed the role, and a caller is a follower only while it
        # blocks on its inbox (it leaves the set under the lock when it wakes): no lock needed.
        if self._reader is call:
            self._release_reader()

    def _read_leading(self, call: _Call, remaining: float | None) -> None:
        """As the reader: wait (up to ``remaining``) for stdout or the exit, and read."""
        poller = self._poller
        if poller is None:
            assert self._child.pidfd is not None
            poller = self._poller = hub().poller((self._child.stdout, self._child.pidfd))
        # Capped, so a close() that failed this call while no byte arrives is seen soon.
        wait = LEAD_POLL_MS if remaining is None else min(LEAD_POLL_MS, remaining * 1000.0)
        events = poller.poll(0)
        if not events and not self._followers and (not self._green or _GREEN_WAITING.lone):
            # A lone caller polls a little before it sleeps: a response that comes within
            # LEAD_SPIN is then read without a wake-up (docs/decisions/0026). Under gevent only
            # when no other caller in the process waits: the spin holds up every greenlet.
            until = time.monotonic() + min(LEAD_SPIN, wait / 1000.0)
            while not events and time.monotonic() < until:
                events = poller.poll(0)
        if not events:
            events = poller.poll(wait)
        stdout = self._child.stdout
        exited = False
        for fd, _ in events:
            if fd == stdout:
                if not self._read_stdout():
                    self._release_reader()  # at EOF: no one reads again
                    return
            else:
                exited = True
        if exited:
            self._drain_after_exit()

    def _read_stdout(self) -> bool:
        """Read one chunk of stdout as the role holder; False at its end."""
        try:
            chunk = os.read(self._child.stdout, READ_SIZE)
        except BlockingIOError:
            return True
        except OSError:
            chunk = b""
        if chunk:
            self._on_stdout(chunk)
            return True
        self._stdout_done = True
        self._on_stdout_eof()
        return False

    def _release_reader(self) -> None:
        """Give the reader role to a waiting caller, or back to the hub (re-armed); first
        handle an exit the hub saw while the role was held."""
        while True:
            with self._lock:
                if not self._exit_pending:
                    following = (
                        self._followers.pop() if self._followers and not self._stdout_done else None
                    )
                    self._reader = following
                    if self._reader_free is not None:
                        self._reader_free.notify_all()
                    if following is None and not self._stdout_done and not self._close_started:
                        hub().rearm(self._child.stdout)
                    break
                self._exit_pending = False
            self._drain_after_exit()
        if following is not None:
            following.inbox.put(_LEAD)

    def _await_reader_gone(self, timeout: float) -> None:
        """Close: wait (bounded) until no caller reads stdout, so its fd can be closed."""
        with self._lock:
            if self._reader_free is None:
                self._reader_free = threading.Condition(self._lock)
            self._reader_free.wait_for(lambda: self._reader in (None, _HUB, _LOOP), timeout)

    def _on_stdout_ready(self) -> None:
        """The hub saw stdout readable (or hung up) with no caller reading: read one chunk."""
        with self._lock:
            if self._reader is not None or self._stdout_done:
                return
            self._reader = _HUB
        try:
            self._read_stdout()
        finally:
            self._release_reader()

    def _timed_out(self, request_id: Any, deadline: Deadline) -> dict[str, Any]:
        self._cancel(request_id, "Request timed out")
        error = deadline.error()
        size = self._dropped_for.pop(request_id, None) if self._dropped_for else None
        if size is not None:
            error = timeout_after_dropped_line(error, size, self._framer.max_line_bytes)
        raise error

    def _cancel(self, request_id: Any, reason: str) -> None:
        with self._lock:
            self._pending.pop(request_id, None)
            if self._lost is not None:
                return
        try:
            note = jsonrpc.encode_line(jsonrpc.cancelled_notification(request_id, reason))
            self._outbox.write(note, time.monotonic() + 1.0)
        except (McpError, TimeoutError):
            pass

    def _lose(self, error: McpError) -> McpError:
        """The connection is unusable: fail every pending request with ``error`` (a gone
        server's error carries its stderr tail)."""
        if self._lost is None and is_exit_error(error):
            error = self._with_stderr_tail(error)
        with self._lock:
            if self._lost is None:
                self._lost = error
            error = self._lost
            calls = list(self._pending.values())
        if calls:
            written = errors.with_outcome(error, "unknown")  # the request may have been read
            for call in calls:
                call.inbox.put(("error", written))
        self._end_listens(error)
        return error

    # -- internals: the hub's callbacks (on the hub thread; never block) -----------------------

    def _on_stdout(self, chunk: bytes) -> None:
        self._bytes_in += len(chunk)  # one reader at a time (the role): no lock needed
        for line in self._framer.feed(chunk):
            self._on_line(line)

    def _on_line(self, line: bytes | Oversized) -> None:
        if isinstance(line, Oversized):
            self._on_oversized(line)
            return
        try:
            messages = jsonrpc.unbatch(jsonrpc.decode(line))
        except jsonrpc.DecodeError as exc:
            self._skipped(line, exc)
            return
        for message in messages:  # one, or a batch's (2025-03-26)
            self._on_message(line, message)

    def _on_message(self, line: bytes, message: Any) -> None:
        try:
            kind = jsonrpc.classify(message)
        except jsonrpc.DecodeError as exc:
            # An answer to one of our requests that is not a valid response (both "result" and
            # "error", say): fail that call now rather than at its timeout.
            request_id = jsonrpc.refused_response_id(message)
            if request_id is None or not self._fail_call(request_id, exc.reason):
                self._skipped(line, exc)
            return
        if isinstance(kind, (jsonrpc.Response, jsonrpc.ErrorResponse)):
            self._on_response(kind.id, message)
        elif isinstance(kind, jsonrpc.Notification):
            self._on_notification(kind.method, kind.params)
        else:
            self._on_server_request(kind.id, kind.method, kind.params, message)

    def _skipped(self, line: bytes, exc: jsonrpc.DecodeError) -> None:
        self._warnings.log(
            _log.warning,
            "not_json_rpc",
            "skipped a line that is not JSON-RPC",
            connection=self.name,
            reason=exc.reason,
            line=line[:200],
        )

    def _on_oversized(self, line: Oversized) -> None:
        """A line over ``max_response_bytes``: the call it answers fails -32000 at once; when
        no waiting call can be named (docs/decisions/0038), the requests waiting now are marked,
        so that a timeout among them says a line was dropped."""
        limit = self._framer.max_line_bytes
        request_id = answered_id(line)
        if request_id is not None and self._fail_pending(request_id, too_large_error(limit)):
            self._warnings.log(
                _log.warning,
                "oversized",
                "failed a call on a response over max_response_bytes",
                connection=self.name,
                id=request_id,
                size=line.size,
            )
            return
        self._warnings.log(
            _log.warning,
            "oversized",
            "refused an oversized line from the server",
            connection=self.name,
            size=line.size,
            id=request_id,
        )
        if request_id is None:
            with self._lock:
                self._dropped_for = dict.fromkeys(self._pending, line.size)

    def _fail_pending(self, request_id: Any, error: McpError) -> bool:
        """Fail the pending call (or subscription) ``request_id`` with ``error``; False if
        nothing waits on that id."""
        with self._lock:
            call = self._pending.pop(request_id, None)
            if call is not None:
                self._followers.discard(call)
            route = self._listens.pop(request_id, None) if call is None else None
        if call is not None:
            call.inbox.put(("error", error))
        elif route is not None:
            route.end(error)
        else:
            return False
        return True

    def _fail_call(self, request_id: Any, reason: str) -> bool:
        """Fail the pending call (or subscription) ``request_id`` with -32000 for an invalid
        response; False if nothing waits on that id."""
        error = errors.broken_response_error(reason, cause=("invalid_response", reason))
        if not self._fail_pending(request_id, error):
            return False
        self._warnings.log(
            _log.warning,
            "invalid_response",
            "failed a call on an invalid response",
            connection=self.name,
            id=request_id,
            reason=reason,
        )
        return True

    def _on_response(self, request_id: Any, message: dict[str, Any]) -> None:
        with self._lock:
            call = self._pending.pop(request_id, None)
            if call is not None:
                self._followers.discard(call)
            route = self._listens.pop(request_id, None) if call is None else None
        if route is not None:
            route.on_message(message)
            return
        if call is None:
            self._warnings.log(
                _log.info,
                "unknown_id",
                "dropped a response to an unknown id",
                connection=self.name,
                id=request_id,
            )
            return
        call.inbox.put(("response", message))

    def _on_notification(self, method: str, params: dict[str, Any] | None) -> None:
        if self._listens and self._route_listen(method, params):
            return
        if method == "notifications/progress":
            token = progress_request_id(params)
            if token is None:
                return
            with self._lock:
                call = self._pending.get(token)
            if call is None:
                return
            if not call.counted:
                call.inbox.put(("progress", params))
                return
            if call.queued_progress >= MAX_QUEUED_PROGRESS:
                call.dropped_progress += 1
                if call.dropped_progress == 1:  # once per request, not once per report
                    _log.warning(
                        "dropping progress reports for a slow caller",
                        connection=self.name,
                        id=token,
                        queued=MAX_QUEUED_PROGRESS,
                    )
                return
            call.queued_progress += 1
            call.inbox.put(("progress", params))
            return
        _log.debug("notification", connection=self.name, method=method)
        self.session_events.deliver(method, params)

    def _on_server_request(
        self, request_id: Any, method: str, params: dict[str, Any] | None, message: dict[str, Any]
    ) -> None:
        """Reply at once when no handler has to run (ping, or no handler at all); else run the
        handler in the pool. A handler that raises is answered -32603 (the seed's stdio rule)."""
        answer = self._answer
        if answer is None or answered_without_handler(method, params):
            self._reply(server_request_reply(request_id, method, params, None))
            return

        def run() -> None:
            try:
                reply = server_request_reply(request_id, method, params, answer)
            except Exception as exc:
                _log.warning("an input handler raised", connection=self.name, method=method)
                reply = handler_raised_reply(request_id, exc)
            self._reply(reply)

        pool = self._handlers()
        try:
            if pool is None:
                raise pykka.ActorDeadError("closed")
            pool.tell(RunHandler(run, lambda: self._reply(busy_reply(request_id))))
        except pykka.ActorDeadError:  # closing
            self._reply(busy_reply(request_id))

    def _handlers(self) -> Any:
        """The handler pool actor; None once closing."""
        pool = self._handler_pool
        return None if pool is _STOPPED else pool

    def _start_handlers(self) -> None:
        """Start the handler pool under the connections supervisor (the caller's thread)."""
        limit, tasks = self._max_server_requests, self._handler_tasks
        spec = ChildSpec(
            id=f"{self.name}-handlers",
            start=lambda: HandlerPool.start(limit, tasks),
            restart="temporary",
            shutdown=HANDLERS_STOP,
        )
        self._handler_pool = start_child(connections(), spec)

    def _stop_handlers(self) -> None:
        with self._lock:
            pool, self._handler_pool = self._handler_pool, _STOPPED
        if pool is not None and pool is not _STOPPED:
            try:
                terminate_child(connections(), f"{self.name}-handlers", HANDLERS_STOP + 1.0)
            except Exception:
                _log.debug("the handler pool had ended", connection=self.name)
        self._handler_tasks.interrupt_and_join(HANDLERS_STOP)

    def _reply(self, reply: dict[str, Any]) -> None:
        """Answer a server request without ever waiting (``Outbox.reply``)."""
        self._outbox.reply(jsonrpc.encode_line(reply))

    def _on_stdout_eof(self) -> None:
        for line in self._framer.flush():
            self._on_line(line)
        self._server_gone()

    def _on_exit(self) -> None:
        if self._close_started:
            return
        if self._lead:
            lent: Callable[[], None] | None = None
            with self._lock:
                if self._reader is not None:
                    self._exit_pending = True  # the role holder handles it when it lets go
                    if self._reader is not _LOOP:
                        return
                    lent = self._on_lent_exit
                else:
                    self._reader = _HUB
            if lent is not None:
                lent()  # the loop gives the role back, which handles the exit
                return
            try:
                self._drain_after_exit()
            finally:
                self._release_reader()
            return
        self._drain_after_exit()

    def _drain_after_exit(self) -> None:
        """The server exited: read the lines it wrote last, then fail what is pending."""
        # The exit may be seen before the last lines the server wrote: read them first.
        while True:
            try:
                chunk = os.read(self._child.stdout, READ_SIZE)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            self._on_stdout(chunk)
        self._server_gone(exited=True)

    def _server_gone(self, *, exited: bool = False) -> None:
        """The server exited or closed its stdout: it can never answer again, so pending and
        later requests fail -32000 at once, with the exit status when there is one."""
        status = process.poll_exit(self._child)
        if status is None and not exited:
            # stdout closes a moment before the exit is visible: find out off the hub thread.
            threading.Thread(
                target=self._stdout_closed, name=f"snodo-exit-{self.name}", daemon=True
            ).start()
            return
        if status is None:
            # Under gevent the child watcher collects the status when its hub runs: wait briefly.
            status = process.wait_exit(self._child, 1.0)
        self._lose_with_status(status)

    def _exit_status(self) -> int | None:
        """The server's exit status, waiting ``EXIT_WAIT`` for an exit that usually follows."""
        return process.wait_exit(self._child, EXIT_WAIT)

    def _stdout_closed(self) -> None:
        self._lose_with_status(self._exit_status())

    def _lose_with_status(self, status: int | None) -> None:
        if status is not None:
            self._lose(errors.server_exit_error(status))
        else:
            self._lose(
                errors.connection_error("The server closed its stdout", cause=("stdout_closed",))
            )
        self._report_end()
        self._close_async("the server is gone")

    def on_end(self, callback: Callable[[McpError], None]) -> None:
        """``EndReportingTransport``: ``callback(error)`` once the server is gone."""
        with self._lock:
            self._on_end = callback
            ended = self._lost is not None and not self._close_started
        if ended:
            self._report_end()

    def _report_end(self) -> None:
        with self._lock:
            callback, error = self._on_end, self._lost
            if callback is None or error is None or self._reported_end:
                return
            self._reported_end = True
        try:
            callback(error)
        except Exception:
            _log.exception("an end callback failed", connection=self.name)

    def _stderr_sink(self, option: Any) -> Callable[[str], None] | None:
        """What takes each stderr line (None: nothing is read)."""
        if option in _STDERR_WORDS:
            return None  # spawned to this process's fd 2 or /dev/null: nothing to read
        extra = {"connection": self.name, "server": self.server_name, "pid": self._child.pid}
        if option is None:
            option = logging.getLogger(f"snodo.server.{self.server_name}.stderr")
        if isinstance(option, logging.Logger):
            return partial(_log_line, option, extra)
        if callable(getattr(option, "write", None)):
            return partial(_write_line, option)
        line_function: Callable[[str], None] = option
        return line_function

    def _on_stderr(self, chunk: bytes) -> None:
        with self._stderr_lock:
            self._stderr_lines(self._stderr_framer.feed(chunk))

    def _on_stderr_eof(self) -> None:
        with self._stderr_lock:
            self._stderr_lines(self._stderr_framer.flush())
            self._stderr_eof = True

    def _stderr_lines(self, lines: list[bytes | Oversized]) -> None:
        """Keep and deliver stderr lines (under ``_stderr_lock``); a sink that raises is logged
        once per connection, and its later failures are dropped."""
        sink = self._stderr_line
        for raw in lines:
            if isinstance(raw, Oversized):
                if self._stderr_tail is not None:
                    self._stderr_tail = self._stderr_tail.add(oversized_line(raw.size))
                continue
            line = raw.decode("utf-8", "replace")
            if self._stderr_tail is not None:
                self._stderr_tail = self._stderr_tail.add(line)
            if sink is None:
                continue
            try:
                sink(line)
            except Exception:
                if not self._stderr_failed:
                    self._stderr_failed = True
                    _log.warning(
                        "the stderr sink raised; its later failures are not logged",
                        connection=self.name,
                        exc_info=True,
                    )

    def _with_stderr_tail(self, error: McpError) -> McpError:
        """``error`` with the server's last stderr lines: what it wrote before it went is read
        first, up to stderr's end or an empty pipe. The reads run on the hub, after the hub has
        handed over every chunk it read before, so none is missed or taken out of order; a thread
        off the hub waits for them at most ``STDERR_SETTLE``."""
        io = hub()
        if threading.current_thread() is io.thread:
            self._drain_stderr()
        else:
            drained = threading.Event()

            def drain() -> None:
                try:
                    self._drain_stderr()
                finally:
                    drained.set()

            if io.call_soon(drain):
                drained.wait(STDERR_SETTLE)
            else:
                self._drain_stderr()  # nothing is watched: no chunk can be in flight
        with self._stderr_lock:
            tail = self._stderr_tail
        return error if tail is None else with_tail(error, tail)

    def _drain_stderr(self) -> None:
        """Read what stderr holds now (at most ``_STDERR_DRAIN_READS`` reads; a grandchild may
        hold it open and write on), up to its end or an empty pipe."""
        with self._stderr_lock:
            for _ in range(_STDERR_DRAIN_READS):
                if self._stderr_fd is None or self._stderr_eof:
                    return
                try:
                    chunk = os.read(self._stderr_fd, READ_SIZE)
                except OSError:  # BlockingIOError: empty, the writer still there
                    return
                if not chunk:
                    self._stderr_lines(self._stderr_framer.flush())
                    self._stderr_eof = True
                    return
                self._stderr_lines(self._stderr_framer.feed(chunk))

    def _close_async(self, why: str) -> None:
        """Close from a thread that must not block (the hub, a watcher, the owner actor)."""
        with self._lock:
            if self._close_started:
                return
        _log.debug("closing", connection=self.name, why=why)
        threading.Thread(target=self.close, name=f"snodo-close-{self.name}", daemon=True).start()


#: Most reads of stderr when the server is gone (a grandchild may hold it open and write on).
_STDERR_DRAIN_READS = 64
#: The longest the error of a gone server waits for the hub to read its last stderr lines.
STDERR_SETTLE = 0.5
#: The ``stderr=`` strings.
_STDERR_WORDS = ("inherit", "discard")


def stderr_mode(option: Any) -> process.StderrMode:
    """Check ``stderr=`` (None, a callable, a ``logging.Logger``, a file object, "inherit" or
    "discard") and say how the child's stderr is spawned."""
    if isinstance(option, str):
        if option not in _STDERR_WORDS:
            raise ValueError(
                f'stderr= must be a callable, a logger, a file, "inherit" or "discard", '
                f"not {option!r}"
            )
        return "inherit" if option == "inherit" else "discard"
    if (
        option is None
        or isinstance(option, logging.Logger)
        or callable(getattr(option, "write", None))
        or callable(option)
    ):
        return "pipe"
    raise TypeError(
        f'stderr= must be a callable, a logger, a file, "inherit" or "discard", not {option!r}'
    )


def _log_line(logger: logging.Logger, extra: Mapping[str, Any], line: str) -> None:
    logger.info("%s", line, extra=extra)


def _write_line(file: Any, line: str) -> None:
    file.write(line + "\n")
    flush = getattr(file, "flush", None)
    if flush is not None:
        flush()


def _stdio_partition() -> str:
    return "stdio"


def _copy(error: McpError) -> McpError:
    return McpError(error.code, error.message, error.data, kind=error.kind, cause=error.cause)


def _inbox_item(
    call: _Call, kind: str, value: Any, options: RequestOptions
) -> dict[str, Any] | None:
    """A response or error from the caller's inbox (returned / raised), or a progress
    notification delivered to the caller's progress function (None)."""
    if kind == "response":
        response: dict[str, Any] = value
        return response
    if kind == "error":
        raise _copy(value)
    call.queued_progress -= 1
    if options.on_progress is not None:
        options.on_progress(value)  # if it raises, request() cancels
    return None
