"""Leak accounting: what a block of test code leaves behind, and a check that it left nothing.

``no_leaks()`` takes a baseline of this process's threads, file descriptors, descendant
processes and actors (snodo's registry and Pykka's), runs the block, then waits up to its
deadline for everything new to go: threads are joined and actors waited on directly; fds and
processes are read from ``/proc`` until they are gone or the deadline passes. What is still
there fails the block with :class:`Leaked`, an ``AssertionError`` carrying a :class:`LeakReport`
(threads by name, fds with what they point at, pids with their command lines, actors).

Not counted, because they are process-wide and kept on purpose: the supervision layer's service
threads (``service_threads()``), the I/O hub's thread, the stdio reaper process and its pipe
(decision 0034) and, with ``pooled=True``, the idle keep-alive sockets of snodo's HTTP pool
(decision 0013). Processes are this process's descendants (zombie children included: a child not
reaped is a leak) and orphans: processes of our session started during the block whose process
group's leader was ours or is gone (a server's grandchild left when the server was killed), and
whose parent is init or one of our ancestors (where the kernel moves an orphan: a process that a
sibling of ours runs, such as another pytest worker's server, is not ours).
Linux only (``/proc``).
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "LEAK_DEADLINE",
    "Baseline",
    "LeakReport",
    "Leaked",
    "ancestors",
    "children",
    "command_line",
    "descendants",
    "find_leaks",
    "group_members",
    "no_leaks",
    "open_fds",
    "pooled_sockets",
    "process_wide_threads",
    "reaper_pipe",
    "stop_leftovers",
]

#: How long a check waits, by default, for what a closing connection releases asynchronously.
LEAK_DEADLINE = 5.0

#: The poll interval of the /proc reads (fds and processes have nothing to wait on).
_POLL = 0.02

_IO_HUB = "snodo-io-hub"


# -- /proc -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Stat:
    state: str
    ppid: int
    pgrp: int
    session: int
    start: int  # clock ticks since boot


def _stat(pid: int) -> _Stat | None:
    """A process's /proc stat fields that matter here, or None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return _Stat(fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def _all_stats() -> dict[int, _Stat]:
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None:
                stats[int(name)] = stat
    return stats


def _now_ticks() -> int:
    """Clock ticks since boot (the unit of /proc's start times), rounded down."""
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return int(uptime * os.sysconf("SC_CLK_TCK")) - 1


def command_line(pid: int) -> str:
    """The command line of ``pid`` as one string ('' once it is gone; '[name]' for a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    if raw:
        return raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    try:
        return f"[{Path(f'/proc/{pid}/comm').read_text().strip()}]"
    except OSError:
        return ""


def descendants(stats: dict[int, _Stat] | None = None) -> set[int]:
    """Every process below this one (children, their children...), zombies included."""
    stats = _all_stats() if stats is None else stats
    below: dict[int, list[int]] = {}
    for pid, stat in stats.items():
        below.setdefault(stat.ppid, []).append(pid)
    found: set[int] = set()
    todo = [os.getpid()]
    while todo:
        for pid in below.get(todo.pop(), ()):
            if pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def ancestors(stats: dict[int, _Stat] | None = None) -> set[int]:
    """Every process above this one (its parent, theirs...): where an orphan can be moved."""
    stats = _all_stats() if stats is None else stats
    found: set[int] = set()
    stat = stats.get(os.getpid())
    while stat is not None and stat.ppid > 0 and stat.ppid not in found:
        found.add(stat.ppid)
        stat = stats.get(stat.ppid)
    return found


def children() -> set[int]:
    """This process's children, zombies included (a zombie child is a process not reaped)."""
    me = os.getpid()
    return {pid for pid, stat in _all_stats().items() if stat.ppid == me}


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``."""
    return [
        pid
        for pid, stat in _all_stats().items()
        if stat.pgrp == pgid and stat.state not in ("Z", "X")
    ]


def open_fds() -> dict[int, str]:
    """fd -> what it points at, for this process."""
    fds = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            fds[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the fd of the listdir itself, or one closed meanwhile
    return fds


def pooled_sockets() -> set[str]:
    """The sockets (as /proc/self/fd names them) of the idle keep-alive connections in snodo's
    process-wide HTTP pool (docs/decisions/0013): shared by every client, kept after close()."""
    from snodo.transports import http_wire

    found = set()
    for sock in http_wire.idle_sockets():
        fileno = sock.fileno()
        if fileno >= 0:
            with contextlib.suppress(OSError):
                found.add(os.readlink(f"/proc/self/fd/{fileno}"))
    return found


def _reaper_pid() -> int | None:
    from snodo.transports import reaper

    return reaper.reaper_pid()


def reaper_pipe() -> str | None:
    """The pipe (as /proc names it) to this process's stdio reaper, kept after close()."""
    pid = _reaper_pid()
    if pid is None:
        return None
    with contextlib.suppress(OSError):
        return os.readlink(f"/proc/{pid}/fd/0")
    return None


