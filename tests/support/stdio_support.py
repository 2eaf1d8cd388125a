"""Shared helpers for the stdio client tests: server command lines, waits with deadlines, wire
logs, and a leak check of child processes and file descriptors.

A test module that imports :func:`stdio_warm_up` and :func:`stdio_no_leaks` gets both as autouse
fixtures: the process-wide parts are started before any baseline, and no test leaves a child
process or a file descriptor behind.

Every wait here polls real state (a file, /proc, a predicate) against a deadline; none is a
sleep that stands in for synchronisation.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import snodo
from snodo.testing import leaks
from tests.support.wire_schema import check_client_message, validator

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ROOT / "tests" / "servers"
PYTHON = sys.executable
ALL = list(snodo.SUPPORTED_VERSIONS)
SESSION_ERA = ["2025-11-25", "2025-06-18"]
LATEST = "2026-07-28"

#: How long a leak check waits for fds and children to go.
LEAK_DEADLINE = 5.0

EXAMPLE_RUNTIME = "examples.example_runtime:runtime"


# -- command lines ---------------------------------------------------------------------------


def snodo_server(runtime: str = EXAMPLE_RUNTIME, *, log: Path | None = None) -> snodo.Stdio:
    """``python -m snodo.server RUNTIME`` (run it with ``cwd=ROOT``); ``log`` tees its stdin."""
    command = ["-m", "snodo.server", runtime]
    if log is None:
        return snodo.Stdio(PYTHON, command)
    return snodo.Stdio(PYTHON, [str(SERVERS / "scripted_tee.py"), str(log), PYTHON, *command])


def script(name: str, *args: str) -> snodo.Stdio:
    """One of the scripts in tests/servers/, run by this interpreter."""
    return snodo.Stdio(PYTHON, [str(SERVERS / name), *args])


# -- waiting ---------------------------------------------------------------------------------


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.01) -> Any:
    """Poll ``predicate`` until it returns something truthy; that value, or AssertionError."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true within {timeout}s: {predicate!r}")
        pause.wait(interval)


def elapsed(since: float) -> float:
    return time.monotonic() - since


# -- files the servers write -----------------------------------------------------------------


def read_lines(path: Path) -> list[str]:
    """Complete lines of a file (a line still being written is left out)."""
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return []
    lines = text.split("\n")
    return [line for line in lines[:-1] if line]


def read_messages(path: Path) -> list[dict[str, Any]]:
    """The JSON messages of a wire log (one received line per line)."""
    messages = []
    for line in read_lines(path):
        messages.append(json.loads(line))
    return messages


def starts(path: Path) -> list[int]:
    """The pids a server script recorded, one per start."""
    return [int(line) for line in read_lines(path)]


def wait_for_message(
    path: Path, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0
) -> dict[str, Any]:
    """Wait until the wire log at ``path`` holds a message matching ``predicate``."""

    def found() -> dict[str, Any] | None:
        for message in read_messages(path):
            if predicate(message):
                return message
        return None

    result: dict[str, Any] = wait_until(found, timeout)
    return result


def check_wire(path: Path, expected_version: str | None = None) -> list[dict[str, Any]]:
    """Validate every message the client wrote (as logged by a server) against the schema.

    The version of each message follows the flow: ``initialize`` names its own version, the
    ``server/discover`` probe is 2026-07-28, and everything after is ``expected_version`` (the
    negotiated one). Answers to server requests are checked as JSON-RPC responses, and as the
    result the request's method expects when it is known.
    """
    messages = read_messages(path)
    assert messages, f"the server logged nothing at {path}"
    version = expected_version or LATEST
    for message in messages:
        if message.get("method") == "initialize":
            check_client_message(message["params"]["protocolVersion"], message)
        elif message.get("method") == "server/discover":
            check_client_message(LATEST, message)
        elif "method" in message:
            check_client_message(version, message)
        else:
            check_response(version, message)
    return messages


_RESULT_DEFINITIONS = {
    "elicitation/create": "ElicitResult",
    "sampling/createMessage": "CreateMessageResult",
    "roots/list": "ListRootsResult",
    "ping": "EmptyResult",
}


def check_response(version: str, message: dict[str, Any], method: str | None = None) -> None:
    """Validate a response the client wrote (to a server request) against ``version``.

    On 2026-07-28 the envelope is checked with 2025-11-25's schema: 2026-07-28's Result requires
    ``resultType``, while the reference says a server ping is answered ``{}``; server requests
    are outside the multi round-trip flow there (see the test report).
    """
    envelope = "2025-11-25" if version == LATEST else version
    validator(envelope, "JSONRPCMessage").validate(message)
    assert "method" not in message
    assert ("result" in message) != ("error" in message), message
    if method is not None and "result" in message:
        definition = _RESULT_DEFINITIONS[method]
        schema_version = envelope if definition == "EmptyResult" else version
        validator(schema_version, definition).validate(message["result"])


# -- processes ---------------------------------------------------------------------------

# One implementation of the leak accounting: snodo.testing.leaks (the kit applications use).
children = leaks.children
group_members = leaks.group_members
open_fds = leaks.open_fds
pooled_sockets = leaks.pooled_sockets
reaper_pipe = leaks.reaper_pipe


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of a process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2])


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def exists(pid: int) -> bool:
    """True while ``pid`` has a /proc entry (a zombie still has one)."""
    return _stat(pid) is not None


def rss_bytes() -> int:
    """This process's resident set size."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def gone(pid: int) -> bool:
    """True once ``pid`` and every live member of its process group have ended."""
    return not running(pid) and not group_members(pid)


# -- the leak check --------------------------------------------------------------------------


@contextlib.contextmanager
def no_leaks(deadline: float = LEAK_DEADLINE, *, pooled: bool = False) -> Iterator[None]:
    """Fail when the block leaves a child process (or zombie) or a file descriptor behind
    (``snodo.testing.leaks.no_leaks`` for those two kinds; threads and actors are the
    conftest's). With ``pooled``, the idle keep-alive sockets of snodo's process-wide HTTP
    pool are not leaks."""
    with leaks.no_leaks(deadline, pooled=pooled, threads=False, actors=False, grandchildren=False):
        yield


@pytest.fixture(scope="session", autouse=True)
def stdio_warm_up() -> None:
    """Autouse where imported: :func:`warm_up` once, before the first test."""
    warm_up()


@pytest.fixture(autouse=True)
def stdio_no_leaks() -> Iterator[None]:
    """Autouse where imported: :func:`no_leaks` around every test."""
    with no_leaks():
        yield


def warm_up() -> None:
    """Open and close one stdio connection, so that process-wide parts started on first use
    (the supervision root, the I/O hub, gevent's child watcher) exist before any test's
    baseline."""
    try:
        with snodo.connect(script("scripted_server.py"), protocol=LATEST) as client:
            client.call_tool("echo", {"text": "warm"})
    except Exception:  # a broken transport fails the tests themselves, not every setup
        return


def reset_peak_rss() -> None:
    """Reset this process's peak RSS (VmHWM) so that ``peak_rss`` measures from now."""
    Path("/proc/self/clear_refs").write_text("5")


def peak_rss() -> int:
    """This process's peak resident set size since the last ``reset_peak_rss``."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/self/status")
