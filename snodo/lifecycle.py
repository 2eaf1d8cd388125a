"""A client's connection over time: its owner, its state, and its restarts.

``snodo.connect`` and ``snodo.direct`` put every client under a :class:`Lifecycle`, which starts
the connection's ``ConnectionOwner`` (``snodo.actors``) under the connections supervisor. The
owner decides (restart or give up, after what backoff); the lifecycle carries it out on the
client: a call on a restarting connection waits for it within its own timeout, a call that finds
the connection broken reports it, a request refused with a 404 for its session is sent once
more on the new session, and subscriptions cut off by the end are opened again after a restart
with a ``Gap`` first. Under ``restart="temporary"`` (the default) calls never come here.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from itertools import count
from typing import TYPE_CHECKING, Any, Protocol, cast

import pykka

from snodo.actors.connection_owner import (
    Broken,
    Closing,
    ConnectionHooks,
    ConnectionOwner,
    ConnectionState,
    OwnerEnded,
    StateChange,
)
from snodo.calls import AwaitReady
from snodo.log import get_logger
from snodo.options import CallOptions, ClientOptions
from snodo.protocol import endings, errors
from snodo.protocol.dialects import Dialect
from snodo.protocol.errors import McpError
from snodo.protocol.inputs import Done
from snodo.protocol.negotiation import Session
from snodo.supervision import (
    ChildSpec,
    Owner,
    OwnerWatch,
    connections,
    start_child,
    terminate_child,
    watch,
)
from snodo.supervision.restarts import RestartPolicy
from snodo.transports.base import EndReportingTransport, Transport

if TYPE_CHECKING:
    from pykka import ActorRef

    from snodo.cached_calls import CachedCalls
    from snodo.calls import CallPipeline, Steps
    from snodo.subscription import ListenContext

__all__ = [
    "ClientSide",
    "Lifecycle",
    "Negotiated",
    "Resume",
    "StateTarget",
    "Supervision",
    "deliver_state",
]

_log = get_logger("snodo.connection")

_names = count(1)

#: What ``on_state=`` may be: a callable, a queue (``put_nowait``) or an actor ref (``tell``).
StateTarget = Any

#: A subscription cut off by an end: called with the new connection's listen context after a
#: restart, or None when the connection is closed for good.
Resume = Callable[["ListenContext | None", "McpError | None"], None]

#: The longest a call waits for a restart when neither it nor the client has a timeout.
RESTART_WAIT = 600.0


@dataclass(frozen=True, slots=True)
class Negotiated:
    """One opened connection: the transport and what negotiation settled on it."""

    transport: Transport
    dialect: Dialect
    session: Session | None


@dataclass(frozen=True, slots=True)
class Supervision:
    """How ``connect``/``direct`` supervise a connection (their keywords, checked)."""

    policy: RestartPolicy
    owner: Owner
    #: Opens and negotiates a new connection (a restart); None where none can be made.
    reopen: Callable[[], Negotiated] | None = None
    ping_interval: float | None = None
    on_state: StateTarget = None
    #: The supervisor the connection's owner runs under (a fleet's own); None: ``connections()``.
    supervisor: ActorRef[Any] | None = None


class ClientSide(Protocol):
    """What a lifecycle drives on its client (``snodo.client`` implements it, holding the client
    weakly: a client dropped without ``close()`` is still collected, and ``on_collected`` runs).
    A call on a collected client raises ``McpError`` -32000."""

    def current(self) -> tuple[CallPipeline | CachedCalls, Session | None]:
        """What a call runs now and the session it runs in (read together)."""
        ...

    def install(self, negotiated: Negotiated) -> None:
        """Start sending through a new connection (a restart)."""
        ...

    def end(self, error: McpError | None) -> None:
        """Close the client; later calls fail with ``error``."""
        ...

    def ping(self, timeout: float) -> None:
        """The health check (``ping`` on the session era)."""
        ...

    def listen_context(self) -> ListenContext:
        """What opening a subscription on the current connection needs."""
        ...

    def transport(self) -> Transport:
        """The current transport."""
        ...

    def gone(self) -> None:
        """The connection is gone for good: calls fail from now on (the close follows)."""
        ...

    def on_collected(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once the client is collected without ``close()``."""
        ...


def deliver_state(target: StateTarget, change: StateChange) -> None:
    """Hand ``change`` to an ``on_state=`` target; a full queue drops it with a warning."""
    if target is None:
        return
    if isinstance(target, pykka.ActorRef):
        try:
            target.tell(change)
        except pykka.ActorDeadError:
            pass
        return
    put = getattr(target, "put_nowait", None)
    if callable(put):
        try:
            put(change)
        except queue.Full:
            _log.warning("on_state queue is full: a state change was dropped", state=change.state)
        return
    target(change)


