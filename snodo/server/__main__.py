"""``python -m snodo.server MODULE:ATTR``: serve a Runtime on stdin/stdout.

``ATTR`` (dotted) names a :class:`~snodo.server.Runtime` or a zero-argument callable returning
one; ``MODULE`` is imported with the current directory on ``sys.path``. Exit status: 0 when stdin
ends, 2 for a bad target or bad options (with a message on stderr), 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from snodo.server.stdio import (
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
        description="Serve a snodo Runtime over stdio (one JSON-RPC message per line).",
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and serve; the exit status."""
    args = _parser().parse_args(argv)
    if args.server_request_timeout <= 0:
        print(
            "python -m snodo.server: error: --server-request-timeout must be positive",
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
