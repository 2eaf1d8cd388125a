"""Spawning and ending stdio server processes (reference (e) "stdio transport": the client launches
the server as a subprocess; shutdown closes stdin, waits, then SIGTERM, then SIGKILL;
runtime-costs §3: spawn with os.posix_spawn, not fork).

Real child processes only (tests/servers/proc_*.py). Every test ends with no child of ours left
and nothing left in the process groups it created, checked through /proc.
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from snodo.protocol.errors import CONNECTION_CLOSED, McpError
from snodo.transports import process
from snodo.transports.process import ChildProcess

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self/fd"), reason="checks children and fds through /proc (Linux)"
)

SERVERS = Path(__file__).resolve().parent / "servers"
PYTHON = sys.executable
DEADLINE = 20.0  # generous bound for anything a child does (CI boxes are slow)


# -- /proc helpers ---------------------------------------------------------------------------


def _procs() -> list[tuple[int, int, int, str]]:
    """(pid, ppid, pgid, state) of every process visible in /proc."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat_line = f.read()
        except OSError:
            continue
        fields = stat_line[stat_line.rindex(b")") + 2 :].split()
        found.append((int(name), int(fields[1]), int(fields[2]), fields[0].decode()))
    return found


def _state(pid: int) -> str | None:
    """The /proc state letter of ``pid``, or None once it is gone."""
    return next((p[3] for p in _procs() if p[0] == pid), None)


def _children_of_us() -> set[int]:
    me = os.getpid()
    return {pid for pid, ppid, _, _ in _procs() if ppid == me}


def _in_group(pgid: int) -> list[tuple[int, int, int, str]]:
    """Processes of group ``pgid`` that are still ours to end: running ones, and zombies whose
    parent is us. A dead orphan stays a zombie until init reaps it, which is init's business
    (this box's init reaps lazily, about once a second)."""
    me = os.getpid()
    return [p for p in _procs() if p[2] == pgid and (p[3] != "Z" or p[1] == me)]


def _open_fds() -> set[int]:
    fds = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            os.fstat(int(name))
        except OSError:
            continue
        fds.add(int(name))
    return fds


def _eventually(predicate: Callable[[], bool], timeout: float = DEADLINE) -> bool:
    """Re-check ``predicate`` until it holds or ``timeout`` passes (under gevent, os.close takes
    effect when the hub next runs, so fd checks need the hub to get a turn)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)
    return True


# -- children --------------------------------------------------------------------------------


class Children:
    """Spawns through ``process.spawn`` and remembers every child and process group."""

    def __init__(self) -> None:
        self.spawned: list[ChildProcess] = []

    def spawn(self, script: str, *args: str, **kwargs: Any) -> ChildProcess:
        child = process.spawn(PYTHON, [str(SERVERS / script), *args], **kwargs)
        self.spawned.append(child)
        return child

    def add(self, child: ChildProcess) -> ChildProcess:
        self.spawned.append(child)
        return child


@pytest.fixture
def children() -> Iterator[Children]:
    """Every test ends with no child of ours and no member of any group it created."""
    before = _children_of_us()
    kids = Children()
    yield kids
    leftovers = [c for c in kids.spawned if c.returncode is None]
    for child in kids.spawned:  # also ends groups left behind by an exited leader
        process.terminate(child, grace=0.0, term_wait=1.0)
    assert not leftovers, f"test left children running: {[c.pid for c in leftovers]}"
    assert _children_of_us() - before == set()
    for child in kids.spawned:
        assert _in_group(child.pgid) == []


def _read_until(child: ChildProcess, predicate: Callable[[bytes], bool], fd: int = -1) -> bytes:
    """Read the child's stdout (or ``fd``) until ``predicate(data)`` or EOF, within DEADLINE."""
    fd = child.stdout if fd < 0 else fd
    deadline = time.monotonic() + DEADLINE
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    data = b""
    while not predicate(data):
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no answer from {child.argv} within {DEADLINE}s; got {data!r}"
        poller.poll(int(remaining * 1000) + 1)
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            continue
        if not chunk:
            break
        data += chunk
    return data


def _read_line(child: ChildProcess) -> bytes:
    return _read_until(child, lambda d: d.endswith(b"\n"))


def _read_to_eof(child: ChildProcess) -> bytes:
    return _read_until(child, lambda d: False)


def _info(child: ChildProcess) -> dict[str, Any]:
    info: dict[str, Any] = json.loads(_read_line(child))
    return info


# -- spawn -----------------------------------------------------------------------------------


