"""What ``snodo.connect`` can reach: plain frozen records, cheap to import."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "Http",
    "Sse",
    "Stdio",
]


@dataclass(frozen=True, slots=True)
class Stdio:
    """A stdio server target: ``snodo.connect(snodo.Stdio("python", ["server.py"]))`` starts
    the command as a subprocess and speaks MCP on its stdin and stdout (the server's lifetime is
    the connection's)."""

    command: str
    args: tuple[str, ...] = ()

    def __init__(self, command: str, args: Sequence[str] = ()) -> None:
        if not isinstance(command, str) or not command:
            raise ValueError("Stdio needs a command")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise TypeError("Stdio args must be a sequence of strings")
        object.__setattr__(self, "command", command)
        object.__setattr__(self, "args", tuple(args))


@dataclass(frozen=True, slots=True)
class Http:
    """A Streamable HTTP target: ``snodo.connect(snodo.Http("https://example.test/mcp"))``
    reaches a remote (or local) server at that URL, for either protocol era."""

    url: str

    def __post_init__(self) -> None:
        _check_http_url(self.url)


@dataclass(frozen=True, slots=True)
class Sse:
    """An HTTP+SSE target (the 2024-11-05 transport): ``snodo.connect(snodo.Sse(url))``.

    ``url`` is the event stream's (a GET opens it; its ``endpoint`` event names where messages
    are POSTed). The connection speaks 2024-11-05 only (docs/decisions/0040).
    """

    url: str

    def __post_init__(self) -> None:
        _check_http_url(self.url)


def _check_http_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
