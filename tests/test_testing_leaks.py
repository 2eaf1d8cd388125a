"""snodo.testing.leaks: the leak checker finds what a block deliberately leaves, and says what.

Each kind is left on purpose (a thread, a pipe, a grandchild process, an actor, a zombie child)
and the test asserts that :class:`Leaked` names it in its report; then the test ends it itself.
A block that leaves nothing, or whose leftovers go within the deadline, passes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Any

import pytest

import snodo
from snodo.supervision import Actor, green_mode, stop
from snodo.testing import Leaked, LeakReport, no_leaks, serve_stdio, warm_up
from snodo.testing.leaks import Baseline, command_line, find_leaks

#: A leak check's deadline in these tests: short, the leaks here are meant to stay.
SHORT = 0.3
WAIT = 10.0

# A child that starts a sleeping grandchild, prints its pid and exits (leaving it an orphan).
GRANDCHILD = (
    "import subprocess, sys; "
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)  # grandchild'], "
    "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
    "print(p.pid, flush=True)"
)


class Idle(Actor):
    def on_receive(self, message: Any) -> Any:
        return None


@pytest.fixture(scope="module", autouse=True)
def warm() -> None:
    warm_up()


def wait_gone(pid: int) -> None:
    end = threading.Event()
    for _ in range(int(WAIT / 0.01)):
        if not command_line(pid) or command_line(pid).startswith("["):
            return
        end.wait(0.01)
    raise AssertionError(f"{pid} still running")


def test_a_block_that_leaves_nothing_passes_and_its_report_is_empty() -> None:
    with no_leaks(SHORT) as baseline:
        r, w = os.pipe()
        os.close(r)
        os.close(w)
    assert not baseline.report()
    assert str(LeakReport()) == "nothing"


def test_what_ends_within_the_deadline_is_waited_for_not_reported() -> None:
    """The checker joins a thread that is still ending and waits on an actor that is stopping."""
    go = threading.Event()
    worker = threading.Thread(target=go.wait, args=(WAIT,), name="ending-soon")
    with no_leaks(WAIT):
        worker.start()
        ref = Idle.start()
        ref.stop(block=False)
        go.set()
    assert not worker.is_alive()


def test_a_leaked_thread_is_reported_by_name() -> None:
    release = threading.Event()
    worker = threading.Thread(target=release.wait, args=(WAIT,), name="left-behind")
    try:
        with pytest.raises(Leaked) as leaked, no_leaks(SHORT):
            worker.start()
        assert leaked.value.report.threads == ["left-behind"]
        assert "threads: left-behind" in str(leaked.value)
        assert isinstance(leaked.value, AssertionError)
    finally:
        release.set()
        worker.join(WAIT)


def test_a_leaked_fd_is_reported_with_what_it_points_at() -> None:
    with pytest.raises(Leaked) as leaked, no_leaks(SHORT):
        r, w = os.pipe()
    try:
        fds = leaked.value.report.fds
        assert set(fds) == {r, w}
        assert fds[r].startswith("pipe:[") and fds[r] == fds[w]
    finally:
        os.close(r)
        os.close(w)


def test_a_leaked_grandchild_process_is_reported_with_its_command_line() -> None:
    """The child exits and is reaped; its child lives on (an orphan in our session)."""
    with pytest.raises(Leaked) as leaked, no_leaks(SHORT):
        child = subprocess.run(
            [sys.executable, "-c", GRANDCHILD], capture_output=True, check=True, timeout=WAIT
        )
        grandchild = int(child.stdout)
    try:
        processes = leaked.value.report.processes
        # another test's process that is still ending can be seen too (side-by-side runs)
        assert grandchild in processes
        assert "# grandchild" in processes[grandchild]
    finally:
        os.kill(grandchild, signal.SIGKILL)
        wait_gone(grandchild)


# A sibling of the checking process: on a first line it starts a sleeper, prints its pid, and on
# a second line it kills it.
SIBLING = (
    "import subprocess, sys; sys.stdin.readline(); "
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)  # sibling']); "
    "print(p.pid, flush=True); sys.stdin.readline(); p.kill(); p.wait()"
)
# The checking process: no_leaks over a block that waits for a line.
CHECKER = (
    "import sys; from snodo.testing.leaks import no_leaks\n"
    "with no_leaks(0.3, threads=False, fds=False, actors=False):\n"
    "    print('checking', flush=True); sys.stdin.readline()\n"
)


def talking(command: list[str]) -> subprocess.Popen[str]:
    """``command`` with its stdin, stdout and stderr piped as text."""
    return subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_process_that_a_sibling_starts_during_the_block_is_not_a_leak() -> None:
    """Side-by-side runs share a session and a process group: a process started meanwhile by a
    sibling (another suite's server) is the sibling's, not an orphan of the checking process."""
    sibling = talking([sys.executable, "-c", SIBLING])
    checker = talking([sys.executable, "-c", CHECKER])
    try:
        assert checker.stdin and checker.stdout and sibling.stdin and sibling.stdout
        assert checker.stdout.readline() == "checking\n"
        sibling.stdin.write("start\n")
        sibling.stdin.flush()
        started = int(sibling.stdout.readline())
        _, err = checker.communicate("done\n", timeout=WAIT)
        assert checker.returncode == 0, err  # old rule: "leaked ... processes: <started>"
        assert str(started) not in err
    finally:
        for process in (checker, sibling):
            if process.poll() is None:
                process.communicate("end\n", timeout=WAIT)


@pytest.mark.skipif(green_mode(), reason="gevent's child watcher reaps every child itself")
def test_a_zombie_child_is_a_leak() -> None:
    """A child that exited but was never reaped is a process left behind."""
    with pytest.raises(Leaked) as leaked, no_leaks(SHORT):
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        pid = child.pid
        baseline_wait = threading.Event()
        for _ in range(int(WAIT / 0.01)):  # until it has exited (a zombie), without reaping
            if command_line(pid).startswith("[") or not command_line(pid):
                break
            baseline_wait.wait(0.01)
    try:
        # another test's process that is still ending can be seen too: the checker is right to
        # name it, and this test asks only that the zombie is named
        assert pid in leaked.value.report.processes
    finally:
        child.wait(WAIT)


def test_a_leaked_actor_is_reported_and_stopped() -> None:
    with pytest.raises(Leaked) as leaked, no_leaks(SHORT):
        ref = Idle.start()
    assert leaked.value.report.actors == [f"Idle ({ref.actor_urn})"]
    assert stop(ref, timeout=WAIT)  # cleanup=True already stopped it


def test_every_kind_left_at_once_is_in_one_report() -> None:
    release = threading.Event()
    worker = threading.Thread(target=release.wait, args=(WAIT,), name="all-kinds")
    baseline = Baseline()
    worker.start()
    r, w = os.pipe()
    ref = Idle.start()
    child = subprocess.run(
        [sys.executable, "-c", GRANDCHILD], capture_output=True, check=True, timeout=WAIT
    )
    grandchild = int(child.stdout)
    try:
        report = find_leaks(baseline, SHORT)
        assert "all-kinds" in report.threads  # (the actor's own thread is there too)
        assert set(report.fds) == {r, w}
        assert grandchild in report.processes  # (another test's ending process may be too)
        assert len(report.actors) == 1
        text = str(report)
        for part in ("all-kinds", f"{r} -> pipe:", f"{grandchild} (", "actors: Idle"):
            assert part in text
    finally:
        release.set()
        worker.join(WAIT)
        os.close(r)
        os.close(w)
        stop(ref, timeout=WAIT)
        os.kill(grandchild, signal.SIGKILL)
        wait_gone(grandchild)


def test_a_closed_stdio_connection_leaves_nothing_and_an_open_one_is_reported() -> None:
    served = serve_stdio("snodo.testing.servers:empty_runtime")
    with no_leaks():
        with snodo.connect(served.target, protocol="2026-07-28") as client:
            client.call_tool("echo", {"text": "x"})
    with pytest.raises(Leaked) as leaked, no_leaks(SHORT):
        client = snodo.connect(served.target, protocol="2026-07-28")
    try:
        report = leaked.value.report
        assert any("snodo.testing.servers:empty_runtime" in c for c in report.processes.values())
        assert report.fds and report.actors
    finally:
        client.close()


def test_kinds_switched_off_are_not_checked() -> None:
    release = threading.Event()
    worker = threading.Thread(target=release.wait, args=(WAIT,), name="not-counted")
    try:
        with no_leaks(SHORT, threads=False):
            worker.start()
    finally:
        release.set()
        worker.join(WAIT)
