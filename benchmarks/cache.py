"""The response cache: a cached ``list_tools`` against an uncached one, in the same run.

    python benchmarks/cache.py [--calls 20000] [--rounds 5] [--warmup 500]

The server is one Runtime with ten tools (each with a small input schema) whose ``tools/list``
results carry ``ttlMs`` 60,000 and ``cacheScope`` "public", pinned to 2026-07-28:

* direct: ``snodo.direct(runtime)`` and ``snodo.direct(runtime, cache=True)``;
* stdio: ``snodo.connect(snodo.Stdio(python, ["-m", "snodo.server", "cache:runtime"]))``, the
  same Runtime served by a child process, without and with ``cache=True``.

Every measurement runs in a fresh subprocess: connect, check one answer (ten tools), make
``--warmup`` untimed calls (the first one stores the result), then time ``--calls`` sequential
``list_tools()`` calls. Rounds interleave the four cases. Reported: µs per call min / median /
max over the rounds and the speed-up of the cached call. Target: a cache hit (the cached rows)
costs under 10 µs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import machine, version_of

HERE = Path(__file__).resolve().parent
TARGET_US = 10.0
TOOLS = 10
VERSION = "2026-07-28"

#: case name -> (connection, cache)
CASES: dict[str, tuple[str, bool]] = {
    "direct uncached": ("direct", False),
    "direct cached": ("direct", True),
    "stdio uncached": ("stdio", False),
    "stdio cached": ("stdio", True),
}


def build() -> Any:
    """The benchmark's Runtime: ten tools, public tools/list results for a minute."""
    from snodo.server import CacheHint, Runtime

    rt = Runtime(
        "bench-cache",
        "1.0",
        versions=[VERSION],
        cache_hints={"tools": CacheHint(ttl_ms=60_000, scope="public")},
    )
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["text"],
    }
    for i in range(TOOLS):
        rt.add_tool(
            f"tool_{i}", lambda args, ctx: "ok", description=f"Tool {i}", input_schema=schema
        )
    return rt


def __getattr__(name: str) -> Any:
    """``cache:runtime`` for ``python -m snodo.server`` (built only when the server asks)."""
    if name == "runtime":
        return build()
    raise AttributeError(name)


# -- the worker (runs in its own subprocess) ----------------------------------------------------


def run(case: str, calls: int, warmup: int) -> dict[str, Any]:
    import snodo

    connection, cache = CASES[case]
    if connection == "direct":
        client = snodo.direct(build(), protocol=VERSION, cache=cache)
    else:
        server = snodo.Stdio(sys.executable, ["-m", "snodo.server", "cache:runtime"])
        client = snodo.connect(server, cwd=str(HERE), protocol=VERSION, cache=cache)
    with client:
        tools = client.list_tools()
        assert len(tools) == TOOLS, tools
        for _ in range(warmup):
            client.list_tools()
        started = time.perf_counter()
        for _ in range(calls):
            tools = client.list_tools()
        elapsed = time.perf_counter() - started
        assert len(tools) == TOOLS, tools
    return {"us": elapsed / calls * 1e6}


def measure(case: str, calls: int, warmup: int) -> float | str:
    """One measurement in a fresh subprocess: µs per call, or an error text."""
    command = [sys.executable, __file__, "--worker", case, "--calls", str(calls)]
    command += ["--warmup", str(warmup)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return "timed out"
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    return float(outcome["us"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="timed calls per measurement")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (one subprocess each)")
    parser.add_argument("--warmup", type=int, default=500, help="untimed calls first")
    parser.add_argument("--worker", choices=sorted(CASES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(run(args.worker, args.calls, args.warmup)))
        return 0

    print("cached versus uncached list_tools (10 tools, public ttlMs 60000), sequential calls")
    print(f"machine: {machine()}")
    print(f"snodo {version_of('snodo')}, protocol {VERSION}")
    print(f"{args.rounds} rounds x {args.calls} calls after {args.warmup} warm-up calls\n")
    samples: dict[str, list[float]] = {case: [] for case in CASES}
    failed = False
    for _ in range(args.rounds):
        for case in CASES:
            outcome = measure(case, args.calls, args.warmup)
            if isinstance(outcome, str):
                print(f"{case}: FAILED: {outcome}")
                failed = True
            else:
                samples[case].append(outcome)
    print(f"{'case':<18}{'min µs':>10}{'median µs':>12}{'max µs':>10}")
    medians: dict[str, float] = {}
    for case, values in samples.items():
        if not values:
            continue
        medians[case] = statistics.median(values)
        print(f"{case:<18}{min(values):>10.2f}{medians[case]:>12.2f}{max(values):>10.2f}")
    print()
    for connection in ("direct", "stdio"):
        cached, uncached = (
            medians.get(f"{connection} cached"),
            medians.get(f"{connection} uncached"),
        )
        if cached is None or uncached is None:
            continue
        verdict = "met" if cached < TARGET_US else "NOT met"
        print(
            f"{connection}: a cache hit costs {cached:.2f} µs, {uncached / cached:.1f}x faster "
            f"than the uncached call (target < {TARGET_US:.0f} µs: {verdict})"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
