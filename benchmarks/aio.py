"""asyncio ``tools/call`` rates over stdio and HTTP: snodo's ``AsyncClient`` versus ``mcp`` and TS v2.

    python benchmarks/aio.py [--rounds 3] [--stdio-calls 1000] [--stdio-concurrent-calls 5120]
                             [--http-calls 1000] [--http-concurrent-calls 5120]
                             [--versions 2025-11-25,2026-07-28] [--transports stdio,http]
                             [--skip-ts] [--loop asyncio|uvloop]

The same servers as ``benchmarks/stdio.py`` and ``benchmarks/streamable_http.py``: stdio against
``benchmarks/_echo_server.py`` (started with this interpreter), HTTP against
``benchmarks/_http_echo_server.py`` (the "fast" server: stdlib, TCP_NODELAY, JSON answers, a
thread per connection), started once by this script on 127.0.0.1. Both make the client the
bottleneck. Clients, each measurement in a fresh subprocess:

* ``snodo aio``: ``await snodo.aio.connect(snodo.Stdio(...) | snodo.Http(url), protocol=...)`` on
  the default asyncio loop (``--loop uvloop``: uvloop, for mcp too); the concurrent callers are
  16 and 256 asyncio tasks (``asyncio.gather``) on the one ``AsyncClient``.
* ``mcp``: the official Python SDK 2.3.0, ``mcp.Client(...)`` inside ``anyio.run`` (the asyncio
  backend), as stdio.py and streamable_http.py drive it: ``mode="legacy"`` for 2025-11-25 and
  ``mode="2026-07-28"``; 16 and 256 anyio tasks on the one session.
* ``ts2``: the TypeScript SDK v2 client, ``@modelcontextprotocol/client`` 2.4.0 (pinned in
  ``benchmarks/ts2/package-lock.json``), ``node benchmarks/ts2/bench.mjs``: 16 (and, for
  orientation, 256) concurrent promises on one client. ``npm ci`` runs in benchmarks/ts2 when
  node_modules is missing; without node or npm the row is skipped with a message.
* ``snodo sync``: the threaded ``snodo.connect(...)`` with 16 threads sharing the client, for
  orientation (same work; no target).

Protocol versions: **2025-11-25** (the initialize handshake) is the comparison, spoken by every
client. The TS v2 client also speaks 2026-07-28 (``versionNegotiation: {mode: {pin:
"2026-07-28"}}``: one ``server/discover`` at connect, then every request carries the ``_meta``
envelope; its plain ``initialize`` list stops at 2025-11-25), so every client is measured on
2026-07-28 too (snodo and mcp pinned, no probe), with the same targets. On HTTP at 2026-07-28 the
TS v2 client adds an abort listener per request to a long-lived signal (node warns past 1,500;
the warning goes to its stderr, which is not shown).

Rates: connect, check one answer, ``--warmup`` untimed calls, the sequential calls, then the
concurrent calls spread over 16 callers, then the same number over 256 (``--stdio-*`` and
``--http-*`` counts; every client does the same work on a transport; at 256 over HTTP each task
makes 20 calls by default, so opening the keep-alive connections a burst of 256 needs is part of
that level, as it is for an application). Rounds interleave the cases. Reported: calls/s
min / median / max and the client's CPU per call (its own process: user + system, all threads;
servers excluded), and for the Python clients the most OS threads the process held while the 256
callers were in flight (read from /proc/self/status by one caller between its calls), beside the
count after connecting.

Targets (on each version, each transport): snodo aio at least 5x mcp with 16 and with 256 tasks,
and ahead of the TS v2 client with 16 concurrent callers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    cpu_seconds,
    machine,
    read_port,
    run_json,
    spread,
    status_field,
    stop,
    version_of,
)
from _node import TS2_DIR, TS2_PACKAGE, node_version, npm_ready, package_version

__all__ = ["main"]

HERE = Path(__file__).resolve().parent
ECHO_SERVER = HERE / "_echo_server.py"
HTTP_SERVER = HERE / "_http_echo_server.py"
TEXT = "hi"
LEVELS = (16, 256)  # concurrent callers
SYNC_LEVEL = 16
TS_TARGET_LEVEL = 16
TARGET_MCP_RATIO = 5.0
VERSIONS = ("2025-11-25", "2026-07-28")
TRANSPORTS = ("stdio", "http")
CLIENTS = ("snodo aio", "mcp", "ts2", "snodo sync")
START_DEADLINE = 60.0


@dataclass(frozen=True, slots=True)
class Case:
    """One measured row: a client on a transport speaking one version."""

    client: str
    transport: str
    version: str

    @property
    def name(self) -> str:
        return f"{self.client} {self.version}"

    @property
    def levels(self) -> tuple[int, ...]:
        return (SYNC_LEVEL,) if self.client == "snodo sync" else LEVELS


# -- the workers (each runs in its own subprocess) ----------------------------------------------


def check(answer: Any) -> None:
    text = answer["content"][0]["text"] if isinstance(answer, dict) else answer.content[0].text
    assert text == TEXT, answer


class ThreadWatch:
    """The most OS threads seen in this process; read every ``step`` calls by one caller."""

    def __init__(self, share: int) -> None:
        self.step = max(1, share // 16)
        self.most = 0

    def look(self, i: int) -> None:
        if i % self.step == 0:
            self.most = max(self.most, status_field("Threads"))


async def timed_async(
    echo: Callable[[], Awaitable[Any]],
    calls: int,
    concurrent_calls: int,
    warmup: int,
    spawn: Callable[[int, Callable[[int], Coroutine[Any, Any, None]]], Awaitable[None]],
) -> dict[str, Any]:
    """The shared asyncio measurement: ``spawn(n, caller)`` runs ``caller(0)`` .. ``caller(n - 1)``
    as n concurrent tasks."""
    check(await echo())
    for _ in range(warmup):
        await echo()
    idle_threads = status_field("Threads")
    cpu, started = cpu_seconds(), time.perf_counter()
    for _ in range(calls):
        last = await echo()
    seq_seconds, seq_cpu = time.perf_counter() - started, cpu_seconds() - cpu
    check(last)
    conc: dict[str, dict[str, float]] = {}
    for level in LEVELS:
        share = concurrent_calls // level
        watch = ThreadWatch(share)

        async def caller(index: int, share: int = share, watch: ThreadWatch = watch) -> None:
            for i in range(share):
                check(await echo())
                if index == 0:
                    watch.look(i)

        cpu, started = cpu_seconds(), time.perf_counter()
        await spawn(level, caller)
        conc[str(level)] = {
            "seconds": time.perf_counter() - started,
            "cpu": cpu_seconds() - cpu,
            "calls": share * level,
            "threads": watch.most,
        }
    return {
        "seq_seconds": seq_seconds,
        "seq_cpu": seq_cpu,
        "conc": conc,
        "idle_threads": idle_threads,
    }


async def asyncio_spawn(level: int, caller: Callable[[int], Coroutine[Any, Any, None]]) -> None:
    await asyncio.gather(*(caller(i) for i in range(level)))


async def anyio_spawn(level: int, caller: Callable[[int], Coroutine[Any, Any, None]]) -> None:
    import anyio

    async with anyio.create_task_group() as group:
        for i in range(level):
            group.start_soon(caller, i)


def snodo_target(transport: str, url: str) -> Any:
    import snodo

    if transport == "stdio":
        return snodo.Stdio(sys.executable, [str(ECHO_SERVER)])
    return snodo.Http(url)


def snodo_aio_rates(
    case: Case, url: str, counts: tuple[int, int, int], loop: str
) -> dict[str, Any]:
    import snodo.aio

    async def run() -> dict[str, Any]:
        target = snodo_target(case.transport, url)
        async with await snodo.aio.connect(target, protocol=case.version) as client:

            async def echo() -> Any:
                return await client.call_tool("echo", {"text": TEXT})

            outcome = await timed_async(echo, *counts, asyncio_spawn)
            outcome["negotiated"] = client.version
        return outcome

    if loop == "uvloop":
        import uvloop

        return uvloop.run(run())
    return asyncio.run(run())


def mcp_rates(case: Case, url: str, counts: tuple[int, int, int], loop: str) -> dict[str, Any]:
    import anyio
    from mcp import Client, StdioServerParameters

    mode = "legacy" if case.version == "2025-11-25" else case.version
    server: Any = url
    if case.transport == "stdio":
        server = StdioServerParameters(command=sys.executable, args=[str(ECHO_SERVER)])
    outcome: dict[str, Any] = {}

    async def session() -> None:
        async with Client(server, mode=mode) as client:

            async def echo() -> Any:
                return await client.call_tool("echo", {"text": TEXT})

            outcome.update(await timed_async(echo, *counts, anyio_spawn))
            outcome["negotiated"] = client.session.protocol_version

    anyio.run(session, backend="asyncio", backend_options={"use_uvloop": loop == "uvloop"})
    return outcome


def snodo_sync_rates(case: Case, url: str, counts: tuple[int, int, int]) -> dict[str, Any]:
    import snodo

    calls, concurrent_calls, warmup = counts
    with snodo.connect(snodo_target(case.transport, url), protocol=case.version) as client:

        def echo() -> Any:
            return client.call_tool("echo", {"text": TEXT})

        check(echo())
        for _ in range(warmup):
            echo()
        idle_threads = status_field("Threads")
        cpu, started = cpu_seconds(), time.perf_counter()
        for _ in range(calls):
            last = echo()
        seq_seconds, seq_cpu = time.perf_counter() - started, cpu_seconds() - cpu
        check(last)

        share = concurrent_calls // SYNC_LEVEL
        gate = threading.Barrier(SYNC_LEVEL + 1)
        failures: list[BaseException] = []
        watch = ThreadWatch(share)

        def caller(watching: bool) -> None:
            gate.wait()
            try:
                for i in range(share):
                    check(echo())
                    if watching:
                        watch.look(i)
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=caller, args=(i == 0,)) for i in range(SYNC_LEVEL)]
        for thread in threads:
            thread.start()
        gate.wait()
        cpu, started = cpu_seconds(), time.perf_counter()
        for thread in threads:
            thread.join()
        conc = {
            "seconds": time.perf_counter() - started,
            "cpu": cpu_seconds() - cpu,
            "calls": share * SYNC_LEVEL,
            "threads": watch.most,
        }
        if failures:
            raise failures[0]
        negotiated = client.version
    return {
        "seq_seconds": seq_seconds,
        "seq_cpu": seq_cpu,
        "conc": {str(SYNC_LEVEL): conc},
        "idle_threads": idle_threads,
        "negotiated": negotiated,
    }


def worker(args: argparse.Namespace) -> int:
    client, transport, version = args.worker
    case = Case(client, transport, version)
    counts = (args.calls, args.concurrent_calls, args.warmup)
    if client == "snodo aio":
        outcome = snodo_aio_rates(case, args.url, counts, args.loop)
    elif client == "mcp":
        outcome = mcp_rates(case, args.url, counts, args.loop)
    else:
        outcome = snodo_sync_rates(case, args.url, counts)
    print(json.dumps(outcome))
    return 0


# -- the TypeScript v2 client -------------------------------------------------------------------


# -- the driver ---------------------------------------------------------------------------------


@contextmanager
def http_server() -> Iterator[str]:
    """Start ``_http_echo_server.py`` on 127.0.0.1 once; yield its URL; stop it."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, str(HTTP_SERVER), "0"], stdout=subprocess.PIPE, stderr=log
        )
        try:
            port = read_port(process, time.monotonic() + START_DEADLINE)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            stop(process)


