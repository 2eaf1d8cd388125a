"""The loopback redirect listener of a native client (RFC 8252 §7.3): bound on 127.0.0.1
before the authorization URL is built, it answers the browser's redirect and hands back the
request target with its parameters. It runs in the waiting thread; nothing else is started."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

from snodo.oauth.errors import auth_error

__all__ = ["MAX_REQUEST", "NOT_FOUND", "PAGE", "LoopbackListener"]

MAX_REQUEST = 16 * 1024
PAGE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n"
    b"Cache-Control: no-store\r\n\r\n"
    b"<!doctype html><title>Authorized</title><p>You can close this window.</p>"
)
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class LoopbackListener:
    """A one-shot HTTP listener for ``http://127.0.0.1:<port><path>``: it receives the
    authorization server's redirect (the code and state) when the user's browser comes back."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, path: str = "/callback") -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._sock.bind((host, port))
            self._sock.listen(8)
        except OSError:
            self._sock.close()
            raise
        self.path = path
        bound = self._sock.getsockname()[1]
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        self.redirect_uri = f"http://{shown}:{bound}{path}"

    def wait(self, timeout: float) -> str:
        """The request target (``/callback?code=...``) of the first GET to our path within
        ``timeout`` seconds; other requests get 404."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise auth_error(
                    "authorization", f"no redirect reached the listener within {timeout:g} s"
                )
            self._sock.settimeout(left)
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                raise auth_error("authorization", f"the redirect listener failed ({exc})") from None
            with conn:
                target = self._read_target(conn, min(left, 10.0))
                if target is not None and urlsplit(target).path == self.path:
                    conn.sendall(PAGE)
                    return target
                try:
                    conn.sendall(NOT_FOUND)
                except OSError:
                    pass

    @staticmethod
    def _read_target(conn: socket.socket, timeout: float) -> str | None:
        conn.settimeout(timeout)
        data = b""
        try:
            while b"\r\n\r\n" not in data and len(data) < MAX_REQUEST:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError:
            return None
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != "GET":
            return None
        return parts[1]

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> LoopbackListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
