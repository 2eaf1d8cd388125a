"""Streamable HTTP ``tools/call`` rates and memory per idle connection: snodo versus the floor and
the SDK clients.

    python benchmarks/streamable_http.py [--rounds 3] [--calls 500] [--concurrent-calls 800]
                                         [--fast-calls 2000] [--fast-concurrent-calls 3200]
                                         [--ts-rounds 2] [--ts-calls 500] [--ts-concurrent-calls 800]
                                         [--connections 1000] [--sdk-connections 100]
                                         [--memory-rounds 3] [--servers sdk,fast,snodo] [--skip-ts]
    python benchmarks/streamable_http.py --rounds 1 --ts-rounds 1 --memory-rounds 0   # a quick look

(Not ``benchmarks/http.py``: Python puts the script's directory first on ``sys.path``, so a file
named ``http.py`` there would shadow the standard library's ``http`` package in every benchmark
and server script of this directory, and everything that imports ``http.client`` would fail.)

Clients (each measurement in a fresh subprocess):

* snodo: ``snodo.connect(snodo.Http(url), protocol=...)``; the 16 concurrent callers are 16
  threads sharing the one client (snodo's process-wide HTTP/1.1 pool, ``http_wire``, keeps a
  keep-alive connection per concurrent request).
* mcp 2.3.0 (the official Python SDK): ``mcp.Client(url, mode=...)`` inside ``anyio.run`` with its
  default HTTP client (one ``httpx2.AsyncClient`` per ``Client``), ``mode="2026-07-28"`` and
  ``mode="legacy"`` (2025-11-25); the 16 concurrent callers are 16 anyio tasks on the one session.
  For rates the shared-httpx variant is the same thing (one Client, one httpx client); it differs
  in memory only, where it has its own row.
* gevent, floor-gevent (against the fast server only): snodo and the floor in a worker that
  monkey-patches with gevent before anything else (``_common.under_gevent``); their 16 callers
  are greenlets. snodo under gevent against snodo on threads is issue 19's gevent target, and
  the floor under gevent against the floor on threads is what gevent itself costs.
* floor (against the fast server only): no library (``benchmarks/_http_floor.py``): a raw
  keep-alive socket, the request head and body snodo sends for the version, ``json.loads`` and a
  check per call; sequential on one connection, and 16 threads each with its own connection. The
  ceiling for a CPython client on this machine at that moment.
* ts, ts2 (against the fast server only): the TypeScript SDK 1.x (``@modelcontextprotocol/sdk``,
  ``node benchmarks/ts/bench.mjs``; 2025-11-25 only, it speaks nothing later) and the v2 client
  (``@modelcontextprotocol/client``, ``node benchmarks/ts2/bench.mjs``, as benchmarks/aio.py runs
  it; both versions), their Streamable HTTP transports with their defaults, 16 concurrent
  promises on one client. They are slow (about 1-3 ms of CPU per call), so they make
  ``--ts-calls``/``--ts-concurrent-calls`` calls in ``--ts-rounds`` rounds. Skipped with a
  message without node or the packages (``npm ci`` runs once when node_modules is missing).

Servers, each started once by this script and shared by all rounds (client and server share the
machine's cores):

* ``sdk``: the SDK's own server, an ``MCPServer`` with one ``echo`` tool served by
  ``streamable_http_app()`` on uvicorn (stateful, event-stream answers: the SDK's defaults), as in
  the research notes' baseline (section 6: 295 calls/s sequential, 520 with 16 callers), except
  that it logs at WARNING and without uvicorn's access log (by default both log every request).
  It is slower than either client, so both are capped by it: no target applies there. Its
  2026-07-28 answers to a quick tool are JSON; its session-era answers are event streams.
* ``fast``: ``benchmarks/_http_echo_server.py``, a tiny stdlib server (a thread per connection,
  minimal HTTP/1.1 parsing, TCP_NODELAY, JSON answers; about 35 µs of CPU per request) that makes
  the client the bottleneck.
* ``snodo``: snodo's own ``serve_http`` on a one-tool Runtime, for orientation (no target).

The servers' listening sockets are created with ``proto=IPPROTO_TCP``: asyncio sets TCP_NODELAY
only on sockets whose proto says TCP, and uvicorn given a socket made with proto 0 answers every
keep-alive request ~40 ms late (the Nagle trap of the research notes, section 4E).

Both versions are measured for every client but the TS SDK 1.x: 2026-07-28 (pinned: no probe; each call is one
self-contained POST) and 2025-11-25 (initialize, then calls on the session; DELETE at close).

Rates: connect, check one answer, ``--warmup`` untimed calls, the sequential calls, then the
concurrent calls spread over 16 callers (``--calls``/``--concurrent-calls`` against the SDK's and
snodo's servers, ``--fast-calls``/``--fast-concurrent-calls`` against the fast one; both clients
do the same work). Rounds interleave the cases. Reported: calls/s min / median / max, the
client's CPU per call (its own process, all threads; the server excluded), the ratio snodo / mcp
of the medians and the ratio of the sequential CPU per call. Targets, against the fast server:
snodo at least 3x the SDK client's rates and ahead of both TS clients; at least 0.7x the floor
sequentially and 0.5x with 16 callers, with at most 2x its client CPU per call (issue 19).
Against the SDK's server they cannot hold (the server, not the client, sets the pace), so no
verdict is printed there.

Memory: in a fresh subprocess, one warm-up client makes a call; then ``--connections`` more
snodo clients (2026-07-28, so nothing stays open per client: no session, no stream) each make
one call against the fast server and stay open; the client process's RSS delta divided by the
number of clients, with threads and fds per client. The SDK's clients are far slower to open and
heavier, so they are measured with ``--sdk-connections`` (100) clients: with the default HTTP
client (one httpx client each) and with one shared ``httpx2.AsyncClient``
(``streamable_http_client(url, http_client=shared)``). Target: at most 20 KiB per idle snodo
connection.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import (
    cpu_seconds,
    footprint,
    machine,
    read_port,
    run_json,
    spread,
    stop,
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

HERE = Path(__file__).resolve().parent
FAST_SERVER = HERE / "_http_echo_server.py"
TEXT = "hi"
CONCURRENCY = 16
TARGET_RATIO = 3.0
TARGET_KIB_PER_CONNECTION = 20.0
START_DEADLINE = 60.0
MEMORY_VERSION = "2026-07-28"

SERVERS = {
    "sdk": "the SDK's server (MCPServer + uvicorn, event-stream answers)",
    "fast": "benchmarks/_http_echo_server.py (stdlib, TCP_NODELAY, JSON answers)",
    "snodo": "snodo's serve_http",
}
VERSIONS = ("2026-07-28", "2025-11-25")
CLIENTS = ("snodo", "mcp")
#: the fast server's clients per version, the floor first; rounds interleave them in this order
FAST_CLIENTS: dict[str, tuple[str, ...]] = {
    "2026-07-28": ("floor", "snodo", "floor-gevent", "gevent", "mcp", "ts2"),  # no TS SDK 1.x
    "2025-11-25": ("floor", "snodo", "floor-gevent", "gevent", "mcp", "ts", "ts2"),
}
TS_CLIENTS = ("ts", "ts2")
#: snodo / peer at least this on the fast server (1.0: ahead)
PEERS = {"mcp": TARGET_RATIO, "ts": 1.0, "ts2": 1.0}
#: snodo / floor at least this: (sequential, 16 callers); its CPU per call at most CPU x
TARGET_FLOOR = (0.7, 0.5)
TARGET_CPU = 2.0
MEMORY_CASES = {
    "snodo": "snodo",
    "mcp": "mcp (default client: one httpx client each)",
    "mcp-shared": "mcp (one shared httpx2.AsyncClient)",
}


# -- the servers (each runs in its own subprocess) -----------------------------------------------


def listening_socket() -> Any:
    import socket

    # proto=IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only when the
    # socket's proto says TCP. With proto 0 every keep-alive response to a uvicorn server stalls
    # ~40 ms on the client's delayed ACK (the Nagle trap, research notes section 4E).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    return listener


def serve_sdk() -> None:
    """The SDK's server: one echo tool, its Streamable HTTP app on uvicorn, default options."""
    import anyio
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench-echo", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        return text

    listener = listening_socket()
    config = uvicorn.Config(
        server.streamable_http_app(),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=1,
    )
    running = uvicorn.Server(config)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: running.serve(sockets=[listener]))
            with anyio.fail_after(START_DEADLINE):
                while not running.started:  # uvicorn offers no started event to wait on
                    if running.should_exit:
                        return
                    await anyio.sleep(0.01)
            print(f"PORT {listener.getsockname()[1]}", flush=True)

    anyio.run(main)


