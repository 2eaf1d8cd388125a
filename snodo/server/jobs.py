"""The client requests a server runs on worker threads, and the requests it sends the client
while serving them (shared by the stdio and HTTP servers).

- a :class:`Job` is one client request being served by a worker;
- a :class:`JobTable` admits jobs within ``max_concurrency`` slots, starts their workers,
  cancels and finishes them, and knows the job of the current worker thread;
- :class:`Inflight` is ``Peer.inflight``: the Contexts being served, by request id. It closes
  the cancellation race: ``notifications/cancelled`` (or a closed stream) can arrive after a
  job started but before dispatch registered its Context. The canceller marks the job first
  and looks for its Context second; the worker registers the Context first and looks at the
  job second, so one of them always marks the Context;
- :class:`ServerRequests` are the server-to-client requests (session era: ``ctx.elicit``,
  ``ctx.sample``, ``ctx.list_roots``) of one connection or session, each waiting for the
  client's answer: ids ``"srv-1"``, ``"srv-2"``, ... (never an integer, so they cannot collide
  with a client's ids in a log), bounded by a timeout after which the client is told
  ``notifications/cancelled``.

Workers are threads, or greenlets once gevent has patched ``threading``
(:func:`snodo.supervision.green_mode`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from snodo.log import get_logger
from snodo.protocol import jsonrpc
from snodo.protocol.errors import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    McpError,
    connection_error,
    timeout_error,
)

__all__ = [
    "Cancellable",
    "Inflight",
    "Job",
    "JobTable",
    "PendingAnswer",
    "RequestId",
    "ServerRequests",
    "cancelled_error",
    "notification_bytes",
    "response_bytes",
]

RequestId = str | int

_log = get_logger("snodo.server.jobs")


class Cancellable(Protocol):
    """What a job's request is served with: its Context, which can be marked cancelled."""

    def cancel(self) -> None: ...


def cancelled_error() -> McpError:
    """What a cancelled request's pending work fails with (its progress, its server requests)."""
    return McpError(CONNECTION_CLOSED, "Request cancelled by the client", kind="transport")


def response_bytes(
    response: dict[str, Any], encode: Callable[[Any], bytes]
) -> tuple[bytes, dict[str, Any]]:
    """A response encoded, and the response that was: a result that is not JSON becomes a
    -32603 error (logged) rather than no answer at all."""
    try:
        return encode(response), response
    except (TypeError, ValueError) as exc:
        _log.warning("a result could not be encoded", id=response.get("id"), error=str(exc))
        failed = jsonrpc.error_response(
            response.get("id"),
            McpError(INTERNAL_ERROR, f"Internal error: the result is not JSON ({exc})"),
        )
        return encode(failed), failed


def notification_bytes(
    job: Job | None, method: str, params: dict[str, Any], encode: Callable[[Any], bytes]
) -> bytes | None:
    """A notification about ``job``'s request (progress, a log message), encoded; ``None``
    (logged and dropped) when its params are not JSON. Raises :func:`cancelled_error` once the
    job was cancelled: the Context stops reporting and marks itself cancelled."""
    if job is not None and job.cancelled:
        raise cancelled_error()
    try:
        return encode(jsonrpc.notification(method, params))
    except (TypeError, ValueError):
        _log.warning("dropped a notification that is not JSON", method=method, params=repr(params))
        return None


@dataclass(eq=False)
class Job:
    """A client request served by a worker."""

    id: RequestId
    method: str
    #: The jobs of its connection or session by request id (``None``: not looked up by id).
    scope: dict[RequestId, Job] | None = None
    cancelled: bool = False
    holds_slot: bool = True
    #: The server-to-client requests this job is waiting on.
    asking: set[str] = field(default_factory=set)
    #: The request's Context, once dispatch registered it.
    context: Cancellable | None = None
    thread: threading.Thread | None = None


