"""The I/O hub's ``call_soon`` and ``Task``'s end: the two seams the stderr tail and the
server-request handlers rely on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

from snodo.interruptible import Task, TaskCancelled
from snodo.transports.io_hub import IoHub

WAIT = 10.0


def test_call_soon_runs_after_the_chunks_the_hub_already_handed_over() -> None:
    """A function queued with ``call_soon`` runs on the hub after the callbacks of what it read,
    so reading the descriptor itself then takes what is left, in order."""
    io = IoHub()
    assert io.call_soon(lambda: None) is False  # nothing watched: the caller reads itself
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    seen: list[bytes] = []
    first = threading.Event()
    ran: list[tuple[threading.Thread, list[bytes]]] = []
    done = threading.Event()
    try:

        def on_data(chunk: bytes) -> None:
            seen.append(chunk)
            first.set()

        io.watch(read_fd, on_data, lambda: None)
        os.write(write_fd, b"one\n")
        assert first.wait(WAIT)

        def drain() -> None:
            ran.append((threading.current_thread(), list(seen)))
            done.set()

        assert io.call_soon(drain) is True
        assert done.wait(WAIT)
        thread, seen_then = ran[0]
        assert thread is io.thread
        assert seen_then == [b"one\n"]
    finally:
        io.unwatch(read_fd)
        os.close(read_fd)
        os.close(write_fd)


def test_on_end_runs_once_the_function_ends_however_it_ends() -> None:
    """Interrupted or not, ``on_end`` runs; an interrupt after the end is refused."""
    ended: list[str] = []
    gate = threading.Event()
    inside = threading.Event()

    def waits() -> None:
        inside.set()
        gate.wait(WAIT)

    task = Task(waits, "test-task", on_end=lambda: ended.append("interrupted"))
    assert inside.wait(WAIT)
    task.interrupt()
    gate.set()
    assert task.join(WAIT)
    assert ended == ["interrupted"]

    quick = Task(lambda: None, "test-task-quick", on_end=lambda: ended.append("quick"))
    assert quick.join(WAIT)
    quick.interrupt()  # refused: the task has ended
    assert ended == ["interrupted", "quick"]


def test_an_interrupt_never_reaches_on_end() -> None:
    """``on_end`` keeps running to its end even when interrupted as the function returns."""
    finished: list[bool] = []
    on_end_started = threading.Event()
    release = threading.Event()

    def on_end() -> None:
        on_end_started.set()
        try:
            release.wait(WAIT)
            finished.append(True)
        except TaskCancelled:  # pragma: no cover - the failure this test exists to catch
            finished.append(False)

    task = Task(lambda: None, "test-task-end", on_end=on_end)
    assert on_end_started.wait(WAIT)
    task.interrupt()
    release.set()
    assert task.join(WAIT)
    assert finished == [True]


def test_a_trace_function_after_tasks_ended_does_not_hang() -> None:
    """CPython 3.11 loops forever on the next call under a trace or profile function (coverage,
    pdb, cProfile) once a thread's asynchronous exception was cleared with NULL; a task's end
    must not leave the interpreter in that state, interrupted or not (a child process, so that
    the failure is a timeout, not a hung suite)."""
    script = textwrap.dedent(
        """
        import sys, threading
        from snodo.interruptible import Task

        inside, gate = threading.Event(), threading.Event()

        def waits():
            inside.set()
            gate.wait(10.0)

        interrupted = Task(waits, "interrupted")
        assert inside.wait(10.0)
        interrupted.interrupt()
        gate.set()
        assert interrupted.join(10.0)
        assert Task(lambda: None, "quick").join(10.0)
        calls = []
        sys.setprofile(lambda frame, event, arg: calls.append(event))
        len([])
        sys.setprofile(None)
        sys.settrace(lambda frame, event, arg: None)
        (lambda: None)()
        sys.settrace(None)
        print("profiled", len(calls) > 0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60.0
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "profiled True"
