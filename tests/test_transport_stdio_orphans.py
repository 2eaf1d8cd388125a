"""stdio servers die with the daemon (decision 0034): when the snodo process dies without closing a
connection (SIGKILL included), its reaper kills the server's process group, grandchildren too.

Real processes only: a parent Python process connects to a server that starts a grandchild; the
test kills the parent and polls /proc until both are gone. In-process tests check the reaper's
registrations and that there is one reaper per process whatever the number of servers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import snodo
from snodo.transports import process, reaper
from tests.support import stdio_support as support

pytestmark = pytest.mark.skipif(not reaper.ENABLED, reason="the reaper is Linux only")

stdio_warm_up = support.stdio_warm_up
stdio_no_leaks = support.stdio_no_leaks

DEADLINE = 20.0  # generous bound for starting Python processes on a slow box
GEVENT = "gevent.monkey" in sys.modules

#: Ignores SIGTERM and stdin EOF (lingers up to 60 s) and starts a grandchild in its process
#: group; ``--pids FILE`` receives "SERVER_PID GRANDCHILD_PID".
SERVER = textwrap.dedent(
    """\
    import os, signal, subprocess, sys, time
    sys.path.insert(0, {servers!r})
    from scripted_lib import Server, main

    def linger(server):
        time.sleep(60)
        os._exit(0)

    def configure(server):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        server.on_eof = linger
        quiet = subprocess.DEVNULL
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            stdin=quiet, stdout=quiet, stderr=quiet,
        )
        with open(server.extra[server.extra.index("--pids") + 1], "w") as f:
            f.write(f"{{os.getpid()}} {{child.pid}}\\n")

    main(configure)
    """
)

#: argv: MODE (threads|gevent) SERVER PIDFILE READYFILE END (wait|exit). Connects, calls a
#: tool, writes READYFILE, then waits to be killed or exits without closing.
PARENT = textwrap.dedent(
    """\
    import os, sys
    if sys.argv[1] == "gevent":
        from gevent import monkey
        monkey.patch_all()
    import snodo

    server, pids, ready, end = sys.argv[2:6]
    client = snodo.connect(
        snodo.Stdio(sys.executable, [server, "--pids", pids]), protocol="2026-07-28"
    )
    client.call_tool("echo", {"text": "up"})
    with open(ready + ".tmp", "w") as f:
        f.write(f"{client.transport.pid}\\n")
    os.rename(ready + ".tmp", ready)
    if end == "exit":
        os._exit(0)
    sys.stdin.read()
    """
)


def reapers_of(owner: int) -> list[int]:
    """Live processes whose command line is the reaper's, for owner pid ``owner``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")[:-1]
        except OSError:
            continue
        if argv[-2:] == [reaper.MARK.encode(), str(owner).encode()] and support.running(int(name)):
            found.append(int(name))
    return found


def stat_fields(pid: int) -> list[str]:
    """(state, ppid, pgrp, session, ...) from /proc/PID/stat."""
    line = Path(f"/proc/{pid}/stat").read_text()
    return line[line.rindex(")") + 2 :].split()


def kill_if_ours(pid: int, pgid: int) -> None:
    """SIGKILL ``pid`` if it still runs in group ``pgid`` (cleanup after a failed assertion)."""
    if support.running(pid) and int(stat_fields(pid)[2]) == pgid:
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def cat_servers() -> Iterator[list[process.ChildProcess]]:
    """Servers spawned with ``process.spawn`` (``cat``), all terminated at the end."""
    spawned: list[process.ChildProcess] = []
    yield spawned
    for child in spawned:
        process.terminate(child, grace=0.0, term_wait=1.0)


# -- the daemon dies -------------------------------------------------------------------------


@pytest.mark.parametrize("end", ["sigkill", "exit"])
@pytest.mark.parametrize("mode", ["threads", "gevent"])
def test_server_and_grandchild_die_with_the_parent(tmp_path: Path, mode: str, end: str) -> None:
    """A parent that dies (SIGKILL) or exits without closing its connection takes the server
    (which ignores SIGTERM and stdin EOF) and the server's grandchild with it."""
    server = tmp_path / "orphan_server.py"
    server.write_text(SERVER.format(servers=str(support.SERVERS)))
    pids, ready = tmp_path / "pids", tmp_path / "ready"
    argv = [sys.executable, "-c", PARENT, mode, str(server), str(pids), str(ready)]
    parent = subprocess.Popen(
        [*argv, "wait" if end == "sigkill" else "exit"], cwd=support.ROOT, stdin=subprocess.PIPE
    )
    server_pid = grandchild = -1
    try:
        support.wait_until(ready.exists, timeout=DEADLINE)
        server_pid, grandchild = (int(word) for word in pids.read_text().split())
        assert int(ready.read_text()) == server_pid
        assert int(stat_fields(grandchild)[2]) == server_pid, "grandchild not in the group"
        if end == "sigkill":
            assert support.running(server_pid) and support.running(grandchild)
            assert len(reapers_of(parent.pid)) == 1
            os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=DEADLINE)
        support.wait_until(lambda: support.gone(server_pid), timeout=DEADLINE)
        assert not support.running(grandchild)
        support.wait_until(lambda: not reapers_of(parent.pid), timeout=DEADLINE)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=DEADLINE)
        assert parent.stdin is not None
        parent.stdin.close()
        for pid in (server_pid, grandchild):
            if pid > 0:
                kill_if_ours(pid, server_pid)


