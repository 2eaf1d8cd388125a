"""The stdin side of a stdio connection: write combining for requests, and replies that never
wait (docs/decisions/0027).

Concurrent writers combine: whoever holds the write lock writes every queued message, in one
system call per batch, and lets go only when the outbox is empty. Replies to server requests
come from the reading side (the hub, a reading caller, a handler), which must never block on a
server that does not read its stdin: they are written at once when the pipe has room, else
queued (at most ``MAX_UNSENT_REPLY_BYTES``) for the hub to write when it has, and beyond that
dropped and counted. Its records go to the ``snodo.transports.stdio`` logger.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable

from snodo.log import get_logger
from snodo.protocol import errors
from snodo.protocol.errors import McpError
from snodo.transports import process
from snodo.transports.io_hub import hub
from snodo.transports.process import ChildProcess

__all__ = ["MAX_UNSENT_REPLY_BYTES", "Outbox"]

_log = get_logger("snodo.transports.stdio")

#: Replies to server requests (pings, unknown methods, a full handler pool, handlers' answers)
#: waiting for room in the stdin of a server that does not read it; beyond this they are dropped
#: and counted (docs/decisions/0027). With the pipe's own 64 KiB, 128 KiB are in flight at most.
MAX_UNSENT_REPLY_BYTES = 64 * 1024


class Outbox:
    """What is written to one server's stdin, and how.

    ``lose(error)`` makes the connection unusable (every pending request fails) and returns the
    error to raise; ``exit_status()`` waits briefly for the server's exit status (None if it
    has not exited), to name a broken pipe's cause.
    """

    __slots__ = (
        "_child",
        "_dropped",
        "_exit_status",
        "_fd",
        "_lock",
        "_lose",
        "_name",
        "_queue",
        "_quick_writer",
        "_unsent",
        "_watched",
        "_write_lock",
        "bytes_out",
        "closed",
        "watch_used",
    )

    def __init__(
        self,
        child: ChildProcess,
        name: str,
        lose: Callable[[McpError], McpError],
        exit_status: Callable[[], int | None],
    ) -> None:
        self._child = child
        self._fd = child.stdin
        self._name = name
        self._lose = lose
        self._exit_status = exit_status
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()  # guards everything below
        self._queue: list[bytes] = []
        # Replies the reading side could not write without waiting: bytes committed to the
        # stream, written before anything else.
        self._unsent = bytearray()
        self._quick_writer = False  # the write lock is held by a reply flush that never waits
        self._watched = False  # the hub waits for room in stdin to flush _unsent
        #: The hub was asked to watch stdin at least once (close() unwatches it then).
        self.watch_used = False
        self._dropped = 0  # replies dropped since the last report of the count
        self.closed = False
        #: Bytes written to stdin (counted under the write lock: ``Client.stats()``).
        self.bytes_out = 0

    def seal(self) -> None:
        """End the server's stdin without freeing its descriptor number yet: a writer still in
        flight (a handler that could not be interrupted) writes into /dev/null, never into a
        later connection that the OS gave the same number."""
        with self._lock:  # no stdin watch is armed after this (_watch_locked)
            self.closed = True
        if self._child.is_closed("stdin"):
            return
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._fd)
            finally:
                os.close(devnull)
        except OSError:
            pass  # already closed
        if self._write_lock.acquire(timeout=1.0):  # in-flight writes finish into /dev/null
            self._write_lock.release()

    def write(
        self, data: bytes, deadline: float, on_block: Callable[[], None] | None = None
    ) -> None:
        """Write one encoded message by ``deadline``; ``TimeoutError`` if it could not even
        start.

        A writer that finds the lock held leaves its message to the holder and returns at once
        (unless the holder is a reply flush, which never waits: then it takes the lock after
        it). Replies queued by the reading side go first. A message cut off half-way (or a
        combined write that failed) leaves the stream unusable: the connection is lost (-32000)
        and every pending request fails.
        """
        with self._lock:
            quick = False
            if self._write_lock.acquire(blocking=False):
                self._queue.append(data)
            elif not self._quick_writer:
                self._queue.append(data)
                return  # the holder sends it before it lets go
            else:
                quick = True
        if quick:
            # A reply flush holds the lock for a few writes that never wait: take it after.
            if not self._write_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                raise TimeoutError(errno.ETIMEDOUT, "the write lock stayed held")
            with self._lock:
                self._queue.append(data)
        held = True
        batch: list[bytes] = []
        unsent = b""
        first = True
        try:
            while True:
                with self._lock:
                    batch, self._queue = self._queue, []
                    if not batch:
                        held = False
                        self._write_lock.release()
                        if self._unsent:
                            self._watch_locked()  # replies that came meanwhile
                        return
                    unsent = b""
                    if self._unsent:
                        unsent = bytes(self._unsent)
                        self._unsent.clear()
                if self.closed:
                    raise errors.connection_error("Connection closed", cause=("closed",))
                payload = batch[0] if len(batch) == 1 else b"".join(batch)
                if unsent:
                    payload = unsent + payload
                process.write_all(self._fd, payload, deadline, on_block)
                self.bytes_out += len(payload)
                first = False
        except BrokenPipeError:
            # Usually the server has exited and the hub has not seen it yet: report the exit.
            status = self._exit_status()
            if status is not None:
                raise self._lose(errors.server_exit_error(status)) from None
            raise self._lose(
                errors.connection_error(
                    "The server closed its stdin (broken pipe)", cause=("port_exit", "epipe")
                )
            ) from None
        except TimeoutError as exc:
            written = getattr(exc, "characters_written", 0)
            if written < len(unsent):
                with self._lock:  # the replies' rest stays first in line
                    self._unsent[0:0] = unsent[written:]
                written = 0
            else:
                written -= len(unsent)
            if written or len(batch) > 1 or not first:
                raise self._lose(
                    errors.connection_error(
                        "The server stopped reading its stdin in the middle of a message",
                        cause=("write_timeout",),
                    )
                ) from None
            raise
        except OSError as exc:
            raise self._lose(
                errors.connection_error(
                    f"Writing to the server failed: {exc}", cause=("write", str(exc))
                )
            ) from None
        finally:
            if held:
                self._let_go()

    def reply(self, data: bytes) -> None:
        """Answer a server request without ever waiting (from the hub, a reading caller or a
        handler): written now if stdin has room, else queued (at most
        ``MAX_UNSENT_REPLY_BYTES``) for the hub to write when there is room, or for the next
        writer; beyond the bound dropped and counted, so a server that does not read its stdin
        holds up no other connection, and no handler."""
        with self._lock:
            if self.closed:
                return
            dropped = bool(self._unsent) and (
                len(self._unsent) + len(data) > MAX_UNSENT_REPLY_BYTES
            )
            if dropped:
                self._dropped += 1
                first_drop = self._dropped == 1
            else:
                self._unsent += data
                if self._watched or not self._write_lock.acquire(blocking=False):
                    return  # the hub writes it when stdin has room; a holder arms that watch
                self._quick_writer = True
        if dropped:
            if first_drop:  # the count follows once the queue drains, or at close
                _log.warning(
                    "dropping replies to a server that does not read its stdin",
                    connection=self._name,
                    queued_bytes=MAX_UNSENT_REPLY_BYTES,
                )
            return
        self._flush_unsent()

    def report_dropped(self) -> None:
        """On close: the count of replies dropped that was not reported yet."""
        with self._lock:
            dropped, self._dropped = self._dropped, 0
        if dropped:
            self._report_dropped(dropped)

    def _flush_unsent(self) -> None:
        """Holding the write lock as a reply flush: write the queued replies while the pipe has
        room (one non-blocking write); the rest stays queued and the hub watches for room."""
        with self._lock:
            data = bytes(self._unsent)
            self._unsent.clear()
        written = 0
        if data and not self.closed:
            try:
                written = os.write(self._fd, data)
                self.bytes_out += written
            except BlockingIOError:
                pass
            except OSError:
                written = len(data)  # the server is gone (its exit is seen by the hub): drop
        dropped = 0
        with self._lock:
            if written < len(data):
                self._unsent[0:0] = memoryview(data)[written:]
            elif not self._unsent and self._dropped:
                dropped, self._dropped = self._dropped, 0
        self._let_go()
        if dropped:
            self._report_dropped(dropped)

    def _let_go(self) -> None:
        """Release the write lock; replies still queued get the hub's watch for room."""
        with self._lock:
            self._quick_writer = False
            self._write_lock.release()
            if self._unsent:
                self._watch_locked()

    def _watch_locked(self) -> None:
        """(Under the lock.) Have the hub call back when stdin has room, once."""
        if self._watched or self.closed:
            return
        self._watched = self.watch_used = True
        hub().watch_writable(self._fd, self._on_writable)

    def _on_writable(self) -> None:
        """The hub saw room in stdin: write the queued replies (unless a writer holds the lock:
        it arms the watch again when it lets go)."""
        with self._lock:
            self._watched = False
            if self.closed:
                self._unsent.clear()
                return
            if not self._unsent or not self._write_lock.acquire(blocking=False):
                return
            self._quick_writer = True
        self._flush_unsent()

    def _report_dropped(self, count: int) -> None:
        _log.warning(
            "dropped replies to a server that did not read its stdin",
            connection=self._name,
            dropped=count,
        )