class JobTable:
    """The jobs of one server: concurrency slots, workers, cancellation and the end of each.

    ``lock`` guards the table and is the server's own lock (the server admits a job and
    records it elsewhere in one critical section). ``finished(job, running)`` is called, with
    the lock held, after each job ended, with the number still running (shutdown waits for
    none).
    """

    def __init__(
        self,
        lock: threading.Lock,
        max_concurrency: int,
        finished: Callable[[Job, int], None] | None = None,
    ) -> None:
        self.lock = lock
        self.max_concurrency = max_concurrency
        self._finished = finished
        self.busy = 0  # jobs holding a concurrency slot (freed before their response)
        self.running = 0  # jobs admitted and not finished (shutdown waits for these)
        self.jobs: set[Job] = set()
        self.threads: set[threading.Thread] = set()
        self._local = threading.local()  # .job: the job the current worker serves

    def admit(self, job: Job) -> bool:
        """Take a slot for ``job`` (call with :attr:`lock` held); False when every slot is taken."""
        if self.busy >= self.max_concurrency:
            return False
        self.busy += 1
        self.running += 1
        self.jobs.add(job)
        if job.scope is not None:
            job.scope[job.id] = job
        return True

    def spawn(self, job: Job, work: Callable[[Job], None], name: str) -> bool:
        """Run ``work(job)`` on a new worker, then finish the job; False (the job finished)
        when no worker could be started."""
        worker = threading.Thread(target=self._run, args=(job, work), name=name, daemon=True)
        job.thread = worker
        with self.lock:
            self.threads.add(worker)
        try:
            worker.start()
        except RuntimeError:  # no thread left to start
            self.finish(job)
            return False
        return True

    def _run(self, job: Job, work: Callable[[Job], None]) -> None:
        self._local.job = job
        try:
            work(job)
        finally:
            self._local.job = None
            self.finish(job)

    def current(self) -> Job | None:
        """The job the calling worker serves (``None`` outside a worker)."""
        job: Job | None = getattr(self._local, "job", None)
        return job

    def release_slot(self, job: Job) -> None:
        """Free the job's slot (before its response goes out: a client that waits for each
        response before its next request must never find the slot still taken)."""
        with self.lock:
            if job.holds_slot:
                job.holds_slot = False
                self.busy -= 1

    def finish(self, job: Job) -> int:
        """Forget a job that ended; how many are still running."""
        self.release_slot(job)
        with self.lock:
            self.running -= 1
            self.jobs.discard(job)
            if job.thread is not None:
                self.threads.discard(job.thread)
            scope = job.scope
            if scope is not None and scope.get(job.id) is job:
                del scope[job.id]
            running = self.running
            if self._finished is not None:
                self._finished(job, running)
        return running

    def cancel(self, job: Job) -> bool:
        """Mark ``job`` cancelled (its Context too, once registered); False if it already was."""
        with self.lock:
            if job.cancelled:
                return False
            job.cancelled = True
        context = job.context
        if context is not None:
            context.cancel()
        return True

    def attach(self, rid: RequestId, context: Cancellable) -> None:
        """Dispatch registered the Context of ``rid``: the current worker's job takes it, and
        cancels it at once if the job was cancelled meanwhile."""
        job = self.current()
        if job is not None and job.id == rid:
            job.context = context
            if job.cancelled:
                context.cancel()


class Inflight:
    """``Peer.inflight``: the Contexts of the requests a peer is serving, by id, so that
    ``notifications/cancelled`` can mark them.

    dispatch registers a request's Context (:meth:`register`: a dict write and, when
    :attr:`jobs` is set, the hand-off to the current worker's job, :meth:`JobTable.attach`, see
    the module docstring) and releases it when the request ends (:meth:`release`).
    """

    __slots__ = ("contexts", "jobs")

    def __init__(self, jobs: JobTable | None = None) -> None:
        self.contexts: dict[RequestId, Cancellable] = {}
        self.jobs = jobs

    def register(self, rid: RequestId, context: Cancellable) -> None:
        """A request starts: a job cancelled before this registration cancels ``context``."""
        self.contexts[rid] = context
        if self.jobs is not None:
            self.jobs.attach(rid, context)

    def release(self, rid: RequestId, context: Cancellable) -> None:
        """The request ended: forget its Context (unless a newer request reused the id)."""
        contexts = self.contexts
        if contexts.get(rid) is context:
            del contexts[rid]

    def cancel(self, rid: RequestId) -> None:
        """Mark the Context of ``rid`` cancelled, if one is registered."""
        context = self.contexts.get(rid)
        if context is not None:
            context.cancel()

    def __contains__(self, rid: object) -> bool:
        return rid in self.contexts

    def __iter__(self) -> Iterator[RequestId]:
        return iter(list(self.contexts))

    def __len__(self) -> int:
        return len(self.contexts)