class Lifecycle:
    """Owner, state and restarts of one client's connection (see the module docstring)."""

    def __init__(self, supervision: Supervision, client: ClientSide) -> None:
        self.name = f"connection-{next(_names)}"
        self._supervision = supervision
        self._client = client
        self.restarts = supervision.policy.restart != "temporary"
        self.state: ConnectionState = "ready"
        self._error: McpError | None = None
        self._generation = 0
        self._lock = threading.Lock()
        #: Made by the first call that waits for a restart (most connections never have one).
        self._cond: threading.Condition | None = None
        self._parked: list[Resume] = []
        #: Async calls waiting for a restart (``on_change``), woken with the threads.
        self._wakers: list[Callable[[], None]] = []
        self._restarted = 0
        hooks = ConnectionHooks(
            reopen=self._reopen, end=self._end_by_owner, ping=client.ping, changed=self._changed
        )
        start = partial(
            ConnectionOwner.start,
            self.name,
            supervision.policy,
            hooks,
            supervision.owner,
            supervision.ping_interval,
        )
        spec = ChildSpec(id=self.name, start=start, restart="temporary", shutdown=5.0)
        self._parent = supervision.supervisor
        self._owner = start_child(self._parent or connections(), spec)
        self._watch = watch(supervision.owner, self._owner_ended)
        deliver_state(supervision.on_state, StateChange("ready", "connected"))
        self._watch_end(client.transport())

        client.on_collected(partial(_abandon, self._owner, self._watch))

    def _owner_ended(self, reason: Any) -> None:
        self._tell(OwnerEnded(reason))

    # -- the client's calls -------------------------------------------------------------------

    def send(
        self,
        options: ClientOptions,
        method: str,
        params: Mapping[str, Any] | None,
        call: CallOptions,
    ) -> Steps[Done]:
        """A call on a connection that restarts, as steps (see the module docstring)."""
        timeout = call.timeout if call.timeout is not None else options.timeout
        deadline = time.monotonic() + (timeout if timeout is not None else RESTART_WAIT)
        calls, session, generation = yield from self._ready_steps(deadline, timeout, -1)
        try:
            return (yield from calls.steps(method, params, call))
        except McpError as error:
            ending = endings.ending_of(
                error, session is not None and session.session_id is not None
            )
            if ending is None:
                raise
            self._tell(Broken(generation, error))
            data = error.data
            never_sent = isinstance(data, dict) and data.get("outcome") == "not_sent"
            if ending != "expired" and not never_sent:
                raise errors.with_outcome(error, "unknown") from None
        # Not processed (HTTP 404 for the session) or never sent: once more, after the restart.
        calls, session, generation = yield from self._ready_steps(deadline, timeout, generation)
        remaining = max(0.0, deadline - time.monotonic())
        again = replace(call, timeout=remaining) if timeout is not None else call
        return (yield from calls.steps(method, params, again))

    def _ready_steps(
        self, deadline: float, timeout: float | None, after: int
    ) -> Steps[tuple[CallPipeline | CachedCalls, Session | None, int]]:
        ready = self.ready_now(after)
        if ready is not None:
            return ready
        ready = yield AwaitReady(self, deadline, timeout, after)
        return cast("tuple[CallPipeline | CachedCalls, Session | None, int]", ready)

    @property
    def restarted(self) -> int:
        """How many times the connection was opened again."""
        return self._restarted

    # -- ReadySource (snodo.calls): what a call waits on --------------------------------------

    def ready_now(
        self, after: int
    ) -> tuple[CallPipeline | CachedCalls, Session | None, int] | None:
        """The connection to call on if it is ready and newer than ``after``, else None."""
        if self.state == "ready" and self._generation > after:
            calls, session = self._client.current()
            return calls, session, self._generation
        if self.state == "closed":
            raise self.closed_error()
        return None

    def wait_ready(
        self, deadline: float, timeout: float | None, after: int
    ) -> tuple[CallPipeline | CachedCalls, Session | None, int]:
        """Block until the connection is ready (and newer than ``after``), within ``deadline``."""
        return self._ready(deadline, timeout, after)

    def on_change(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` at the next state change (from the changing thread; it must not
        block); returns a canceller."""
        with self._lock:
            self._wakers.append(callback)

        def cancel() -> None:
            with self._lock:
                if callback in self._wakers:
                    self._wakers.remove(callback)

        return cancel

    def closing(self, error: McpError | None) -> None:
        """The client is closing (``error``: why, when not by ``close()``)."""
        with self._lock:
            if error is not None and self._error is None:
                self._error = error
            self.state = "closed"
            parked, self._parked = self._parked, []
            self._wake()
        self._watch.cancel()
        self._tell(Closing())
        for resume in parked:
            resume(None, error)

    def closed(self) -> None:
        """The client has closed its transport: stop the owner actor."""
        try:
            terminate_child(self._parent or connections(), self.name, timeout=10.0)
        except Exception:
            _log.debug("owner already gone", connection=self.name)

    def closed_error(self) -> McpError:
        """What a call on the closed connection raises: why it closed, never sent."""
        error = self._error
        if error is None:
            return errors.connection_error("Connection closed")
        return errors.with_outcome(error, "not_sent")

    # -- subscriptions ------------------------------------------------------------------------

    def park(self, resume: Resume, error: McpError) -> bool:
        """A subscription was cut off by ``error``: resume it after a restart. False when the
        connection will not restart (the subscription ends as usual)."""
        if not self.restarts or endings.ending_of(error, True) is None:
            return False
        with self._lock:
            if self.state == "closed":
                return False
            self._parked.append(resume)
            generation = self._generation
        self._tell(Broken(generation, error))  # a listen stream can be the first to know
        return True

    # -- the owner's hooks --------------------------------------------------------------------

    def _reopen(self) -> None:
        reopen = self._supervision.reopen
        with self._lock:
            self._generation += 1
        try:
            self._client.transport().close()
        except Exception:
            _log.debug("closing the broken transport failed", connection=self.name)
        if reopen is None:
            raise errors.connection_error("This connection cannot be reopened")
        negotiated = reopen()
        with self._lock:
            closed = self.state == "closed"
        if closed:
            negotiated.transport.close()
            raise errors.connection_error("Connection closed")
        self._client.install(negotiated)
        self._restarted += 1
        self._watch_end(negotiated.transport)

    def _end_by_owner(self, error: McpError) -> None:
        try:
            self._client.end(error)
        except McpError:
            pass  # the client was collected meanwhile: nothing is left to end

    def _changed(self, change: StateChange) -> None:
        resume: list[Resume] = []
        with self._lock:
            if self.state == "closed" and change.state != "closed":
                return  # closed by the client meanwhile
            self.state = change.state
            if change.state == "closed" and change.error is not None and self._error is None:
                self._error = change.error
            if change.state == "ready":
                resume, self._parked = self._parked, []
            self._wake()
        if change.state == "closed":
            try:
                self._client.gone()
            except McpError:
                pass  # the client was collected
        deliver_state(self._supervision.on_state, change)
        if resume:
            threading.Thread(
                target=self._resume_all,
                args=(resume, change.error),
                name=f"snodo-resume-{self.name}",
                daemon=True,
            ).start()

    def _resume_all(self, parked: list[Resume], error: McpError | None) -> None:
        context = self._client.listen_context()
        for resume in parked:
            resume(context, error)

    # -- internals ----------------------------------------------------------------------------

    def _ready(
        self, deadline: float, timeout: float | None, after: int = -1
    ) -> tuple[CallPipeline | CachedCalls, Session | None, int]:
        """The connection to call on once it is ready (and newer than generation ``after``)."""
        if self.state == "ready" and self._generation > after:
            calls, session = self._client.current()
            return calls, session, self._generation
        with self._lock:
            if self._cond is None:
                self._cond = threading.Condition(self._lock)
            cond = self._cond
            while True:
                state: ConnectionState = self.state
                if state == "ready" and self._generation > after:
                    break
                if state == "closed":
                    raise self.closed_error()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise errors.timeout_error(
                        timeout if timeout is not None else RESTART_WAIT,
                        cause=("restarting",),
                    )
                cond.wait(remaining)
            calls, session = self._client.current()
            return calls, session, self._generation

    def _wake(self) -> None:
        """Wake the calls waiting for a restart (with the lock held)."""
        if self._cond is not None:
            self._cond.notify_all()
        if self._wakers:
            wakers, self._wakers = self._wakers, []
            for waker in wakers:
                waker()

    def _watch_end(self, transport: Transport) -> None:
        if not isinstance(transport, EndReportingTransport):
            return
        transport.on_end(partial(self._ended, self._generation))

    def _ended(self, generation: int, error: McpError) -> None:
        self._tell(Broken(generation, error))

    def _tell(self, message: Any) -> None:
        try:
            self._owner.tell(message)
        except pykka.ActorDeadError:
            pass


def _abandon(owner: Any, owner_watch: OwnerWatch) -> None:
    """A client was collected without ``close()``: its owner stops itself (never blocks)."""
    owner_watch.cancel()
    try:
        owner.tell(Closing())
    except pykka.ActorDeadError:
        pass