def serve_snodo() -> None:
    """snodo's own server: a Runtime with one echo tool behind serve_http."""
    from urllib.parse import urlsplit

    from snodo.server import Runtime
    from snodo.server.http_server import serve_http

    runtime = Runtime("bench-echo", "1.0")

    @runtime.tool()
    def echo(args: dict[str, Any], ctx: Any) -> str:
        return str(args["text"])

    with serve_http(runtime) as server:
        print(f"PORT {urlsplit(server.url).port}", flush=True)
        threading.Event().wait()  # until terminated


def server_command(kind: str) -> list[str]:
    if kind == "fast":
        return [sys.executable, str(FAST_SERVER), "0"]
    return [sys.executable, __file__, "--serve", kind]


@contextmanager
def running_servers(kinds: Sequence[str]) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    """Start each server; yield (kind -> URL, kind -> why it did not start); stop them all."""
    urls: dict[str, str] = {}
    failed: dict[str, str] = {}
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="snodo-bench-http-") as logs:
        try:
            for kind in kinds:
                log = Path(logs) / f"{kind}.log"
                with open(log, "wb") as stderr:
                    process = subprocess.Popen(
                        server_command(kind), stdout=subprocess.PIPE, stderr=stderr
                    )
                processes.append(process)
                try:
                    port = read_port(process, time.monotonic() + START_DEADLINE)
                except RuntimeError as error:
                    tail = log.read_text(errors="replace").strip().splitlines()[-1:]
                    failed[kind] = f"{error} {' '.join(tail)}".strip()
                    stop(process)
                    continue
                urls[kind] = f"http://127.0.0.1:{port}/mcp"
            yield urls, failed
        finally:
            for process in processes:
                stop(process)


