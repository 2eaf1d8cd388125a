"""The supervision package's internal API: what its modules share, and nothing else.

Not exported by ``snodo.supervision`` (except ``current_actor`` and ``service_threads``):
``actor.py``, ``pooled.py``, ``owner.py``, ``supervisor.py`` and ``timers.py`` import these
names instead of each other's private ones.

* ``Proc``: the supervision state of one snodo actor (links, monitors, exit callbacks, its
  exit reason), kept on the actor's one ``ActorRef`` as the attribute ``PROC_ATTR``;
  ``proc_of(ref)`` reads it, ``is_snodo_actor(ref)`` tests for it.
* ``add_exit_callback(ref, callback)``: a callback for the end of an actor (what owner
  watches and timers use; monitors are the actor-facing form).
* ``running``: which snodo actor runs in this thread or greenlet (set by the thread loop
  and by a pooled actor's turn); ``current_actor()`` reads it.
* ``ExcInfo``, ``Ending``, ``exc_info``: how an actor's end is described between its steps.
* ``service_thread``, ``service_threads``: the process-wide infrastructure threads (pool
  workers, the timer thread) that the tests' leak check ignores.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from pykka import ActorRef

from snodo.supervision.reasons import MonitorRef, Reason

if TYPE_CHECKING:
    from types import TracebackType

    import pykka

__all__ = [
    "PROC_ATTR",
    "Ending",
    "ExcInfo",
    "Proc",
    "add_exit_callback",
    "current_actor",
    "exc_info",
    "is_snodo_actor",
    "proc_of",
    "running",
    "service_thread",
    "service_threads",
]

ExcInfo: TypeAlias = "tuple[type[BaseException], BaseException, TracebackType | None]"
Ending: TypeAlias = "tuple[Reason, ExcInfo | None]"
"""An exit reason, and the failure if the actor's own code raised."""

PROC_ATTR = "_snodo_proc"
"""The ``ActorRef`` attribute that holds a snodo actor's ``Proc``."""

running = threading.local()
"""``running.ref``: the snodo actor whose loop or turn runs in this thread or greenlet."""


def exc_info(exc: BaseException) -> ExcInfo:
    """``sys.exc_info()``'s triple for ``exc``."""
    return (type(exc), exc, exc.__traceback__)


def current_actor() -> ActorRef[Any] | None:
    """The snodo actor whose loop runs in the current thread or greenlet, else None."""
    return cast("ActorRef[Any] | None", getattr(running, "ref", None))


class Proc:
    """Per-actor supervision state, shared by all threads and guarded by ``lock``."""

    __slots__ = (
        "actor",
        "callbacks",
        "exited",
        "links",
        "lock",
        "monitors",
        "name",
        "reason",
        "watching",
    )

    def __init__(self, actor: pykka.Actor) -> None:
        self.actor: weakref.ref[pykka.Actor] = weakref.ref(actor)
        self.name = str(actor)
        self.lock = threading.Lock()
        self.links: dict[str, ActorRef[Any]] = {}  # urn -> linked ref
        self.monitors: dict[MonitorRef, None] = {}  # monitors on this actor, in order
        self.watching: dict[MonitorRef, None] = {}  # monitors it holds (no Down yet)
        self.callbacks: dict[object, Callable[[Reason], object]] = {}
        self.reason: Reason | None = None  # set once, when the actor has ended
        self.exited = threading.Event()  # set after every Exit/Down has been sent


def proc_of(ref: ActorRef[Any]) -> Proc:
    """The ``Proc`` of a snodo actor's ref; ``TypeError`` for any other ref."""
    proc = getattr(ref, PROC_ATTR, None)
    if proc is None:
        msg = f"{ref!r} is not a snodo.supervision.Actor"
        raise TypeError(msg)
    return cast("Proc", proc)


def is_snodo_actor(ref: object) -> bool:
    """True for the ref of a snodo actor (one that has a ``Proc``)."""
    return hasattr(ref, PROC_ATTR)


def add_exit_callback(
    ref: ActorRef[Any], callback: Callable[[Reason], object]
) -> Callable[[], bool]:
    """Call ``callback(reason)`` when ``ref`` ends (at once if it has); returns a canceller.

    The callback runs in the ending actor's thread, after its hooks; keep it short.
    The canceller returns True if it removed a callback that had not run.
    """
    proc = proc_of(ref)
    key = object()
    with proc.lock:
        ended = proc.reason
        if ended is None:
            proc.callbacks[key] = callback

    def cancel() -> bool:
        with proc.lock:
            return proc.callbacks.pop(key, None) is not None

    if ended is not None:
        callback(ended)
    return cancel


# -- service threads -----------------------------------------------------------------------

_service_lock = threading.Lock()
_service: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def service_threads() -> frozenset[threading.Thread]:
    """The live threads (greenlets under gevent) that serve the whole process.

    These are the ``Dispatcher`` workers and the timer thread (``timers.py``): shared
    infrastructure, started lazily and ended when idle, not owned by any actor or
    caller. A leak check of threads should ignore them.
    """
    with _service_lock:
        return frozenset(t for t in _service if t.is_alive())


def service_thread(target: Callable[[], None], name: str) -> threading.Thread:
    """A daemon thread (not started yet), recorded as a service thread."""
    thread = threading.Thread(target=target, name=name, daemon=True)
    with _service_lock:
        _service.add(thread)
    return thread
