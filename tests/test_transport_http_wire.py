"""snodo.transports.http_wire: keep-alive reuse and its edges, against a raw socket server."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from snodo.transports import http_wire

Answer = Callable[[int], bytes]  # request number on the connection -> the response bytes


class RawServer:
    """Accepts connections on 127.0.0.1, answers each request head with ``answer``; counts
    connections; closes a connection after a response when ``close_after`` says so."""

    def __init__(self, answer: Answer, close_after: Callable[[int], bool]) -> None:
        self.answer = answer
        self.close_after = close_after
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
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
            self.connections += 1
            self._socks.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        pending, count = b"", 0
        with sock:
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
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(pending) < length:
                    pending += sock.recv(65536)
                pending = pending[length:]
                count += 1
                sock.sendall(self.answer(count))
                if self.close_after(count):
                    return

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self.listener.close()
        for sock in self._socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
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
        answer: Answer = json_answer, close_after: Callable[[int], bool] = lambda n: False
    ) -> RawServer:
        server = RawServer(answer, close_after)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def wire() -> Iterator[http_wire.WirePool]:
    pool = http_wire.WirePool((True, None, None, None))
    yield pool
    pool.clear()


def post(wire: http_wire.WirePool, url: str) -> bytes:
    response = wire.request(
        "POST",
        url,
        {"Content-Type": "application/json"},
        b"{}",
        connect_timeout=5.0,
        read_timeout=5.0,
        head_limit=65536,
    )
    try:
        assert response.status == 200
        body = b""
        while chunk := response.read1(65536):
            body += chunk
        return body
    finally:
        response.release_conn()


def test_sequential_requests_share_one_keep_alive_connection(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    server = serve()
    assert [post(wire, server.url) for _ in range(5)] == [b'{"n": %d}' % n for n in range(1, 6)]
    assert server.connections == 1


def test_an_idle_connection_the_server_closed_is_replaced(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    """The server closes every connection after one answer (without saying so): each next
    request finds its idle connection closed and goes out on a new one, never failing."""
    server = serve(close_after=lambda n: True)
    for _ in range(4):
        assert post(wire, server.url) == b'{"n": 1}'
    assert server.connections == 4


def test_a_response_that_says_close_is_not_reused(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    def closing(count: int) -> bytes:
        return b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"

    server = serve(answer=closing)
    assert post(wire, server.url) == b"ok"
    assert post(wire, server.url) == b"ok"
    assert server.connections == 2


def test_a_body_not_read_to_its_end_closes_the_connection(
    serve: Callable[..., RawServer], wire: http_wire.WirePool
) -> None:
    server = serve()
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
