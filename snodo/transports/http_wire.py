"""A lean HTTP/1.1 client over raw sockets: a process-wide keep-alive pool and one response type.

The Streamable HTTP transport sends one small POST per message and reads a JSON body or an event
stream; urllib3 + http.client cost ~150 µs of CPU per request here (docs/decisions/0024). This
module does only what the transport needs: ``http://`` and ``https://`` (TLS verified by
default), Content-Length, chunked and close-delimited bodies, interim 1xx responses skipped,
keep-alive reuse of connections whose response was read to its end. Framing decisions are
``snodo.protocol.http1``'s; this module moves the bytes.

Lifetimes (docs/decisions/0028): an idle connection is kept at most ``IDLE_TIMEOUT`` seconds,
only while some client holds its endpoint (``WirePool.retain``/``release``), and is dropped as
soon as it is seen closed; a request that may have reached the server is never sent again (no
response to it is ``NoResponse``).
"""

from __future__ import annotations

import functools
import select
import socket
import ssl
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from snodo.protocol import http1
from snodo.protocol.http1 import FramingError, Headers, HeadTooLarge
from snodo.transports import tls

__all__ = [
    "ConnectError",
    "HeadTooLarge",
    "NoResponse",
    "Response",
    "WireError",
    "WirePool",
    "WireTimeout",
    "idle_sockets",
    "pool",
]

RECV_SIZE = 64 * 1024
#: The smallest read ``read1`` asks the socket for (a long-lived stream reads small: its
#: buffer is held, allocated, while the read blocks).
MIN_RECV = 1024
#: Idle keep-alive connections kept per endpoint (more concurrent requests open and close).
MAX_IDLE = 32
#: Seconds an idle keep-alive connection is kept for reuse: below the common server keep-alive
#: timeouts (5 s: Node, uvicorn, hypercorn, Apache), so that a server rarely closes one just as
#: a request goes out on it, and a pool left idle holds no socket for long.
IDLE_TIMEOUT = 4.0
#: Interim (1xx) responses skipped before the final one; more is a broken server.
MAX_INTERIM = 16


class WireError(Exception):
    """The request or its response failed on the wire."""


