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
from collections.abc import Sequence

from snodo.server.stdio_server import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_SERVER_REQUEST_TIMEOUT,
    DEFAULT_SHUTDOWN_GRACE,
    run,
)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m snodo.server",
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


def _milliseconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of milliseconds: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0..65535, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and serve; the exit status."""
    args = _parser().parse_args(argv)
    if args.server_request_timeout <= 0:
        print(
            "python -m snodo.server: error: --server-request-timeout must be positive",
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
            "python -m snodo.server: error: --host, --port and --sse-retry-ms need --http",
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
