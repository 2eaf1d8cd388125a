"""A fleet of many servers in one process: time to ready, client memory per server, the catalog,
and what routing a call through the fleet costs.

    python benchmarks/fleet.py [--stdio-servers 100] [--http-servers 1000] [--rounds 5]
                               [--parallel 8,32] [--pairs 3000] [--list-calls 200]
                               [--http-processes 4]

Two fleets, each ``snodo.Fleet(config, start="eager")`` in a fresh subprocess per measurement:

* stdio: ``--stdio-servers`` entries ``{"command": python, "args": [_echo_server.py]}``, one
  ``benchmarks/_echo_server.py`` process each (a tiny raw stdlib server with one ``echo`` tool).
* HTTP: ``--http-servers`` entries ``{"type": "http", "url": ...}``, each with its own URL
  (``/mcp/<i>``) on one of ``--http-processes`` ``benchmarks/_http_echo_server.py`` processes on
  127.0.0.1 (it answers a POST to any path), started once by this script and shared by all rounds.

No ``protocol`` is given, as a user's config would not: each server is probed (both echo servers
answer ``server/discover``, so the fleet speaks 2026-07-28). Each measurement: a warm-up fleet of
one server of the same kind makes a routed call and stays open (so that what every fleet loads
once is not counted); then, timed:

* time to ready: from ``Fleet(config)`` until it returns (every server ready or failed), with each
  ``max_parallel_starts`` of ``--parallel`` (the first is the Fleet's default);
* client memory per server: the process's RSS delta over the fleet's start, divided by the number
  of servers (the servers are other processes and excluded), with threads and fds per server;
* ``fleet.list_tools()`` over the whole fleet (the catalog the fleet holds): µs per call, mean of
  ``--list-calls`` after 10 untimed ones, and the item count;
* the routed call: ``fleet.call_tool("<server>_echo", {...})`` against
  ``fleet["<server>"].call_tool("echo", {...})`` on the same connection, ``--pairs`` pairs after
  200 untimed ones, alternating which goes first (ABBA), each call timed on its own; the median
  of each, and their difference (target: under 5 µs);
* ``fleet.close()``, timed, then a check that no server process of the fleet is left.

Rounds interleave the cases; reported are min / median / max over the rounds.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import footprint, machine, read_port, run_json, spread, stop, version_of

__all__ = ["main"]

HERE = Path(__file__).resolve().parent
ECHO_SERVER = HERE / "_echo_server.py"
HTTP_SERVER = HERE / "_http_echo_server.py"
TEXT = "hi"
TARGET_OVERHEAD_US = 5.0
START_DEADLINE = 60.0
WARMUP_PAIRS = 200
WARMUP_LISTS = 10
TRANSPORTS = ("stdio", "http")


# -- the worker (one measurement, in its own subprocess) -----------------------------------------


def fleet_config(transport: str, count: int, urls: Sequence[str], prefix: str) -> dict[str, Any]:
    """``count`` servers in the ``mcpServers`` format: stdio echo processes, or HTTP URLs spread
    over ``urls`` (one path per entry)."""
    servers: dict[str, Any] = {}
    for i in range(count):
        if transport == "stdio":
            servers[f"{prefix}{i}"] = {"command": sys.executable, "args": [str(ECHO_SERVER)]}
        else:
            servers[f"{prefix}{i}"] = {"type": "http", "url": f"{urls[i % len(urls)]}/{i}"}
    return {"mcpServers": servers}


def check(answer: Any) -> None:
    if answer["content"][0]["text"] != TEXT:
        raise AssertionError(f"unexpected answer {answer!r}")


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def timed_pairs(
    direct: Callable[[], Any], routed: Callable[[], Any], pairs: int
) -> tuple[list[int], list[int]]:
    """Nanoseconds per call of each, ``pairs`` of them, alternating which goes first."""
    clock = time.perf_counter_ns
    samples: tuple[list[int], list[int]] = ([], [])
    calls = (direct, routed)
    for i in range(pairs):
        for which in (0, 1) if i % 2 == 0 else (1, 0):
            call = calls[which]
            started = clock()
            answer = call()
            samples[which].append(clock() - started)
            check(answer)
    return samples


def run_fleet(
    transport: str, count: int, parallel: int, urls: Sequence[str], pairs: int, lists: int
) -> dict[str, Any]:
    import snodo

    warm = snodo.Fleet(fleet_config(transport, 1, urls, "warm"), start="eager")
    try:
        check(warm.call_tool("warm0_echo", {"text": TEXT}))
        before = footprint()
        started = time.perf_counter()
        fleet = snodo.Fleet(
            fleet_config(transport, count, urls, "s"),
            start="eager",
            max_parallel_starts=parallel,
        )
        ready_seconds = time.perf_counter() - started
        try:
            after = footprint()
            status = fleet.status()
            states = [entry["state"] for entry in status.values()]
            ready = states.count("ready")
            errors = sorted({str(e["error"]) for e in status.values() if e["error"]})
            pids = [e["pid"] for e in status.values() if e["pid"] is not None]
            versions = sorted({str(e["version"]) for e in status.values() if e["version"]})

            for _ in range(WARMUP_LISTS):
                items = fleet.list_tools()
            list_started = time.perf_counter()
            for _ in range(lists):
                items = fleet.list_tools()
            list_us = (time.perf_counter() - list_started) / lists * 1e6

            server = "s0"
            client = fleet[server]
            routed_name = next(
                item["name"]
                for item in items
                if item["fleet"] == {"server": server, "name": "echo"}
            )
            arguments = {"text": TEXT}

            def direct() -> Any:
                return client.call_tool("echo", arguments)

            def routed() -> Any:
                return fleet.call_tool(routed_name, arguments)

            timed_pairs(direct, routed, WARMUP_PAIRS)
            direct_ns, routed_ns = timed_pairs(direct, routed, pairs)
        finally:
            closing = time.perf_counter()
            fleet.close()
            close_seconds = time.perf_counter() - closing
    finally:
        warm.close()
    return {
        "ready_seconds": ready_seconds,
        "close_seconds": close_seconds,
        "servers": count,
        "ready": ready,
        "errors": errors[:3],
        "versions": versions,
        "before": before,
        "after": after,
        "items": len(items),
        "list_us": list_us,
        "direct_us": statistics.median(direct_ns) / 1000,
        "routed_us": statistics.median(routed_ns) / 1000,
        "left_running": sum(alive(pid) for pid in pids),
    }


# -- the driver ---------------------------------------------------------------------------------


@contextmanager
def http_servers(processes: int) -> Iterator[list[str]]:
    """Start ``processes`` ``_http_echo_server.py`` on 127.0.0.1; yield their base URLs; stop them."""
    started: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    with tempfile.TemporaryFile() as log:
        try:
            for _ in range(processes):
                process = subprocess.Popen(
                    [sys.executable, str(HTTP_SERVER), "0"], stdout=subprocess.PIPE, stderr=log
                )
                started.append(process)
                port = read_port(process, time.monotonic() + START_DEADLINE)
                urls.append(f"http://127.0.0.1:{port}/mcp")
            yield urls
        finally:
            for process in started:
                stop(process)


def measure(
    transport: str, count: int, parallel: int, urls: Sequence[str], args: argparse.Namespace
) -> dict[str, Any] | str:
    command = [sys.executable, __file__, "--worker", transport, str(count), str(parallel)]
    command += ["--pairs", str(args.pairs), "--list-calls", str(args.list_calls)]
    command += ["--urls", ",".join(urls)]
    return run_json(command)


def default_parallel() -> int:
    import snodo

    default = inspect.signature(snodo.Fleet).parameters["max_parallel_starts"].default
    return int(default)


def seconds(value: float) -> str:
    return f"{value:.2f}"


def micros(value: float) -> str:
    return f"{value:.1f}"


def report(
    cases: list[tuple[str, int, int]],
    results: dict[tuple[str, int, int], list[dict[str, Any]]],
    failures: dict[tuple[str, int, int], str],
) -> None:
    """Print the four tables (failed cases once, in the first)."""

    def label(case: tuple[str, int, int]) -> str:
        return f"{case[0]} x{case[1]}, max_parallel_starts={case[2]}"

    width = max(len(label(case)) for case in cases)
    print(
        '\ntime to ready: Fleet(config, start="eager") until it returns (s, min / median / max)\n'
    )
    print(f"{'fleet':<{width}}  {'ready s':>18}  {'ms/server':>9}  {'ready':>9}  {'close s':>7}")
    for case in cases:
        if case in failures:
            print(f"{label(case):<{width}}  failed: {failures[case]}")
            continue
        runs = results[case]
        ready = [r["ready_seconds"] for r in runs]
        per_server = statistics.median(ready) / case[1] * 1000
        counts = f"{min(r['ready'] for r in runs)}/{case[1]}"
        close = statistics.median(r["close_seconds"] for r in runs)
        print(
            f"{label(case):<{width}}  {spread(ready, seconds):>18}  {per_server:9.2f}  "
            f"{counts:>9}  {close:7.2f}"
        )

    print("\nclient memory per server: RSS delta over the fleet's start / servers (median)\n")
    print(f"{'fleet':<{width}}  {'RSS delta':>10}  {'KiB/server':>10}  {'threads/server':>14}  "
          f"{'fds/server':>10}")  # fmt: skip
    for case in cases:
        if case in failures:
            continue
        runs, n = results[case], case[1]
        delta = statistics.median(r["after"]["rss"] - r["before"]["rss"] for r in runs)
        threads = statistics.median(r["after"]["threads"] - r["before"]["threads"] for r in runs)
        fds = statistics.median(r["after"]["fds"] - r["before"]["fds"] for r in runs)
        print(
            f"{label(case):<{width}}  {delta / 2**20:6.1f} MiB  {delta / n / 1024:10.1f}  "
            f"{threads / n:14.2f}  {fds / n:10.2f}"
        )

    print("\nfleet.list_tools() over the whole fleet (µs per call, min / median / max)\n")
    print(f"{'fleet':<{width}}  {'µs/call':>24}  {'items':>6}")
    for case in cases:
        if case in failures:
            continue
        runs = results[case]
        print(
            f"{label(case):<{width}}  {spread([r['list_us'] for r in runs], micros):>24}  "
            f"{runs[0]['items']:6d}"
        )

    print(
        '\nrouted call: fleet.call_tool("s0_echo") against fleet["s0"].call_tool("echo") on '
        "the same connection\n(µs per call, median of each round's calls; min / median / max "
        "over the rounds)\n"
    )
    print(f"{'fleet':<{width}}  {'own Client µs':>20}  {'routed µs':>20}  {'overhead µs':>18}")
    for transport in TRANSPORTS:
        overheads: list[float] = []
        for case in cases:
            if case[0] != transport or case in failures:
                continue
            runs = results[case]
            direct = [r["direct_us"] for r in runs]
            routed = [r["routed_us"] for r in runs]
            extra = [r["routed_us"] - r["direct_us"] for r in runs]
            overheads += extra
            print(
                f"{label(case):<{width}}  {spread(direct, micros):>20}  "
                f"{spread(routed, micros):>20}  {spread(extra, micros):>18}"
            )
        if overheads:
            median = statistics.median(overheads)
            verdict = "met" if median < TARGET_OVERHEAD_US else "NOT met"
            print(
                f"  {transport}: routed-call overhead {median:.1f} µs (median of "
                f"{len(overheads)} rounds); target < {TARGET_OVERHEAD_US:.0f} µs: {verdict}"
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stdio-servers", type=int, default=100, help="stdio fleet size (0: none)")
    parser.add_argument("--http-servers", type=int, default=1000, help="HTTP fleet size (0: none)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (one subprocess per case)")
    parser.add_argument(
        "--parallel", help="comma-separated max_parallel_starts values (default: the Fleet's, 32)"
    )
    parser.add_argument("--pairs", type=int, default=3000, help="timed routed/own-Client pairs")
    parser.add_argument("--list-calls", type=int, default=200, help="timed list_tools() calls")
    parser.add_argument("--http-processes", type=int, default=4, help="HTTP echo server processes")
    parser.add_argument(
        "--worker", nargs=3, metavar=("TRANSPORT", "N", "P"), help=argparse.SUPPRESS
    )
    parser.add_argument("--urls", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        transport, count, parallel = args.worker[0], int(args.worker[1]), int(args.worker[2])
        urls = [url for url in args.urls.split(",") if url]
        outcome = run_fleet(transport, count, parallel, urls, args.pairs, args.list_calls)
        print(json.dumps(outcome))
        return 0
    if min(args.stdio_servers, args.http_servers) < 0 or args.rounds < 1 or args.pairs < 1:
        parser.error("counts must be positive (a fleet size of 0 leaves that fleet out)")
    if args.list_calls < 1 or args.http_processes < 1:
        parser.error("--list-calls and --http-processes must be at least 1")
    if args.parallel:
        parallels = [int(p) for p in args.parallel.split(",") if p.strip()]
    else:
        parallels = [default_parallel(), 32]
    sizes = {"stdio": args.stdio_servers, "http": args.http_servers}
    cases = [(t, sizes[t], p) for t in TRANSPORTS if sizes[t] > 0 for p in parallels]
    if not cases:
        parser.error("nothing to measure: both fleet sizes are 0")

    print("snodo.Fleet: many servers in one process (benchmarks/_echo_server.py over stdio, "
          "benchmarks/_http_echo_server.py over HTTP)")  # fmt: skip
    print(f"machine: {machine()}")
    print(f"snodo {version_of('snodo')}; pid {os.getpid()} drives, each measurement in a fresh "
          "subprocess")  # fmt: skip
    print(
        f"{args.rounds} rounds x {len(cases)} cases; stdio: {args.stdio_servers} echo server "
        f"processes; HTTP: {args.http_servers} entries, each its own URL, on "
        f"{args.http_processes} echo server processes; {args.list_calls} list_tools() calls, "
        f"{args.pairs} routed/own-Client call pairs per measurement"
    )
    results: dict[tuple[str, int, int], list[dict[str, Any]]] = {case: [] for case in cases}
    failures: dict[tuple[str, int, int], str] = {}
    versions: set[str] = set()
    leaks = 0
    with http_servers(args.http_processes if args.http_servers else 0) as urls:
        for _ in range(args.rounds):
            for case in cases:
                if case in failures:
                    continue
                got = measure(*case, urls, args)
                if isinstance(got, str):
                    failures[case] = got
                    continue
                if got["ready"] != got["servers"]:
                    failures[case] = (
                        f"{got['ready']}/{got['servers']} servers ready: {'; '.join(got['errors'])}"
                    )
                    continue
                versions.update(got["versions"])
                leaks += got["left_running"]
                results[case].append(got)
    print(f"negotiated: {', '.join(sorted(versions)) or '-'}")
    report(cases, results, failures)
    if leaks:
        print(f"\n{leaks} server processes were still running after fleet.close()")
    return 1 if failures or leaks else 0  # a target not met is a number, not a failure


if __name__ == "__main__":
    sys.exit(main())
