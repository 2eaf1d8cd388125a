"""Spawning and ending stdio server processes (POSIX).

``spawn`` starts a server with ``os.posix_spawn`` (never ``fork``: gevent's ``subprocess`` forks,
which gets slower as the parent grows), as the leader of a new process group, with three fresh
pipes on its fds 0, 1 and 2 and nothing else of ours. The parent ends are non-blocking and
close-on-exec. ``write_all`` writes to the non-blocking stdin with a deadline. ``terminate`` ends
the server as the stdio transport says (close stdin, wait, SIGTERM, SIGKILL) and does the same to
whatever is left of its process group. Every wait is bounded; under gevent monkey-patching the
waits go through the patched ``select.poll`` and ``time.sleep`` and so yield to the hub.

Signalling rule: we only signal the child's process group, and only while we know the group id
still names the group we created. A process group id is the leader's pid, and POSIX (and Linux)
never reuse a pid while a process or a process group of that id still exists. So:

* While the leader is not reaped (alive, or a zombie we hold with ``waitid(WNOWAIT)``),
  ``killpg(pgid)`` can only reach our group: the zombie leader pins the id.
* After the leader is reaped, the id stays pinned only while members of the group remain. We then
  signal only right after ``killpg(pgid, 0)`` (and, on Linux, ``/proc``) showed running members,
  and check that at least every 50 ms. For the id to name a new group at the next signal, the
  whole group would have had to end and the kernel to hand the same pid to a new group leader in
  between, which takes a full wrap of the pid space within that gap.

A member that leaves the group (``setsid``, ``setpgid``) is out of our reach by design.

Exit statuses. Without gevent we are the only reaper, and ``waitid(WNOWAIT)`` lets us see the
leader's exit while keeping it a zombie, so the first rule holds until we reap it ourselves.
Under gevent monkey-patching, ``os.posix_spawn`` (patched: no fork, it only adds a watch)
registers the child with gevent's child watcher, libev reaps it as soon as the hub runs, and the
patched ``os.waitpid`` hands over the status; the zombie can then not be held, and we check with
``waitid`` under our lock, without yielding, right before each signal. A status reaped behind
everyone's back (``SIGCHLD`` set to ``SIG_IGN``, another ``waitpid(-1)`` caller) is lost:
``returncode`` is then 0, as in ``subprocess``. Under gevent, spawn from greenlets of the main
thread: a child spawned from a native thread cannot be watched (see ``_posix_spawn``), so once
gevent's child watcher is active (any patched spawn or ``gevent.subprocess`` use), libev may reap
it first and its status is lost.
"""

from __future__ import annotations

import errno
import math
import os
import select
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

from snodo.protocol.errors import CONNECTION_CLOSED, McpError
from snodo.transports import reaper

__all__ = [
    "ChildProcess",
    "StderrMode",
    "close_fds",
    "group_alive",
    "poll_exit",
    "spawn",
    "terminate",
    "wait_exit",
    "write_all",
]

FdName = Literal["stdin", "stdout", "stderr", "pidfd"]
#: Where a child's stderr goes: a pipe the parent reads, this process's fd 2, or /dev/null.
StderrMode = Literal["pipe", "inherit", "discard"]
_ALL_FDS: Final[tuple[FdName, ...]] = ("stdin", "stdout", "stderr", "pidfd")

#: How long a process is given to die after SIGKILL (only an unkillable process uses it up).
KILL_WAIT: Final = 1.0
#: Longest sleep between checks when no fd can be waited on.
_MAX_NAP: Final = 0.05
#: Longest single poll in ``write_all`` without a deadline, so the wait stays interruptible.
_WAKE: Final = 0.5
#: How long the reaper's starting shell may take to report the reaper and exit.
_REAPER_WAIT: Final = 2.0

#: ``sh -c`` trampoline for ``cwd``: chdir, then exec the resolved command in the same process.
_CWD_TRAMPOLINE: Final = 'cd -P "$1" || exit 127; shift; exec "$@"'
_SHELL: Final = "/bin/sh"

# Signals Python ignores at start-up (ignored dispositions survive exec): back to default in the
# child, as subprocess's restore_signals does.
_SIGDEF: Final = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ") if hasattr(signal, name)
)