# -- server-to-client requests ---------------------------------------------------------------


@dataclass(eq=False)
class PendingAnswer:
    """A server-to-client request waiting for the client's answer."""

    job: Job | None
    done: threading.Event = field(default_factory=threading.Event)
    result: dict[str, Any] | None = None
    error: McpError | None = None


Send = Callable[[dict[str, Any]], None]
"""Sends one message to the client: raises ``McpError`` once the way out is gone, ``TypeError``
or ``ValueError`` for a message that is not JSON."""


class ServerRequests:
    """The server-to-client requests of one stdio connection or HTTP session."""

    def __init__(
        self,
        lock: threading.Lock,
        ids: Iterator[int],
        *,
        timeout: float,
        closed_message: str,
        refused: Callable[[], bool] | None = None,
    ) -> None:
        self._lock = lock
        self._ids = ids
        self._timeout = timeout
        self._closed_message = closed_message
        self._refused = refused
        self.closed = False
        self.pending: dict[str, PendingAnswer] = {}

    def ask(
        self, job: Job | None, method: str, params: dict[str, Any], send: Send
    ) -> dict[str, Any]:
        """Send ``method`` to the client and wait for its result (``McpError`` for an error
        answer, -32001 after the timeout, -32000 once the connection or session is gone)."""
        sid = f"srv-{next(self._ids)}"
        pending = PendingAnswer(job)
        with self._lock:
            if self.closed or (self._refused is not None and self._refused()):
                raise connection_error(self._closed_message)
            if job is not None:
                if job.cancelled:
                    raise cancelled_error()
                job.asking.add(sid)
            self.pending[sid] = pending
        try:
            send(jsonrpc.request(sid, method, params))
        except (TypeError, ValueError) as exc:
            self._forget(sid, pending)
            raise McpError(INTERNAL_ERROR, f"Server request params are not JSON: {exc}") from None
        except McpError:
            self._forget(sid, pending)
            raise
        if not pending.done.wait(self._timeout) and self._forget(sid, pending):
            with contextlib.suppress(McpError):
                send(jsonrpc.cancelled_notification(sid, "timed out"))
            raise timeout_error(self._timeout)
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    def _forget(self, sid: str, pending: PendingAnswer) -> bool:
        """Stop waiting for ``sid``; False if an answer (or a failure) arrived meanwhile."""
        with self._lock:
            if self.pending.get(sid) is not pending:
                return False
            del self.pending[sid]
            if pending.job is not None:
                pending.job.asking.discard(sid)
            return True

    def answer(self, sid: object, result: dict[str, Any] | None, error: McpError | None) -> bool:
        """Deliver the client's answer to server request ``sid``; False if none is waiting."""
        if type(sid) is not str:
            return False
        with self._lock:
            pending = self.pending.pop(sid, None)
            if pending is None:
                return False
            if pending.job is not None:
                pending.job.asking.discard(sid)
            pending.result = result
            pending.error = error
        pending.done.set()
        return True

    def fail_job(self, job: Job, send: Send) -> None:
        """``job`` was cancelled: fail the requests it waits on, and tell the client."""
        failed: list[tuple[str, PendingAnswer]] = []
        with self._lock:
            for sid in job.asking:
                pending = self.pending.pop(sid, None)
                if pending is not None:
                    pending.error = cancelled_error()
                    failed.append((sid, pending))
            job.asking.clear()
        for sid, pending in failed:
            pending.done.set()
            with contextlib.suppress(McpError):
                send(jsonrpc.cancelled_notification(sid, "the request that asked was cancelled"))

    def close(self, error: McpError) -> None:
        """The connection ended: fail every waiting request with ``error``, refuse new ones."""
        with self._lock:
            self.closed = True
            pending = list(self.pending.values())
            self.pending.clear()
            for waiting in pending:
                if waiting.job is not None:
                    waiting.job.asking.clear()
                waiting.error = error
        for waiting in pending:
            waiting.done.set()
