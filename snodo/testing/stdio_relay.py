"""``stdio_relay.py HOST:PORT TOKEN -- COMMAND...``: the stdio fault proxy's relay process.

The client starts this as its stdio server. It starts COMMAND (the real server) as its child,
in its own process group (the client's kill of the group reaches it), and connects back to the
fault proxy over 127.0.0.1, where the proxy decides what passes. It is dumb on purpose: it
moves bytes between the pipes and the socket in frames (a tag byte, a 4-byte length, the
bytes) and obeys the proxy's commands. Standard library only, so it starts fast.

To the proxy: ``c`` bytes the client wrote, ``C`` its EOF, ``s`` bytes the server wrote, ``S``
its EOF. From the proxy: ``c`` bytes for the client, ``s`` bytes for the server, ``Y`` close the
server's stdin, ``X`` close the client's stdout and end, ``K`` the same as a failure (status 1), ``R`` close both of the client's
pipes and end. Ending stops the child (SIGTERM, then SIGKILL, with deadlines); losing the
proxy ends the relay the same way, and so does the client's EOF once the child has gone.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading

__all__ = ["main"]

HEADER = struct.Struct(">cI")
CHUNK = 65536
STOP_WAIT = 2.0


def _send(sock: socket.socket, lock: threading.Lock, tag: bytes, data: bytes = b"") -> None:
    with lock:
        sock.sendall(HEADER.pack(tag, len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    parts = []
    while n:
        data = sock.recv(min(n, CHUNK))
        if not data:
            return None
        parts.append(data)
        n -= len(data)
    return b"".join(parts)


def _pump(
    fd: int, sock: socket.socket, lock: threading.Lock, data_tag: bytes, eof_tag: bytes
) -> None:
    """Read ``fd`` to EOF, sending each read to the proxy."""
    with contextlib.suppress(OSError):
        while True:
            data = os.read(fd, CHUNK)
            if not data:
                break
            _send(sock, lock, data_tag, data)
        _send(sock, lock, eof_tag)


def _stop(child: subprocess.Popen[bytes]) -> int:
    """End the child: EOF on its stdin first (a server ends on it), then SIGTERM, SIGKILL."""
    assert child.stdin is not None
    for step in (child.stdin.close, child.terminate, child.kill):
        if step is not None:
            with contextlib.suppress(OSError):
                step()
        try:
            return child.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            continue
    return child.wait(STOP_WAIT)


def _write(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        return False
    return True


def main(argv: list[str]) -> int:
    address, token, separator, *command = argv
    if separator != "--" or not command:
        print("usage: stdio_relay.py HOST:PORT TOKEN -- COMMAND...", file=sys.stderr)
        return 2
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=10.0)
    sock.settimeout(None)
    lock = threading.Lock()
    _send(sock, lock, b"H", token.encode())
    try:
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except OSError as exc:
        print(f"stdio_relay: cannot start {command[0]!r}: {exc}", file=sys.stderr)
        return 127
    assert child.stdin is not None and child.stdout is not None
    child_in, child_out = child.stdin.fileno(), child.stdout.fileno()
    for fd, tags in ((0, (b"c", b"C")), (child_out, (b"s", b"S"))):
        threading.Thread(target=_pump, args=(fd, sock, lock, *tags), daemon=True).start()
    status = 0
    try:
        while True:
            head = _recv_exact(sock, HEADER.size)
            if head is None:
                break  # the proxy has gone
            tag, size = HEADER.unpack(head)
            data = _recv_exact(sock, size) if size else b""
            if data is None:
                break
            if tag == b"c":
                _write(1, data)
            elif tag == b"s":
                _write(child_in, data)
            elif tag == b"Y":
                with contextlib.suppress(OSError):
                    child.stdin.close()
                # the child's stdout EOF follows; the relay ends on X once it has
            elif tag in (b"X", b"K"):
                with contextlib.suppress(OSError):
                    os.close(1)
                status = 1 if tag == b"K" else 0
                break
            elif tag == b"R":
                for fd in (0, 1):
                    with contextlib.suppress(OSError):
                        os.close(fd)
                status = 1
                break
    except OSError:
        pass
    finally:
        code = _stop(child)
        with contextlib.suppress(OSError):
            sock.close()
    return status or (code if code >= 0 else 128 - code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