class ConnectError(WireError):
    """The connection could not be opened; ``reason`` says why in a few words (the OS error or
    the TLS failure, e.g. "certificate verify failed: ...") for the caller's own message."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class WireTimeout(WireError, TimeoutError):
    """A connect or read timeout passed."""


class NoResponse(WireError):
    """The request was written whole but no response came: the server may have acted on it, so
    it is never sent again (the caller reports the outcome as unknown)."""


#: Plain TCP sockets on Linux wait with the kernel's own timeouts (``SO_RCVTIMEO``,
#: ``SO_SNDTIMEO``) on a blocking socket and are checked for a close with ``TCP_INFO``: no
#: ``poll`` before each ``send`` and ``recv``, and none at reuse, so a request gives the GIL up
#: twice instead of five times (docs/decisions/0052). TLS and gevent's sockets keep the
#: socket's own timeout and ``poll``.
_KERNEL_WAITS = sys.platform == "linux" and hasattr(socket, "TCP_INFO")
_TCP_INFO_SIZE = 136  # up to ``tcpi_bytes_received`` (Linux 4.1)
_TCP_ESTABLISHED = 1
_UNSET = -1.0


class _Conn:
    """One socket, the bytes read from it past the last response, and (while idle) when it
    expires. ``kernel``: its waits are bounded by the kernel's timeouts (see ``_KERNEL_WAITS``);
    ``received`` counts the bytes read from it, to tell a stray byte from none."""

    __slots__ = ("buf", "expires", "kernel", "key", "received", "reused", "sock", "timeout")

    def __init__(self, sock: socket.socket, key: tuple[Any, ...], kernel: bool = False) -> None:
        self.sock = sock
        self.key = key
        self.buf = b""
        self.reused = False
        self.expires = 0.0
        self.kernel = kernel
        self.received = 0
        self.timeout: float | None = _UNSET  # the kernel timeouts set (None: no bound)

    def wait_at_most(self, timeout: float | None) -> None:
        """Bound each next wait of the socket (a send, a receive) by ``timeout`` seconds."""
        if not self.kernel:
            self.sock.settimeout(timeout)
        elif timeout != self.timeout:
            self.timeout = timeout
            value = _timeval(timeout)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)

    def send(self, payload: bytes) -> None:
        """All of ``payload``, within the timeout as a whole (``TimeoutError``), as
        ``sendall`` on a socket with a timeout; another ``OSError`` when the connection fails
        first (some bytes never left then)."""
        if not self.kernel:
            self.sock.sendall(payload)
            return
        timeout = self.timeout
        started = time.monotonic()
        try:
            sent = self.sock.send(payload)  # blocking: returns short only at the timeout
            if sent == len(payload):
                return
            # Short (the send buffer stayed full until the timeout, or a signal came): the
            # rest within what is left of the timeout.
            view = memoryview(payload)[sent:]
            while view:
                if timeout is not None:
                    left = timeout - (time.monotonic() - started)
                    if left <= 0:
                        raise TimeoutError("timed out")
                    self.wait_at_most(left)
                view = view[self.sock.send(view) :]
        except BlockingIOError:  # the kernel's timeout, with nothing sent
            raise TimeoutError("timed out") from None
        finally:
            self.wait_at_most(timeout)

    def recv(self, size: int) -> bytes:
        """Up to ``size`` bytes, waiting at most the timeout (``TimeoutError``)."""
        try:
            data = self.sock.recv(size)
        except BlockingIOError:  # the kernel's timeout
            raise TimeoutError("timed out") from None
        self.received += len(data)
        return data

    def seen_closed(self) -> bool | None:
        """Whether the peer closed or reset the connection or sent bytes no request asked for,
        from the kernel's TCP state (no wait, no GIL hand-off); None when it cannot tell."""
        try:
            info = self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
        except OSError:
            return True
        if len(info) < _TCP_INFO_SIZE:
            return None
        unread = int.from_bytes(info[128:136], sys.byteorder) - self.received
        return info[0] != _TCP_ESTABLISHED or unread != 0

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Response:
    """A response whose body is read on demand (``read1``); the urllib3 subset the transport
    uses: ``status``, ``headers``, ``read1``, ``release_conn``, ``drain_conn``, ``shutdown``,
    ``close``; and ``head_size``, ``discard``."""

    def __init__(
        self, wire: WirePool, conn: _Conn, head: http1.Head, framing: tuple[str, int]
    ) -> None:
        self._wire = wire
        self._conn: _Conn | None = conn
        self.status = head.status
        self.reason = head.reason
        self.head_size = head.size  # bytes of the head, its blank line included
        self.headers: Headers = head.headers
        self._mode, self._left = framing
        self._chunked = http1.ChunkedDecoder() if self._mode == "chunked" else None
        self._reusable = http1.keeps_alive(head) and self._mode in ("none", "length", "chunked")
        self._done = self._mode == "none" or (self._mode == "length" and self._left == 0)
        self._decoded = b""  # chunked body bytes decoded beyond what a read asked for
        self._cut = False

    @property
    def complete(self) -> bool:
        """True once the whole body has been read."""
        return self._done

    @property
    def buffered(self) -> bool:
        """True when the rest of the body is already in memory, so no read can block (a JSON
        answer read with its head in one ``recv``): reading it needs no deadline timer."""
        conn = self._conn
        if self._done or conn is None:
            return True
        return self._mode == "length" and not self._decoded and len(conn.buf) >= self._left

    def read1(self, amt: int = RECV_SIZE) -> bytes:
        """Up to ``amt`` body bytes, waiting for at least one (b"" at the end of the body)."""
        if self._decoded:
            data, self._decoded = self._decoded[:amt], self._decoded[amt:]
            return data
        conn = self._conn
        if self._done or conn is None:
            return b""
        while True:
            if conn.buf:
                data, conn.buf = conn.buf, b""
            else:
                data = self._recv(conn, min(RECV_SIZE, max(amt, MIN_RECV)))
                if not data:
                    return self._at_eof()
            if self._mode == "length":
                take = data[: min(amt, self._left)]
                conn.buf = data[len(take) :]
                self._left -= len(take)
                if self._left == 0:
                    self._done = True
                return take
            if self._mode == "close":
                if len(data) > amt:
                    data, conn.buf = data[:amt], data[amt:]
                return data
            assert self._chunked is not None
            try:
                body, rest = self._chunked.feed(data)
            except FramingError as exc:
                self._reusable = False
                raise WireError(str(exc)) from None
            if self._chunked.done:
                self._done = True
                conn.buf = rest
            if body or self._done:
                body, self._decoded = body[:amt], body[amt:]
                return body

    def _recv(self, conn: _Conn, size: int) -> bytes:
        try:
            return conn.recv(size)
        except TimeoutError:
            self._reusable = False
            raise WireTimeout("read timed out") from None
        except OSError as exc:
            self._reusable = False
            if self._cut:
                return b""
            raise WireError(f"read failed: {exc}") from None

    def _at_eof(self) -> bytes:
        self._reusable = False
        if self._mode == "close" and not self._cut:
            self._done = True
            return b""
        if self._cut:
            return b""
        raise WireError("the connection closed before the end of the body")

    def release_conn(self) -> None:
        """Give the connection back to the pool when the body was read to its end (and nothing
        follows it); close it otherwise."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._done and self._reusable and not self._cut and not conn.buf:
            self._wire.checkin(conn)
        else:
            conn.close()

    def drain_conn(self) -> None:
        """Read and drop the rest of the body (errors end the connection instead)."""
        try:
            while self.read1(RECV_SIZE):
                pass
        except WireError:
            self._reusable = False

    def shutdown(self) -> None:
        """Shut the socket down (from any thread): a blocked read returns at once."""
        self._cut = True
        self._reusable = False
        conn = self._conn
        if conn is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def discard(self) -> None:
        """Give up on the response: shut it down and close it, so its connection is not reused
        (from any thread; a read blocked on it returns at once)."""
        self.shutdown()
        self.close()


Key = tuple[Any, ...]


class WirePool:
    """Keep-alive connections per (scheme, host, port) for one TLS configuration.

    An idle connection is kept only for an endpoint that some client holds (``retain`` /
    ``release``), for at most ``idle_timeout`` seconds, and never once it is seen closed or
    readable. Expiry is checked at every ``request`` and every connection put back, and by one
    sweep timer on the shared timer service, armed only while a connection is idle (so a pool
    left alone closes its sockets too). ``clock`` is for tests.
    """

    def __init__(
        self,
        tls: tuple[bool, str | None, str | None, str | None],
        *,
        idle_timeout: float = IDLE_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tls = tls
        self._context: ssl.SSLContext | None = None
        self._idle: dict[Key, deque[_Conn]] = {}  # oldest on the left, reuse from the right
        self._refs: dict[Key, int] = {}
        self._idle_timeout = idle_timeout
        self._clock = clock
        self._next_expiry = float("inf")  # no idle connection expires before this
        self._sweeper: Any = None  # the pending sweep Timer, if any
        self._lock = threading.Lock()

    # -- clients of an endpoint ----------------------------------------------------------------

    def retain(self, url: str) -> None:
        """One more client of ``url``'s endpoint: idle connections to it are kept while any
        client holds it."""
        key = _endpoint(url)
        if key is None:
            return  # request() reports the bad URL
        with self._lock:
            self._refs[key] = self._refs.get(key, 0) + 1

    def release(self, url: str) -> None:
        """A client of ``url``'s endpoint closed; after the last one its idle connections are
        closed (a connection still in use is closed when it comes back)."""
        key = _endpoint(url)
        if key is None:
            return
        conns: deque[_Conn] | None = None
        with self._lock:
            left = self._refs.get(key, 0) - 1
            if left > 0:
                self._refs[key] = left
                return
            self._refs.pop(key, None)
            conns = self._idle.pop(key, None)
            if not self._idle:
                self._disarm_locked()
        for conn in conns or ():
            conn.close()

    # -- requests --------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        *,
        connect_timeout: float | None,
        read_timeout: float | None,
        head_limit: int,
        on_socket: Callable[[socket.socket], None] | None = None,
        deadline: float | None = None,
    ) -> Response:
        """Send one request and read its final response head (interim 1xx skipped).

        ``deadline`` (``time.monotonic()`` seconds): no wait of the connect, the TLS handshake,
        the write or the head's reads goes past it (``WireTimeout``); a deadline number, not a
        timer per request (docs/decisions/0052). ``NoResponse`` when the request was written
        whole and no response came: the server may have acted on it, so it is never sent again.
        """
        where = _where(url)
        if where is None:
            raise ConnectError(f"unsupported URL {url!r}")
        key, host_field, target = where
        if body is not None:
            headers = {**headers, "Content-Length": str(len(body))}
        payload = http1.request_head(method, target, host_field, headers)
        if body:
            payload += body
        conn = self._take(key)
        while True:
            if conn is None:
                conn = self._open(key, connect_timeout, deadline)
            if on_socket is not None:
                on_socket(conn.sock)
            try:
                return self._exchange(conn, method, payload, read_timeout, head_limit, deadline)
            except _Unsent:
                # Only a reused connection raises it, so this runs at most once: the request
                # did not go out whole (see _exchange), the server cannot have acted on it.
                conn.close()
                conn = None
            except BaseException:
                conn.close()
                raise

    def _exchange(
        self,
        conn: _Conn,
        method: str,
        payload: bytes,
        read_timeout: float | None,
        head_limit: int,
        deadline: float | None = None,
    ) -> Response:
        timeout = read_timeout if deadline is None else _until(deadline, read_timeout)
        conn.wait_at_most(timeout)
        set_at = time.monotonic() if deadline is not None else 0.0
        try:
            conn.send(payload)  # bounded as a whole by the timeout
        except TimeoutError:
            raise WireTimeout("write timed out") from None
        except OSError as exc:
            # send returns only once every byte was handed to the kernel; when it raises,
            # some bytes of the request were never sent, so the server cannot have read it
            # whole (its Content-Length says how long it is) nor acted on it. On a reused
            # connection that is the server having closed it meanwhile: safe to send again on
            # a new one. Once sendall returned, nothing proves the request was not delivered
            # (a server that read it and died, or closed instead of answering, looks the same
            # as one that closed the idle connection just before), so a missing response is
            # NoResponse, never a resend (docs/decisions/0028).
            if conn.reused:
                raise _Unsent() from None
            raise WireError(f"send failed: {exc}") from None
        reader = http1.HeadReader(head_limit)
        data = conn.buf
        conn.buf = b""
        interim = 0
        while True:
            if data:
                try:
                    head = reader.feed(data)
                    framing = http1.body_framing(head, method) if head is not None else None
                except HeadTooLarge:
                    raise
                except FramingError as exc:
                    raise WireError(str(exc)) from None
                if head is not None and framing is not None:
                    if not 100 <= head.status < 200:
                        conn.buf = reader.rest
                        if timeout != read_timeout:  # the body's reads wait as before
                            conn.wait_at_most(read_timeout)
                        return Response(self, conn, head, framing)
                    interim += 1  # interim: skip it; every head counts against the limit
                    if interim > MAX_INTERIM:
                        raise WireError(f"more than {MAX_INTERIM} interim responses")
                    head_limit -= head.size
                    data, reader = reader.rest, http1.HeadReader(head_limit)
                    continue
            if deadline is not None and time.monotonic() - set_at > _DEADLINE_SLACK:
                # Time has passed since the timeout was set (a slow write, a head in pieces):
                # this read waits only for what is left of the deadline.
                timeout = _until(deadline, read_timeout)
                conn.wait_at_most(timeout)
                set_at = time.monotonic()
            try:
                data = conn.recv(RECV_SIZE)
            except TimeoutError:
                raise WireTimeout("read timed out") from None
            except OSError as exc:
                raise NoResponse(_NO_RESPONSE + f" ({exc})") from None
            if not data:
                raise NoResponse(_NO_RESPONSE)

    # -- idle connections ------------------------------------------------------------------------

    def _take(self, key: Key) -> _Conn | None:
        """The newest idle connection to ``key`` not seen closed, or None. The check is a
        system call, so it runs outside the lock: a thread waiting for the GIL behind it
        must not also hold every other caller off the pool (docs/decisions/0052)."""
        now = self._clock()
        dead: list[_Conn] = []
        found = None
        while found is None:
            with self._lock:
                if now >= self._next_expiry:
                    self._expire_locked(now, dead)
                idle = self._idle.get(key)
                conn = idle.pop() if idle else None
                if idle is not None and not idle:
                    del self._idle[key]
            if conn is None:
                break
            if _closed([conn]):
                # Seen closed (or with stray bytes): a server that closes one idle
                # connection usually closes them all, so check the others at once.
                dead.append(conn)
                self._drop_closed(dead, key)
                continue
            conn.reused = True
            found = conn
        for conn in dead:
            conn.close()
        return found

    def checkin(self, conn: _Conn) -> None:
        """Keep a connection whose response was read to its end for reuse (a response's
        ``release_conn``), unless no client holds its endpoint or the idle set is full."""
        now = self._clock()
        dead: list[_Conn] = []
        with self._lock:
            if now >= self._next_expiry:
                self._expire_locked(now, dead)
            idle = self._idle.get(conn.key)
            if conn.key not in self._refs or (idle is not None and len(idle) >= MAX_IDLE):
                dead.append(conn)
            else:
                if idle is None:
                    idle = self._idle[conn.key] = deque()
                conn.expires = now + self._idle_timeout
                idle.append(conn)
                self._next_expiry = min(self._next_expiry, conn.expires)
                if self._sweeper is None:
                    self._arm_locked(now)
        for conn in dead:
            conn.close()

    def _expire_locked(self, now: float, dead: list[_Conn]) -> None:
        """Move every idle connection past its expiry to ``dead``; recompute the next expiry."""
        nearest = float("inf")
        for key in list(self._idle):
            idle = self._idle[key]
            while idle and idle[0].expires <= now:
                dead.append(idle.popleft())
            if idle:
                nearest = min(nearest, idle[0].expires)
            else:
                del self._idle[key]
        self._next_expiry = nearest

    def _drop_closed(self, dead: list[_Conn], key: Key | None = None) -> None:
        """Move the idle connections (of ``key``, or all) seen closed to ``dead``; they are
        checked outside the lock, and one taken meanwhile is left to its taker."""
        with self._lock:
            keys = [key] if key is not None else list(self._idle)
            looked = [conn for k in keys for conn in self._idle.get(k, ())]
        closed = _closed(looked) if looked else set()
        if not closed:
            return
        with self._lock:
            for k in keys:
                idle = self._idle.get(k)
                if not idle:
                    continue
                keep = [conn for conn in idle if conn not in closed]
                if len(keep) != len(idle):
                    dead.extend(conn for conn in idle if conn in closed)
                    idle.clear()
                    idle.extend(keep)
                if not idle:
                    del self._idle[k]

    def _arm_locked(self, now: float) -> None:
        """Start the sweep timer for the next expiry (the timer service never takes this lock
        while it holds its own, so arming under it is safe)."""
        from snodo.supervision.timers import call_later

        try:
            self._sweeper = call_later(max(0.0, self._next_expiry - now), self._sweep)
        except Exception:  # no timer (too many pending): the lazy checks still expire them
            self._sweeper = None

    def _disarm_locked(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()

    def _sweep(self) -> None:
        """The sweep timer: close the idle connections past their expiry or seen closed; armed
        again only while some connection stays idle."""
        now = self._clock()
        dead: list[_Conn] = []
        with self._lock:
            self._sweeper = None
            self._expire_locked(now, dead)
        self._drop_closed(dead)
        with self._lock:
            if self._idle and self._sweeper is None:
                self._arm_locked(now)
        for conn in dead:
            conn.close()

    def _open(self, key: Key, timeout: float | None, deadline: float | None = None) -> _Conn:
        scheme, host, port = key
        if deadline is not None:
            timeout = _until(deadline, timeout)
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except TimeoutError:
            raise WireTimeout(f"connecting to {host}:{port} timed out") from None
        except OSError as exc:
            raise ConnectError(
                f"cannot connect to {host}:{port}: {exc}", tls.failure_reason(exc)
            ) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                if self._context is None:
                    self._context = tls.client_context(*self._tls)
                if deadline is not None:  # the handshake waits only for what is left
                    sock.settimeout(_until(deadline, timeout))
                sock = self._context.wrap_socket(sock, server_hostname=host)
            kernel = _KERNEL_WAITS and type(sock).__module__ == "socket"  # not TLS, not gevent's
            if kernel:
                sock.settimeout(None)  # blocking: the kernel's timeouts bound its waits
        except TimeoutError:
            sock.close()
            raise WireTimeout(f"TLS handshake with {host}:{port} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            raise ConnectError(
                f"TLS with {host}:{port} failed: {exc}", tls.failure_reason(exc)
            ) from None
        return _Conn(sock, key, kernel)

    @property
    def sweeping(self) -> bool:
        """True while the sweep timer is armed (only while some connection is idle)."""
        return self._sweeper is not None

    def idle_count(self) -> int:
        """How many idle connections the pool holds now."""
        with self._lock:
            return sum(len(idle) for idle in self._idle.values())

    def clear(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, {}
            self._next_expiry = float("inf")
            self._disarm_locked()
        for conns in idle.values():
            for conn in conns:
                conn.close()


_NO_RESPONSE = (
    "the server closed the connection without a response; the request was sent whole, so its"
    " outcome is unknown"
)


#: How long after its socket timeout was set a read may start before the timeout is set again
#: from the deadline (a read of the head right after its write keeps the one set before it).
_DEADLINE_SLACK = 0.001


def _until(deadline: float, timeout: float | None) -> float:
    """The socket timeout that ends a wait at ``deadline`` (never longer than ``timeout``); a
    deadline already past is a timeout so short that the wait fails at once."""
    left = max(deadline - time.monotonic(), 1e-6)
    if timeout is None:
        return left
    # Within the slack of ``timeout``: ``timeout`` itself (the socket's as it stays for the body).
    return timeout if left > timeout - _DEADLINE_SLACK else left


class _Unsent(Exception):
    """A reused connection failed before the request went out whole: safe to send again."""


def _endpoint(url: str) -> Key | None:
    """The pool key of ``url``: (scheme, host, port), or None for what this client cannot use."""
    where = _where(url)
    return None if where is None else where[0]


@functools.lru_cache(maxsize=256)
def _where(url: str) -> tuple[Key, str, str] | None:
    """``url`` as the pool key, the Host field and the request target, or None for what this
    client cannot use; cached (a transport sends every request to the same URL)."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        return None
    host = parts.hostname
    if scheme not in ("http", "https") or not host:
        return None
    host_field = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        host_field += f":{parts.port}"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return (scheme, host, port), host_field, target


