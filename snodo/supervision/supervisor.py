"""OTP-style supervisors: child specs, three restart strategies, restart intensity.

A ``Supervisor`` is an ``Actor`` that traps exits and links to each child it starts.
When a child ends, its ``restart`` type decides whether anything restarts:

* ``"permanent"``: always; ``"transient"``: only after an abnormal exit (see
  ``is_abnormal``: not NORMAL, not SHUTDOWN); ``"temporary"``: never, and its spec is
  forgotten (a dead connection is reported, not silently restarted).

and the strategy decides what restarts with it:

* ``one_for_one``: the child alone;
* ``one_for_all``: every running child is stopped (newest first) and all are started
  again in their original order;
* ``rest_for_one``: the children started after it are stopped (newest first), then it and
  they are started again in order.

Temporary siblings stopped by a restart are not restarted. More than ``max_restarts``
restarts within ``max_seconds`` (OTP's intensity and period) make the supervisor stop its
children and exit with ``Crash(TooManyRestarts)``, which its links see.

Pykka actors cannot be restarted: a restart starts a new actor with a new urn. A child's
stable name is its spec ``id``; ``child(sup, id)`` resolves it to the current ref.
Stopping a child means: unlink, ``stop(ref, SHUTDOWN, spec.shutdown)``, then ``kill`` and
a bounded wait if it did not stop in time (a thread stuck in a blocking call cannot be
interrupted; it is logged and left behind). Children are stopped newest first when the
supervisor ends. A supervisor also ends when a non-child linked to it (its parent) ends
with a reason other than NORMAL, as in OTP.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias, get_args

from snodo.supervision.actor import Actor, call, exit_reason, join, kill, link, stop, unlink
from snodo.supervision.core import proc_of
from snodo.supervision.reasons import (
    KILLED,
    NORMAL,
    SHUTDOWN,
    ActorCrashed,
    ActorDead,
    Crash,
    Reason,
    TooManyRestarts,
    is_abnormal,
)
from snodo.supervision.restarts import Restart, restarts_in_window

if TYPE_CHECKING:
    from types import TracebackType

    from pykka import ActorRef
    from typing_extensions import Self

__all__ = [
    "ChildInfo",
    "ChildSpec",
    "Restart",
    "Strategy",
    "Supervisor",
    "child",
    "start_child",
    "terminate_child",
    "which_children",
]

Strategy: TypeAlias = Literal["one_for_one", "one_for_all", "rest_for_one"]


@dataclass(frozen=True)
class ChildSpec:
    """How to start one child and when to restart it.

    ``start`` runs in the supervisor's thread and must return the ref of a freshly
    started snodo ``Actor``. ``shutdown`` is the seconds a stop may take before a kill.
    """

    id: str
    start: Callable[[], ActorRef[Any]]
    restart: Restart = "permanent"
    shutdown: float = 5.0

    def __post_init__(self) -> None:
        if self.restart not in get_args(Restart):
            msg = f"restart must be one of {get_args(Restart)}, not {self.restart!r}"
            raise ValueError(msg)
        if not self.shutdown >= 0:
            msg = f"shutdown must be a number of seconds >= 0, not {self.shutdown!r}"
            raise ValueError(msg)


@dataclass(frozen=True)
class ChildInfo:
    """One row of ``which_children``: ``ref`` is None while the child is not running."""

    id: str
    ref: ActorRef[Any] | None
    restart: Restart


class _Child:
    __slots__ = ("ref", "spec")

    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        self.ref: ActorRef[Any] | None = None


def _started(sup: Supervisor) -> None:
    """Answered once on_start (the initial children) is done."""


@dataclass(frozen=True)
class _StartChild:
    """Message of ``start_child``: answered with the new child's ref."""

    spec: ChildSpec


@dataclass(frozen=True)
class _TerminateChild:
    """Message of ``terminate_child``: answered True if there was such a child."""

    child_id: str


@dataclass(frozen=True)
class _WhichChildren:
    """Message of ``which_children``: answered with the ``ChildInfo`` rows."""


class _StartFailed(Exception):
    def __init__(self, child: _Child, reason: Reason) -> None:
        super().__init__(child.spec.id)
        self.child = child
        self.reason = reason