# -- threads and actors ----------------------------------------------------------------------


def process_wide_threads() -> set[threading.Thread]:
    """Threads that serve the whole process and are no block's own: the supervision service
    threads and the I/O hub."""
    from snodo.supervision import service_threads

    wide = set(service_threads())
    wide.update(t for t in threading.enumerate() if t.name == _IO_HUB)
    return wide


def _threads() -> set[threading.Thread]:
    dummy: Any = getattr(threading, "_DummyThread", ())  # foreign threads/greenlets: not ours
    wide = process_wide_threads()
    return {
        t
        for t in threading.enumerate()
        if t.is_alive() and not isinstance(t, dummy) and t not in wide
    }


def _actors() -> list[Any]:
    import pykka

    from snodo.supervision import registry

    refs: list[Any] = list(registry.all())
    urns = {ref.actor_urn for ref in refs}
    refs += [ref for ref in pykka.ActorRegistry.get_all() if ref.actor_urn not in urns]
    return refs


def _actor_name(ref: Any) -> str:
    actor_class = getattr(ref, "actor_class", None)
    name = getattr(actor_class, "__name__", type(ref).__name__)
    return f"{name} ({ref.actor_urn})"


# -- the report ------------------------------------------------------------------------------


@dataclass(slots=True)
class LeakReport:
    """What a block left behind: threads by name, fds -> what they point at, pids -> command
    lines, actors by class and urn. Empty (falsy) when nothing was left."""

    threads: list[str] = field(default_factory=list)
    fds: dict[int, str] = field(default_factory=dict)
    processes: dict[int, str] = field(default_factory=dict)
    actors: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.threads or self.fds or self.processes or self.actors)

    def __str__(self) -> str:
        parts = []
        if self.threads:
            parts.append("threads: " + ", ".join(self.threads))
        if self.fds:
            parts.append("fds: " + ", ".join(f"{fd} -> {to}" for fd, to in self.fds.items()))
        if self.processes:
            parts.append(
                "processes: " + ", ".join(f"{pid} ({cmd})" for pid, cmd in self.processes.items())
            )
        if self.actors:
            parts.append("actors: " + ", ".join(self.actors))
        return "; ".join(parts) if parts else "nothing"


class Leaked(AssertionError):
    """A block left something behind; ``report`` says what."""

    def __init__(self, report: LeakReport) -> None:
        super().__init__(f"leaked after the block: {report}")
        self.report = report


# -- the check -------------------------------------------------------------------------------