# -- the workers (each runs in its own subprocess) ----------------------------------------------


def snodo_rates(
    url: str, version: str, calls: int, concurrent_calls: int, warmup: int
) -> dict[str, Any]:
    import snodo

    with snodo.connect(snodo.Http(url), protocol=version) as client:

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


def _mcp_mode(version: str) -> str:
    return "legacy" if version == "2025-11-25" else version


def mcp_rates(
    url: str, version: str, calls: int, concurrent_calls: int, warmup: int
) -> dict[str, Any]:
    import anyio
    from mcp import Client

    outcome: dict[str, Any] = {}

    async def session() -> None:
        async with Client(url, mode=_mcp_mode(version)) as client:

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


def snodo_memory(url: str, connections: int) -> dict[str, Any]:
    import snodo

    clients = []
    try:
        warm = snodo.connect(snodo.Http(url), protocol=MEMORY_VERSION)
        clients.append(warm)
        first: Any = warm.call_tool("echo", {"text": TEXT})
        assert first["content"][0]["text"] == TEXT, first
        before = footprint()
        started = time.perf_counter()
        for _ in range(connections):
            client = snodo.connect(snodo.Http(url), protocol=MEMORY_VERSION)
            clients.append(client)
            answer: Any = client.call_tool("echo", {"text": TEXT})
            assert answer["content"][0]["text"] == TEXT, answer
        opened = time.perf_counter() - started
        after = footprint()
    finally:
        closing = time.perf_counter()
        for client in clients:
            client.close()
    closed = time.perf_counter() - closing
    return {"before": before, "after": after, "open_seconds": opened, "close_seconds": closed}


def mcp_memory(url: str, connections: int, shared: bool) -> dict[str, Any]:
    from contextlib import AsyncExitStack

    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    outcome: dict[str, Any] = {}

    async def sessions() -> None:
        stack = AsyncExitStack()
        try:
            http_client = None
            if shared:
                http_client = await stack.enter_async_context(create_mcp_http_client())

            def new_client() -> Client:
                if http_client is None:
                    return Client(url, mode=MEMORY_VERSION)
                return Client(
                    streamable_http_client(url, http_client=http_client), mode=MEMORY_VERSION
                )

            warm = await stack.enter_async_context(new_client())
            assert getattr((await warm.call_tool("echo", {"text": TEXT})).content[0], "text", None)
            outcome["before"] = footprint()
            started = time.perf_counter()
            for _ in range(connections):
                client = await stack.enter_async_context(new_client())
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
        client, version = case.split()
        if client in ("floor", "floor-gevent"):
            from _http_floor import rates

            counts = (args.calls, args.concurrent_calls, args.warmup)
            outcome = rates(args.url, version, *counts, CONCURRENCY)
        else:
            run = snodo_rates if client in ("snodo", "gevent") else mcp_rates
            outcome = run(args.url, version, args.calls, args.concurrent_calls, args.warmup)
    elif case == "snodo":
        outcome = snodo_memory(args.url, args.connections)
    else:
        outcome = mcp_memory(args.url, args.connections, shared=case == "mcp-shared")
    print(json.dumps(outcome))
    return 0