class Supervisor(Actor):
    """Starts, links and restarts child actors by a strategy (see the module docstring)."""

    trap_exits = True

    kill_wait: ClassVar[float] = 1.0
    """After killing a child that outlived its ``shutdown``: how long to wait for it."""

    start_timeout: ClassVar[float] = 10.0
    """How long ``start`` waits for the initial children to be started."""

    @classmethod
    def start(cls, *args: Any, **kwargs: Any) -> ActorRef[Self]:
        """Start the supervisor and wait until its initial children are started (as OTP).

        Raises ``ActorCrashed`` (with the exit reason) if starting a child failed, and
        ``CallTimeout`` after ``start_timeout`` seconds.
        """
        ref = super().start(*args, **kwargs)
        try:
            call(ref, _started, cls.start_timeout)
        except ActorDead as exc:
            join(ref, cls.start_timeout)
            reason = exit_reason(ref)
            msg = f"{ref} failed to start: {reason}"
            raise ActorCrashed(msg, reason or KILLED) from (
                reason.exc if isinstance(reason, Crash) else exc
            )
        return ref

    def __init__(
        self,
        strategy: Strategy = "one_for_one",
        children: Sequence[ChildSpec] = (),
        max_restarts: int = 3,
        max_seconds: float = 5.0,
    ) -> None:
        super().__init__()
        if strategy not in get_args(Strategy):
            msg = f"strategy must be one of {get_args(Strategy)}, not {strategy!r}"
            raise ValueError(msg)
        if max_restarts < 0 or not max_seconds > 0:
            msg = "max_restarts must be >= 0 and max_seconds > 0"
            raise ValueError(msg)
        ids = [spec.id for spec in children]
        if len(set(ids)) != len(ids):
            msg = f"duplicate child ids in {ids}"
            raise ValueError(msg)
        self.strategy: Strategy = strategy
        self.max_restarts = max_restarts
        self.max_seconds = max_seconds
        self._initial = tuple(children)
        self._children: list[_Child] = []  # in start order
        self._by_urn: dict[str, _Child] = {}
        self._running: dict[str, ActorRef[Any]] = {}  # id -> running ref; see running_child
        self._restarts: tuple[float, ...] = ()  # restart times within the period

    def running_child(self, child_id: str) -> ActorRef[Any] | None:
        """The running ref of the child ``child_id``, or None; safe from any thread.

        One dict read, no message: it answers while the supervisor is busy, and can be
        stale by the time it is used (``child`` is the ref-taking form).
        """
        return self._running.get(child_id)

    def on_receive(self, message: Any) -> Any:
        """The API's messages (``start_child``, ``terminate_child``, ``which_children``)."""
        if isinstance(message, _StartChild):
            return self._start_child(message.spec)
        if isinstance(message, _TerminateChild):
            return self._terminate_child(message.child_id)
        if isinstance(message, _WhichChildren):
            return self._which_children()
        return super().on_receive(message)

    # -- lifecycle -----------------------------------------------------------------------

    def on_start(self) -> None:
        """Start the initial children in order; any failure stops those started and fails."""
        for spec in self._initial:
            self._start_child(spec)

    def on_stop(self) -> None:
        """Stop every child, newest first."""
        self._terminate_all()

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop every child, newest first (also after too many restarts)."""
        self._terminate_all()

    def on_exit(self, ref: ActorRef[Any], reason: Reason) -> None:
        """A linked actor ended: restart per spec and strategy, or follow a parent down."""
        child = self._by_urn.pop(ref.actor_urn, None)
        if child is None:  # a parent or peer linked to this supervisor
            if reason != NORMAL:
                stop(self.actor_ref, reason)
            return
        child.ref = None
        self._running.pop(child.spec.id, None)
        self.child_exited(child.spec.id, ref, reason)
        restart = child.spec.restart
        if restart == "temporary":
            self._children.remove(child)
            return
        if restart == "transient" and not is_abnormal(reason):
            return
        self._restart(child, reason)

    def child_exited(self, child_id: str, ref: ActorRef[Any], reason: Reason) -> None:
        """Hook: a child ended by itself (before any restart). Logs abnormal exits."""
        if is_abnormal(reason):
            self.log.warning(
                "child exited", child=child_id, child_urn=ref.actor_urn, reason=str(reason)
            )

    # -- the work (always in the supervisor's own thread) --------------------------------

    def _start_child(self, spec: ChildSpec) -> ActorRef[Any]:
        if any(c.spec.id == spec.id for c in self._children):
            msg = f"a child with id {spec.id!r} already exists"
            raise ValueError(msg)
        entry = _Child(spec)
        ref = self._spawn(entry)
        self._children.append(entry)
        return ref

    def _spawn(self, entry: _Child) -> ActorRef[Any]:
        ref = entry.spec.start()
        proc_of(ref)  # TypeError for anything but a snodo actor
        link(self.actor_ref, ref)  # an already-dead child delivers its Exit at once
        entry.ref = ref
        self._by_urn[ref.actor_urn] = entry
        self._running[entry.spec.id] = ref
        return ref

    def _terminate(self, entry: _Child) -> None:
        ref = entry.ref
        if ref is None:
            return
        entry.ref = None
        self._by_urn.pop(ref.actor_urn, None)
        self._running.pop(entry.spec.id, None)
        unlink(self.actor_ref, ref)
        if not stop(ref, SHUTDOWN, timeout=entry.spec.shutdown):
            kill(ref)
            if not join(ref, self.kill_wait):
                self.log.error(
                    "child did not exit after kill", child=entry.spec.id, child_urn=ref.actor_urn
                )

    def _terminate_all(self) -> None:
        for entry in reversed(self._children):
            try:
                self._terminate(entry)
            except Exception:
                self.log.exception("stopping a child failed", child=entry.spec.id)

    def _terminate_child(self, child_id: str) -> bool:
        for entry in self._children:
            if entry.spec.id == child_id:
                self._terminate(entry)
                self._children.remove(entry)
                return True
        return False

    def _which_children(self) -> list[ChildInfo]:
        return [ChildInfo(c.spec.id, c.ref, c.spec.restart) for c in self._children]

    def _count_restart(self, child_id: str, reason: Reason) -> None:
        now = time.monotonic()
        self._restarts = restarts_in_window(self._restarts, self.max_seconds, now)
        if len(self._restarts) >= self.max_restarts:
            msg = (
                f"{self}: more than {self.max_restarts} restarts in {self.max_seconds} s;"
                f" child {child_id!r} ended with {reason}"
            )
            raise TooManyRestarts(msg, child_id, reason)
        self._restarts = (*self._restarts, now)

    def _restart(self, failed: _Child, reason: Reason) -> None:
        while True:
            self._count_restart(failed.spec.id, reason)  # raises: the supervisor crashes
            try:
                self._apply_strategy(failed)
            except _StartFailed as exc:
                failed, reason = exc.child, exc.reason
                self.log.warning(
                    "child failed to restart", child=failed.spec.id, reason=str(reason)
                )
            else:
                return

    def _apply_strategy(self, failed: _Child) -> None:
        if self.strategy == "one_for_one":
            group = [failed]
        elif self.strategy == "one_for_all":
            group = list(self._children)
        else:
            group = self._children[self._children.index(failed) :]
        again = [c for c in group if c is failed or c.ref is not None]
        for entry in reversed(group):
            if entry is not failed:
                self._terminate(entry)
        for entry in again:
            if entry is not failed and entry.spec.restart == "temporary":
                self._children.remove(entry)
                continue
            if entry.ref is not None:  # started meanwhile by an earlier round
                continue
            try:
                self._spawn(entry)
            except Exception as exc:
                raise _StartFailed(entry, Crash(exc)) from exc


# -- the API, usable from any thread, greenlet or actor ----------------------------------


def start_child(sup: ActorRef[Any], spec: ChildSpec, timeout: float = 5.0) -> ActorRef[Any]:
    """Start a child under ``sup`` and return its ref.

    Raises ``ValueError`` for a duplicate id, whatever ``spec.start`` raised (the spec is
    then not kept), or the ``call`` errors (``CallTimeout``, ``ActorDead``).
    """
    return call(sup, _StartChild(spec), timeout)  # type: ignore[no-any-return]


def terminate_child(sup: ActorRef[Any], child_id: str, timeout: float = 10.0) -> bool:
    """Stop the child ``child_id`` and forget its spec; False if there was no such child.

    ``timeout`` bounds the whole call: give it more than the child's ``shutdown``.
    """
    return bool(call(sup, _TerminateChild(child_id), timeout))


def which_children(sup: ActorRef[Any], timeout: float = 5.0) -> list[ChildInfo]:
    """The children of ``sup`` in start order, with their current refs."""
    return list(call(sup, _WhichChildren(), timeout))


def child(sup: ActorRef[Any], child_id: str) -> ActorRef[Any] | None:
    """The running ref of ``sup``'s child ``child_id``, or None (not running, unknown).

    Reads the supervisor's table directly (no message), so it answers even while the
    supervisor is busy restarting; the answer can be stale by the time it is used.
    """
    actor = proc_of(sup).actor()
    if not isinstance(actor, Supervisor):
        if actor is None:
            return None
        msg = f"{sup!r} is not a Supervisor"
        raise TypeError(msg)
    return actor.running_child(child_id)
