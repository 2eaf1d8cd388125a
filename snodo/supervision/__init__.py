"""snodo.supervision: an OTP-like supervised actor runtime on Pykka (knows nothing of MCP).

* ``Actor``: a Pykka ``ThreadingActor`` with exit reasons, links, monitors, contained
  ``BaseException``s and a bounded inbox (``actor.py``).
* ``Supervisor``, ``ChildSpec``: restart strategies and intensity (``supervisor.py``).
* ``root()``, ``connections()``: the lazily started process-wide tree (``root.py``).
* ``current_owner()``, ``watch()``: who opened something, and a callback when it ends
  (``owner.py``).

Everything that waits takes a deadline. What depends on Pykka internals is listed in the
docstrings of ``actor.py`` and ``_inbox.py``.
"""

from __future__ import annotations

from snodo.supervision.actor import (
    Actor,
    Registry,
    call,
    current_actor,
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
from snodo.supervision.owner import (
    Owner,
    OwnerKind,
    Watch,
    current_owner,
    green_mode,
    owner_of,
    watch,
)
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

__all__ = [
    "KILLED",
    "NORMAL",
    "SHUTDOWN",
    "Actor",
    "ActorCrashed",
    "ActorDead",
    "CallTimeout",
    "ChildInfo",
    "ChildSpec",
    "Crash",
    "Down",
    "Exit",
    "InboxFull",
    "MonitorRef",
    "Owner",
    "OwnerKind",
    "Reason",
    "Registry",
    "Restart",
    "Strategy",
    "SupervisionError",
    "Supervisor",
    "TooManyRestarts",
    "Watch",
    "call",
    "child",
    "connections",
    "current_actor",
    "current_owner",
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
    "shutdown_root",
    "start_child",
    "stop",
    "stop_all",
    "terminate_child",
    "unlink",
    "watch",
    "which_children",
]