def _real_poll() -> Callable[[], Any] | None:
    """The operating system's ``select.poll``, also under gevent monkey-patching (gevent's own
    poll runs a turn of its hub even with a zero timeout; a zero-timeout check never blocks)."""
    if "gevent" in sys.modules:
        try:
            from gevent.monkey import get_original

            found: Any = get_original("select", "poll")
            return found  # type: ignore[no-any-return]
        except Exception:
            pass
    return getattr(select, "poll", None)


_POLL = _real_poll()


def _timeval(timeout: float | None) -> bytes:
    """``timeout`` as the kernel's ``struct timeval`` (zero: no bound; a bound is at least 1 µs)."""
    if timeout is None:
        return struct.pack("@ll", 0, 0)
    micros = max(1, int(timeout * 1_000_000))
    return struct.pack("@ll", micros // 1_000_000, micros % 1_000_000)


def _closed(conns: list[_Conn]) -> set[_Conn]:
    """The connections among ``conns`` that are readable, in error or closed now: an idle
    connection with anything to read is at EOF, reset, or has stray bytes; none is usable."""
    out: set[_Conn] = set()
    by_fd: dict[int, _Conn] = {}
    for conn in conns:
        fileno = conn.sock.fileno()
        seen = conn.seen_closed() if conn.kernel and fileno >= 0 else None
        if fileno < 0 or seen:
            out.add(conn)
        elif seen is None:
            by_fd[fileno] = conn
    if not by_fd:
        return out
    try:
        if _POLL is None:
            ready = select.select([conn.sock for conn in by_fd.values()], [], [], 0)[0]
            out.update(conn for conn in by_fd.values() if conn.sock in ready)
            return out
        poller = _POLL()
        for fileno in by_fd:
            poller.register(fileno, select.POLLIN)
        for fileno, _ in poller.poll(0):
            out.add(by_fd[fileno])
    except (OSError, ValueError):
        out.update(by_fd.values())
    return out


_pools: dict[tuple[Any, ...], WirePool] = {}
_pools_lock = threading.Lock()


def idle_sockets() -> list[socket.socket]:
    """The sockets of every pool's idle keep-alive connections (what a leak check of fds
    must not count: ``snodo.testing.leaks``)."""
    with _pools_lock:
        pools = list(_pools.values())
    found = []
    for each in pools:
        with each._lock:  # noqa: SLF001 - the pools are this module's own
            found += [conn.sock for idle in each._idle.values() for conn in idle]  # noqa: SLF001
    return found


def pool(
    verify: bool, ca_certs: str | None, cert_file: str | None, key_file: str | None
) -> WirePool:
    """The process-wide pool for one TLS configuration."""
    key = (verify, ca_certs, cert_file, key_file)
    with _pools_lock:
        found = _pools.get(key)
        if found is None:
            found = _pools[key] = WirePool(key)
        return found
