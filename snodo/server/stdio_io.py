"""The stdio server's streams: reading stdin in chunks, writing whole messages to stdout, and
moving the process's own fd 0 and fd 1 aside while they carry the protocol.

While the protocol uses the process's own stdin/stdout, it reads and writes private
close-on-exec duplicates of fd 0 and fd 1; fd 0 then reads the null device, fd 1 writes to
stderr and ``sys.stdout`` is ``sys.stderr``. A stray ``print()`` in a tool, or a child process
a tool starts, therefore cannot corrupt (or read) the protocol stream. Both are restored when
serving ends.

Under gevent the blocking reads of stdin and writes of stdout run on gevent's thread pool, so
the hub (and every worker greenlet) keeps running while the reader waits for input; a socket's
stream is already cooperative there and stays on its hub.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, Final, TypeVar

from snodo.log import get_logger
from snodo.supervision.owner import green_mode

__all__ = ["READ_SIZE", "Writer", "reader", "std_streams"]

#: Bytes asked for per read of stdin.
READ_SIZE: Final = 64 * 1024

_log = get_logger("snodo.server.stdio_server")
_T = TypeVar("_T")
_R = TypeVar("_R")


def _off_hub(fn: Callable[[_T], _R], stream: BinaryIO) -> Callable[[_T], _R]:
    """Under gevent, blocking stream calls run on gevent's thread pool so the hub runs on; a
    socket's stream is already cooperative there (and must stay on its hub's thread)."""
    if not green_mode() or isinstance(getattr(stream, "raw", stream), socket.SocketIO):
        return fn
    import gevent

    pool = gevent.get_hub().threadpool

    def call(arg: _T) -> _R:
        result: _R = pool.apply(fn, (arg,))
        return result

    return call


def reader(stream: BinaryIO) -> Callable[[], bytes]:
    """Reads ``stream`` a chunk at a time (``b""`` at its end, or once it was closed)."""
    read: Callable[[int], bytes | None] = getattr(stream, "read1", None) or stream.read
    blocking_read = _off_hub(read, stream)

    def read_chunk() -> bytes:
        try:
            return blocking_read(READ_SIZE) or b""
        except ValueError:  # the stream was closed under us: end of input
            return b""

    return read_chunk


class Writer:
    """Whole messages onto the protocol stream, one at a time, flushed; never raises."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._closed = False
        self._put = _off_hub(self._put_data, stream)

    def write(self, data: bytes) -> bool:
        """Write one encoded message; False once the stream is closed or broken."""
        with self._lock:
            if self._closed:
                return False
            try:
                self._put(data)
            except (OSError, ValueError) as exc:
                self._closed = True
                _log.warning("stdout failed; dropping further output", error=str(exc))
                return False
            return True

    def _put_data(self, data: bytes) -> None:
        stream = self._stream
        view = memoryview(data)
        while view:
            written = stream.write(view)
            if type(written) is not int or written >= len(view):
                break
            view = view[max(written, 0) :]
        stream.flush()

    def close(self) -> None:
        """Refuse further writes (late workers after shutdown write nothing)."""
        with self._lock:
            self._closed = True


@contextlib.contextmanager
def std_streams(
    claim_in: bool, claim_out: bool
) -> Iterator[tuple[BinaryIO | None, BinaryIO | None]]:
    """The protocol's stdin/stdout (those claimed), with fd 0/1 moved aside for user code."""
    restore: list[Callable[[], None]] = []
    try:
        proto_in = _claim_stdin(restore) if claim_in else None
        proto_out = _claim_stdout(restore) if claim_out else None
        yield proto_in, proto_out
    finally:
        for undo in reversed(restore):
            try:
                undo()
            except Exception:
                _log.exception("could not restore a standard stream")


def _fd_of(stream: Any) -> int | None:
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return fd if isinstance(fd, int) else None


def _dup_private(fd: int) -> int:
    """A close-on-exec duplicate of ``fd`` above the standard descriptors."""
    if sys.platform != "win32":
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    return os.dup(fd)  # non-inheritable by default (PEP 446)


def _divert(fd: int, private: int, open_target: Callable[[], int]) -> Callable[[], None] | None:
    """Point ``fd`` at ``open_target()``; the undo, or None (nothing changed) on failure."""
    try:
        target = open_target()
    except OSError:
        return None
    try:
        os.dup2(target, fd)
    except OSError:
        return None
    finally:
        os.close(target)

    def undo() -> None:
        os.dup2(private, fd)

    return undo


def _claim_stdin(restore: list[Callable[[], None]]) -> BinaryIO:
    stdin = sys.stdin
    if stdin is None:
        raise OSError("there is no stdin to serve on")
    if _fd_of(stdin) != 0:
        return stdin.buffer  # not fd 0 (already redirected): read it in place
    try:
        private = _dup_private(0)
    except OSError:
        return stdin.buffer
    undo = _divert(0, private, lambda: os.open(os.devnull, os.O_RDONLY))
    if undo is None:
        os.close(private)
        return stdin.buffer
    null_in = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - closed on restore

    def put_back() -> None:
        undo()
        sys.stdin = stdin
        null_in.close()

    restore.append(put_back)
    sys.stdin = null_in
    # closefd=False: a thread may still be blocked on the descriptor when serving ends.
    return os.fdopen(private, "rb", buffering=0, closefd=False)


def _claim_stdout(restore: list[Callable[[], None]]) -> BinaryIO:
    stdout = sys.stdout
    if stdout is None:
        raise OSError("there is no stdout to serve on")
    with contextlib.suppress(Exception):
        stdout.flush()

    def user_stdout_to_stderr() -> None:
        if sys.stderr is not None:
            sys.stdout = sys.stderr
            restore.append(lambda: setattr(sys, "stdout", stdout))

    if _fd_of(stdout) != 1:
        user_stdout_to_stderr()
        return stdout.buffer
    try:
        private = _dup_private(1)
    except OSError:
        user_stdout_to_stderr()
        return stdout.buffer

    def to_stderr() -> int:
        try:
            return os.dup(2)
        except OSError:
            return os.open(os.devnull, os.O_WRONLY)

    undo = _divert(1, private, to_stderr)
    if undo is None:
        os.close(private)
        user_stdout_to_stderr()
        return stdout.buffer

    def put_back() -> None:
        with contextlib.suppress(Exception):
            stdout.flush()  # stray output buffered meanwhile goes to stderr, not the protocol
        undo()

    restore.append(put_back)
    user_stdout_to_stderr()
    return os.fdopen(private, "wb", closefd=False)