def measure(case: Case, url: str, args: argparse.Namespace) -> dict[str, Any] | str:
    calls, concurrent_calls = (
        (args.stdio_calls, args.stdio_concurrent_calls)
        if case.transport == "stdio"
        else (args.http_calls, args.http_concurrent_calls)
    )
    if case.client == "ts2":
        command = ["node", str(TS2_DIR / "bench.mjs"), case.version]
        command += [str(calls), str(concurrent_calls), str(args.warmup)]
        command += [",".join(map(str, LEVELS)), case.transport]
        command += [sys.executable, str(ECHO_SERVER)] if case.transport == "stdio" else [url]
        return run_json(command)
    command = [sys.executable, __file__, "--worker", case.client, case.transport, case.version]
    command += ["--calls", str(calls), "--concurrent-calls", str(concurrent_calls)]
    command += ["--warmup", str(args.warmup), "--url", url, "--loop", args.loop]
    return run_json(command)


@dataclass(slots=True)
class Samples:
    """What the rounds measured for one case."""

    seq: list[float]
    seq_cpu: list[float]
    conc: dict[int, list[float]]
    conc_cpu: dict[int, list[float]]
    threads: dict[int, list[int]]
    idle_threads: list[int]
    negotiated: str = "?"


def record(samples: Samples, got: dict[str, Any], calls: int) -> None:
    samples.seq.append(calls / got["seq_seconds"])
    samples.seq_cpu.append(got["seq_cpu"] / calls * 1e6)
    for level_text, row in got["conc"].items():
        level = int(level_text)
        samples.conc.setdefault(level, []).append(row["calls"] / row["seconds"])
        samples.conc_cpu.setdefault(level, []).append(row["cpu"] / row["calls"] * 1e6)
        if "threads" in row:
            samples.threads.setdefault(level, []).append(int(row["threads"]))
    if "idle_threads" in got:
        samples.idle_threads.append(int(got["idle_threads"]))
    samples.negotiated = str(got["negotiated"])