def test_echo_round_trip_through_the_pipes(children: Children) -> None:
    """Messages go in on the child's stdin and come back on its stdout."""
    child = children.spawn("proc_echo.py")
    assert child.argv == (PYTHON, str(SERVERS / "proc_echo.py"))
    process.write_all(child.stdin, b'{"jsonrpc":"2.0","id":1}\n', time.monotonic() + DEADLINE)
    assert _read_line(child) == b'{"jsonrpc":"2.0","id":1}\n'
    assert process.terminate(child) == 0


def test_child_leads_its_own_process_group(children: Children) -> None:
    """setpgroup=0: the child's pgid is its pid (so the group can be signalled as a whole)."""
    child = children.spawn("proc_info.py")
    info = _info(child)
    assert info["pid"] == child.pid == child.pgid == info["pgid"]
    assert os.getpgid(0) != child.pgid
    assert process.wait_exit(child, DEADLINE) == 0
    process.close_fds(child)


def test_parent_ends_are_non_blocking_and_not_inheritable(children: Children) -> None:
    child = children.spawn("proc_echo.py")
    for fd in (child.stdin, child.stdout, child.stderr):
        assert not os.get_blocking(fd)
        assert not os.get_inheritable(fd)
    if hasattr(os, "pidfd_open"):
        assert child.pidfd is not None
    assert process.terminate(child) == 0


def test_child_sees_only_fds_0_1_2(children: Children) -> None:
    """No fd of the parent leaks into the child, not even one marked inheritable."""
    r, w = os.pipe()
    os.set_inheritable(r, True)
    os.set_inheritable(w, True)
    try:
        plain = children.spawn("proc_info.py")
        assert _info(plain)["fds"] == [0, 1, 2]
        in_dir = children.spawn("proc_info.py", cwd="/")
        assert _info(in_dir)["fds"] == [0, 1, 2]
    finally:
        os.close(r)
        os.close(w)
    for child in (plain, in_dir):
        assert process.terminate(child) == 0


def test_child_starts_with_default_signal_state(children: Children) -> None:
    """SIGPIPE is back to default (Python ignores it) and no signal is blocked in the child,
    even when the spawning thread blocks one."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        child = children.add(process.spawn("cat", ["/proc/self/status"]))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    status = dict(
        line.split(":\t", 1) for line in _read_to_eof(child).decode().splitlines() if ":\t" in line
    )
    ignored = int(status["SigIgn"], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1))
    assert int(status["SigBlk"], 16) == 0
    assert process.terminate(child) == 0


def test_env_overlays_the_parent_environment_and_none_unsets(
    children: Children, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Elixir notes (Stdio transport details): ``env`` overlays; a nil value unsets a variable."""
    monkeypatch.setenv("SNODO_T_KEPT", "parent")
    monkeypatch.setenv("SNODO_T_GONE", "parent")
    monkeypatch.setenv("SNODO_T_OVER", "parent")
    names = ("SNODO_T_KEPT", "SNODO_T_GONE", "SNODO_T_OVER", "SNODO_T_NEW")
    env = {"SNODO_T_GONE": None, "SNODO_T_OVER": "child", "SNODO_T_NEW": "new"}
    for cwd in (None, "/"):
        child = children.spawn("proc_info.py", *names, env=env, cwd=cwd)
        assert _info(child)["env"] == {
            "SNODO_T_KEPT": "parent",
            "SNODO_T_GONE": None,
            "SNODO_T_OVER": "child",
            "SNODO_T_NEW": "new",
        }
        assert process.terminate(child) == 0
    inherited = children.spawn("proc_info.py", *names)
    assert _info(inherited)["env"]["SNODO_T_GONE"] == "parent"
    assert process.terminate(inherited) == 0


def test_bad_env_names_are_refused_before_anything_is_opened() -> None:
    before = _open_fds()
    for bad in ("", "A=B"):
        with pytest.raises(ValueError):
            process.spawn(PYTHON, ["-c", "pass"], env={bad: "x"})
    assert _eventually(lambda: _open_fds() == before)


def test_cwd_runs_the_command_in_that_directory(children: Children, tmp_path: Path) -> None:
    """``cwd``: the child runs there, keeps the pid and group it was spawned with, and argv."""
    child = children.spawn("proc_info.py", "x", cwd=str(tmp_path))
    info = _info(child)
    assert info["cwd"] == os.path.realpath(tmp_path)
    assert info["pid"] == child.pid == info["pgid"]
    assert info["argv"] == [str(SERVERS / "proc_info.py"), "x"]
    assert process.terminate(child) == 0