# -- the driver ---------------------------------------------------------------------------------


def measure_rates(
    url: str, case: str, calls: int, concurrent_calls: int, warmup: int
) -> dict[str, Any] | str:
    client, version = case.split()
    if client == "ts":
        counts = [calls, concurrent_calls, warmup, CONCURRENCY]
        script = str(TS_DIR / "bench.mjs")
        return run_json(["node", script, "rates", *map(str, counts), "http", url])
    if client == "ts2":
        counts = (calls, concurrent_calls, warmup)
        got = run_json(ts2_command(version, counts, CONCURRENCY, ["http", url]))
        return ts2_outcome(got, CONCURRENCY)
    command = [sys.executable, __file__, "--worker", "rates", case, "--url", url]
    command += ["--calls", str(calls), "--concurrent-calls", str(concurrent_calls)]
    command += ["--warmup", str(warmup)]
    gevent = client in ("gevent", "floor-gevent")
    return run_json(under_gevent(command) if gevent else command)


def measure_memory(url: str, case: str, connections: int) -> dict[str, Any] | str:
    command = [sys.executable, __file__, "--worker", "memory", case, "--url", url]
    command += ["--connections", str(connections)]
    return run_json(command)


def server_cases(server: str) -> list[tuple[str, str]]:
    """(server, case name) for every row against ``server``, in the order rounds run them."""
    if server == "fast":
        return [(server, f"{c} {v}") for v in VERSIONS for c in FAST_CLIENTS[v]]
    return [(server, f"{c} {v}") for v in VERSIONS for c in CLIENTS]


