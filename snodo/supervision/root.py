"""The process-wide root supervisor and its dynamic ``connections`` child.

``root()`` starts the root lazily on first use (thread- and greenlet-safe: one lock,
checked twice) and starts it again after ``shutdown_root`` or after it died. The root
(one_for_one) has one permanent child, the ``connections`` supervisor (one_for_one),
under which each connection subtree is started as a *temporary* child: a dead
connection is reported, never silently restarted.

An atexit hook calls ``shutdown_root`` so the tree stops in order (newest first) when
the interpreter exits; the actors run on daemon threads, so the hook does get to run.
"""

from __future__ import annotations

import atexit
import threading
import time
from typing import TYPE_CHECKING, Any, cast

from snodo.supervision.actor import call, join, stop
from snodo.supervision.reasons import SHUTDOWN, ActorDead, CallTimeout
from snodo.supervision.supervisor import ChildSpec, Supervisor, child

if TYPE_CHECKING:
    from pykka import ActorRef

__all__ = ["CONNECTIONS", "connections", "root", "shutdown_root"]

CONNECTIONS = "connections"
_ROOT_MAX_RESTARTS = 10
_ROOT_MAX_SECONDS = 10.0
_CONNECTIONS_SHUTDOWN = 10.0
_OLD_ROOT_WAIT = 5.0

_lock = threading.Lock()
_root: ActorRef[Supervisor] | None = None
_atexit_registered = False


def _start_connections() -> ActorRef[Any]:
    return Supervisor.start(strategy="one_for_one")


def _running_connections(sup: Supervisor) -> ActorRef[Supervisor] | None:
    return sup.running_child(CONNECTIONS)


def root() -> ActorRef[Supervisor]:
    """The root supervisor, started on first use (or again if it has ended)."""
    global _root, _atexit_registered
    ref = _root
    if ref is not None and ref.is_alive():
        return ref
    with _lock:
        ref = _root
        if ref is not None and ref.is_alive():
            return ref
        if ref is not None:  # dying: let it finish before a new tree starts
            join(ref, _OLD_ROOT_WAIT)
        spec = ChildSpec(CONNECTIONS, _start_connections, "permanent", _CONNECTIONS_SHUTDOWN)
        ref = Supervisor.start(
            strategy="one_for_one",
            children=[spec],
            max_restarts=_ROOT_MAX_RESTARTS,
            max_seconds=_ROOT_MAX_SECONDS,
        )
        _root = ref
        if not _atexit_registered:
            atexit.register(shutdown_root)
            _atexit_registered = True
        return ref


def connections(timeout: float = 5.0) -> ActorRef[Supervisor]:
    """The running ``connections`` supervisor (waits out a restart, up to ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        sup = root()
        ref = child(sup, CONNECTIONS)
        if ref is not None and ref.is_alive():
            return cast("ActorRef[Supervisor]", ref)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            msg = f"no running connections supervisor within {timeout} s"
            raise CallTimeout(msg)
        if ref is not None:
            # Once it has fully ended, its Exit is already in the root's inbox, so the
            # call below is answered after the root has handled it (and restarted it).
            join(ref, remaining)
        try:
            found = call(sup, _running_connections, max(0.0, deadline - time.monotonic()))
        except ActorDead:  # the root itself ended: root() starts a new one
            continue
        if found is not None and found.is_alive():
            return found


def shutdown_root(timeout: float = 5.0) -> bool:
    """Stop the root tree (children newest first); True if it ended within ``timeout``."""
    global _root
    with _lock:
        ref, _root = _root, None
    if ref is None:
        return True
    return stop(ref, SHUTDOWN, timeout)
