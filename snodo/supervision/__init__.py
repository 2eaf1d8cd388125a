"""snodo.supervision: an OTP-like supervised actor runtime on Pykka (knows nothing of MCP).

* ``Actor``: a Pykka ``ThreadingActor`` with exit reasons, links, monitors, contained
  ``BaseException``s and a bounded inbox (``actor.py``).
* ``PooledActor``: the same semantics with no thread of its own; its turns run on a shared
  ``Dispatcher`` of a few workers (``pooled.py``). Its handlers must not block.
* ``send_after``, ``call_later``: the process-wide timer service (``timers.py``).
* ``service_threads()``: the pool workers and the timer thread, shared by the process
  (``core.py``, which also holds what the modules share: the package's internal API).
* ``Supervisor``, ``ChildSpec``: restart strategies and intensity (``supervisor.py``).
* ``root()``, ``connections()``: the lazily started process-wide tree (``root.py``).
* ``current_owner()``, ``watch()``: who opened something, and a callback when it ends
  (``owner.py``).

Everything that waits takes a deadline. What depends on Pykka internals is listed in the
docstrings of ``actor.py``, ``pooled.py`` and ``inbox.py``.
"""

from __future__ import annotations

from snodo.supervision.actor import (
    Actor,
    Registry,
    call,
    demonitor,
    exit_reason,
    join,
    kill,
    link,
    monitor,
    registry,
    stop,
    stop_all,
    unlink,
)
from snodo.supervision.core import current_actor, service_threads
from snodo.supervision.owner import (
    Owner,
    OwnerKind,
    OwnerWatch,
    current_owner,
    green_mode,
    owner_of,
    watch,
)
from snodo.supervision.pooled import Dispatcher, PooledActor, default_dispatcher
from snodo.supervision.reasons import (
    KILLED,
    NORMAL,
    SHUTDOWN,
    ActorCrashed,
    ActorDead,
    CallTimeout,
    Crash,
    Down,
    Exit,
    InboxFull,
    MonitorRef,
    Reason,
    SupervisionError,
    TooManyRestarts,
    is_abnormal,
)
from snodo.supervision.root import connections, root, shutdown_root
from snodo.supervision.supervisor import (
    ChildInfo,
    ChildSpec,
    Restart,
    Strategy,
    Supervisor,
    child,
    start_child,
    terminate_child,
    which_children,
)
from snodo.supervision.timers import (
    MAX_PENDING_TIMERS,
    Timer,
    TimerService,
    TooManyTimers,
    call_later,
    default_timers,
    send_after,
)

__all__ = [
    "KILLED",
    "MAX_PENDING_TIMERS",
    "NORMAL",
    "SHUTDOWN",
    "Actor",
    "ActorCrashed",
    "ActorDead",
    "CallTimeout",
    "ChildInfo",
    "ChildSpec",
    "Crash",
    "Dispatcher",
    "Down",
    "Exit",
    "InboxFull",
    "MonitorRef",
    "Owner",
    "OwnerKind",
    "OwnerWatch",
    "PooledActor",
    "Reason",
    "Registry",
    "Restart",
    "Strategy",
    "SupervisionError",
    "Supervisor",
    "Timer",
    "TimerService",
    "TooManyRestarts",
    "TooManyTimers",
    "call",
    "call_later",
    "child",
    "connections",
    "current_actor",
    "current_owner",
    "default_dispatcher",
    "default_timers",
    "demonitor",
    "exit_reason",
    "green_mode",
    "is_abnormal",
    "join",
    "kill",
    "link",
    "monitor",
    "owner_of",
    "registry",
    "root",
    "send_after",
    "service_threads",
    "shutdown_root",
    "start_child",
    "stop",
    "stop_all",
    "terminate_child",
    "unlink",
    "watch",
    "which_children",
]
