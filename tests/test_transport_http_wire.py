"""snodo.transports.http_wire: keep-alive reuse and its edges, against a raw socket server.

Rules (docs/decisions/0024, 0028): a connection is reused only when its response was read to
the end; an idle connection seen closed is dropped before a request goes out on it; a request
written whole is never sent again (no response is ``NoResponse``), one that provably did not go
out whole is sent once more on a new connection; idle connections expire after the pool's idle
timeout, only live while a client holds their endpoint, and a sweep timer closes them when the
pool is left alone.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from snodo.transports import http_wire

Answer = Callable[[int], bytes]  # request number on the connection -> the response bytes


class RawServer:
    """Accepts connections on 127.0.0.1, answers each request head with ``answer``; counts
    connections, requests and connections closed; closes a connection after a response when
    ``close_after`` says so, and resets it (RST, the body unread) before reading the body of a
    request when ``reset_before_body`` says so. An empty answer is no answer."""

    def __init__(
        self,
        answer: Answer,
        close_after: Callable[[int], bool],
        reset_before_body: Callable[[int], bool] = lambda n: False,
    ) -> None:
        self.answer = answer
        self.close_after = close_after
        self.reset_before_body = reset_before_body
        self.connections = 0
        self.heads: list[tuple[int, int]] = []  # (connection, request on it) per head read
        self.requests: list[tuple[int, int]] = []  # the same, per request read whole
        self.closed = 0
        self._cond = threading.Condition()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # no autotuning
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/mcp"
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self._cond:
                self.connections += 1
                number = self.connections
                self._socks.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock, number), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket, number: int) -> None:
        try:
            self._requests(sock, number)
        finally:
            sock.close()
            with self._cond:
                self.closed += 1
                self._cond.notify_all()

    def _requests(self, sock: socket.socket, number: int) -> None:
        pending, count = b"", 0
        while True:
            while b"\r\n\r\n" not in pending:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                pending += data
            head, pending = pending.split(b"\r\n\r\n", 1)
            count += 1
            with self._cond:
                self.heads.append((number, count))
            if self.reset_before_body(count):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(pending) < length:
                try:
                    data = sock.recv(1 << 20)
                except OSError:
                    return
                if not data:
                    return
                pending += data
            pending = pending[length:]
            with self._cond:
                self.requests.append((number, count))
            answer = self.answer(count)
            if answer:
                sock.sendall(answer)
            if self.close_after(count):
                return

    def wait_closed(self, count: int, timeout: float = 5.0) -> None:
        """Wait until ``count`` connections have ended on the server's side."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.closed < count:
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"{self.closed} of {count} connections closed"
                self._cond.wait(remaining)

    def send_raw(self, data: bytes) -> None:
        """Send ``data`` on every connection, outside any response (a server gone wrong)."""
        with self._cond:
            socks = list(self._socks)
        for sock in socks:
            sock.sendall(data)

    def drop_all(self) -> None:
        """Close every connection from the server's side (as a server's idle timeout does)."""
        with self._cond:
            socks = list(self._socks)
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self.listener.close()
        self.drop_all()
        self._acceptor.join(5.0)
        for thread in self._threads:
            thread.join(5.0)


def json_answer(count: int) -> bytes:
    body = b'{"n": %d}' % count
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(
        answer: Answer = json_answer,
        close_after: Callable[[int], bool] = lambda n: False,
        reset_before_body: Callable[[int], bool] = lambda n: False,
    ) -> RawServer:
        server = RawServer(answer, close_after, reset_before_body)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def wire(clock: Clock) -> Iterator[http_wire.WirePool]:
    pool = http_wire.WirePool((True, None, None, None), clock=clock)
    yield pool
    pool.clear()


def post(wire: http_wire.WirePool, url: str, body: bytes = b"{}") -> bytes:
    response = wire.request(
        "POST",
        url,
        {"Content-Type": "application/json"},
        body,
        connect_timeout=5.0,
        read_timeout=5.0,
        head_limit=65536,
    )
    try:
        assert response.status == 200
        data = b""
        while chunk := response.read1(65536):
            data += chunk
        return data
    finally:
        response.release_conn()


