"""A hostile raw-socket HTTP server: every response head drips and never ends.

    python tests/servers/hostile_http_head.py MODE [PIECE]

Binds 127.0.0.1 (the OS chooses the port) and prints ``PORT <port>`` once it listens. For each
request (head and Content-Length body read) it sends a status line, then header bytes forever,
``PIECE`` bytes per write (64 by default, TCP_NODELAY), until the client goes away:

* ``fields``: endless small header lines (``X-Drip-N: v``);
* ``line``: one header line that never ends;
* ``long``: endless 11,000-byte header lines (each within any line limit).

One thread per connection; it ends when stdin closes (the test's end) or it is killed. Used by
tests/test_transport_http_pool_lifetimes.py, which measures the client's CPU time against it.
"""

from __future__ import annotations

import socket
import sys
import threading


def pieces(mode: str) -> bytes:
    """A large block of the endless head (sent again and again)."""
    if mode == "fields":
        return b"".join(b"X-Drip-%d: v\r\n" % n for n in range(4096))
    if mode == "line":
        return b"a" * 65536
    if mode == "long":
        return (b"X-Long: " + b"b" * 11000 + b"\r\n") * 8
    raise SystemExit(f"unknown mode {mode!r}")


def read_request(sock: socket.socket) -> bool:
    pending = b""
    while b"\r\n\r\n" not in pending:
        data = sock.recv(65536)
        if not data:
            return False
        pending += data
    head, body = pending.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        data = sock.recv(65536)
        if not data:
            return False
        body += data
    return True


def serve(sock: socket.socket, block: bytes, piece: int) -> None:
    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if not read_request(sock):
                return
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
            view = memoryview(block)
            while True:
                for at in range(0, len(view), piece):
                    sock.sendall(view[at : at + piece])
        except OSError:
            return


def main() -> None:
    mode = sys.argv[1]
    piece = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    block = pieces(mode)
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"PORT {listener.getsockname()[1]}", flush=True)

    def accept() -> None:
        while True:
            sock, _ = listener.accept()
            threading.Thread(target=serve, args=(sock, block, piece), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.read()  # until the test closes our stdin


if __name__ == "__main__":
    main()
