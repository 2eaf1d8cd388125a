"""The reaper: one small shell per snodo process that kills the stdio servers when snodo dies.

A server killed with its parent would otherwise live on as an orphan, with its grandchildren
(decision 0034). The reaper is a ``/bin/sh`` loop (about 0.7 MB RSS; ``python -S`` is 8 MB)
started on the first ``watch``, reading ``+PGID`` and ``-PGID`` lines from a pipe whose write end
only this process holds (close-on-exec, closed in a forked child). At end of file (this process
exited or died, SIGKILL included) it sends SIGKILL to every process group still registered and
exits. It is not our child (its starting shell exits at once, so it is re-parented) and has its
own process group, no fd but its pipe, and ``/dev/null`` for output.

A group is registered right after its leader is spawned and unregistered right before the
leader is reaped: until then the unreaped leader pins the group id (see ``process``), so the
reaper can only ever signal our own groups. Lines are a few bytes, below ``PIPE_BUF``, so each
non-blocking write is whole or nothing. A write that finds the reaper gone drops our end; the
next ``watch`` starts a new reaper and registers every group again. Linux only (``ENABLED``);
elsewhere nothing is started and servers outlive a killed snodo process, as before.
"""

from __future__ import annotations

import math
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Final

from snodo.log import get_logger

__all__ = [
    "ENABLED",
    "MARK",
    "SCRIPT",
    "WRITE_WAIT",
    "Starter",
    "command",
    "forget",
    "reaper_pid",
    "watch",
    "watched",
]

#: Whether this platform gets a reaper (Linux: ``/bin/sh``, process groups, ``/proc``).
ENABLED: Final = sys.platform.startswith("linux")
#: The reaper's ``$0``: its command line is ``/bin/sh -c SCRIPT snodo-reaper OWNER_PID``.
MARK: Final = "snodo-reaper"
#: How long a write may wait for room in the pipe before the reaper counts as stuck.
WRITE_WAIT: Final = 1.0

#: Runs as ``sh -c SCRIPT snodo-reaper OWNER``: starts the loop in the background with the pipe
#: (fd 0) as its stdin, prints its pid and exits. ``set -f``: ``$groups`` is split, never globbed.
SCRIPT: Final = r"""exec 3<&0
(
trap '' HUP INT QUIT
set -f
groups=' '
while IFS= read -r line; do
  case $line in
  +*) groups="$groups${line#+} " ;;
  -*) id=${line#-}
      case $groups in *" $id "*) groups="${groups%% $id *} ${groups#* $id }" ;; esac ;;
  esac
done
for id in $groups; do kill -s KILL -- "-$id" 2>/dev/null; done
) 0<&3 3<&- >/dev/null 2>&1 &
echo $!
"""

#: Starts a reaper from its argv: (the reaper's pid, our non-blocking close-on-exec end of its
#: pipe), or None if it could not be started. ``process`` provides it (it owns spawning).
Starter = Callable[[Sequence[str]], "tuple[int, int] | None"]

_log = get_logger("snodo.transports.reaper")

# Reentrant: the starter reaps the starting shell, which goes through ``forget``.
_lock = threading.RLock()
_fd: int | None = None
_pid: int | None = None
_groups: set[int] = set()


def command() -> tuple[str, ...]:
    """The reaper's argv (the owner pid only tells a reader whose reaper it is)."""
    return ("/bin/sh", "-c", SCRIPT, MARK, str(os.getpid()))


def watch(pgid: int, start: Starter) -> None:
    """Register process group ``pgid``: it gets SIGKILL when this process dies. Never raises; a
    reaper that cannot be started is logged and the group runs unwatched (as without a reaper).
    """
    if not ENABLED:
        return
    with _lock:
        _groups.add(pgid)
        if _fd is not None and _send(b"+%d\n" % pgid):
            return
        _start(start)


def forget(pgid: int) -> None:
    """Unregister ``pgid`` (call before its leader is reaped); a no-op for a group not watched."""
    if pgid not in _groups:  # the common case needs no lock (the starting shell is never watched)
        return
    with _lock:
        if pgid not in _groups:
            return
        _groups.discard(pgid)
        if _fd is not None:
            _send(b"-%d\n" % pgid)


def watched() -> frozenset[int]:
    """The process groups registered with the reaper now."""
    with _lock:
        return frozenset(_groups)


def reaper_pid() -> int | None:
    """The pid of this process's reaper, or None while there is none."""
    with _lock:
        return _pid


def _start(start: Starter) -> None:
    """Start a reaper and register every watched group with it (under ``_lock``)."""
    global _fd, _pid
    started = start(command())
    if started is None:
        _log.warning("reaper_not_started", groups=len(_groups))
        return
    _pid, _fd = started
    for pgid in sorted(_groups):
        if not _send(b"+%d\n" % pgid):
            _log.warning("reaper_lost_at_start", pid=_pid)
            return


def _send(line: bytes) -> bool:
    """Write one line to the reaper (under ``_lock``); False if it is gone (our end is dropped)."""
    assert _fd is not None
    deadline: float | None = None
    while True:
        try:
            os.write(_fd, line)
            return True
        except BlockingIOError:
            now = time.monotonic()
            deadline = now + WRITE_WAIT if deadline is None else deadline
            if now >= deadline:
                # Stuck (stopped?): end it, or at our end of file it would kill live groups.
                _drop(kill=True)
                return False
            poller = select.poll()
            poller.register(_fd, select.POLLOUT)
            poller.poll(math.ceil((deadline - now) * 1000))
        except OSError:  # EPIPE: the reaper has gone
            _drop(kill=False)
            return False


def _drop(*, kill: bool) -> None:
    global _fd, _pid
    if kill and _pid is not None:
        try:
            os.kill(_pid, signal.SIGKILL)  # alive: it still holds the read end we could not fill
        except OSError:
            pass
    if _fd is not None:
        _close(_fd)
    _fd = _pid = None


def _close(fd: int) -> None:
    """``close(2)`` at once, also under gevent (its patched ``os.close`` defers the close)."""
    monkey = sys.modules.get("gevent.monkey")
    closer = os.close
    if monkey is not None and monkey.is_object_patched("os", "close"):
        closer = monkey.get_original("os", "close")
    try:
        closer(fd)
    except OSError:
        pass


def _after_fork_in_child() -> None:
    """A forked child owns none of the groups, and must not hold our end of the pipe open."""
    global _fd, _pid, _lock
    _lock = threading.RLock()  # another thread may have held it at the fork
    if _fd is not None:
        _close(_fd)
    _fd = _pid = None
    _groups.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
