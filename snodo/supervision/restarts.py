"""Restart policies, pure: whether an ending restarts, after what backoff, within what intensity.

OTP's names and rules: ``"temporary"`` never restarts, ``"transient"`` restarts after an
abnormal end, ``"permanent"`` after any end; more than ``max_restarts`` restarts within
``restart_window`` seconds (OTP's intensity and period) and the child is down for good. Beyond
OTP, a restart waits a backoff first (exponential, capped, with full jitter, as AWS's
"Exponential Backoff And Jitter" recommends), so a server that fails at once is not respawned
in a tight loop. Times are arguments (seconds on a monotonic clock); nothing here sleeps.
Supervisors (``snodo.supervision.supervisor``) and connection owners (``snodo.actors``) both
decide with these functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias, get_args

__all__ = [
    "Backoff",
    "GiveUp",
    "Restart",
    "RestartAfter",
    "RestartPolicy",
    "decide",
    "over_intensity",
    "restarts_in_window",
]

Restart: TypeAlias = Literal["permanent", "transient", "temporary"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """The wait before restart ``n`` (1-based): ``initial * factor**(n-1)``, at most ``cap``;
    with ``jitter`` a uniformly random share of it ("full jitter")."""

    initial: float = 0.1
    factor: float = 2.0
    cap: float = 30.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if not (self.initial >= 0 and self.factor >= 1 and self.cap >= self.initial):
            msg = (
                "backoff needs initial >= 0, factor >= 1 and cap >= initial, not "
                f"initial={self.initial!r} factor={self.factor!r} cap={self.cap!r}"
            )
            raise ValueError(msg)

    def delay(self, attempt: int, unit: float) -> float:
        """Seconds before restart ``attempt``; ``unit`` in [0, 1) is the jitter draw."""
        base = min(self.cap, self.initial * self.factor ** max(0, attempt - 1))
        return base * unit if self.jitter else base


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """A connection's (or a child's) ``restart=``, ``backoff=`` and restart intensity."""

    restart: Restart = "temporary"
    backoff: Backoff = Backoff()
    max_restarts: int = 5
    restart_window: float = 60.0

    def __post_init__(self) -> None:
        if self.restart not in get_args(Restart):
            msg = f"restart must be one of {get_args(Restart)}, not {self.restart!r}"
            raise ValueError(msg)
        if isinstance(self.max_restarts, bool) or not (
            isinstance(self.max_restarts, int) and self.max_restarts >= 0
        ):
            msg = f"max_restarts must be an int >= 0, not {self.max_restarts!r}"
            raise ValueError(msg)
        if not (
            isinstance(self.restart_window, int | float)
            and not isinstance(self.restart_window, bool)
            and self.restart_window > 0
        ):
            msg = f"restart_window must be a number of seconds > 0, not {self.restart_window!r}"
            raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class RestartAfter:
    """Restart after ``delay`` seconds; ``history`` is the restart times including this one."""

    delay: float
    attempt: int
    history: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Do not restart: ``why`` is ``"temporary"``, ``"normal"`` (a transient child ended
    normally) or ``"intensity"`` (``restarts`` restarts within the window already)."""

    why: Literal["temporary", "normal", "intensity"]
    restarts: int


def restarts_in_window(history: tuple[float, ...], window: float, now: float) -> tuple[float, ...]:
    """The restart times of ``history`` that are still within ``window`` seconds of ``now``."""
    return tuple(t for t in history if now - t <= window)


def over_intensity(
    history: tuple[float, ...], max_restarts: int, window: float, now: float
) -> bool:
    """True when one more restart now would exceed ``max_restarts`` within ``window``."""
    return len(restarts_in_window(history, window, now)) >= max_restarts


def decide(
    policy: RestartPolicy,
    history: tuple[float, ...],
    abnormal: bool,
    now: float,
    unit: float,
) -> RestartAfter | GiveUp:
    """What follows an end: ``abnormal`` is a crash, a broken connection or an expired session;
    ``history`` the earlier restart times; ``unit`` in [0, 1) the jitter draw."""
    if policy.restart == "temporary":
        return GiveUp("temporary", len(history))
    if policy.restart == "transient" and not abnormal:
        return GiveUp("normal", len(history))
    recent = restarts_in_window(history, policy.restart_window, now)
    if len(recent) >= policy.max_restarts:
        return GiveUp("intensity", len(history))
    attempt = len(recent) + 1
    return RestartAfter(policy.backoff.delay(attempt, unit), attempt, (*recent, now))