@dataclass(eq=False)
class ChildProcess:
    """A spawned server: its pid and process group, and the parent's ends of its pipes.

    Close the fds only through ``close_fds`` (it tracks what is closed, so nothing is closed
    twice); ``terminate`` closes them all.
    """

    pid: int
    pgid: int
    stdin: int
    stdout: int
    #: None when stderr was not piped (``spawn(stderr="inherit" | "discard")``).
    stderr: int | None
    pidfd: int | None
    argv: tuple[str, ...]
    returncode: int | None = None
    #: The fds ``close_fds`` closed (kept by it, under ``lock``).
    closed_fds: set[str] = field(default_factory=set, init=False, repr=False)
    #: Guards closing the fds and reaping the process (one at a time).
    lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def is_closed(self, name: FdName) -> bool:
        """True once ``close_fds`` closed that fd (``pidfd`` and ``stderr`` count as closed
        when absent)."""
        absent = (name == "pidfd" and self.pidfd is None) or (
            name == "stderr" and self.stderr is None
        )
        return name in self.closed_fds or absent


# --------------------------------------------------------------------------------------------
# spawn


def spawn(
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str | None] | None = None,
    cwd: str | None = None,
    stderr: StderrMode = "pipe",
) -> ChildProcess:
    """Start ``command args...`` with piped stdio, as the leader of a new process group.

    On Linux the group is registered with this process's reaper (``reaper``), which kills it if
    this process dies first; it is unregistered when the leader is reaped.

    ``command`` is looked up like ``execvp`` does, in the child's ``PATH`` (``env`` applied), and
    relative to ``cwd`` when given. ``env`` overlays ``os.environ``; a ``None`` value unsets that
    variable. ``cwd`` runs the command through a ``/bin/sh`` trampoline that changes directory
    and execs it in the same process. A command that cannot be started raises ``McpError``
    (-32000, kind ``transport``, cause ``("spawn_failed", errno)``) and leaves no fd open.
    ``stderr``: ``"pipe"`` (the parent reads it), ``"inherit"`` (the child writes to this
    process's fd 2) or ``"discard"`` (``/dev/null``); with the last two ``stderr`` is None.
    """
    child = _start(command, args, env=env, cwd=cwd, stderr=stderr)
    reaper.watch(child.pgid, _start_reaper)
    return child


