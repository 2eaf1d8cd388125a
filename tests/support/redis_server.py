"""A real ``redis-server`` for tests: installed from Debian's packages when missing (see
:mod:`tests.support.system_tools`), started on 127.0.0.1 on a free port with no persistence,
and stopped, killed, paused or restarted on the same port by the test that owns it.

Tests that need one call :func:`redis_server` (a context manager) or use the module-scoped
fixture pattern ``server = request.getfixturevalue(...)``; when the server cannot be had here
(no root to install it) the test is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.system_tools import ensure_program

#: How long a start (until PING answers) or a stop may take.
START_DEADLINE = 10.0
STOP_DEADLINE = 5.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _ping(port: int, timeout: float) -> bool:
    """True when a redis-server on 127.0.0.1:port answers PING within ``timeout``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` child on 127.0.0.1; ``url`` is what a ``redis.Redis`` connects to."""

    def __init__(self, program: str, directory: Path) -> None:
        self.program = program
        self.directory = directory
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = directory / "redis.log"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it (on the same port as before, if it ran) and wait until PING answers."""
        for _attempt in range(3):
            with open(self.log, "ab") as log:
                self.process = subprocess.Popen(
                    [
                        self.program,
                        "--bind",
                        "127.0.0.1",
                        "--port",
                        str(self.port),
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--protected-mode",
                        "yes",
                        "--dir",
                        str(self.directory),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            deadline = time.monotonic() + START_DEADLINE
            while time.monotonic() < deadline and self.process.poll() is None:
                if _ping(self.port, 0.5):
                    return
                time.sleep(0.02)  # polling a port that has no event to wait on
            self._reap()
            if self.process.returncode is not None and self.process.returncode != 0:
                self.port = _free_port()  # the port was taken meanwhile: try another
                continue
            break
        raise RuntimeError(f"redis-server did not start; its log: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after ``STOP_DEADLINE``) and reap it."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGCONT)  # a paused server must see the SIGTERM
        self._reap()

    def kill(self) -> None:
        """Kill it with SIGKILL: what a crash looks like to its clients."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self._reap()

    def pause(self) -> None:
        """SIGSTOP: connections stay open and nothing answers (a slow or hung Redis)."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def restart(self) -> None:
        """Stop it and start it again on the same port (empty: nothing is persisted)."""
        self.stop()
        self.start()

    def _reap(self) -> None:
        assert self.process is not None
        try:
            self.process.wait(STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
            self.process.kill()
            self.process.wait(STOP_DEADLINE)


def redis_program() -> str | None:
    """The path of ``redis-server``, installing Debian's package first when it is missing."""
    return ensure_program("redis-server", "redis-server")


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    """A started ``redis-server`` for the block (the test is skipped when none can be had)."""
    program = redis_program()
    if program is None:
        pytest.skip("redis-server is not installed and cannot be installed here (no root/apt-get)")
    pytest.importorskip("redis", reason="the redis package (extra snodo[redis]) is not installed")
    with tempfile.TemporaryDirectory(prefix="snodo-redis-") as directory:
        server = RedisServer(program, Path(directory))
        server.start()
        try:
            yield server
        finally:
            server.stop()
