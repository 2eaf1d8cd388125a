"""The stdio side of the fault proxy: relays connect back here and the faults happen here.

``StdioEngine`` listens on 127.0.0.1 for the relays (``stdio_relay.py``) that the client starts
as its server; each relay (one per start of the connection, so restarts too) is a session with
a thread per direction, which splits the bytes into lines, records them in the book and applies
the faults it decides before passing them on. Every queue is bounded, every wait has a deadline.
"""

from __future__ import annotations

import contextlib
import json
import queue
import secrets
import socket
import struct
import sys
import threading
import time
from pathlib import Path

from snodo.testing.faults import FLOOD_PREFIX, TO_CLIENT, TO_SERVER, FaultBook
from snodo.transports.targets import Stdio

__all__ = ["RELAY", "StdioEngine"]

RELAY = str(Path(__file__).with_name("stdio_relay.py"))
HEADER = struct.Struct(">cI")
POLL = 0.05
MAX_LINE = 64 * 1024 * 1024
QUEUE_BOUND = 4096
JOIN_DEADLINE = 10.0


class _Session:
    """One relay: the socket, its two direction queues and their threads."""

    def __init__(self, engine: StdioEngine, sock: socket.socket, number: int) -> None:
        self.engine = engine
        self.sock = sock
        self.number = number
        self.lock = threading.Lock()
        self.ended = threading.Event()
        self.queues: dict[str, queue.Queue[bytes | None]] = {
            TO_SERVER: queue.Queue(QUEUE_BOUND),
            TO_CLIENT: queue.Queue(QUEUE_BOUND),
        }

    # -- sending to the relay ----------------------------------------------------------------

    def send(self, tag: bytes, data: bytes = b"") -> bool:
        if self.ended.is_set():
            return False
        try:
            with self.lock:
                self.sock.sendall(HEADER.pack(tag, len(data)) + data)
        except OSError:
            self.ended.set()
            return False
        return True

    def end(self, tag: bytes) -> None:
        """Tell the relay to end (``X`` or ``R``); nothing more passes."""
        self.send(tag)
        self.ended.set()

    # -- the threads -------------------------------------------------------------------------

    def read(self) -> None:
        """Split the relay's frames into the two direction queues."""
        buffers = {TO_SERVER: b"", TO_CLIENT: b""}
        try:
            while not (self.engine.book.stopping.is_set() or self.ended.is_set()):
                head = self.recv_exact(HEADER.size)
                if head is None:
                    return
                tag, size = HEADER.unpack(head)
                data = self.recv_exact(size) if size else b""
                if data is None:
                    return
                direction = TO_SERVER if tag in (b"c", b"C") else TO_CLIENT
                if tag in (b"C", b"S"):
                    if buffers[direction]:
                        self._put(direction, buffers[direction])
                    self._put(direction, None)
                    continue
                buffer = buffers[direction] + data
                *lines, rest = buffer.split(b"\n")
                for line in lines:
                    self._put(direction, line + b"\n")
                if len(rest) > MAX_LINE:  # too long to hold: passed on as it is
                    self._put(direction, rest)
                    rest = b""
                buffers[direction] = rest
        finally:
            for direction in (TO_SERVER, TO_CLIENT):
                self._put(direction, None)

    def recv_exact(self, n: int) -> bytes | None:
        parts = []
        while n:
            if self.engine.book.stopping.is_set():
                return None
            try:
                data = self.sock.recv(min(n, 65536))
            except TimeoutError:
                continue
            except OSError:
                return None
            if not data:
                return None
            parts.append(data)
            n -= len(data)
        return b"".join(parts)

    def _put(self, direction: str, item: bytes | None) -> None:
        """Queue ``item`` for its direction's thread; waits (bounded) while it is full."""
        deadline = time.monotonic() + JOIN_DEADLINE
        while not self.engine.book.stopping.is_set() and time.monotonic() < deadline:
            try:
                self.queues[direction].put(item, timeout=POLL)
                return
            except queue.Full:
                continue

    def pass_on(self, direction: str) -> None:
        """Take one direction's lines off its queue, apply the faults, pass them on."""
        book = self.engine.book
        eof_tag = b"Y" if direction == TO_SERVER else b"X"
        while not book.stopping.is_set():
            try:
                item = self.queues[direction].get(timeout=POLL)
            except queue.Empty:
                if self.ended.is_set():
                    return
                continue
            if item is None:
                if not self.ended.is_set():
                    self.send(eof_tag)
                if direction == TO_CLIENT:
                    self.ended.set()
                return
            if self.ended.is_set():
                continue  # drain: nothing passes once the relay was told to end
            self.line(direction, item)

    def line(self, direction: str, item: bytes) -> None:
        book = self.engine.book
        tag = b"s" if direction == TO_SERVER else b"c"
        message = book.record(direction, item.rstrip(b"\r\n"), self.number)
        if direction == TO_SERVER and str(message.id).startswith(FLOOD_PREFIX):
            return  # the answer to a request of a flood: it stops here
        actions = book.decide(message)
        book.applied(message, actions)
        kinds = {a.kind for a in actions}
        out = item
        for action in actions:
            if action.kind == "delay" and not book.pause(action.seconds):
                return
            if action.kind in ("stall_head", "stall_body"):
                book.stall(self.engine.stall_timeout)
            if action.kind == "oversize":
                body = item.rstrip(b"\r\n")
                out = body + b" " * max(0, action.nbytes - len(body)) + b"\n"
            if action.kind == "garbage":
                self.send(tag, b"{this is not json\n")
            if action.kind == "flood":
                for _ in range(action.count):
                    request = {"jsonrpc": "2.0", "id": book.flood_id(), "method": action.method}
                    self.send(tag, json.dumps(request).encode() + b"\n")
        if "reset" in kinds:
            self.end(b"R")
            return
        if "cut" in kinds:
            self.send(tag, out[: max(1, len(out) // 2)].rstrip(b"\n"))
            self.end(b"K")
            return
        if "drop" in kinds:
            return
        self.send(tag, out)
        if "duplicate" in kinds:
            self.send(tag, out)


class StdioEngine:
    """The listener the relays connect back to, and their sessions."""

    def __init__(
        self, book: FaultBook, command: str, args: tuple[str, ...], stall_timeout: float
    ) -> None:
        self.book = book
        self.stall_timeout = stall_timeout
        self.token = secrets.token_hex(16)
        self.sessions: list[_Session] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(POLL)
        port = self._listener.getsockname()[1]
        relay_args = ["-S", "-E", RELAY, f"127.0.0.1:{port}", self.token, "--", command, *args]
        self.target = Stdio(sys.executable, relay_args)
        self._start(self._accept, "fault-proxy-stdio-accept")

    def _start(self, target: object, name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)  # type: ignore[arg-type]
        with self.book.cond:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self.book.stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._start(self._hello, "fault-proxy-stdio-hello", sock)

    def _hello(self, sock: socket.socket) -> None:
        """Check the relay's token, then run its session."""
        sock.settimeout(POLL)
        number = self.book.connection()
        session = _Session(self, sock, number)
        head = session.recv_exact(HEADER.size)
        hello = session.recv_exact(HEADER.unpack(head)[1]) if head else None
        if head is None or hello is None or hello.decode(errors="replace") != self.token:
            sock.close()
            return
        with self.book.cond:
            self.sessions.append(session)
        self._start(session.pass_on, f"fault-proxy-stdio-{number}-in", TO_SERVER)
        self._start(session.pass_on, f"fault-proxy-stdio-{number}-out", TO_CLIENT)
        try:
            session.read()
        finally:
            # the relay's socket closes once both directions have passed on what they hold
            deadline = time.monotonic() + JOIN_DEADLINE
            while not session.ended.is_set() and time.monotonic() < deadline:
                session.ended.wait(POLL)
                if self.book.stopping.is_set():
                    break
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def live_sessions(self) -> list[_Session]:
        with self.book.cond:
            return [s for s in self.sessions if not s.ended.is_set()]

    def close(self) -> None:
        self.book.stopping.set()
        self._listener.close()
        with self.book.cond:
            threads = list(self._threads)
        deadline = time.monotonic() + JOIN_DEADLINE
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t for t in threads if t.is_alive()]
        if alive:
            raise RuntimeError(f"fault proxy threads still running: {alive}")