def test_sequential_requests_share_one_keep_alive_connection(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    server = serve()
    wire.retain(server.url)
    assert [post(wire, server.url) for _ in range(5)] == [b'{"n": %d}' % n for n in range(1, 6)]
    assert server.connections == 1


def test_an_idle_connection_the_server_closed_is_replaced(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    """The server closes every connection after one answer (without saying so): each next
    request sees its idle connection closed before writing and goes out on a new one."""
    server = serve(close_after=lambda n: True)
    wire.retain(server.url)
    for count in range(1, 5):
        assert post(wire, server.url) == b'{"n": 1}'
        server.wait_closed(count)
    assert server.connections == 4
    assert len(server.requests) == 4


def test_a_response_that_says_close_is_not_reused(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    def closing(count: int) -> bytes:
        return b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"

    server = serve(answer=closing)
    wire.retain(server.url)
    assert post(wire, server.url) == b"ok"
    assert post(wire, server.url) == b"ok"
    assert server.connections == 2


def test_a_body_not_read_to_its_end_closes_the_connection(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    server = serve()
    wire.retain(server.url)
    response = wire.request(
        "POST", server.url, {}, b"{}", connect_timeout=5.0, read_timeout=5.0, head_limit=65536
    )
    assert response.read1(3) == b'{"n'
    response.release_conn()
    assert post(wire, server.url) == b'{"n": 1}'  # a new connection: its first request
    assert server.connections == 2


def test_an_unreachable_endpoint_is_a_connect_error(wire: http_wire.WirePool) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    with pytest.raises(http_wire.ConnectError):
        post(wire, f"http://127.0.0.1:{port}/mcp")


# -- a request is never sent twice (issue 12, item 1) --------------------------------------------


def test_a_request_read_on_a_reused_connection_and_not_answered_is_not_sent_again(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    """The server answers the first request, reads the second on the same keep-alive
    connection and closes without answering: NoResponse (the outcome is unknown), and the
    server saw that request exactly once."""
    server = serve(answer=lambda n: json_answer(n) if n == 1 else b"", close_after=lambda n: n == 2)
    wire.retain(server.url)
    assert post(wire, server.url) == b'{"n": 1}'
    with pytest.raises(http_wire.NoResponse, match="outcome is unknown"):
        post(wire, server.url)
    server.wait_closed(1)
    assert server.requests == [(1, 1), (1, 2)]
    assert server.connections == 1
    assert post(wire, server.url) == b'{"n": 1}'  # the pool still works: a new connection


def test_no_response_on_a_new_connection_is_no_response_too(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    server = serve(answer=lambda n: b"", close_after=lambda n: True)
    wire.retain(server.url)
    with pytest.raises(http_wire.NoResponse):
        post(wire, server.url)
    assert server.requests == [(1, 1)]


def test_a_partial_head_then_a_close_is_no_response(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    """A server that starts a head and closes has not answered either: NoResponse."""
    server = serve(answer=lambda n: b"HTTP/1.1 200 OK\r\nContent-", close_after=lambda n: True)
    wire.retain(server.url)
    with pytest.raises(http_wire.NoResponse):
        post(wire, server.url)
    assert server.requests == [(1, 1)]


def test_an_idle_connection_with_stray_bytes_is_replaced(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    """Bytes that arrive on an idle connection, after its response was read, answer nothing:
    the connection is seen unusable before a request goes out on it (on Linux from the
    kernel's TCP state, with no poll), and the request goes out on a new one."""
    server = serve()
    wire.retain(server.url)
    used: list[socket.socket] = []
    response = wire.request(
        "POST",
        server.url,
        {},
        b"{}",
        connect_timeout=5.0,
        read_timeout=5.0,
        head_limit=4096,
        on_socket=used.append,
    )
    assert response.read1(100) == b'{"n": 1}' and response.read1(100) == b""
    response.release_conn()
    assert wire.idle_count() == 1
    server.send_raw(b'HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{"n": 99}')
    readable, _, _ = select.select(used, [], [], 5.0)
    assert readable == used  # the stray bytes are in the client's kernel buffer
    assert post(wire, server.url) == b'{"n": 1}'  # the first answer on a new connection
    assert server.connections == 2


def test_a_write_the_server_reads_slowly_times_out_within_the_timeout(
    wire: http_wire.WirePool,
) -> None:
    """A server that reads 4 KiB every 50 ms: each send of a 16 MiB body makes some progress,
    and the write still fails as a timeout within the request's timeout as a whole (a bound
    per send would let it run for minutes)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    stop = threading.Event()

    def drip_reader() -> None:
        sock, _ = listener.accept()
        with sock:
            for _ in range(400):  # at most 20 s
                if stop.wait(0.05) or not sock.recv(4096):
                    return

    reader = threading.Thread(target=drip_reader, daemon=True)
    reader.start()
    big = b'{"x": "' + b"a" * (16 << 20) + b'"}'
    started = time.monotonic()
    try:
        with pytest.raises(http_wire.WireTimeout, match="write timed out"):
            wire.request(
                "POST",
                url,
                {},
                big,
                connect_timeout=5.0,
                read_timeout=0.5,
                head_limit=4096,
                deadline=started + 0.5,
            )
        elapsed = time.monotonic() - started
        assert 0.4 < elapsed < 1.5, elapsed
    finally:
        stop.set()
        listener.close()
        reader.join(5.0)


def test_a_request_that_did_not_go_out_whole_is_sent_again_on_a_new_connection(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    """On the reused connection the server resets the connection after the second request's
    head, its 16 MiB body unread: the client's sendall fails before the last byte left, so
    the server never had the request whole and the client sends it once more on a new
    connection, where it is read whole once."""
    server = serve(reset_before_body=lambda n: n == 2)
    wire.retain(server.url)
    assert post(wire, server.url) == b'{"n": 1}'
    big = b'{"x": "' + b"a" * (16 << 20) + b'"}'
    assert post(wire, server.url, big) == b'{"n": 1}'
    assert server.heads == [(1, 1), (1, 2), (2, 1)]
    assert server.requests == [(1, 1), (2, 1)]


# -- idle lifetimes (issue 12, item 4) -------------------------------------------------------------


def test_an_idle_connection_older_than_the_idle_timeout_is_not_reused(
    serve: Callable[..., RawServer], wire: http_wire.WirePool, clock: Clock
) -> None:
    """IDLE_TIMEOUT: a connection idle for less is reused; one idle for longer is closed (the
    server sees it end) and the request goes out on a new connection."""
    server = serve()
    wire.retain(server.url)
    post(wire, server.url)
    clock.now += http_wire.IDLE_TIMEOUT - 0.5
    assert post(wire, server.url) == b'{"n": 2}'
    clock.now += http_wire.IDLE_TIMEOUT + 0.5
    assert post(wire, server.url) == b'{"n": 1}'
    assert server.connections == 2
    server.wait_closed(1)
    assert wire.idle_count() == 1


def test_expired_connections_of_every_endpoint_go_at_the_next_pool_operation(
    serve: Callable[..., RawServer], wire: http_wire.WirePool, clock: Clock
) -> None:
    """The lazy sweep looks at every endpoint, not only the one a request goes to."""
    first, second = serve(), serve()
    wire.retain(first.url)
    wire.retain(second.url)
    post(wire, first.url)
    clock.now += http_wire.IDLE_TIMEOUT + 1
    post(wire, second.url)
    first.wait_closed(1)
    assert wire.idle_count() == 1


def test_idle_connections_the_server_closed_are_dropped_when_one_is_seen(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    """Three idle connections; the server closes them all (as at its idle timeout). The next
    request sees the first closed, drops the other two with it, and goes out on a new one."""
    server = serve()
    wire.retain(server.url)
    responses = [
        wire.request(
            "POST", server.url, {}, b"{}", connect_timeout=5.0, read_timeout=5.0, head_limit=4096
        )
        for _ in range(3)
    ]
    for response in responses:
        assert response.read1(100) == b'{"n": 1}'
        assert response.read1(100) == b""
        response.release_conn()
    assert wire.idle_count() == 3
    server.drop_all()
    server.wait_closed(3)
    assert post(wire, server.url) == b'{"n": 1}'
    assert server.connections == 4
    assert wire.idle_count() == 1


def test_the_last_client_of_an_endpoint_releases_its_idle_connections(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    """retain/release count the clients of an endpoint: idle connections stay while one holds
    it, close with the last release, and a connection that comes back after it is closed."""
    server = serve()
    wire.retain(server.url)
    wire.retain(server.url)
    post(wire, server.url)
    wire.release(server.url)
    assert wire.idle_count() == 1
    response = wire.request(
        "POST", server.url, {}, b"{}", connect_timeout=5.0, read_timeout=5.0, head_limit=4096
    )
    wire.release(server.url)
    assert response.read1(100) == b'{"n": 2}'
    assert response.read1(100) == b""
    response.release_conn()
    server.wait_closed(1)
    assert wire.idle_count() == 0
    post(wire, server.url)  # an endpoint nobody holds: requests work, nothing is kept
    server.wait_closed(2)
    assert wire.idle_count() == 0


def test_the_sweep_timer_closes_idle_connections_of_a_pool_left_alone(
    serve: Callable[..., RawServer],
) -> None:
    """A long-idle daemon keeps no socket past the idle timeout: the sweep timer (armed only
    while a connection is idle) closes it without any further request, then stops."""
    server = serve()
    pool = http_wire.WirePool((True, None, None, None), idle_timeout=0.2)
    try:
        pool.retain(server.url)
        post(pool, server.url)
        assert pool.idle_count() == 1 and pool.sweeping
        server.wait_closed(1)
        assert pool.idle_count() == 0
        assert not pool.sweeping
    finally:
        pool.clear()
