"""``ConnectionOwner``: one pooled actor per connection (every transport) under ``connections()``.

It owns the connection's lifetime and state, not its calls (those stay on the lock-based hot
path: docs/decisions/0008, 0023): it closes the connection when the connection's owner (the
opening thread, greenlet or actor, or ``owner=``) ends (``OwnerEnded``, from the lifecycle's
watch); it hears every end of
the connection (the transport's report, a call that found it broken, a failed ping) and decides
with ``snodo.supervision.restarts`` whether to restart, after what backoff, or to give up; and it
reports every state change. Its handlers never block: a reopen, a ping or a close runs on a
thread of its own and reports back as a message.

The connection it drives is declared by :class:`ConnectionHooks` (the client's callables), so the
owner reads nothing off the client.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from snodo.log import get_logger
from snodo.protocol import endings
from snodo.protocol.errors import McpError, connection_error
from snodo.supervision import NORMAL, Owner, stop
from snodo.supervision.pooled import PooledActor
from snodo.supervision.restarts import GiveUp, RestartPolicy, decide
from snodo.supervision.timers import Timer, send_after

__all__ = [
    "Broken",
    "Closing",
    "ConnectionHooks",
    "ConnectionOwner",
    "ConnectionState",
    "OwnerEnded",
    "StateChange",
]

_log = get_logger("snodo.connection")

ConnectionState: TypeAlias = Literal["connecting", "ready", "restarting", "closed"]


@dataclass(frozen=True, slots=True)
class StateChange:
    """One transition of a connection, as ``on_state=`` receives it.

    ``reason`` says why in a few words; ``error`` is the error that ended the connection (None
    for a start, a restart that worked or a close by the client); ``restarts`` counts the
    restarts so far.
    """

    state: ConnectionState
    reason: str
    error: McpError | None = None
    restarts: int = 0


@dataclass(frozen=True, slots=True)
class ConnectionHooks:
    """What a ``ConnectionOwner`` drives; the client gives its own callables.

    ``reopen`` (blocking, on a thread of the owner's): close what is left of the connection,
    open a new transport, negotiate again and start using it; raises ``McpError`` on failure.
    ``end`` (blocking): close the connection for good, remembering ``error`` for later calls.
    ``ping`` (blocking): a ``ping`` within ``timeout``; raises ``McpError``. ``changed``
    (quick): a state change, to record and pass on.
    """

    reopen: Callable[[], None]
    end: Callable[[McpError], None]
    ping: Callable[[float], None]
    changed: Callable[[StateChange], None]


# -- messages -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Broken:
    """Connection ``generation`` ended with ``error`` (the transport's report, a failed call)."""

    generation: int
    error: McpError


@dataclass(frozen=True, slots=True)
class Closing:
    """The client is closing the connection: no more restarts."""


@dataclass(frozen=True, slots=True)
class _RestartDue:
    generation: int


@dataclass(frozen=True, slots=True)
class _Reopened:
    generation: int
    error: McpError | None


@dataclass(frozen=True, slots=True)
class OwnerEnded:
    """The connection's owner (thread, greenlet or actor) ended: close for good."""

    reason: Any


@dataclass(frozen=True, slots=True)
class _PingDue:
    generation: int


@dataclass(frozen=True, slots=True)
class _Pinged:
    generation: int


@dataclass(frozen=True, slots=True)
class _PingFailed:
    generation: int
    error: McpError


class ConnectionOwner(PooledActor):
    """Lifetime, state and restarts of one connection (see the module docstring)."""

    def __init__(
        self,
        name: str,
        policy: RestartPolicy,
        hooks: ConnectionHooks,
        owner: Owner,
        ping_interval: float | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self._policy = policy
        self._hooks = hooks
        self._owner = owner
        self._ping_interval = ping_interval
        self._generation = 0
        self._state: ConnectionState = "ready"
        self._history: tuple[float, ...] = ()
        self._restarts = 0
        self._timer: Timer | None = None

    def on_start(self) -> None:
        self._schedule_ping()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Broken):
            self._broken(message.generation, message.error)
        elif isinstance(message, _RestartDue):
            self._restart_due(message.generation)
        elif isinstance(message, _Reopened):
            self._reopened(message.generation, message.error)
        elif isinstance(message, _PingDue):
            self._ping_due(message.generation)
        elif isinstance(message, _Pinged):
            if message.generation == self._generation:
                self._schedule_ping()
        elif isinstance(message, _PingFailed):
            self._ping_failed(message.generation, message.error)
        elif isinstance(message, OwnerEnded):
            self._give_up_owner(message.reason)
        elif isinstance(message, Closing):
            self._closing()
        return None

    def on_stop(self) -> None:
        self._cancel_timer()
        if self._state != "closed":  # stopped by its supervisor (a shutdown): close too
            self._state = "closed"
            error = _closed_error(f"its supervisor stopped the connection owner {self.name}")
            self._in_thread("close", lambda: self._hooks.end(error))

    # -- the ends ---------------------------------------------------------------------------

    def _broken(self, generation: int, error: McpError) -> None:
        if generation != self._generation or self._state != "ready":
            return  # an older connection, or one already being handled
        decision = decide(
            self._policy,
            self._history,
            endings.is_abnormal(error),
            time.monotonic(),
            random.random(),
        )
        if isinstance(decision, GiveUp):
            self._give_up(error, decision)
            return
        self._history = decision.history
        self._restarts += 1
        self._set_state("restarting", _restart_reason(error, decision.delay), error)
        self._cancel_timer()
        self._timer = send_after(self.actor_ref, _RestartDue(generation), decision.delay)

    def _restart_due(self, generation: int) -> None:
        if generation != self._generation or self._state != "restarting":
            return

        def reopen() -> None:
            try:
                self._hooks.reopen()
            except McpError as error:
                self._tell(_Reopened(generation, error))
            except Exception as exc:  # a custom transport's bug: count it as a failed start
                self._tell(_Reopened(generation, _closed_error(f"reopening failed: {exc!r}")))
            else:
                self._tell(_Reopened(generation, None))

        self._in_thread("reopen", reopen)

    def _reopened(self, generation: int, error: McpError | None) -> None:
        if generation != self._generation or self._state != "restarting":
            return
        self._generation += 1
        if error is None:
            self._set_state("ready", f"restarted (restart {self._restarts})")
            self._schedule_ping()
            return
        self._state = "ready"  # the failed start is one more end of the connection
        self._broken(self._generation, error)

    def _give_up(self, error: McpError, decision: GiveUp) -> None:
        if decision.why == "intensity":
            cause = ("max_restarts", self._restarts, error.cause)
            final = McpError(
                error.code,
                f"{error.message} (down for good: {self._restarts} restarts within "
                f"{self._policy.restart_window} s, the limit is {self._policy.max_restarts})",
                error.data,
                kind=error.kind,
                cause=cause,
            )
            reason = f"too many restarts ({self._restarts})"
        else:
            final = error
            reason = "the server exited" if decision.why == "normal" else "the connection ended"
        self._close_with(final, reason)

    def _give_up_owner(self, why: Any) -> None:
        if self._state == "closed":
            return
        owner = self._owner
        message = (
            f"Connection closed because its owner {owner.kind} {owner.name!r} ended; "
            "pass owner= to choose another"
        )
        self._close_with(_closed_error(message, cause=("owner_ended", owner.name)), "owner ended")

    def _close_with(self, error: McpError, reason: str) -> None:
        self._cancel_timer()
        self._set_state("closed", reason, error)
        self._in_thread("close", lambda: self._hooks.end(error))

    def _closing(self) -> None:
        self._cancel_timer()
        if self._state != "closed":
            self._set_state("closed", "closed by the client")
        stop(self.actor_ref, NORMAL)

    # -- health -----------------------------------------------------------------------------

    def _schedule_ping(self) -> None:
        if self._ping_interval is not None and self._state == "ready":
            self._cancel_timer()
            self._timer = send_after(
                self.actor_ref, _PingDue(self._generation), self._ping_interval
            )

    def _ping_due(self, generation: int) -> None:
        if generation != self._generation or self._state != "ready":
            return
        interval = self._ping_interval or 1.0

        def ping() -> None:
            try:
                self._hooks.ping(interval)
            except McpError as error:
                self._tell(_PingFailed(generation, error))
                return
            self._tell(_Pinged(generation))

        self._in_thread("ping", ping)

    def _ping_failed(self, generation: int, error: McpError) -> None:
        if self._policy.restart == "temporary":  # not known to be dead: reported, kept open
            _log.warning("ping failed", connection=self.name, error=error.message)
            if generation == self._generation:
                self._schedule_ping()
            return
        self._broken(generation, _ping_failure(error))

    # -- internals --------------------------------------------------------------------------

    def _set_state(
        self, state: ConnectionState, reason: str, error: McpError | None = None
    ) -> None:
        self._state = state
        change = StateChange(state, reason, error, self._restarts)
        try:
            self._hooks.changed(change)
        except Exception:
            _log.exception("recording a state change failed", connection=self.name)

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _tell(self, message: Any) -> None:
        try:
            self.actor_ref.tell(message)
        except Exception:  # the owner actor has ended: the connection is closed already
            pass

    def _in_thread(self, what: str, work: Callable[[], None]) -> None:
        thread = threading.Thread(target=work, name=f"snodo-{what}-{self.name}", daemon=True)
        thread.start()


def _restart_reason(error: McpError, delay: float) -> str:
    return f"{error.message}; restarting in {delay:.2f} s"


def _ping_failure(error: McpError) -> McpError:
    """A failed ping is a broken connection (a timeout included)."""
    return McpError(
        error.code,
        f"ping failed: {error.message}",
        error.data,
        kind="transport",
        cause=("ping", error.cause),
    )


def _closed_error(message: str, *, cause: Any = ("closed",)) -> McpError:
    return connection_error(message, cause=cause)
