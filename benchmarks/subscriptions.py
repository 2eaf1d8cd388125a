"""Subscription throughput and memory: events per second through one subscription and through
100 on one stdio connection, and memory per open subscription.

    python benchmarks/subscriptions.py [--events 20000] [--fanout-events 500] [--subs 100]
                                       [--memory-subs 1000] [--rounds 3]

The stdio server is ``benchmarks/_subs_server.py`` (stdlib, raw JSON lines), so the client is the
bottleneck. The direct row serves the same events from a snodo ``Runtime`` in the process
(``runtime.resource_updated``), so it measures the client side plus the Runtime's source. The HTTP
row listens to snodo's own ``serve_http`` in another process (``benchmarks/_subs_runtime.py``),
whose SSE writer sets much of the pace.

Rates: each round opens the subscription(s) with ``max_buffer`` large enough to keep every
event, asks for all of them up front (``demand(n)``), triggers the burst, and pulls every event
with ``next()``; the clock runs from the trigger to the last event pulled. Reported: events/s
min / median / max and the client's CPU per event (this process, all threads; the stdio server
is another process and excluded).

Memory: in a fresh subprocess, one stdio connection opens ``--memory-subs`` subscriptions
(thread owner, default buffer); reported is the RSS delta divided by their number. The same for
``--memory-http-subs`` HTTP subscriptions (each holds its own connection and a reader thread).
Target: at most 32 KiB per open subscription.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import cpu_seconds, machine, status_field, version_of

HERE = Path(__file__).resolve().parent
SERVER = HERE / "_subs_server.py"
TARGET_KIB = 32.0
FILTER = {"resourceSubscriptions": ["mem://bench"]}


def _connect(url: str | None = None) -> Any:
    import snodo

    if url is not None:
        return snodo.connect(snodo.Http(url), protocol="2026-07-28")
    return snodo.connect(snodo.Stdio(sys.executable, [str(SERVER)]), protocol="2026-07-28")


class HttpServer:
    """``python -m snodo.server --http`` serving benchmarks/_subs_runtime.py, in another process."""

    def __enter__(self) -> str:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "snodo.server",
                "--http",
                "--port",
                "0",
                "_subs_runtime:runtime",
            ],
            cwd=str(HERE),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stderr is not None
        line = self.process.stderr.readline()
        return line.split("serving ", 1)[1].split()[0]

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(10)
        if self.process.stderr is not None:
            self.process.stderr.close()


def _pull(subs: list[Any], per_sub: int) -> None:
    from snodo import Notification

    for sub in subs:
        for _ in range(per_sub):
            event = sub.next(timeout=60)
            if not isinstance(event, Notification):
                raise RuntimeError(f"unexpected event {event!r}")


def stdio_rate(subs_count: int, events: int, url: str | None = None) -> tuple[float, float]:
    """(deliveries per second, client CPU µs per delivery) for one burst (HTTP with ``url``)."""
    with _connect(url) as client:
        subs = [client.listen(FILTER, max_buffer=events + 1) for _ in range(subs_count)]
        for sub in subs:
            sub.demand(events)
        cpu0, t0 = cpu_seconds(), time.perf_counter()
        client.call_tool("burst", {"count": events}, timeout=120)
        _pull(subs, events)
        elapsed, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
        for sub in subs:
            sub.close()
    total = subs_count * events
    return total / elapsed, cpu / total * 1e6


def direct_rate(events: int) -> tuple[float, float]:
    import snodo
    from snodo.server import Runtime

    runtime = Runtime("bench")
    with snodo.direct(runtime) as client:
        sub = client.listen(FILTER, max_buffer=events + 1)
        sub.demand(events)
        cpu0, t0 = cpu_seconds(), time.perf_counter()
        for _ in range(events):
            runtime.resource_updated("mem://bench")
        _pull([sub], events)
        elapsed, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
        sub.close()
    return events / elapsed, cpu / events * 1e6


def memory(count: int, url: str | None = None) -> dict[str, float]:
    """Run in a fresh interpreter: RSS per open subscription on one connection."""
    code = f"""
import gc, json, sys
sys.path.insert(0, {str(HERE)!r})
from _common import status_field
import subscriptions as b
client = b._connect({url!r})
warm = client.listen(b.FILTER)
warm.close()
gc.collect()
before = status_field("VmRSS")
subs = [client.listen(b.FILTER) for _ in range({count})]
gc.collect()
after = status_field("VmRSS")
import threading
out = {{"kib": (after - before) / {count}, "threads": threading.active_count()}}
for s in subs:
    s.close()
client.close()
print(json.dumps(out))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _row(name: str, samples: list[tuple[float, float]]) -> str:
    rates = sorted(r for r, _ in samples)
    cpu = statistics.median(c for _, c in samples)
    figures = " / ".join(f"{r:,.0f}" for r in (rates[0], statistics.median(rates), rates[-1]))
    return f"{name:<50} {figures:>32} {cpu:>9.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--fanout-events", type=int, default=500)
    parser.add_argument("--subs", type=int, default=100)
    parser.add_argument("--memory-subs", type=int, default=1000)
    parser.add_argument("--http-events", type=int, default=5000)  # under LISTEN_BACKLOG
    parser.add_argument("--memory-http-subs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    print(f"snodo {version_of('snodo')}, pykka {version_of('pykka')}")
    print()
    one: list[tuple[float, float]] = []
    many: list[tuple[float, float]] = []
    direct: list[tuple[float, float]] = []
    http: list[tuple[float, float]] = []
    with HttpServer() as url:
        for _ in range(args.rounds):
            one.append(stdio_rate(1, args.events))
            many.append(stdio_rate(args.subs, args.fanout_events))
            direct.append(direct_rate(args.events))
            http.append(stdio_rate(1, args.http_events, url))
            gc.collect()
    print(f"{'case':<50} {'events/s min / median / max':>32} {'µs cpu':>9}")
    print(_row(f"stdio, 1 subscription ({args.events} events)", one))
    print(_row(f"stdio, {args.subs} subscriptions x {args.fanout_events} events", many))
    print(_row(f"direct, 1 subscription ({args.events} events)", direct))
    print(_row(f"http (serve_http), 1 subscription ({args.http_events} events)", http))
    print()
    mem = memory(args.memory_subs)
    kib = mem["kib"]
    print(
        f"memory: {args.memory_subs} open subscriptions on one stdio connection: "
        f"{kib:.1f} KiB each (threads in the process: {mem['threads']:.0f})"
    )
    with HttpServer() as url:
        http_mem = memory(args.memory_http_subs, url)
    print(
        f"memory: {args.memory_http_subs} open subscriptions over HTTP: "
        f"{http_mem['kib']:.1f} KiB each (threads in the process: {http_mem['threads']:.0f})"
    )
    verdict = "met" if kib <= TARGET_KIB else "NOT met"
    print(
        f"target <= {TARGET_KIB:.0f} KiB per open subscription (stdio): {verdict} ({kib:.1f} KiB)"
    )
    verdict = "met" if http_mem["kib"] <= TARGET_KIB else "NOT met"
    print(
        f"target <= {TARGET_KIB:.0f} KiB per open subscription (HTTP): {verdict} "
        f"({http_mem['kib']:.1f} KiB)"
    )
    _ = status_field  # the memory child reads it


if __name__ == "__main__":
    main()