def rate(values: Sequence[float]) -> str:
    return spread(values, lambda v: f"{v:,.0f}")


def report(cases: list[Case], results: dict[Case, Samples], errors: dict[Case, str],
           skipped: dict[str, str]) -> bool:  # fmt: skip
    """Print the tables, ratios and PASS/FAIL verdicts; True if a snodo case failed."""
    for transport in TRANSPORTS:
        rows = [c for c in cases if c.transport == transport]
        if not rows:
            continue
        print(f"\n{transport}: calls/s min / median / max, µs cpu per call (median)")
        head = f"{'case':<22} {'negotiated':<11} {'sequential':>26} {'µs':>5}"
        for level in LEVELS:
            head += f"  {f'{level} concurrent':>26} {'µs':>5}"
        print(head + "  threads idle / at 256")
        for case in rows:
            if case.client in skipped:
                print(f"{case.name:<22} skipped: {skipped[case.client]}")
                continue
            if case in errors:
                print(f"{case.name:<22} failed: {errors[case]}")
                continue
            s = results[case]
            line = f"{case.name:<22} {s.negotiated:<11} {rate(s.seq):>26} "
            line += f"{statistics.median(s.seq_cpu):5.0f}"
            for level in LEVELS:
                if level in s.conc:
                    line += f"  {rate(s.conc[level]):>26} "
                    line += f"{statistics.median(s.conc_cpu[level]):5.0f}"
                else:
                    line += f"  {'-':>26} {'-':>5}"
            if s.idle_threads:
                top = max(s.threads)
                line += f"  {statistics.median(s.idle_threads):.0f} / {max(s.threads[top])}"
                if top != LEVELS[-1]:
                    line += f" (at {top})"
            print(line)

        print()
        for version in VERSIONS:
            ours = Case("snodo aio", transport, version)
            if ours not in results:
                continue
            mine = results[ours]
            for peer_client, levels, target in (
                ("mcp", LEVELS, TARGET_MCP_RATIO),
                ("ts2", (TS_TARGET_LEVEL,), 1.0),
                ("snodo sync", (SYNC_LEVEL,), None),
            ):
                peer = Case(peer_client, transport, version)
                if peer not in results:
                    continue
                theirs = results[peer]
                parts = [
                    f"sequential {statistics.median(mine.seq) / statistics.median(theirs.seq):.2f}x"
                ]
                for level in levels:
                    ratio = statistics.median(mine.conc[level]) / statistics.median(
                        theirs.conc[level]
                    )
                    part = f"{level} concurrent {ratio:.2f}x"
                    if target is not None:
                        passed = ratio >= target if target > 1.0 else ratio > target
                        part += f" {'PASS' if passed else 'FAIL'}"
                    parts.append(part)
                goal = (
                    ""
                    if target is None
                    else f" (target {'>=' if target > 1.0 else '>'} {target:g}x at "
                    f"{', '.join(map(str, levels))})"
                )
                print(f"ratio {ours.name} / {peer.name}: {', '.join(parts)}{goal}")
            top = LEVELS[-1]
            if mine.threads.get(top):
                print(
                    f"threads in the snodo aio process during {top} concurrent calls "
                    f"({version}): {max(mine.threads[top])} at most "
                    f"({statistics.median(mine.idle_threads):.0f} after connecting)"
                )
    return any(c.client.startswith("snodo") for c in errors)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds (one subprocess per case each)"
    )
    parser.add_argument(
        "--stdio-calls", type=int, default=1000, help="timed sequential stdio calls"
    )
    parser.add_argument(
        "--stdio-concurrent-calls", type=int, default=5120, help="timed stdio calls per level"
    )
    parser.add_argument("--http-calls", type=int, default=1000, help="timed sequential HTTP calls")
    parser.add_argument(
        "--http-concurrent-calls", type=int, default=5120, help="timed HTTP calls per level"
    )
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first")
    parser.add_argument("--versions", default=",".join(VERSIONS), help="comma-separated")
    parser.add_argument("--transports", default=",".join(TRANSPORTS), help="comma-separated")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated")
    parser.add_argument("--skip-ts", action="store_true", help="leave the TypeScript client out")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--worker", nargs=3, metavar=("CLIENT", "TRANSPORT", "VERSION"),
                        help=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument("--calls", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--concurrent-calls", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)

    wanted = [c.strip() for c in args.clients.split(",")]
    skipped: dict[str, str] = {}
    why_not = (
        "--skip-ts"
        if args.skip_ts
        else (npm_ready(TS2_DIR, TS2_PACKAGE) if "ts2" in wanted else None)
    )
    if why_not is not None:
        skipped["ts2"] = why_not
    cases = [
        Case(client, transport, version)
        for transport in args.transports.split(",")
        for version in args.versions.split(",")
        for client in CLIENTS
        if client in wanted
    ]

    print("asyncio tools/call round trips: snodo.aio against mcp and the TypeScript SDK v2 client")
    print(f"machine: {machine()}")
    print(
        f"snodo {version_of('snodo')}, mcp {version_of('mcp')}, {TS2_PACKAGE} {package_version(TS2_DIR, TS2_PACKAGE)} "
        f"(node {node_version()}); loop {args.loop}"
    )
    print(
        f"servers: stdio benchmarks/_echo_server.py, HTTP benchmarks/_http_echo_server.py; "
        f"{args.rounds} rounds; stdio {args.stdio_calls} sequential + {args.stdio_concurrent_calls}"
        f" per level, HTTP {args.http_calls} + {args.http_concurrent_calls}, after {args.warmup} "
        f"warm-up calls; levels {', '.join(map(str, LEVELS))} tasks (snodo sync: {SYNC_LEVEL} threads)"
    )
    results: dict[Case, Samples] = {}
    errors: dict[Case, str] = {}
    with http_server() as url:
        for _ in range(args.rounds):
            for case in cases:
                if case in errors or case.client in skipped:
                    continue
                got = measure(case, url, args)
                if isinstance(got, str):
                    errors[case] = got
                    continue
                samples = results.setdefault(case, Samples([], [], {}, {}, {}, []))
                calls = args.stdio_calls if case.transport == "stdio" else args.http_calls
                record(samples, got, calls)
    return 1 if report(cases, results, errors, skipped) else 0


if __name__ == "__main__":
    sys.exit(main())