def report_rates(args: argparse.Namespace, urls: dict[str, str], skipped: dict[str, str]) -> bool:
    """Measure and print the rates per server; True if a snodo or floor case failed."""
    every = [case for server in urls for case in server_cases(server)]
    cases = [case for case in every if case[1].split()[0] not in skipped]
    seq: dict[tuple[str, str], list[float]] = {c: [] for c in cases}
    conc: dict[tuple[str, str], list[float]] = {c: [] for c in cases}
    seq_cpu: dict[tuple[str, str], list[float]] = {c: [] for c in cases}
    conc_cpu: dict[tuple[str, str], list[float]] = {c: [] for c in cases}
    negotiated: dict[tuple[str, str], str] = {}
    errors: dict[tuple[str, str], str] = {}

    def work(server: str, client: str) -> tuple[int, int]:
        if client in TS_CLIENTS:
            return args.ts_calls, args.ts_concurrent_calls
        if server == "sdk" or server == "snodo":
            return args.calls, args.concurrent_calls
        return args.fast_calls, args.fast_concurrent_calls

    for round_number in range(max(args.rounds, args.ts_rounds)):
        for case in cases:
            server, name = case
            client = name.split()[0]
            wanted = args.ts_rounds if client in TS_CLIENTS else args.rounds
            if case in errors or round_number >= wanted:
                continue
            calls, concurrent_calls = work(server, client)
            got = measure_rates(urls[server], name, calls, concurrent_calls, args.warmup)
            if isinstance(got, str):
                errors[case] = got
                continue
            seq[case].append(calls / got["seq_seconds"])
            conc[case].append(got["conc_calls"] / got["conc_seconds"])
            seq_cpu[case].append(got["seq_cpu"] / calls * 1e6)
            conc_cpu[case].append(got["conc_cpu"] / got["conc_calls"] * 1e6)
            negotiated[case] = str(got["negotiated"])

    failed = False
    for server in urls:
        calls, concurrent_calls = work(server, "snodo")
        print(f"server: {SERVERS[server]}")
        extra = ""
        if server == "fast":
            extra = (
                f"; ts and ts2: {args.ts_calls} and {args.ts_concurrent_calls}, "
                f"{args.ts_rounds} rounds"
            )
        print(
            f"  ({calls} sequential calls, then {concurrent_calls} over {CONCURRENCY} "
            f"concurrent callers{extra})"
        )
        print(
            f"{'case':<24} {'negotiated':<11} {'sequential calls/s min / median / max':>37} "
            f"{'µs cpu':>7}  {'16 concurrent calls/s min / median / max':>40} {'µs cpu':>7}"
        )
        medians: dict[str, Medians] = {}
        for case in server_cases(server):
            name = case[1]
            client = name.split()[0]
            if client in skipped:
                print(f"{name:<24} skipped: {skipped[client]}")
                continue
            if case in errors:
                print(f"{name:<24} failed: {errors[case]}")
                failed = failed or client in ("snodo", "gevent", "floor", "floor-gevent")
                continue
            medians[name] = Medians(
                statistics.median(seq[case]),
                statistics.median(conc[case]),
                statistics.median(seq_cpu[case]),
                statistics.median(conc_cpu[case]),
            )
            print(
                f"{name:<24} {negotiated[case]:<11} "
                f"{spread(seq[case], lambda v: f'{v:,.0f}'):>37} "
                f"{medians[name].seq_cpu:7.0f}  "
                f"{spread(conc[case], lambda v: f'{v:,.0f}'):>40} "
                f"{medians[name].conc_cpu:7.0f}"
            )
        if server == "fast":
            names = [name for _, name in server_cases(server)]
            for line in ratio_lines(medians, names, VERSIONS, PEERS, TARGET_FLOOR, TARGET_CPU):
                print(line)
            for line in gevent_lines(medians, VERSIONS):
                print(line)
            print()
            continue
        for version in VERSIONS:
            ours, peer = f"snodo {version}", f"mcp {version}"
            if ours not in medians or peer not in medians:
                print(f"ratio {ours} / {peer}: n/a")
                continue
            ratios = [
                medians[ours].seq / medians[peer].seq,
                medians[ours].conc / medians[peer].conc,
            ]
            cpu = medians[peer].seq_cpu / medians[ours].seq_cpu
            print(
                f"ratio {ours} / {peer}: sequential {ratios[0]:.2f}x, concurrent "
                f"{ratios[1]:.2f}x (no target: the server sets the pace); "
                f"client CPU per call mcp / snodo {cpu:.2f}x"
            )
        print()
    return failed


