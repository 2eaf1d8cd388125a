"""stdio ``tools/call`` rates and memory per idle connection: snodo versus the floor and the SDK clients.

    python benchmarks/stdio.py [--calls 2000] [--concurrent-calls 3200] [--rounds 5]
                               [--floor-rounds 3] [--ts2-rounds 3]
                               [--connections 100] [--memory-rounds 3] [--skip-ts]
    python benchmarks/stdio.py --rounds 1 --floor-rounds 1 --ts2-rounds 1 --memory-rounds 0

Every client talks to the same tiny raw server, ``benchmarks/_echo_server.py`` (stdlib json, one
``echo`` tool), started with this interpreter, so the client is the bottleneck. Clients:

* floor: no library (``benchmarks/_stdio_floor.py``): the bytes snodo sends for the version,
  ``json.dumps``/``os.write``/``os.read``/``json.loads`` and a check per call; sequential in a bare
  loop, and 16 caller threads with one reader thread handing each reply by id to its caller's
  queue. The ceiling for a CPython client on this machine at that moment.
* snodo: ``snodo.connect(snodo.Stdio(python, [_echo_server.py]), protocol=...)``; the concurrent
  callers are 16 threads sharing the one client.
* gevent: snodo as above in a worker that monkey-patches with gevent before anything else
  (``_common.under_gevent``); the 16 callers are greenlets. Target (issue 19): every rate at least
  snodo's on threads. (No floor under gevent here: the bare floor's ``os.read`` of a pipe is not
  cooperative under gevent, so it would measure the threaded floor again.)
* mcp 2.3.0 (the official Python SDK): ``mcp.Client(StdioServerParameters(...))`` inside
  ``anyio.run``, ``mode="legacy"`` for 2025-11-25 and ``mode="2026-07-28"``; the concurrent callers
  are 16 anyio tasks on the one session.
* The TypeScript SDK (``@modelcontextprotocol/sdk``, pinned in benchmarks/ts/package-lock.json):
  ``node benchmarks/ts/bench.mjs``; the concurrent callers are 16 async workers on one client.
  ``npm ci`` runs in benchmarks/ts when node_modules is missing; without node or npm the row is
  skipped with a message.
* The TypeScript client v2 (``@modelcontextprotocol/client``, pinned in
  benchmarks/ts2/package-lock.json): ``node benchmarks/ts2/bench.mjs``, as benchmarks/aio.py runs
  it; 16 concurrent promises on one client; skipped like the 1.x client.

Both protocol versions: **2025-11-25** (the initialize handshake), which every client speaks, and
2026-07-28 (pinned: no probe; every request carries the ``_meta`` envelope) for every client but
the TS SDK 1.x, which speaks nothing later (the v2 client pinned to it sends one
``server/discover`` at connect).

Rates: each measurement runs in a fresh subprocess: connect, check one answer, ``--warmup``
untimed calls, ``--calls`` sequential calls, then ``--concurrent-calls`` calls spread over 16
concurrent callers. Rounds interleave the cases (``--rounds``; the rows issue 19 added, the floor
and ts2, run ``--floor-rounds`` and ``--ts2-rounds``, 3 by default, to keep the run's length). Reported: calls/s min / median / max and the
client's CPU per call (its own process: user + system, all threads; the server is excluded).

Memory: in a fresh subprocess, open one warm-up client and make a call; then open
``--connections`` more clients, each making one call, and report the client process's RSS delta
divided by the number of connections (servers are other processes and excluded), with the OS
threads and file descriptors it holds per connection.

Targets (issue 19), per version: snodo at least 0.8x the floor sequentially and 0.7x with 16
callers, its client CPU per call at most 2x the floor's (both shapes), ahead of every peer on
both rates; and at most 24 KiB of RSS per idle connection.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import (
    cpu_seconds,
    footprint,
    machine,
    run_json,
    spread,
    under_gevent,
    version_of,
)
from _node import (
    TS2_DIR,
    TS2_PACKAGE,
    TS_DIR,
    TS_PACKAGE,
    node_version,
    npm_ready,
    package_version,
    ts2_command,
    ts2_outcome,
)
from _ratios import Medians, gevent_lines, ratio_lines

__all__ = ["main", "node_version"]  # benchmarks/aio.py imports node_version from here

HERE = Path(__file__).resolve().parent
ECHO_SERVER = HERE / "_echo_server.py"
TEXT = "hi"
CONCURRENCY = 16
TARGET_KIB_PER_CONNECTION = 24.0
SHARED = "2025-11-25"  # the protocol every client speaks (memory is measured there)
VERSIONS = ("2025-11-25", "2026-07-28")
#: the clients of each version, the floor first; rounds interleave them in this order
CLIENTS: dict[str, tuple[str, ...]] = {
    "2025-11-25": ("floor", "snodo", "gevent", "mcp", "ts", "ts2"),
    "2026-07-28": ("floor", "snodo", "gevent", "mcp", "ts2"),  # the TS SDK 1.x: nothing later
}
PEERS = {"mcp": 1.0, "ts": 1.0, "ts2": 1.0}  # snodo must be ahead of each
#: case name -> (client, protocol version)
RATE_CASES: dict[str, tuple[str, str]] = {
    f"{client} {version}": (client, version) for version in VERSIONS for client in CLIENTS[version]
}
#: snodo / floor at least this: (sequential, 16 callers); and its CPU per call at most CPU x
TARGET_FLOOR = (0.8, 0.7)
TARGET_CPU = 2.0
MEMORY_CASES = ["snodo", "mcp", "ts"]


def server_command() -> tuple[str, list[str]]:
    return sys.executable, [str(ECHO_SERVER)]


# -- the workers (each runs in its own subprocess) ----------------------------------------------


def snodo_rates(version: str, calls: int, concurrent_calls: int, warmup: int) -> dict[str, Any]:
    import snodo

    command, args = server_command()
    with snodo.connect(snodo.Stdio(command, args), protocol=version) as client:

        def echo() -> Any:
            return client.call_tool("echo", {"text": TEXT})

        first = echo()
        assert first["content"][0]["text"] == TEXT, first
        for _ in range(warmup):
            echo()
        cpu, started = cpu_seconds(), time.perf_counter()
        for _ in range(calls):
            last = echo()
        seq_seconds, seq_cpu = time.perf_counter() - started, cpu_seconds() - cpu
        assert last["content"][0]["text"] == TEXT, last

        share = concurrent_calls // CONCURRENCY
        gate = threading.Barrier(CONCURRENCY + 1)
        failures: list[BaseException] = []

        def caller() -> None:
            gate.wait()
            try:
                for _ in range(share):
                    answer = echo()
                    assert answer["content"][0]["text"] == TEXT, answer
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=caller) for _ in range(CONCURRENCY)]
        for thread in threads:
            thread.start()
        gate.wait()
        cpu, started = cpu_seconds(), time.perf_counter()
        for thread in threads:
            thread.join()
        conc_seconds, conc_cpu = time.perf_counter() - started, cpu_seconds() - cpu
        if failures:
            raise failures[0]
        negotiated = client.version
    return {
        "seq_seconds": seq_seconds,
        "seq_cpu": seq_cpu,
        "conc_seconds": conc_seconds,
        "conc_calls": share * CONCURRENCY,
        "conc_cpu": conc_cpu,
        "negotiated": negotiated,
    }


def _mcp_client(version: str) -> Any:
    from mcp import Client, StdioServerParameters

    command, args = server_command()
    mode = "legacy" if version == "2025-11-25" else version
    return Client(StdioServerParameters(command=command, args=args), mode=mode)


def mcp_rates(version: str, calls: int, concurrent_calls: int, warmup: int) -> dict[str, Any]:
    import anyio

    outcome: dict[str, Any] = {}

    async def session() -> None:
        async with _mcp_client(version) as client:

            async def echo() -> Any:
                return await client.call_tool("echo", {"text": TEXT})

            first = await echo()
            assert getattr(first.content[0], "text", None) == TEXT, first
            for _ in range(warmup):
                await echo()
            cpu, started = cpu_seconds(), time.perf_counter()
            for _ in range(calls):
                last = await echo()
            outcome["seq_seconds"] = time.perf_counter() - started
            outcome["seq_cpu"] = cpu_seconds() - cpu
            assert getattr(last.content[0], "text", None) == TEXT, last

            share = concurrent_calls // CONCURRENCY

            async def caller() -> None:
                for _ in range(share):
                    answer = await echo()
                    assert getattr(answer.content[0], "text", None) == TEXT, answer

            cpu, started = cpu_seconds(), time.perf_counter()
            async with anyio.create_task_group() as group:
                for _ in range(CONCURRENCY):
                    group.start_soon(caller)
            outcome["conc_seconds"] = time.perf_counter() - started
            outcome["conc_cpu"] = cpu_seconds() - cpu
            outcome["conc_calls"] = share * CONCURRENCY
            outcome["negotiated"] = client.session.protocol_version

    anyio.run(session)
    return outcome


def snodo_memory(connections: int, traced: bool = False) -> dict[str, Any]:
    """``traced``: also count the Python heap the connections keep (tracemalloc; a run of its
    own, since tracing changes the RSS it would measure)."""
    import tracemalloc

    import snodo

    command, args = server_command()
    clients = []
    try:
        warm = snodo.connect(snodo.Stdio(command, args), protocol=SHARED)
        clients.append(warm)
        first: Any = warm.call_tool("echo", {"text": TEXT})
        assert first["content"][0]["text"] == TEXT, first
        if traced:
            tracemalloc.start()
        before = footprint()
        heap_before = tracemalloc.get_traced_memory()[0]
        started = time.perf_counter()
        for _ in range(connections):
            client = snodo.connect(snodo.Stdio(command, args), protocol=SHARED)
            clients.append(client)
            answer: Any = client.call_tool("echo", {"text": TEXT})
            assert answer["content"][0]["text"] == TEXT, answer
        opened = time.perf_counter() - started
        after = footprint()
        heap = tracemalloc.get_traced_memory()[0] - heap_before
        tracemalloc.stop()
    finally:
        closing = time.perf_counter()
        for client in clients:
            client.close()
    closed = time.perf_counter() - closing
    return {
        "before": before,
        "after": after,
        "heap": heap,
        "open_seconds": opened,
        "close_seconds": closed,
    }


def mcp_memory(connections: int) -> dict[str, Any]:
    from contextlib import AsyncExitStack

    import anyio

    outcome: dict[str, Any] = {}

    async def sessions() -> None:
        stack = AsyncExitStack()
        try:
            warm = await stack.enter_async_context(_mcp_client(SHARED))
            assert getattr((await warm.call_tool("echo", {"text": TEXT})).content[0], "text", None)
            outcome["before"] = footprint()
            started = time.perf_counter()
            for _ in range(connections):
                client = await stack.enter_async_context(_mcp_client(SHARED))
                answer = await client.call_tool("echo", {"text": TEXT})
                assert getattr(answer.content[0], "text", None) == TEXT, answer
            outcome["open_seconds"] = time.perf_counter() - started
            outcome["after"] = footprint()
        finally:
            closing = time.perf_counter()
            await stack.aclose()
            outcome["close_seconds"] = time.perf_counter() - closing

    anyio.run(sessions)
    return outcome


def worker(kind: str, case: str, args: argparse.Namespace) -> int:
    outcome: dict[str, Any]
    if kind == "rates":
        client, version = RATE_CASES[case]
        if client == "floor":
            from _stdio_floor import rates

            outcome = rates(version, args.calls, args.concurrent_calls, args.warmup, CONCURRENCY)
        else:
            run = snodo_rates if client in ("snodo", "gevent") else mcp_rates
            outcome = run(version, args.calls, args.concurrent_calls, args.warmup)
    elif kind == "heap":
        outcome = snodo_memory(args.connections, traced=True)
    else:
        outcome = (
            snodo_memory(args.connections) if case == "snodo" else mcp_memory(args.connections)
        )
    print(json.dumps(outcome))
    return 0


# -- the TypeScript clients --------------------------------------------------------------------


def ts_ready() -> dict[str, str]:
    """client -> why its rows are skipped, for the TS clients that cannot run."""
    skipped = {}
    for client, directory, package in (("ts", TS_DIR, TS_PACKAGE), ("ts2", TS2_DIR, TS2_PACKAGE)):
        why_not = npm_ready(directory, package)
        if why_not is not None:
            skipped[client] = why_not
    return skipped


def ts_command(kind: str, args: argparse.Namespace) -> list[str]:
    command, server_args = server_command()
    script = str(TS_DIR / "bench.mjs")
    if kind == "rates":
        counts = [args.calls, args.concurrent_calls, args.warmup, CONCURRENCY]
        return ["node", script, "rates", *map(str, counts), "stdio", command, *server_args]
    return ["node", "--expose-gc", script, "memory", str(args.connections), command, *server_args]


# -- the driver ---------------------------------------------------------------------------------


def measure(kind: str, case: str, args: argparse.Namespace) -> dict[str, Any] | str:
    client = RATE_CASES[case][0] if kind == "rates" else case
    if client == "ts":
        return run_json(ts_command(kind, args))
    if client == "ts2":
        command, server_args = server_command()
        counts = (args.calls, args.concurrent_calls, args.warmup)
        target = ["stdio", command, *server_args]
        return ts2_outcome(
            run_json(ts2_command(RATE_CASES[case][1], counts, CONCURRENCY, target)), CONCURRENCY
        )
    command = [sys.executable, __file__, "--worker", kind, case]
    command += ["--calls", str(args.calls), "--concurrent-calls", str(args.concurrent_calls)]
    command += ["--warmup", str(args.warmup), "--connections", str(args.connections)]
    return run_json(under_gevent(command) if client == "gevent" else command)


def report_rates(args: argparse.Namespace, skipped: dict[str, str]) -> bool:
    """Measure and print the rates and the ratios; True if a snodo or floor case failed."""
    cases = [c for c in RATE_CASES if RATE_CASES[c][0] not in skipped]
    seq: dict[str, list[float]] = {c: [] for c in cases}
    conc: dict[str, list[float]] = {c: [] for c in cases}
    seq_cpu: dict[str, list[float]] = {c: [] for c in cases}
    conc_cpu: dict[str, list[float]] = {c: [] for c in cases}
    negotiated: dict[str, str] = {}
    errors: dict[str, str] = {}
    shapes: dict[str, list[tuple[float, float]]] = {c: [] for c in cases}  # the floor's
    rounds = {"floor": args.floor_rounds, "gevent": args.floor_rounds, "ts2": args.ts2_rounds}
    for round_number in range(max(args.rounds, *rounds.values())):
        for case in cases:
            if case in errors or round_number >= rounds.get(RATE_CASES[case][0], args.rounds):
                continue
            got = measure("rates", case, args)
            if isinstance(got, str):
                errors[case] = got
                continue
            if "seq_loop" in got:
                shapes[case].append((got["seq_loop"], got["seq_reader"]))
            seq[case].append(args.calls / got["seq_seconds"])
            conc[case].append(got["conc_calls"] / got["conc_seconds"])
            seq_cpu[case].append(got["seq_cpu"] / args.calls * 1e6)
            conc_cpu[case].append(got["conc_cpu"] / got["conc_calls"] * 1e6)
            negotiated[case] = str(got["negotiated"])

    print(
        f"{'case':<17} {'negotiated':<11} {'sequential calls/s min / median / max':>37} "
        f"{'µs cpu':>7}  {'16 concurrent calls/s min / median / max':>40} {'µs cpu':>7}"
    )
    medians: dict[str, Medians] = {}
    for case in RATE_CASES:
        client = RATE_CASES[case][0]
        if client in skipped:
            print(f"{case:<17} skipped: {skipped[client]}")
            continue
        if case in errors:
            print(f"{case:<17} failed: {errors[case]}")
            continue
        medians[case] = Medians(
            statistics.median(seq[case]),
            statistics.median(conc[case]),
            statistics.median(seq_cpu[case]),
            statistics.median(conc_cpu[case]),
        )
        print(
            f"{case:<17} {negotiated[case]:<11} {spread(seq[case], lambda v: f'{v:,.0f}'):>37} "
            f"{medians[case].seq_cpu:7.0f}  "
            f"{spread(conc[case], lambda v: f'{v:,.0f}'):>40} "
            f"{medians[case].conc_cpu:7.0f}"
        )
    for case, measured in shapes.items():
        if measured:
            loop = statistics.median(m[0] for m in measured)
            reader = statistics.median(m[1] for m in measured)
            print(
                f"  {case} sequential: the faster per round of a bare loop (median "
                f"{loop:,.0f}/s) and one reader thread (median {reader:,.0f}/s)"
            )
    print()
    for line in ratio_lines(medians, RATE_CASES, VERSIONS, PEERS, TARGET_FLOOR, TARGET_CPU):
        print(line)
    for line in gevent_lines(medians, VERSIONS):
        print(line)
    return any(RATE_CASES[case][0] in ("snodo", "gevent", "floor") for case in errors)


def report_memory(args: argparse.Namespace, skipped: dict[str, str]) -> bool:
    """Measure and print memory per idle connection; True if the snodo case failed."""
    n = args.connections
    print(
        f"\nmemory per idle connection: {n} connections each after one call, client process only "
        f"(median of {args.memory_rounds} runs)\n"
    )
    print(
        f"{'client':<7} {'RSS delta':>10} {'KiB/conn':>9} {'threads/conn':>13} {'fds/conn':>9} "
        f"{'open s':>7} {'close s':>8}"
    )
    per_connection: dict[str, float] = {}
    failed = False
    for case in MEMORY_CASES:
        if case in skipped:
            print(f"{case:<7} skipped: {skipped[case]}")
            continue
        runs: list[dict[str, Any]] = []
        error = None
        for _ in range(args.memory_rounds):
            got = measure("memory", case, args)
            if isinstance(got, str):
                error = got
                break
            runs.append(got)
        if error is not None:
            print(f"{case:<7} failed: {error}")
            failed = failed or case == "snodo"
            continue
        if case == "ts":  # node reports RSS only
            deltas = [r["rss_after"] - r["rss_before"] for r in runs]
            threads = fds = opened = closed = "-"
        else:
            deltas = [r["after"]["rss"] - r["before"]["rss"] for r in runs]
            threads = f"{statistics.median((r['after']['threads'] - r['before']['threads']) / n for r in runs):.2f}"
            fds = f"{statistics.median((r['after']['fds'] - r['before']['fds']) / n for r in runs):.2f}"
            opened = f"{statistics.median(r['open_seconds'] for r in runs):.2f}"
            closed = f"{statistics.median(r['close_seconds'] for r in runs):.2f}"
        delta = statistics.median(deltas)
        per_connection[case] = delta / n / 1024
        print(
            f"{case:<7} {delta / 2**20:>6.1f} MiB {per_connection[case]:9.1f} {threads:>13} "
            f"{fds:>9} {opened:>7} {closed:>8}"
        )
    print()
    if "snodo" in per_connection:
        heap = measure("heap", "snodo", args)
        if isinstance(heap, dict):
            print(
                f"snodo Python heap kept per connection (tracemalloc, one more run): "
                f"{heap['heap'] / n / 1024:.1f} KiB (the RSS delta also depends on where the "
                "allocator finds room, so it moves by a KiB or two when object sizes change)"
            )
        kib = per_connection["snodo"]
        verdict = "met" if kib <= TARGET_KIB_PER_CONNECTION else "NOT met"
        print(
            f"target snodo <= {TARGET_KIB_PER_CONNECTION:.0f} KiB per idle connection: "
            f"{verdict} ({kib:.1f} KiB)"
        )
        for peer in ("mcp", "ts"):
            if peer in per_connection and kib > 0:
                print(f"ratio {peer} / snodo per connection: {per_connection[peer] / kib:.2f}x")
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="timed sequential calls per round")
    parser.add_argument(
        "--concurrent-calls", type=int, default=3200, help="timed calls over 16 callers per round"
    )
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first")
    parser.add_argument("--rounds", type=int, default=5, help="rate rounds (one subprocess each)")
    parser.add_argument("--floor-rounds", type=int, default=3, help="rate rounds for the floor")
    parser.add_argument("--ts2-rounds", type=int, default=3, help="rate rounds for ts2")
    parser.add_argument("--connections", type=int, default=100, help="idle connections to hold")
    parser.add_argument("--memory-rounds", type=int, default=3, help="memory runs per client")
    parser.add_argument("--skip-ts", action="store_true", help="leave both TypeScript clients out")
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "CASE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], args.worker[1], args)

    skipped = {"ts": "--skip-ts", "ts2": "--skip-ts"} if args.skip_ts else ts_ready()

    print("stdio tools/call round trips against benchmarks/_echo_server.py (raw, stdlib json)")
    print(f"machine: {machine()}")
    print(
        f"snodo {version_of('snodo')}, mcp {version_of('mcp')}, "
        f"{TS_PACKAGE} {package_version(TS_DIR, TS_PACKAGE)}, "
        f"{TS2_PACKAGE} {package_version(TS2_DIR, TS2_PACKAGE)} (node {node_version()})"
    )
    print(
        f"{args.rounds} rounds x ({args.calls} sequential calls, then {args.concurrent_calls} calls "
        f"over {CONCURRENCY} concurrent callers) after {args.warmup} warm-up calls "
        f"(the floor: {args.floor_rounds} rounds, ts2: {args.ts2_rounds}); both protocol "
        f"versions; memory on {SHARED}"
    )
    print("µs cpu: the client process's CPU time per call (median)\n")
    rates_failed = report_rates(args, skipped)
    memory_failed = False
    if args.memory_rounds > 0:
        memory_failed = report_memory(args, skipped)
    else:
        print("\nmemory per idle connection: skipped (--memory-rounds 0)")
    return 1 if rates_failed or memory_failed else 0


if __name__ == "__main__":
    sys.exit(main())
