"""How long ``import snodo`` takes in a fresh interpreter, next to ``import mcp`` (the official SDK).

    python benchmarks/import_time.py [--runs 7]

Each run starts a new ``python -c`` subprocess that times the import with ``time.perf_counter``
and counts the modules it loaded; bytecode caches are warm (one untimed run first), so this is
the cost a long-running program pays at start-up, not a first-install compile.

``import snodo`` loads its public names lazily, so the bare import is nearly free. The row
``snodo+api`` also resolves every name in ``snodo.__all__`` (the client, the protocol layer, the
transports) and imports ``snodo.server`` (the Runtime): what a program that opens a client
actually pays. Target: both under 150 ms (median).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence

from _common import machine

TARGET_MS = 150.0
CASES = {
    "snodo": "import snodo",
    "snodo+api": ("import snodo, snodo.server\nfor _name in snodo.__all__: getattr(snodo, _name)"),
    "mcp": "import mcp",
}
PROBE = """
import sys, time, json
before = len(sys.modules)
t = time.perf_counter()
{statement}
elapsed = time.perf_counter() - t
print(json.dumps({{"seconds": elapsed, "modules": len(sys.modules) - before}}))
"""


def measure(case: str, runs: int) -> tuple[list[float], int] | None:
    """Run ``case`` in ``runs`` fresh interpreters; None if it cannot be imported."""
    code = PROBE.format(statement=CASES[case])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPROFILEIMPORTTIME",)}
    times: list[float] = []
    modules = 0
    for i in range(runs + 1):  # the first run warms the bytecode cache and is not counted
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            print(f"  {case} failed: {done.stderr.strip().splitlines()[-1:]}")
            return None
        sample = json.loads(done.stdout.strip().splitlines()[-1])
        if i > 0:
            times.append(float(sample["seconds"]) * 1000.0)
            modules = int(sample["modules"])
    return times, modules


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per module (default 7)")
    args = parser.parse_args(argv)

    print("import time in a fresh interpreter (ms; warm bytecode cache)")
    print(f"machine: {machine()}")
    print(f"runs: {args.runs} per module, plus one untimed warm-up\n")
    print(f"{'import':<10} {'min':>8} {'median':>8} {'max':>8} {'modules':>8}")
    results: dict[str, float] = {}
    for case in CASES:
        measured = measure(case, args.runs)
        if measured is None:
            print(f"{case:<10} {'failed':>8}")
            continue
        times, modules = measured
        median = statistics.median(times)
        results[case] = median
        print(f"{case:<10} {min(times):8.1f} {median:8.1f} {max(times):8.1f} {modules:8d}")

    print()
    if "snodo" not in results or "snodo+api" not in results:
        print("import snodo failed")
        return 1
    for case in ("snodo", "snodo+api"):
        verdict = "met" if results[case] < TARGET_MS else "NOT met"
        print(f"target {case} < {TARGET_MS:.0f} ms (median): {verdict} ({results[case]:.1f} ms)")
    if "mcp" in results:
        ratio = results["mcp"] / results["snodo+api"]
        print(f"ratio: import mcp takes {ratio:.1f}x as long as snodo+api")
    return 0


if __name__ == "__main__":
    sys.exit(main())
