"""The shared response cache: a cache hit through Redis on 127.0.0.1 against the in-process hit.

    python benchmarks/cache_redis.py [--calls 5000] [--rounds 5]

The server is ``benchmarks/cache.py``'s Runtime (ten tools, public ``tools/list`` for a minute)
behind ``snodo.direct``; one client with ``cache=True`` (the in-process ``ResponseCache``) and
one with ``cache=snodo.RedisCache(...)`` against a ``redis-server`` this script starts on
127.0.0.1 (``tests/support/redis_server.py``, the tests' helper: installed from Debian's
packages when missing). After one storing call, ``--calls`` sequential ``list_tools()`` hits are
timed per round, the two cases interleaved. Reported: µs per hit min / median / max and the
ratio of the Redis hit to the in-process one (one Lua script round trip per hit).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the repository: tests.support.redis_server

from _common import machine, version_of  # noqa: E402
from cache import TOOLS, VERSION, build  # noqa: E402


def hits(client: Any, calls: int) -> float:
    """µs per ``list_tools()`` hit over ``calls`` sequential calls."""
    started = time.perf_counter()
    for _ in range(calls):
        tools = client.list_tools()
    elapsed = time.perf_counter() - started
    assert len(tools) == TOOLS, tools
    return elapsed / calls * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=5_000, help="timed hits per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds")
    args = parser.parse_args(argv)

    import snodo
    from tests.support.redis_server import RedisServer, redis_program

    program = redis_program()
    if program is None:
        print("redis-server is not installed and cannot be installed here: no row")
        return 1
    import subprocess

    server_version = subprocess.run(
        [program, "--version"], capture_output=True, text=True, timeout=10, check=False
    ).stdout.split()
    print(f"{machine()}; redis {version_of('redis')}; {' '.join(server_version[:3])}")
    print(f"{args.rounds} rounds of {args.calls} cached list_tools() hits, direct Runtime")
    results: dict[str, list[float]] = {"in-process hit": [], "redis hit": []}
    with tempfile.TemporaryDirectory(prefix="snodo-bench-redis-") as directory:
        server = RedisServer(program, Path(directory))
        server.start()
        try:
            with (
                snodo.RedisCache(server.url, prefix="bench:") as shared,
                snodo.direct(build(), protocol=VERSION, cache=True) as local_client,
                snodo.direct(build(), protocol=VERSION, cache=shared) as redis_client,
            ):
                for client in (local_client, redis_client):
                    client.list_tools()  # stored
                    hits(client, 200)  # warm
                for _ in range(args.rounds):
                    results["in-process hit"].append(hits(local_client, args.calls))
                    results["redis hit"].append(hits(redis_client, args.calls))
                assert shared.failures == 0, "Redis failed during the run"
        finally:
            server.stop()
    print(f"{'case':<16} {'min µs':>9} {'median µs':>10} {'max µs':>9}")
    for case, values in results.items():
        print(
            f"{case:<16} {min(values):>9.1f} {statistics.median(values):>10.1f} {max(values):>9.1f}"
        )
    ratio = statistics.median(results["redis hit"]) / statistics.median(results["in-process hit"])
    print(f"redis hit / in-process hit: {ratio:.1f}x (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