def report_memory(args: argparse.Namespace, url: str) -> bool:
    """Measure and print memory per idle connection; True if the snodo case failed."""
    print(
        f"memory per idle connection ({MEMORY_VERSION}, against the fast server): each client "
        f"made one call and stays open; client process only (median of {args.memory_rounds} runs)"
    )
    print(
        f"{'client':<46} {'clients':>7} {'RSS delta':>10} {'KiB/conn':>9} {'threads/conn':>13} "
        f"{'fds/conn':>9} {'open s':>7} {'close s':>8}"
    )
    per_connection: dict[str, float] = {}
    failed = False
    for case, label in MEMORY_CASES.items():
        n = args.connections if case == "snodo" else args.sdk_connections
        runs: list[dict[str, Any]] = []
        error = None
        for _ in range(args.memory_rounds):
            got = measure_memory(url, case, n)
            if isinstance(got, str):
                error = got
                break
            runs.append(got)
        if error is not None:
            print(f"{label:<46} failed: {error}")
            failed = failed or case == "snodo"
            continue
        delta = statistics.median(r["after"]["rss"] - r["before"]["rss"] for r in runs)
        threads = statistics.median(
            (r["after"]["threads"] - r["before"]["threads"]) / n for r in runs
        )
        fds = statistics.median((r["after"]["fds"] - r["before"]["fds"]) / n for r in runs)
        opened = statistics.median(r["open_seconds"] for r in runs)
        closed = statistics.median(r["close_seconds"] for r in runs)
        per_connection[case] = delta / n / 1024
        print(
            f"{label:<46} {n:>7} {delta / 2**20:>6.1f} MiB {per_connection[case]:9.1f} "
            f"{threads:13.2f} {fds:9.2f} {opened:7.2f} {closed:8.2f}"
        )
    print()
    if "snodo" in per_connection:
        kib = per_connection["snodo"]
        verdict = "met" if kib <= TARGET_KIB_PER_CONNECTION else "NOT met"
        print(
            f"target snodo <= {TARGET_KIB_PER_CONNECTION:.0f} KiB per idle connection: "
            f"{verdict} ({kib:.1f} KiB)"
        )
        for peer in ("mcp", "mcp-shared"):
            if peer in per_connection and kib > 0:
                print(f"ratio {peer} / snodo per connection: {per_connection[peer] / kib:.1f}x")
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="sequential calls (sdk, snodo)")
    parser.add_argument(
        "--concurrent-calls", type=int, default=800, help="calls over 16 callers (sdk, snodo)"
    )
    parser.add_argument("--fast-calls", type=int, default=2000, help="sequential calls (fast)")
    parser.add_argument(
        "--fast-concurrent-calls", type=int, default=3200, help="calls over 16 callers (fast)"
    )
    parser.add_argument("--ts-calls", type=int, default=500, help="sequential calls (ts, ts2)")
    parser.add_argument(
        "--ts-concurrent-calls", type=int, default=800, help="calls over 16 callers (ts, ts2)"
    )
    parser.add_argument("--ts-rounds", type=int, default=2, help="rate rounds for ts and ts2")
    parser.add_argument("--skip-ts", action="store_true", help="leave both TypeScript clients out")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls first")
    parser.add_argument("--rounds", type=int, default=3, help="rate rounds (one subprocess each)")
    parser.add_argument("--connections", type=int, default=1000, help="idle snodo clients")
    parser.add_argument("--sdk-connections", type=int, default=100, help="idle SDK clients")
    parser.add_argument("--memory-rounds", type=int, default=3, help="memory runs per client")
    parser.add_argument(
        "--servers", default="sdk,fast,snodo", help="comma-separated: sdk, fast, snodo"
    )
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "CASE"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--serve", choices=["sdk", "snodo"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve == "sdk":
        serve_sdk()
        return 0
    if args.serve == "snodo":
        serve_snodo()
        return 0
    if args.worker:
        return worker(args.worker[0], args.worker[1], args)
    kinds = [k.strip() for k in args.servers.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in SERVERS]
    if unknown:
        parser.error(f"unknown servers: {', '.join(unknown)}")

    skipped: dict[str, str] = {}
    for client, directory, package in (("ts", TS_DIR, TS_PACKAGE), ("ts2", TS2_DIR, TS2_PACKAGE)):
        why_not = "--skip-ts" if args.skip_ts else npm_ready(directory, package)
        if why_not is not None:
            skipped[client] = why_not

    print("Streamable HTTP tools/call round trips: snodo versus the floor and the SDK clients")
    print(f"machine: {machine()}")
    print(
        f"snodo {version_of('snodo')} (own HTTP/1.1 client), mcp {version_of('mcp')}, "
        f"httpx2 {version_of('httpx2')}, uvicorn {version_of('uvicorn')}, "
        f"{TS_PACKAGE} {package_version(TS_DIR, TS_PACKAGE)}, "
        f"{TS2_PACKAGE} {package_version(TS2_DIR, TS2_PACKAGE)} (node {node_version()})"
    )
    print(
        f"{args.rounds} rounds per case after {args.warmup} warm-up calls; client and server "
        "share the machine's cores"
    )
    print("µs cpu: the client process's CPU time per call (median)")
    print(
        "research baseline (notes section 6): mcp -> SDK server, 2026-07-28: 295 calls/s "
        "sequential, 520 with 16 callers, ~2 ms client CPU per call\n"
    )
    with running_servers(kinds) as (urls, failed_servers):
        for kind, why in failed_servers.items():
            print(f"server {kind} did not start: {why}\n")
        rates_failed = report_rates(args, urls, skipped)
        memory_failed = False
        if args.memory_rounds <= 0:
            print("memory: skipped (--memory-rounds 0)")
        elif "fast" in urls:
            memory_failed = report_memory(args, urls["fast"])
        else:
            print("memory: skipped (needs the fast server)")
    needed_failed = "fast" in failed_servers or "sdk" in failed_servers
    return 1 if rates_failed or memory_failed or needed_failed else 0


if __name__ == "__main__":
    sys.exit(main())