# -- one reaper, registrations ---------------------------------------------------------------


def test_close_unregisters_the_group() -> None:
    """While a connection is open its group is registered with the reaper; close() removes it
    (before the server is reaped) and keeps the reaper."""
    with snodo.connect(support.script("scripted_server.py"), protocol=support.LATEST) as client:
        pid = client.transport.pid
        assert pid in reaper.watched()
        keeper = reaper.reaper_pid()
        assert keeper is not None and support.running(keeper)
    assert pid not in reaper.watched()
    assert reaper.reaper_pid() == keeper and support.running(keeper)


def test_fifty_servers_one_reaper(cat_servers: list[process.ChildProcess]) -> None:
    """Fifty servers at once share one reaper; terminating them unregisters every group and
    leaves that one reaper, which is not our child."""
    for _ in range(50):
        cat_servers.append(process.spawn("cat"))
    groups = {child.pgid for child in cat_servers}
    assert groups <= reaper.watched()
    keeper = reaper.reaper_pid()
    assert reapers_of(os.getpid()) == [keeper]
    for child in cat_servers:
        assert process.terminate(child, grace=0.0, term_wait=1.0) is not None
    assert not groups & reaper.watched()
    assert reapers_of(os.getpid()) == [keeper]
    assert keeper not in support.children()


def test_the_reaper_keeps_nothing_of_ours(cat_servers: list[process.ChildProcess]) -> None:
    """The reaper has its own process group, is not our child, and holds only its pipe (which
    no server holds) and /dev/null."""
    cat_servers.append(process.spawn("cat"))
    keeper = reaper.reaper_pid()
    assert keeper is not None
    _, ppid, pgrp = stat_fields(keeper)[:3]
    assert int(ppid) != os.getpid()
    assert int(pgrp) not in (os.getpgrp(), cat_servers[0].pgid)

    def targets(pid: int) -> dict[int, str]:
        fds = {}
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                fds[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
        return fds

    def settled() -> dict[int, str] | None:
        fds = targets(keeper)  # right after the start it may still hold its starter's pipes
        return fds if set(fds.values()) <= {fds.get(0), "/dev/null"} else None

    held = support.wait_until(settled, timeout=DEADLINE)
    pipe = held[0]
    assert pipe.startswith("pipe:")
    assert pipe in support.open_fds().values(), "our end of the reaper's pipe"
    assert pipe not in targets(cat_servers[0].pid).values()


def test_a_lost_reaper_is_replaced_with_every_group(
    cat_servers: list[process.ChildProcess],
) -> None:
    """When the reaper has gone, the next spawn starts a new one (spawn does not fail) that gets
    every group still registered."""
    cat_servers.append(process.spawn("cat"))
    old = reaper.reaper_pid()
    assert old is not None
    os.kill(old, signal.SIGKILL)  # the reaper our spawn started
    support.wait_until(lambda: not support.running(old), timeout=DEADLINE)
    cat_servers.append(process.spawn("cat"))
    new = reaper.reaper_pid()
    assert new is not None and new != old
    assert {child.pgid for child in cat_servers} <= reaper.watched()
    assert reapers_of(os.getpid()) == [new]


@pytest.mark.skipif(GEVENT, reason="forks the test process; the thread mode run covers it")
def test_a_forked_child_drops_the_reaper() -> None:
    """A forked child holds no end of the reaper's pipe and owns no group."""
    with snodo.connect(support.script("scripted_server.py"), protocol=support.LATEST):
        assert reaper.watched()
        pid = os.fork()
        if pid == 0:  # the child: no Python cleanup, only the exit code says what it saw
            os._exit(0 if reaper.reaper_pid() is None and not reaper.watched() else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert reaper.watched()
