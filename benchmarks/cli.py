"""``snodo tools`` against the same listing through the library, each from a fresh interpreter.

    python benchmarks/cli.py [--runs 15]

Both sides start the example Runtime over stdio (``python -m snodo.server
example_runtime:runtime``), list its tools and print them, then exit; each run is one
subprocess timed from the outside (wall clock, ``perf_counter`` around ``subprocess.run``), so
the interpreter start, the imports, the server's start and the handshake are in both. The
command is the installed console script (``.venv/bin/snodo tools --stdio ...``); the library
side is ``python -c "import snodo; ..."`` printing each tool's name. Runs alternate which goes
first, after one untimed warm-up of each. Also the CPU time (user + system) of each run, its
server included (``RUSAGE_CHILDREN``), steadier than the wall clock on a loaded machine.
Target: the command's median within 50 ms of the library's (docs/decisions/0043-cli.md).
"""

from __future__ import annotations

import argparse
import resource
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from _common import machine

TARGET_MS = 50.0
ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SNODO = Path(sys.executable).parent / "snodo"
SERVER = [sys.executable, "-m", "snodo.server", "example_runtime:runtime"]
LIBRARY = f"""
import snodo
client = snodo.connect(snodo.Stdio({SERVER[0]!r}, {SERVER[1:]!r}))
for tool in client.list_tools():
    print(tool["name"], tool.get("description", ""), sep="\\t")
client.close()
"""
COMMANDS = {
    "snodo tools": [str(SNODO), "tools", "--stdio", shlex.join(SERVER)],
    "library": [sys.executable, "-c", LIBRARY],
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def once(command: list[str]) -> tuple[float, float]:
    """One run of ``command`` in ``examples/`` (so the server finds its module): wall and CPU
    ms."""
    cpu = _cpu()
    began = time.perf_counter()
    done = subprocess.run(
        command, cwd=EXAMPLES, capture_output=True, text=True, timeout=120, check=False
    )
    elapsed = (time.perf_counter() - began) * 1000.0
    cpu = (_cpu() - cpu) * 1000.0
    if done.returncode != 0 or "echo" not in done.stdout:
        raise SystemExit(f"{command[:2]} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return elapsed, cpu


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs of each (default 15)")
    args = parser.parse_args(argv)
    if not SNODO.exists():
        print(f"no console script at {SNODO}: pip install -e . (it comes with the package)")
        return 1

    print("snodo tools against the library's list_tools(), each a fresh interpreter (ms)")
    print(f"machine: {machine()}")
    print(f"runs: {args.runs} of each, alternating, after one untimed warm-up each\n")
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpus: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for command in COMMANDS.values():
        once(command)
    names = list(COMMANDS)
    for run in range(args.runs):
        for name in names if run % 2 == 0 else reversed(names):
            wall, cpu = once(COMMANDS[name])
            times[name].append(wall)
            cpus[name].append(cpu)
    print(f"{'':<12} {'min':>8} {'median':>8} {'max':>8} {'cpu median':>11}")
    for name, samples in times.items():
        print(
            f"{name:<12} {min(samples):8.1f} {statistics.median(samples):8.1f} "
            f"{max(samples):8.1f} {statistics.median(cpus[name]):11.1f}"
        )
    command = statistics.median(times["snodo tools"])
    library = statistics.median(times["library"])
    difference = command - library
    cpu_difference = statistics.median(cpus["snodo tools"]) - statistics.median(cpus["library"])
    verdict = "met" if difference <= TARGET_MS else "NOT met"
    print(
        f"\ndifference of the medians: {difference:+.1f} ms wall, {cpu_difference:+.1f} ms CPU; "
        f"target within {TARGET_MS:.0f} ms (wall): {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
