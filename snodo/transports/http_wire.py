"""A lean HTTP/1.1 client over raw sockets: a process-wide keep-alive pool and one response type.

The Streamable HTTP transport sends one small POST per message and reads a JSON body or an event
stream; urllib3 + http.client cost ~150 µs of CPU per request here (docs/decisions/0024). This
module does only what the transport needs: ``http://`` and ``https://`` (TLS verified by
default), Content-Length, chunked and close-delimited bodies, interim 1xx responses skipped,
keep-alive reuse of connections whose response was read to its end. Framing decisions are
``snodo.protocol.http1``'s; this module moves the bytes.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from snodo.protocol import http1
from snodo.protocol.http1 import FramingError, Headers, HeadTooLarge

__all__ = [
    "ConnectError",
    "HeadTooLarge",
    "NoResponse",
    "Response",
    "WireError",
    "WirePool",
    "WireTimeout",
    "pool",
]

RECV_SIZE = 64 * 1024
#: The smallest read ``read1`` asks the socket for (a long-lived stream reads small: its
#: buffer is held, allocated, while the read blocks).
MIN_RECV = 1024
#: Idle keep-alive connections kept per endpoint (more concurrent requests open and close).
MAX_IDLE = 32


class WireError(Exception):
    """The request or its response failed on the wire."""


class ConnectError(WireError):
    """The connection could not be opened."""


class WireTimeout(WireError, TimeoutError):
    """A connect or read timeout passed."""


class NoResponse(WireError):
    """The request was written whole but no response came: the server may have acted on it, so
    it is never sent again (the caller reports the outcome as unknown)."""


class _Conn:
    """One socket and the bytes read from it past the last response."""

    __slots__ = ("buf", "key", "reused", "sock")

    def __init__(self, sock: socket.socket, key: tuple[Any, ...]) -> None:
        self.sock = sock
        self.key = key
        self.buf = b""
        self.reused = False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Response:
    """A response whose body is read on demand (``read1``); the urllib3 subset the transport
    uses: ``status``, ``headers``, ``read1``, ``release_conn``, ``drain_conn``, ``shutdown``,
    ``close``."""

    def __init__(
        self, wire: WirePool, conn: _Conn, head: http1.Head, framing: tuple[str, int]
    ) -> None:
        self._wire = wire
        self._conn: _Conn | None = conn
        self.status = head.status
        self.reason = head.reason
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
            return conn.sock.recv(size)
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
            self._wire._put(conn)
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


class WirePool:
    """Keep-alive connections per (scheme, host, port) for one TLS configuration."""

    def __init__(self, tls: tuple[bool, str | None, str | None, str | None]) -> None:
        self._tls = tls
        self._context: ssl.SSLContext | None = None
        self._idle: dict[tuple[Any, ...], deque[_Conn]] = {}
        self._lock = threading.Lock()

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
    ) -> Response:
        """Send one request and read its final response head (interim 1xx skipped)."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise ConnectError(f"unsupported URL {url!r}")
        port = parts.port or (443 if scheme == "https" else 80)
        host = parts.hostname
        host_field = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            host_field += f":{parts.port}"
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        fields = dict(headers)
        if body is not None:
            fields["Content-Length"] = str(len(body))
        payload = http1.request_head(method, target, host_field, fields)
        if body:
            payload += body
        key = (scheme, host, port)
        for attempt in (0, 1):
            conn = self._take(key) if attempt == 0 else None
            if conn is None:
                conn = self._open(key, connect_timeout)
            if on_socket is not None:
                on_socket(conn.sock)
            try:
                return self._exchange(conn, method, payload, read_timeout, head_limit)
            except _Stale:
                conn.close()
                continue  # the idle connection was closed by the server: once on a new one
            except BaseException:
                conn.close()
                raise
        raise WireError("the server closed the connection")  # unreachable in practice

    def _exchange(
        self,
        conn: _Conn,
        method: str,
        payload: bytes,
        read_timeout: float | None,
        head_limit: int,
    ) -> Response:
        sock = conn.sock
        sock.settimeout(read_timeout)
        try:
            sock.sendall(payload)
        except TimeoutError:
            raise WireTimeout("write timed out") from None
        except OSError as exc:
            if conn.reused:
                raise _Stale() from None
            raise WireError(f"send failed: {exc}") from None
        buf = conn.buf
        conn.buf = b""
        first = True
        while True:
            end = http1.find_head_end(buf, head_limit)
            if end < 0:
                try:
                    data = sock.recv(RECV_SIZE)
                except TimeoutError:
                    raise WireTimeout("read timed out") from None
                except OSError as exc:
                    if conn.reused and first and not buf:
                        raise _Stale() from None
                    raise WireError(f"read failed: {exc}") from None
                if not data:
                    if conn.reused and first and not buf:
                        raise _Stale()
                    raise WireError("the server closed the connection without a response")
                buf += data
                continue
            first = False
            try:
                head = http1.parse_head(buf[:end])
                framing = http1.body_framing(head, method)
            except HeadTooLarge:
                raise
            except FramingError as exc:
                raise WireError(str(exc)) from None
            buf = buf[end:]
            if 100 <= head.status < 200:  # interim: skip it, read the next head
                continue
            conn.buf = buf
            return Response(self, conn, head, framing)

    def _take(self, key: tuple[Any, ...]) -> _Conn | None:
        with self._lock:
            idle = self._idle.get(key)
            while idle:
                conn = idle.pop()
                if _usable(conn.sock):
                    conn.reused = True
                    return conn
                conn.close()
        return None

    def _put(self, conn: _Conn) -> None:
        with self._lock:
            idle = self._idle.setdefault(conn.key, deque())
            if len(idle) < MAX_IDLE:
                idle.append(conn)
                return
        conn.close()

    def _open(self, key: tuple[Any, ...], timeout: float | None) -> _Conn:
        scheme, host, port = key
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except TimeoutError:
            raise WireTimeout(f"connecting to {host}:{port} timed out") from None
        except OSError as exc:
            raise ConnectError(f"cannot connect to {host}:{port}: {exc}") from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                if self._context is None:
                    self._context = _context(*self._tls)
                sock = self._context.wrap_socket(sock, server_hostname=host)
        except TimeoutError:
            sock.close()
            raise WireTimeout(f"TLS handshake with {host}:{port} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            raise ConnectError(f"TLS with {host}:{port} failed: {exc}") from None
        return _Conn(sock, key)

    def clear(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()


class _Stale(Exception):
    """A reused connection turned out closed before any byte of the response."""


def _usable(sock: socket.socket) -> bool:
    """An idle connection is usable when nothing is readable on it (no EOF, no stray bytes)."""
    try:
        if sock.fileno() < 0:
            return False
        make_poller = getattr(select, "poll", None)  # gevent removes it when it patches
        if make_poller is None:
            return not select.select([sock], [], [], 0)[0]
        poller = make_poller()
        poller.register(sock, select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


_pools: dict[tuple[Any, ...], WirePool] = {}
_pools_lock = threading.Lock()


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


def _context(
    verify: bool, ca_certs: str | None, cert_file: str | None, key_file: str | None
) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca_certs)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file is not None:
        context.load_cert_chain(cert_file, key_file)
    return context