class Baseline:
    """What exists now (the chosen kinds), to compare with later: :func:`find_leaks`."""

    def __init__(
        self,
        *,
        threads: bool = True,
        fds: bool = True,
        processes: bool = True,
        actors: bool = True,
        pooled: bool = False,
        grandchildren: bool = True,
    ) -> None:
        self.pooled = pooled
        self.grandchildren = grandchildren
        self.threads: set[threading.Thread] | None = _threads() if threads else None
        self.actor_urns: set[str] | None = {ref.actor_urn for ref in _actors()} if actors else None
        self.fds: dict[int, str] | None = open_fds() if fds else None
        self.started = _now_ticks()
        self.session = os.getsid(0)
        self.processes: set[tuple[int, int]] | None = None
        if processes:
            stats = _all_stats()
            self.processes = {(pid, stats[pid].start) for pid in descendants(stats)}

    # -- what is new since ----------------------------------------------------------------

    def new_threads(self) -> list[threading.Thread]:
        if self.threads is None:
            return []
        return [t for t in _threads() if t not in self.threads]

    def new_actors(self) -> list[Any]:
        if self.actor_urns is None:
            return []
        urns = self.actor_urns
        return [ref for ref in _actors() if ref.actor_urn not in urns]

    def new_fds(self) -> dict[int, str]:
        if self.fds is None:
            return {}
        before = self.fds
        new = {fd: to for fd, to in open_fds().items() if before.get(fd) != to}
        if self.pooled and new:
            shared = pooled_sockets()
            new = {fd: to for fd, to in new.items() if to not in shared}
        if new:  # the reaper's pipe is process-wide, like the I/O hub (decision 0034)
            pipe = reaper_pipe()
            new = {fd: to for fd, to in new.items() if to != pipe}
        return new

    def new_processes(self) -> list[int]:
        if self.processes is None:
            return []
        stats = _all_stats()
        below = descendants(stats)
        reaper = _reaper_pid()
        known = self.processes
        own_group = os.getpgrp()
        new = {pid for pid in below if (pid, stats[pid].start) not in known}
        if not self.grandchildren:
            me = os.getpid()
            new = {pid for pid in new if stats[pid].ppid == me}
        adopters = ancestors(stats) | {1}  # init, or a subreaper above us
        for pid, stat in stats.items() if self.grandchildren else ():  # orphans
            if (
                pid in below
                or stat.ppid not in adopters
                or stat.session != self.session
                or stat.start < self.started
                or stat.state in ("Z", "X")
            ):
                continue
            if stat.pgrp == own_group or stat.pgrp in below or stat.pgrp not in stats:
                new.add(pid)
        new.discard(reaper if reaper is not None else -1)
        return sorted(new)

    def report(self) -> LeakReport:
        """What is new now, without waiting."""
        return LeakReport(
            threads=[t.name for t in self.new_threads()],
            fds=self.new_fds(),
            processes={pid: command_line(pid) for pid in self.new_processes()},
            actors=[_actor_name(ref) for ref in self.new_actors()],
        )


def find_leaks(baseline: Baseline, deadline: float = LEAK_DEADLINE) -> LeakReport:
    """Wait up to ``deadline`` seconds for everything new since ``baseline`` to go; what is
    left. Threads are joined and actors waited on; fds and processes are re-read from /proc."""
    from snodo.supervision import join

    end = time.monotonic() + deadline
    pause = threading.Event()
    collected = False
    while True:
        threads, actors = baseline.new_threads(), baseline.new_actors()
        fds, processes = baseline.new_fds(), baseline.new_processes()
        if not (threads or actors or fds or processes):
            return LeakReport()
        if not collected:
            # A client dropped without close() (say, held by a caught exception's traceback
            # cycle) stops its connection owner once it is collected.
            collected = True
            gc.collect()
            continue
        remaining = end - time.monotonic()
        if remaining <= 0:
            return baseline.report()
        for ref in actors:
            left = max(0.0, end - time.monotonic())
            if hasattr(ref, "_snodo_proc"):
                join(ref, left)
            else:
                ref.actor_stopped.wait(left)
        for thread in threads:
            thread.join(max(0.0, end - time.monotonic()))
        if (fds or processes) and not (threads or actors):
            pause.wait(min(_POLL, max(0.0, end - time.monotonic())))


def stop_leftovers(baseline: Baseline) -> None:
    """Stop the actors new since ``baseline`` (newest first), so that one leak does not fail
    the next check too. Threads and processes are left alone: they are not ours to end."""
    from snodo.supervision import kill, stop

    for ref in reversed(baseline.new_actors()):
        if hasattr(ref, "_snodo_proc"):
            if not stop(ref, timeout=1.0):
                kill(ref)
        else:
            ref.stop(block=False)


@contextlib.contextmanager
def no_leaks(
    deadline: float = LEAK_DEADLINE,
    *,
    pooled: bool = False,
    threads: bool = True,
    fds: bool = True,
    processes: bool = True,
    actors: bool = True,
    grandchildren: bool = True,
    cleanup: bool = True,
) -> Iterator[Baseline]:
    """Fail with :class:`Leaked` when the block leaves a thread, fd, descendant process or
    actor behind (after waiting up to ``deadline`` seconds for them to go).

    The keywords choose the kinds (``grandchildren=False``: only this process's own children);
    ``pooled`` excludes the HTTP pool's idle sockets;
    ``cleanup`` stops leaked actors before raising. Start the process-wide parts the block will
    use (``snodo.supervision.connections()``, an I/O hub...) before it: see :func:`warm_up` in
    ``snodo.testing``.
    """
    baseline = Baseline(
        threads=threads,
        fds=fds,
        processes=processes,
        actors=actors,
        pooled=pooled,
        grandchildren=grandchildren,
    )
    yield baseline
    report = find_leaks(baseline, deadline)
    if report:
        if cleanup:
            stop_leftovers(baseline)
        raise Leaked(report)
