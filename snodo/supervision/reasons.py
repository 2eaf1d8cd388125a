"""Exit reasons, exit and down signals, and the supervision errors.

An actor ends with exactly one exit reason. It is one of the atoms ``NORMAL``,
``SHUTDOWN`` and ``KILLED``, any other string the stopper chose, or ``Crash(exc)``
when the actor's own code raised. The reason travels to linked actors as ``Exit``
and to monitors as ``Down``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import pykka

if TYPE_CHECKING:
    from pykka import ActorRef

__all__ = [
    "KILLED",
    "NORMAL",
    "SHUTDOWN",
    "ActorCrashed",
    "ActorDead",
    "CallTimeout",
    "Crash",
    "Down",
    "Exit",
    "InboxFull",
    "MonitorRef",
    "Reason",
    "SupervisionError",
    "TooManyRestarts",
    "is_abnormal",
]

NORMAL: Final = "normal"
"""The actor finished its work; links are not affected."""

SHUTDOWN: Final = "shutdown"
"""The actor was told to stop (by a supervisor, ``stop()`` or the root shutting down)."""

KILLED: Final = "killed"
"""The actor was killed with ``kill()``: its inbox was dropped."""


@dataclass(frozen=True)
class Crash:
    """The actor's own code raised ``exc`` (a handler, a hook, or ``on_start``)."""

    exc: BaseException

    def __str__(self) -> str:
        return f"crash: {self.exc!r}"


Reason: TypeAlias = str | Crash
"""An exit reason: ``NORMAL``, ``SHUTDOWN``, ``KILLED``, another string, or ``Crash``."""


def is_abnormal(reason: Reason) -> bool:
    """Tell whether ``reason`` is an error (OTP's meaning: neither normal nor shutdown).

    Supervisors restart "transient" children only after an abnormal exit. Links are
    wider, as in Erlang: every reason except ``NORMAL`` (``SHUTDOWN`` included) takes
    a linked actor down unless it traps exits.
    """
    return reason != NORMAL and reason != SHUTDOWN


@dataclass(frozen=True, eq=False)
class MonitorRef:
    """Handle of one monitor: ``watcher`` gets ``Down`` once ``target`` exits."""

    watcher: ActorRef[Any]
    target: ActorRef[Any]

    def __repr__(self) -> str:
        return f"MonitorRef({self.watcher.actor_urn} -> {self.target.actor_urn}, #{id(self):x})"


@dataclass(frozen=True)
class Exit:
    """Exit signal from a linked actor ``ref`` that ended with ``reason``."""

    ref: ActorRef[Any]
    reason: Reason


@dataclass(frozen=True)
class Down:
    """Monitor notice: the actor ``ref`` watched through ``monitor_ref`` ended with ``reason``."""

    monitor_ref: MonitorRef
    ref: ActorRef[Any]
    reason: Reason


class SupervisionError(Exception):
    """Base of the errors raised by ``snodo.supervision``."""


class ActorDead(SupervisionError, pykka.ActorDeadError):
    """The actor is not running, or stopped before it handled the message.

    It subclasses ``pykka.ActorDeadError`` so either name catches it.
    """


class ActorCrashed(ActorDead):
    """The actor crashed while it handled this very message (e.g. ``SystemExit``).

    The original exception is ``__cause__`` and ``reason``; it is never re-raised in the
    caller, because a ``BaseException`` there would take the caller down too.
    """

    def __init__(self, message: str, reason: Reason) -> None:
        super().__init__(message)
        self.reason = reason


class CallTimeout(SupervisionError, TimeoutError):
    """A bounded call got no answer before its deadline; the message is not cancelled."""


class InboxFull(SupervisionError):
    """The actor's bounded inbox stayed full for the whole bounded wait of a send."""


class TooManyRestarts(SupervisionError):
    """A supervisor's children failed more than ``max_restarts`` times in ``max_seconds``."""

    def __init__(self, message: str, child_id: str, last_reason: Reason) -> None:
        super().__init__(message)
        self.child_id = child_id
        self.last_reason = last_reason
