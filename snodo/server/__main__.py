"""``python -m snodo.server MODULE:ATTR``: serve a Runtime on stdin/stdout.

``ATTR`` (dotted) names a :class:`~snodo.server.Runtime` or a zero-argument callable returning
one; ``MODULE`` is imported with the current directory on ``sys.path``. Exit status: 0 when stdin
ends, 2 for a bad target or bad options (with a message on stderr), 130 on Ctrl-C.

``python -m snodo.server --http [--host H] [--port P] MODULE:ATTR`` serves it over Streamable
HTTP instead (``snodo.server.http_server.run_http``): the URL is printed on stderr, SIGTERM or Ctrl-C
stops it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from snodo.server.stdio_server import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_SERVER_REQUEST_TIMEOUT,
    DEFAULT_SHUTDOWN_GRACE,
    run,
)

__all__ = ["main"]


def _number(
    parse: Callable[[str], float], what: str, low: float, high: float = float("inf")
) -> Callable[[str], Any]:
    """An argparse type: ``parse(text)``, refused unless ``low <= value`` (and ``< inf``,
    ``<= high`` for a finite ``high``)."""

    def convert(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not low <= value <= high or value == float("inf"):
            bound = f"{low:g}..{high:g}" if high != float("inf") else f">= {low:g}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value

    return convert


_positive_int = _number(int, "an integer", 1)
_seconds = _number(float, "a number of seconds", 0)
_milliseconds = _number(int, "a number of milliseconds", 0)
_port = _number(int, "a port number", 0, 65535)


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Serve a snodo Runtime over stdio (one JSON-RPC message per line), "
        "or over Streamable HTTP with --http.",
    )
    parser.add_argument(
        "target",
        metavar="MODULE:ATTR",
        help="the Runtime, or a zero-argument callable returning one (e.g. myapp.mcp:runtime)",
    )
    parser.add_argument(
        "--max-concurrency",
        type=_positive_int,
        default=DEFAULT_MAX_CONCURRENCY,
        help="requests served at once; more are answered 'Server busy' (default %(default)s)",
    )
    parser.add_argument(
        "--max-line-bytes",
        type=_positive_int,
        default=DEFAULT_MAX_LINE_BYTES,
        help="longest input line accepted (default %(default)s)",
    )
    parser.add_argument(
        "--server-request-timeout",
        type=_seconds,
        default=DEFAULT_SERVER_REQUEST_TIMEOUT,
        help="seconds to wait for the client to answer elicitation/sampling/roots (default %(default)s)",
    )
    parser.add_argument(
        "--shutdown-grace",
        type=_seconds,
        default=DEFAULT_SHUTDOWN_GRACE,
        help="seconds in-flight requests may run on after stdin ends (default %(default)s)",
    )
    parser.add_argument(
        "--http",
        action="store_true",
        help="serve over Streamable HTTP instead of stdio",
    )
    parser.add_argument(
        "--host",
        default=None,
        help="with --http: the address to bind (default 127.0.0.1)",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=None,
        help="with --http: the port to bind, 0 for any free one (default 8000)",
    )
    parser.add_argument(
        "--sse-retry-ms",
        type=_milliseconds,
        default=None,
        help="with --http, for testing clients' resumption: 2025-11-25 response streams send "
        "'retry: N' in their priming event and close at once (SSE polling)",
    )
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m snodo.server") -> int:
    """Parse the command line and serve; the exit status (``prog``: ``snodo serve`` names
    itself in help and errors)."""
    args = _parser(prog).parse_args(argv)
    if args.server_request_timeout <= 0:
        print(
            f"{prog}: error: --server-request-timeout must be positive",
            file=sys.stderr,
        )
        return 2
    if args.http:
        from snodo.server.http_server import DEFAULT_PORT, run_http

        return run_http(
            args.target,
            host="127.0.0.1" if args.host is None else args.host,
            port=DEFAULT_PORT if args.port is None else args.port,
            max_concurrency=args.max_concurrency,
            server_request_timeout=args.server_request_timeout,
            shutdown_grace=args.shutdown_grace,
            sse_retry_ms=args.sse_retry_ms,
        )
    if args.port is not None or args.host is not None or args.sse_retry_ms is not None:
        print(
            f"{prog}: error: --host, --port and --sse-retry-ms need --http",
            file=sys.stderr,
        )
        return 2
    return run(
        args.target,
        max_concurrency=args.max_concurrency,
        max_line_bytes=args.max_line_bytes,
        server_request_timeout=args.server_request_timeout,
        shutdown_grace=args.shutdown_grace,
    )


if __name__ == "__main__":
    sys.exit(main())
