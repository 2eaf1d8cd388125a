"""What OpenTelemetry costs per call: absent, installed without an SDK, and with the SDK.

    python benchmarks/otel.py [--calls 3000] [--rounds 5] [--warmup 300] [--transports direct,stdio]

Sequential ``call_tool("echo")`` on 2026-07-28, in three modes:

* ``absent``: ``opentelemetry`` made unimportable (a ``sys.meta_path`` finder refusing it), as
  when ``snodo[otel]`` is not installed: the drivers check one flag per call.
* ``api``: ``opentelemetry-api`` importable, no SDK configured (the API's no-op tracer and
  meter): a non-recording span, nothing injected, no-op histograms.
* ``sdk``: the SDK's ``TracerProvider`` with a span processor that drops every span (what
  an exporter costs is left out) and a ``MeterProvider`` with a reader that is never
  collected: every span is recorded with its attributes, every duration aggregated.

Over ``direct`` (``snodo.direct`` on a one-tool Runtime: both a CLIENT and a SERVER span per
call in ``sdk`` mode) and ``stdio`` (``benchmarks/_echo_server.py``, a raw server: CLIENT spans
only). Each measurement runs in a fresh subprocess; rounds interleave the cases. Reported: µs
per call (median over the rounds) and each mode's delta from ``absent``; ``absent`` should be
within noise of ``direct.py``'s ``snodo 2026-07-28`` row.
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
ECHO_SERVER = HERE / "_echo_server.py"
TEXT = "hi"
VERSION = "2026-07-28"
MODES = ("absent", "api", "sdk")
TRANSPORTS = ("direct", "stdio")


class _Refuse:
    """A meta path finder that makes ``opentelemetry`` look not installed."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"blocked for the benchmark: {name}")


def _set_up(mode: str) -> None:
    if mode == "absent":
        sys.meta_path.insert(0, _Refuse())
        return
    if mode == "sdk":
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

        class Drop(SpanProcessor):
            """Receives every ended span and keeps none."""

        provider = TracerProvider()
        provider.add_span_processor(Drop())
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def run(mode: str, transport: str, calls: int, warmup: int) -> dict[str, Any]:
    _set_up(mode)
    import snodo
    from snodo.server import Runtime

    if transport == "direct":
        runtime = Runtime("bench-echo", "1.0")

        @runtime.tool()
        def echo(args: dict[str, Any], ctx: Any) -> str:
            return str(args["text"])

        client = snodo.direct(runtime, protocol=VERSION)
    else:
        client = snodo.connect(snodo.Stdio(sys.executable, [str(ECHO_SERVER)]), protocol=VERSION)
    with client:
        first = client.call_tool("echo", {"text": TEXT})
        assert isinstance(first, dict) and first["content"][0]["text"] == TEXT, first
        for _ in range(warmup):
            client.call_tool("echo", {"text": TEXT})
        started = time.perf_counter()
        for _ in range(calls):
            client.call_tool("echo", {"text": TEXT})
        elapsed = time.perf_counter() - started
    from snodo import telemetry

    loaded = any(name.startswith("opentelemetry") for name in sys.modules)
    assert loaded == (mode != "absent"), (mode, loaded)
    assert telemetry.enabled is (mode != "absent"), telemetry.enabled
    return {"seconds": elapsed}


def measure(mode: str, transport: str, calls: int, warmup: int) -> float | str:
    """µs per call from one fresh subprocess, or an error text."""
    command = [sys.executable, __file__, "--worker", f"{mode}:{transport}"]
    command += ["--calls", str(calls), "--warmup", str(warmup)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return "timed out after 300 s"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return lines[-1]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    return float(outcome["seconds"]) * 1e6 / calls


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (one subprocess each)")
    parser.add_argument("--warmup", type=int, default=300, help="untimed calls first")
    parser.add_argument("--transports", default=",".join(TRANSPORTS), help="direct,stdio")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        mode, transport = args.worker.split(":")
        print(json.dumps(run(mode, transport, args.calls, args.warmup)))
        return 0

    transports = [t for t in args.transports.split(",") if t]
    print(f"OpenTelemetry cost per call_tool, sequential, {VERSION}")
    print(f"machine: {machine()}")
    print(
        f"snodo {version_of('snodo')}, opentelemetry-api {version_of('opentelemetry-api')}, "
        f"opentelemetry-sdk {version_of('opentelemetry-sdk')}"
    )
    print(f"{args.rounds} rounds x {args.calls} calls after {args.warmup} warm-up calls\n")

    cases = [(mode, transport) for transport in transports for mode in MODES]
    samples: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
    errors: dict[tuple[str, str], str] = {}
    for _ in range(args.rounds):
        for case in cases:
            if case in errors:
                continue
            got = measure(*case, args.calls, args.warmup)
            if isinstance(got, str):
                errors[case] = got
            else:
                samples[case].append(got)

    print(
        f"{'transport':<10} {'mode':<8} {'min µs':>8} {'median µs':>10} {'max µs':>8} {'delta':>16}"
    )
    for transport in transports:
        base = samples[("absent", transport)]
        base_median = (
            statistics.median(base) if base and ("absent", transport) not in errors else None
        )
        for mode in MODES:
            case = (mode, transport)
            if case in errors:
                print(f"{transport:<10} {mode:<8} failed: {errors[case]}")
                continue
            values = samples[case]
            median = statistics.median(values)
            delta = ""
            if base_median is not None and mode != "absent":
                delta = f"{median - base_median:+.1f} µs ({median / base_median - 1:+.0%})"
            print(
                f"{transport:<10} {mode:<8} {min(values):8.1f} {median:10.1f} "
                f"{max(values):8.1f} {delta:>16}"
            )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