def _start(
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str | None] | None = None,
    cwd: str | None = None,
    stderr: StderrMode = "pipe",
) -> ChildProcess:
    """``spawn`` without the reaper."""
    argv = (command, *args)
    child_env = _child_env(env)
    where = None
    if cwd is not None:
        where = cwd if os.path.isabs(cwd) else os.path.join(os.getcwd(), cwd)
        cwd_error = _dir_error(where)
        if cwd_error is not None:
            raise _spawn_error(
                f"cannot start {command!r}: working directory {cwd!r}: {os.strerror(cwd_error)}",
                cwd_error,
            )
    executable = _resolve(command, child_env, where)

    pipes: list[int] = []
    try:
        in_r, in_w = _pipe(pipes)
        out_r, out_w = _pipe(pipes)
        in_r, out_w = (_above_stdio(fd, pipes) for fd in (in_r, out_w))
        actions: list[tuple[Any, ...]] = [
            (os.POSIX_SPAWN_DUP2, in_r, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
        ]
        err_r: int | None = None
        err_w: int | None = None
        if stderr == "pipe":
            err_r, err_w = _pipe(pipes)
            err_w = _above_stdio(err_w, pipes)
            actions.append((os.POSIX_SPAWN_DUP2, err_w, 2))
        elif stderr == "discard":
            actions.append((os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0))
        # "inherit": no action, the child keeps this process's fd 2
        actions += _close_actions()
        if where is None:
            path, spawn_argv = executable, list(argv)
        else:
            path = _SHELL
            spawn_argv = [_SHELL, "-c", _CWD_TRAMPOLINE, "snodo-cwd", where, executable, *args]
        pid = _posix_spawn()(
            path,
            spawn_argv,
            child_env,
            file_actions=actions,
            setpgroup=0,
            setsigmask=(),
            setsigdef=_SIGDEF,
        )
    except OSError as exc:
        _close_all(pipes)
        code = exc.errno if exc.errno is not None else str(exc)
        text = exc.strerror or str(exc)
        raise _spawn_error(f"cannot start {command!r}: {text}", code) from exc
    except BaseException:
        _close_all(pipes)
        raise
    _close_all([in_r, out_w] if err_w is None else [in_r, out_w, err_w])
    for fd in (in_w, out_r) if err_r is None else (in_w, out_r, err_r):
        os.set_blocking(fd, False)
    return ChildProcess(
        pid=pid,
        pgid=pid,
        stdin=in_w,
        stdout=out_r,
        stderr=err_r,
        pidfd=_pidfd_open(pid),
        argv=argv,
    )


def _start_reaper(argv: Sequence[str]) -> tuple[int, int] | None:
    """``reaper.Starter``: run the reaper's starting shell, read the reaper's pid from it and
    reap it; the shell's stdin, the reaper's pipe now, is handed over. None if that fails."""
    try:
        shell = _start(argv[0], argv[1:])
    except McpError:
        return None
    try:
        report = _read_line(shell.stdout, time.monotonic() + _REAPER_WAIT)
        if wait_exit(shell, _REAPER_WAIT) == 0 and report.strip().isdigit():
            close_fds(shell, "stdout", "stderr", "pidfd")
            return int(report), shell.stdin
    except OSError:
        pass
    terminate(shell, grace=0.0, term_wait=_REAPER_WAIT)  # nothing registered yet: its EOF is safe
    return None


def _read_line(fd: int, deadline: float) -> bytes:
    """Read the non-blocking ``fd`` up to a newline, end of file or ``deadline``."""
    data = b""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while not data.endswith(b"\n") and (remaining := deadline - time.monotonic()) > 0:
        poller.poll(math.ceil(remaining * 1000))
        try:
            chunk = os.read(fd, 64)
        except BlockingIOError:
            continue
        if not chunk:
            break
        data += chunk
    return data


def _posix_spawn() -> Callable[..., int]:
    """``os.posix_spawn``; under gevent, the patched one where it can watch the child.

    gevent's patched ``posix_spawn`` registers the child with its child watcher so that the
    patched ``os.waitpid`` gets its status; child watchers live on the default loop only, and the
    patched call raises (after spawning) in a native thread with a hub of its own, so there we
    spawn with the original and reap with the plain ``waitpid``.
    """
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_object_patched("os", "posix_spawn"):
        return os.posix_spawn
    import gevent

    if gevent.get_hub().loop.default:
        return os.posix_spawn
    original: Callable[..., int] = monkey.get_original("os", "posix_spawn")
    return original


def _spawn_error(message: str, cause: int | str) -> McpError:
    return McpError(CONNECTION_CLOSED, message, kind="transport", cause=("spawn_failed", cause))


def _child_env(env: Mapping[str, str | None] | None) -> dict[str, str]:
    merged = dict(os.environ)
    if env is None:
        return merged
    for key, value in env.items():
        if not key or "=" in key or "\0" in key:
            raise ValueError(f"invalid environment variable name: {key!r}")
        if value is None:
            merged.pop(key, None)
        elif "\0" in value:
            raise ValueError(f"environment variable {key!r} contains a NUL character")
        else:
            merged[key] = value
    return merged


def _dir_error(path: str) -> int | None:
    """The errno ``chdir(path)`` would fail with, or None."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return exc.errno or errno.ENOENT
    if not stat.S_ISDIR(st.st_mode):
        return errno.ENOTDIR
    if not os.access(path, os.X_OK):
        return errno.EACCES
    return None


def _exec_error(path: str) -> int | None:
    """The errno ``execve(path)`` would most likely fail with, or None if it looks runnable."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return exc.errno or errno.ENOENT
    if not stat.S_ISREG(st.st_mode) or not os.access(path, os.X_OK):
        return errno.EACCES
    return None


def _resolve(command: str, env: Mapping[str, str], cwd: str | None) -> str:
    """Find the file to execute, as ``execvp`` in the child (after ``chdir(cwd)``) would."""
    if not command:
        raise _spawn_error("cannot start '': empty command", errno.ENOENT)
    if "/" in command:
        path = command if cwd is None else os.path.join(cwd, command)
        error = _exec_error(path)
        if error is not None:
            raise _spawn_error(f"cannot start {command!r}: {os.strerror(error)}", error)
        return path
    denied = False
    for directory in os.get_exec_path(env):
        base = directory or "."
        if cwd is not None:
            base = os.path.join(cwd, base)
        candidate = os.path.join(base, command)
        error = _exec_error(candidate)
        if error is None:
            return candidate
        denied = denied or error == errno.EACCES
    error = errno.EACCES if denied else errno.ENOENT
    raise _spawn_error(
        f"cannot start {command!r}: {os.strerror(error)} (searched PATH)",
        error,
    )


def _pipe(opened: list[int]) -> tuple[int, int]:
    r, w = os.pipe()  # both non-inheritable (O_CLOEXEC)
    opened += (r, w)
    return r, w


def _above_stdio(fd: int, opened: list[int]) -> int:
    """A copy of ``fd`` numbered 3 or more, so the child's dup2 onto 0..2 cannot clobber it."""
    if fd > 2:
        return fd
    import fcntl  # POSIX only; needed only when our own stdio fds are closed

    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    opened.append(high)
    opened.remove(fd)
    _raw_close(fd)
    return high


def _close_actions() -> list[tuple[int, ...]]:
    """File actions closing our inheritable fds above 2 in the child (others close on exec)."""
    closefrom = getattr(os, "POSIX_SPAWN_CLOSEFROM", None)  # Python 3.13+
    if closefrom is not None:
        return [(closefrom, 3)]
    for fd_dir in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        actions: list[tuple[Any, ...]] = []
        for name in names:
            fd = int(name)
            if fd > 2 and _inheritable(fd):
                actions.append((os.POSIX_SPAWN_CLOSE, fd))
        return actions
    return []


def _inheritable(fd: int) -> bool:
    try:
        return os.get_inheritable(fd)
    except OSError:  # the directory fd listdir used, now closed
        return False


def _pidfd_open(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:  # ENOSYS on kernels before 5.3, or a seccomp filter
        return None
    return fd


def _close_all(fds: Sequence[int]) -> None:
    for fd in fds:
        try:
            _raw_close(fd)
        except OSError:
            pass


def _raw_close(fd: int) -> None:
    """``close(2)`` at once, also under gevent.

    gevent's patched ``os.close`` defers the close to the end of the hub's next loop iteration
    (so that watchers on the fd can be cleaned up); for the child's stdin that would delay the
    EOF that asks the server to exit until some other event wakes the hub. Only fds that no
    watcher can be waiting on go through here: the child's pipe ends (never watched), the pidfd
    (watched only inside our own waits) and stdin (watched only inside ``write_all``).
    """
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_object_patched("os", "close"):
        monkey.get_original("os", "close")(fd)
    else:
        os.close(fd)


# --------------------------------------------------------------------------------------------
# fds and writing


def close_fds(child: ChildProcess, *names: FdName) -> None:
    """Close the named parent fds of ``child`` (all four when none is named), each at most once.

    Do not close ``stdin`` while a ``write_all`` on it is in progress. Under gevent, ``stdout``
    and ``stderr`` are closed with gevent's cooperative ``os.close`` (the fd number is released
    when the hub next runs); ``stdin`` and ``pidfd`` are closed at once, so the server sees EOF
    immediately.
    """
    with child.lock:
        for name in names or _ALL_FDS:
            if name in child.closed_fds:
                continue
            child.closed_fds.add(name)
            fd = child.pidfd if name == "pidfd" else getattr(child, name)
            if fd is None:
                continue
            try:
                if name in ("stdout", "stderr"):  # an I/O hub may watch these: gevent's close
                    os.close(fd)
                else:
                    _raw_close(fd)
            except OSError:
                pass


def write_all(
    fd: int, data: bytes, deadline: float | None, on_block: Callable[[], None] | None = None
) -> None:
    """Write all of ``data`` to the non-blocking ``fd`` by ``deadline`` (``time.monotonic()``);
    ``on_block`` runs once before the first wait for room in the pipe.

    Raises ``TimeoutError`` at the deadline and ``BrokenPipeError`` when the reader is gone; both
    carry ``characters_written`` (a partial line means the stream can no longer be used). With
    no deadline the wait still wakes every 0.5 s, so signals are handled.
    """
    total = len(data)
    if not total:
        return
    try:
        written = os.write(fd, data)  # the usual: the pipe takes the whole message at once
    except BlockingIOError:
        written = 0
    except BrokenPipeError as exc:
        broken = BrokenPipeError(
            errno.EPIPE, f"Broken pipe: the reader is gone after 0 of {total} bytes"
        )
        raise _written(broken, 0) from exc
    if written == total:
        return  # no memoryview, no slice (docs/decisions/0052)
    poller: select.poll | None = None
    with memoryview(data) as view:
        while written < total:
            try:
                written += os.write(fd, view[written:])
                continue
            except BlockingIOError:
                pass
            except BrokenPipeError as exc:
                broken = BrokenPipeError(
                    errno.EPIPE, f"Broken pipe: the reader is gone after {written} of {total} bytes"
                )
                raise _written(broken, written) from exc
            if deadline is None:
                wait = _WAKE
            else:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    timeout = TimeoutError(
                        errno.ETIMEDOUT,
                        f"write timed out after {written} of {total} bytes",
                    )
                    raise _written(timeout, written)
                wait = min(wait, _WAKE)
            if poller is None:
                if on_block is not None:
                    on_block()
                poller = select.poll()
                poller.register(fd, select.POLLOUT)
            for _, events in poller.poll(math.ceil(wait * 1000)):
                if events & select.POLLNVAL:
                    raise OSError(errno.EBADF, f"fd {fd} was closed during the write")


_E = TypeVar("_E", bound=OSError)


def _written(exc: _E, written: int) -> _E:
    exc.characters_written = written  # type: ignore[attr-defined]  # typeshed: BlockingIOError only
    return exc


# --------------------------------------------------------------------------------------------
# exit status
#
# Without gevent we are the only reaper: ``waitid(WNOWAIT)`` sees the leader's exit and leaves it
# a zombie, which pins the group id until we reap it. Under gevent's monkey-patching,
# ``os.posix_spawn`` registers the child with gevent's child watcher: libev reaps it when the hub
# runs, and the patched ``os.waitpid`` hands us the status it kept. So every status is collected
# through ``os.waitpid`` (patched or not), and ``waitid`` is only used to look.


def poll_exit(child: ChildProcess) -> int | None:
    """Reap ``child`` if it has exited (never blocks); its returncode, or None while it runs.

    Under gevent the status arrives once the hub has run after the exit, so this may return
    None for a moment after the process died; ``wait_exit`` waits for it.
    """
    with child.lock:
        return _reap_locked(child)


def wait_exit(child: ChildProcess, timeout: float) -> int | None:
    """Wait up to ``timeout`` seconds for ``child`` to exit and reap it; None if still running."""
    if _wait_leader(child, timeout):
        return _collect(child)
    return None


def _reap_locked(child: ChildProcess) -> int | None:
    if child.returncode is not None:
        return child.returncode
    if _unreaped_locked(child) is False:
        return None
    reaper.forget(child.pgid)  # before the reap frees the group id
    try:
        pid, status = os.waitpid(child.pid, os.WNOHANG)
    except ChildProcessError:  # reaped by someone else without keeping the status
        child.returncode = 0
        return 0
    if pid == 0:
        return None
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode


def _unreaped_locked(child: ChildProcess) -> bool | None:
    """Look without reaping: True if the leader exited and is a zombie, False if it runs, None
    if it has been reaped (by us, or by gevent's child watcher) or cannot be looked at."""
    if child.returncode is not None:
        return None
    waitid = getattr(os, "waitid", None)
    if waitid is None:
        return None
    try:
        info = waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    return info is not None


def _leader_exited(child: ChildProcess) -> bool:
    """True once the leader has exited; where possible it is left unreaped (a zombie)."""
    with child.lock:
        if child.returncode is not None:
            return True
        zombie = _unreaped_locked(child)
        if zombie is not None:
            return zombie
        return _reap_locked(child) is not None


def _wait_leader(child: ChildProcess, timeout: float) -> bool:
    """Wait up to ``timeout`` for the leader to exit (without reaping it); True if it has."""
    deadline = time.monotonic() + max(0.0, timeout)
    nap = 0.001
    poller: select.poll | None = None
    if child.pidfd is not None and not child.is_closed("pidfd"):
        poller = select.poll()
        poller.register(child.pidfd, select.POLLIN)
    while True:
        if _leader_exited(child):
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        if poller is not None and not poller.poll(math.ceil(min(remaining, _WAKE) * 1000)):
            continue
        # No pidfd, or it says the process exited but the status is not ours yet (under
        # gevent it comes when the hub has run): check again shortly.
        time.sleep(min(nap, max(0.0, deadline - time.monotonic())))
        nap = min(nap * 2, _MAX_NAP)


def _collect(child: ChildProcess) -> int:
    """Reap a leader known to have exited. Under gevent this waits for the hub to hand over the
    status (at most ``KILL_WAIT``, then the unpatched ``waitpid`` takes it)."""
    deadline = time.monotonic() + KILL_WAIT
    nap = 0.0005
    while (code := poll_exit(child)) is None:
        if time.monotonic() >= deadline:
            with child.lock:
                return _reap_unpatched_locked(child)
        time.sleep(nap)
        nap = min(nap * 2, _MAX_NAP)
    return code


def _reap_unpatched_locked(child: ChildProcess) -> int:
    monkey = sys.modules.get("gevent.monkey")
    waitpid = os.waitpid if monkey is None else monkey.get_original("os", "waitpid")
    reaper.forget(child.pgid)
    try:
        _, status = waitpid(child.pid, 0)
    except ChildProcessError:
        child.returncode = 0
    else:
        child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode


# --------------------------------------------------------------------------------------------
# process group and termination


def group_alive(child: ChildProcess) -> bool:
    """True while a process of the child's group is still running.

    Zombies do not count: an orphaned grandchild that has died stays in the group until init
    reaps it, which some container inits do lazily. Where there is no ``/proc`` to tell zombies
    apart, any member counts (the leader until it is reaped).
    """
    return _group_running(child.pgid)


def _group_running(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we may not signal still exists
        pass
    running = _running_member(pgid)
    return True if running is None else running


def _running_member(pgid: int) -> bool | None:
    """Whether /proc lists a process of group ``pgid`` that is not a zombie; None without /proc."""
    try:
        entries = os.scandir("/proc")
    except OSError:
        return None
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    line = f.read()
            except OSError:  # gone meanwhile, or hidden
                continue
            # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
            fields = line[line.rindex(b")") + 2 :].split(b" ", 3)
            if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                return True
    return False


def terminate(child: ChildProcess, *, grace: float = 2.0, term_wait: float = 2.0) -> int:
    """End ``child`` and its process group; return its returncode. Idempotent.

    Close stdin, wait up to ``grace`` for the leader to exit, then SIGTERM the group, wait up to
    ``term_wait``, then SIGKILL the group. Once the leader has exited, whatever is left of its
    group (grandchildren) gets SIGTERM, up to ``term_wait`` from the group's SIGTERM, and then
    SIGKILL. Takes at most ``grace + 2 * term_wait`` plus ``KILL_WAIT`` for each SIGKILL that
    does not work at once. Every parent fd is closed afterwards. Raises ``TimeoutError`` only if
    the leader survives SIGKILL (uninterruptible sleep); its fds are closed even then.
    """
    try:
        close_fds(child, "stdin")
        term_sent: float | None = None
        if not _wait_leader(child, grace):
            _signal_group(child, signal.SIGTERM)
            term_sent = time.monotonic()
            if not _wait_leader(child, term_wait):
                _signal_group(child, signal.SIGKILL)
                if not _wait_leader(child, KILL_WAIT):
                    raise TimeoutError(
                        errno.ETIMEDOUT,
                        f"process {child.pid} ({child.argv[0]}) did not exit after SIGKILL",
                    )
        _end_group(child, term_sent, term_wait)
        return _collect(child)
    finally:
        close_fds(child)


def _signal_group(child: ChildProcess, sig: int) -> bool:
    """Signal the child's group while its id is known to be ours; True if signalled.

    The id is pinned by the unreaped leader (checked and signalled under the lock, with no
    yield in between, so neither we nor gevent's watcher reap it meanwhile), or else by members
    of the group still running.
    """
    with child.lock:
        if child.returncode is None and _unreaped_locked(child) is not None:
            _killpg(child.pgid, sig)
            return True
    if not _group_running(child.pgid):
        return False
    _killpg(child.pgid, sig)
    return True


def _killpg(pgid: int, sig: int) -> None:
    """Signal the group; SIGTERM is followed by SIGCONT so that stopped members act on it."""
    for each in (sig, signal.SIGCONT) if sig == signal.SIGTERM else (sig,):
        try:
            os.killpg(pgid, each)
        except (ProcessLookupError, PermissionError):
            return


def _end_group(child: ChildProcess, term_sent: float | None, term_wait: float) -> None:
    """The leader has exited: SIGTERM, then SIGKILL, whatever is left of its group."""
    if term_sent is None and _signal_group(child, signal.SIGTERM):
        term_sent = time.monotonic()
    _collect(child)  # reap the leader: from now on killpg(pgid, 0) tells whether members remain
    if term_sent is None:  # the leader was reaped already and nothing of the group runs
        return
    if _wait_group_gone(child, term_sent + term_wait):
        return
    if _signal_group(child, signal.SIGKILL):
        _wait_group_gone(child, time.monotonic() + KILL_WAIT)


def _wait_group_gone(child: ChildProcess, deadline: float) -> bool:
    """Wait until nothing of the (reaped leader's) group runs, or the deadline."""
    nap = 0.001
    while True:
        _reap_group_children(child)
        if not _group_running(child.pgid):
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(nap, remaining))
        nap = min(nap * 2, _MAX_NAP)


def _reap_group_children(child: ChildProcess) -> None:
    """Reap members of the group that became our children (we are init or a subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-child.pgid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