def test_cwd_relative_command_and_relative_cwd(
    children: Children, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command with a slash is found relative to ``cwd`` (as subprocess does), and a relative
    ``cwd`` is relative to the parent's working directory."""
    (tmp_path / "sub").mkdir()
    script = tmp_path / "sub" / "where.sh"
    script.write_text('#!/bin/sh\npwd -P\necho "$0" "$@"\n')
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    child = children.add(process.spawn("./where.sh", ["a b"], cwd="sub"))
    lines = _read_to_eof(child).decode().splitlines()
    assert lines[0] == os.path.realpath(tmp_path / "sub")
    assert lines[1].endswith("where.sh a b")
    assert process.terminate(child) == 0


def test_path_lookup_uses_the_child_environment(children: Children, tmp_path: Path) -> None:
    """A bare command name is searched in the PATH the child gets (``env`` applied)."""
    tool = tmp_path / "snodo-t-tool"
    tool.write_text("#!/bin/sh\necho found\n")
    tool.chmod(0o755)
    child = children.add(process.spawn("snodo-t-tool", env={"PATH": f"/nonexistent:{tmp_path}"}))
    assert _read_to_eof(child) == b"found\n"
    assert process.terminate(child) == 0


def _spawn_error(command: str, args: list[str] | None = None, **kwargs: Any) -> McpError:
    fds, kids = _open_fds(), _children_of_us()
    with pytest.raises(McpError) as info:
        process.spawn(command, args or [], **kwargs)
    assert _eventually(lambda: _open_fds() == fds), "spawn leaked an fd on failure"
    assert _children_of_us() == kids
    error = info.value
    assert error.code == CONNECTION_CLOSED
    assert error.kind == "transport"
    assert command in error.message
    return error


def test_missing_command_is_a_transport_error_naming_it() -> None:
    """A command that cannot be started: -32000, kind transport, the command and the OS error."""
    error = _spawn_error("snodo-no-such-command")
    assert error.cause == ("spawn_failed", errno.ENOENT)
    assert "No such file or directory" in error.message
    error = _spawn_error("/nonexistent/snodo-server")
    assert error.cause == ("spawn_failed", errno.ENOENT)


def test_missing_command_with_cwd_is_reported_at_spawn(tmp_path: Path) -> None:
    error = _spawn_error("snodo-no-such-command", cwd=str(tmp_path))
    assert error.cause == ("spawn_failed", errno.ENOENT)
    error = _spawn_error("./absent.sh", cwd=str(tmp_path))
    assert error.cause == ("spawn_failed", errno.ENOENT)


def test_non_executable_command_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain.sh"
    plain.write_text("#!/bin/sh\n")
    plain.chmod(stat.S_IRUSR | stat.S_IWUSR)
    if os.access(plain, os.X_OK):  # root may execute anything with an x bit; there is none here
        pytest.skip("running with CAP_DAC_OVERRIDE and an x bit")
    error = _spawn_error(str(plain))
    assert error.cause == ("spawn_failed", errno.EACCES)
    assert "Permission denied" in error.message
    error = _spawn_error(str(tmp_path))  # a directory
    assert error.cause == ("spawn_failed", errno.EACCES)


def test_bad_cwd_is_reported_clearly(tmp_path: Path) -> None:
    """A missing cwd, or one that is a file, fails at spawn with the directory in the message."""
    missing = str(tmp_path / "missing")
    error = _spawn_error(PYTHON, ["-c", "pass"], cwd=missing)
    assert error.cause == ("spawn_failed", errno.ENOENT)
    assert missing in error.message and "working directory" in error.message
    a_file = tmp_path / "file"
    a_file.write_text("")
    error = _spawn_error(PYTHON, ["-c", "pass"], cwd=str(a_file))
    assert error.cause == ("spawn_failed", errno.ENOTDIR)


def test_spawn_works_when_the_parent_has_closed_its_stdio(children: Children) -> None:
    """With fds 0..2 closed in the parent, the new pipes may get those numbers; the child's
    stdio must still be the pipes."""
    spawner = children.spawn("proc_spawner.py")
    assert process.wait_exit(spawner, DEADLINE) == 0
    process.close_fds(spawner)


def _in_native_thread(fn: Callable[[], int]) -> int:
    """Run ``fn`` in an OS thread (under gevent: the hub's thread pool, a hub of its own)."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        import gevent

        result: int = gevent.get_hub().threadpool.apply(fn)
        return result
    results: list[int] = []
    thread = threading.Thread(target=lambda: results.append(fn()))
    thread.start()
    thread.join(DEADLINE)
    assert results, "the thread did not finish"
    return results[0]


def test_spawn_and_terminate_from_an_os_thread(children: Children) -> None:
    """Spawning from a native thread works in both modes. Under gevent child watchers exist only
    on the main hub's loop, so the unpatched posix_spawn is used there; once gevent's child
    watcher is active it may reap that child first, and the status is then lost (0, as
    subprocess reports it), which process.py documents."""
    spawned: list[ChildProcess] = []

    def run() -> int:
        child = children.spawn("proc_echo.py", "6")
        spawned.append(child)
        return process.terminate(child)

    code = _in_native_thread(run)
    assert code == spawned[0].returncode
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("os"):
        assert code in (6, 0)
    else:
        assert code == 6


# -- waiting ---------------------------------------------------------------------------------


def test_poll_and_wait_exit_on_a_running_child_return_none_within_the_timeout(
    children: Children,
) -> None:
    child = children.spawn("proc_stubborn.py")
    assert _read_line(child) == b"ready\n"
    assert process.poll_exit(child) is None
    started = time.monotonic()
    assert process.wait_exit(child, 0.2) is None
    assert 0.15 <= time.monotonic() - started < 5
    assert child.returncode is None
    assert process.group_alive(child)
    assert process.terminate(child, grace=0.0) == -signal.SIGTERM


def test_wait_exit_reaps_and_reports_the_exit_status(children: Children) -> None:
    """The status is the server's own exit code (also under gevent, whose child watcher reaps
    the child and hands the status to the patched waitpid)."""
    child = children.spawn("proc_echo.py", "7")
    process.close_fds(child, "stdin")
    assert process.wait_exit(child, DEADLINE) == 7
    assert child.returncode == 7
    assert process.poll_exit(child) == 7
    assert not process.group_alive(child)
    assert process.terminate(child) == 7


def test_wait_exit_without_a_pidfd(children: Children) -> None:
    """The fallback wait (no pidfd: older kernels, other systems) sees the exit too."""
    child = children.spawn("proc_echo.py", "5")
    process.close_fds(child, "pidfd")
    assert child.is_closed("pidfd")
    process.close_fds(child, "stdin")
    assert process.wait_exit(child, DEADLINE) == 5
    assert process.poll_exit(child) == 5
    assert process.terminate(child) == 5


# -- terminate -------------------------------------------------------------------------------


def test_terminate_fast_path_child_exits_when_stdin_closes(children: Children) -> None:
    """Shutdown step 1: closing stdin is enough for a well-behaved server; no signal is sent."""
    child = children.spawn("proc_echo.py")
    started = time.monotonic()
    assert process.terminate(child, grace=DEADLINE) == 0
    assert time.monotonic() - started < DEADLINE
    assert child.returncode == 0
    assert _in_group(child.pgid) == []


def test_terminate_sends_sigterm_to_a_child_that_ignores_stdin_eof(children: Children) -> None:
    """Shutdown step 2: after the grace period, SIGTERM."""
    child = children.spawn("proc_stubborn.py")
    assert _read_line(child) == b"ready\n"
    started = time.monotonic()
    assert process.terminate(child, grace=0.2, term_wait=DEADLINE) == -signal.SIGTERM
    elapsed = time.monotonic() - started
    assert 0.15 <= elapsed < 0.2 + DEADLINE
    assert _in_group(child.pgid) == []


def test_terminate_kills_a_child_that_ignores_sigterm(children: Children) -> None:
    """Shutdown step 3: SIGKILL after term_wait; the total stays within grace + 2 * term_wait
    plus a small margin."""
    child = children.spawn("proc_stubborn.py", "--ignore-term")
    assert _read_line(child) == b"ready\n"
    started = time.monotonic()
    assert process.terminate(child, grace=0.2, term_wait=0.3) == -signal.SIGKILL
    elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 0.2 + 2 * 0.3 + 1.0
    assert _in_group(child.pgid) == []


def test_terminate_ends_a_grandchild_that_ignores_sigterm(children: Children) -> None:
    """The leader exits on stdin EOF, but its grandchild ignores SIGTERM: after terminate no
    process of the group remains."""
    child = children.spawn("proc_grandchild.py", "stay")
    grandchild = int(_read_line(child))
    assert (grandchild, child.pgid) in [(p[0], p[2]) for p in _procs()]
    started = time.monotonic()
    assert process.terminate(child, grace=DEADLINE, term_wait=0.3) == 0
    # The leader exits at once on EOF; the grandchild costs term_wait, then SIGKILL.
    assert 0.25 <= time.monotonic() - started < 0.3 + 2.0
    assert _in_group(child.pgid) == []
    assert _state(grandchild) in (None, "Z")  # dead (a zombie until init reaps it)


def test_terminate_ends_a_group_whose_leader_already_exited_and_was_reaped(
    children: Children,
) -> None:
    """The leader exits at once leaving a grandchild; the caller reaps the leader first. The
    group is still ended: killpg only after killpg(pgid, 0) shows members pinning the id."""
    child = children.spawn("proc_grandchild.py", "leave")
    grandchild = int(_read_line(child))
    assert process.wait_exit(child, DEADLINE) == 0
    assert [p[0] for p in _in_group(child.pgid) if p[3] != "Z"] == [grandchild]
    assert process.group_alive(child)
    assert process.terminate(child, grace=0.0, term_wait=0.3) == 0
    assert not process.group_alive(child)
    assert _in_group(child.pgid) == []


def test_terminate_continues_a_stopped_leader_so_it_can_handle_sigterm(
    children: Children,
) -> None:
    """A stopped leader cannot see stdin EOF or act on SIGTERM; terminate sends SIGCONT after
    SIGTERM, so it dies of the SIGTERM, and the grandchild that ignores SIGTERM is killed."""
    child = children.spawn("proc_grandchild.py", "stay")
    grandchild = int(_read_line(child))
    os.kill(child.pid, signal.SIGSTOP)
    assert process.terminate(child, grace=0.1, term_wait=0.5) == -signal.SIGTERM
    assert _in_group(child.pgid) == []
    assert _state(grandchild) in (None, "Z")  # dead (a zombie until init reaps it)


def test_stdout_closed_early_and_terminate_closes_each_fd_once(children: Children) -> None:
    """The server closes stdout but keeps running: the reader sees EOF, closes its end through
    close_fds, and terminate closes the rest exactly once."""
    select.poll().poll(0)  # let gevent create its hub fds before the fd baseline
    before = _open_fds()
    child = children.spawn("proc_close_stdout.py")
    assert _read_to_eof(child) == b""
    process.close_fds(child, "stdout")
    assert child.is_closed("stdout") and not child.is_closed("stderr")
    assert process.poll_exit(child) is None
    assert process.terminate(child) == 3
    assert all(child.is_closed(name) for name in ("stdin", "stdout", "stderr", "pidfd"))
    process.close_fds(child)
    assert process.terminate(child) == 3  # idempotent
    assert _eventually(lambda: _open_fds() == before)


# -- write_all -------------------------------------------------------------------------------


def test_write_all_times_out_against_a_child_that_never_reads(children: Children) -> None:
    """A server that does not read its stdin: the write stops at the deadline, saying how much
    went through."""
    child = children.spawn("proc_stubborn.py")
    assert _read_line(child) == b"ready\n"
    data = b"x" * (4 << 20)
    started = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        process.write_all(child.stdin, data, started + 0.2)
    elapsed = time.monotonic() - started
    assert 0.15 <= elapsed < 5
    written = getattr(info.value, "characters_written", None)
    assert isinstance(written, int)
    assert 0 < written < len(data)
    assert f"{written} of {len(data)} bytes" in str(info.value)
    assert process.terminate(child, grace=0.0) == -signal.SIGTERM


def test_write_all_with_a_past_deadline_still_writes_what_fits(children: Children) -> None:
    child = children.spawn("proc_echo.py")
    process.write_all(child.stdin, b"now\n", time.monotonic() - 1)
    assert _read_line(child) == b"now\n"
    assert process.terminate(child) == 0


def test_write_all_raises_broken_pipe_after_the_child_exits(children: Children) -> None:
    child = children.spawn("proc_info.py")
    assert process.wait_exit(child, DEADLINE) == 0
    with pytest.raises(BrokenPipeError) as info:
        process.write_all(child.stdin, b"late\n", time.monotonic() + DEADLINE)
    assert getattr(info.value, "characters_written", None) == 0
    assert process.terminate(child) == 0


def test_write_all_without_deadline_delivers_everything(children: Children) -> None:
    """Larger than the pipe buffer: partial writes and waits for writability, all bytes arrive."""
    child = children.spawn("proc_sink.py")
    data = os.urandom(3 << 20)
    process.write_all(child.stdin, data, None)
    process.close_fds(child, "stdin")
    assert _read_line(child) == f"{len(data)}\n".encode()
    assert process.terminate(child) == 0
