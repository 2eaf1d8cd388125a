"""In-process ``call_tool`` round trips per second: snodo.direct versus the official Python SDK.

    python benchmarks/direct.py [--calls 3000] [--rounds 5] [--warmup 300]

Both sides serve one tool, ``echo(text) -> text``, in the same process as the client:

* snodo: ``snodo.direct(runtime)`` on a ``snodo.server.Runtime``, pinned to 2026-07-28 and to
  2025-11-25 (a session-era session negotiated through the Runtime).
* SDK (``mcp`` 2.3.0): ``mcp.Client(MCPServer)`` inside ``anyio.run``. ``mode="2026-07-28"`` drives
  the SDK's direct per-request path (no JSON-RPC framing), ``mode="legacy"`` the 2025-11-25
  initialize handshake over its in-memory streams.

Every measurement runs in a fresh subprocess (neither library's import or heap weighs on the
other), checks one answer, makes ``--warmup`` untimed calls, then times ``--calls`` sequential
calls. Rounds interleave the four cases so machine noise hits them alike. Reported: calls/s
min / median / max over the rounds, and the median ratio snodo / SDK per protocol version.
Target: snodo at least 3x the SDK's rate. One more row, ``snodo task``, makes the same calls
with ``progress=``, which runs each handler in a task of its own: the price of a direct call
that close() can fail at once (docs/decisions/0029).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from _common import machine, version_of

TARGET_RATIO = 3.0
TEXT = "hi"

#: case name -> (library, protocol version)
CASES: dict[str, tuple[str, str]] = {
    "snodo 2026-07-28": ("snodo", "2026-07-28"),
    "snodo task 2026-07-28": ("snodo-task", "2026-07-28"),
    "floor hand-off": ("floor", "-"),
    "sdk 2026-07-28": ("sdk", "2026-07-28"),
    "snodo 2025-11-25": ("snodo", "2025-11-25"),
    "sdk 2025-11-25": ("sdk", "2025-11-25"),
}
PAIRS = [("snodo 2026-07-28", "sdk 2026-07-28"), ("snodo 2025-11-25", "sdk 2025-11-25")]


# -- the workers (each runs in its own subprocess) ----------------------------------------------


def run_snodo(version: str, calls: int, warmup: int, *, task: bool = False) -> dict[str, Any]:
    import snodo
    from snodo.server import Runtime

    runtime = Runtime("bench-echo", "1.0")

    @runtime.tool()
    def echo(args: dict[str, Any], ctx: Any) -> str:
        return str(args["text"])

    def ignore(params: dict[str, Any]) -> None:
        pass

    # progress= runs the handler in a task of its own (the path close() can fail at once).
    extra: dict[str, Any] = {"progress": ignore} if task else {}
    with snodo.direct(runtime, protocol=version) as client:
        first = client.call_tool("echo", {"text": TEXT}, **extra)
        assert isinstance(first, dict), first
        assert first["content"][0]["text"] == TEXT, first
        negotiated = client.version
        last: object = first
        for _ in range(warmup):
            client.call_tool("echo", {"text": TEXT}, **extra)
        started = time.perf_counter()
        for _ in range(calls):
            last = client.call_tool("echo", {"text": TEXT}, **extra)
        elapsed = time.perf_counter() - started
        assert isinstance(last, dict) and last["content"][0]["text"] == TEXT, last
    return {"seconds": elapsed, "negotiated": negotiated}


def run_floor(calls: int, warmup: int) -> dict[str, Any]:
    """No library: the least a call costs when its handler runs on another (pre-started) thread
    and the caller waits for the answer, the bound under any abandonable direct call."""
    import queue
    import threading

    jobs: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
    answers: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()

    def serve() -> None:
        while (job := jobs.get()) is not None:
            answers.put({"content": [{"type": "text", "text": str(job["text"])}]})

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    last: dict[str, Any] = {}
    for _ in range(warmup):
        jobs.put({"text": TEXT})
        answers.get(timeout=10)
    started = time.perf_counter()
    for _ in range(calls):
        jobs.put({"text": TEXT})
        last = answers.get(timeout=10)
    elapsed = time.perf_counter() - started
    jobs.put(None)
    thread.join(10)
    assert last["content"][0]["text"] == TEXT, last
    return {"seconds": elapsed, "negotiated": "-"}


def run_sdk(version: str, calls: int, warmup: int) -> dict[str, Any]:
    import anyio
    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench-echo")

    @server.tool()
    def echo(text: str) -> str:
        return text

    mode = "legacy" if version == "2025-11-25" else version
    outcome: dict[str, Any] = {}

    async def session() -> None:
        async with Client(server, mode=mode) as client:
            first = await client.call_tool("echo", {"text": TEXT})
            block = first.content[0]
            assert getattr(block, "text", None) == TEXT, first
            negotiated = client.session.protocol_version
            last = first
            for _ in range(warmup):
                await client.call_tool("echo", {"text": TEXT})
            started = time.perf_counter()
            for _ in range(calls):
                last = await client.call_tool("echo", {"text": TEXT})
            outcome["seconds"] = time.perf_counter() - started
            assert getattr(last.content[0], "text", None) == TEXT, last
            outcome["negotiated"] = negotiated

    anyio.run(session)
    return outcome


def worker(case: str, calls: int, warmup: int) -> int:
    library, version = CASES[case]
    if library == "sdk":
        outcome = run_sdk(version, calls, warmup)
    elif library == "floor":
        outcome = run_floor(calls, warmup)
    else:
        outcome = run_snodo(version, calls, warmup, task=library == "snodo-task")
    print(json.dumps(outcome))
    return 0


# -- the driver ---------------------------------------------------------------------------------


def measure(case: str, calls: int, warmup: int) -> tuple[float, str] | str:
    """One measurement in a fresh subprocess: (calls per second, negotiated) or an error text."""
    command = [sys.executable, __file__, "--worker", case, "--calls", str(calls)]
    command += ["--warmup", str(warmup)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return "timed out after 300 s"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return lines[-1]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    return calls / float(outcome["seconds"]), str(outcome["negotiated"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (one subprocess each)")
    parser.add_argument("--warmup", type=int, default=300, help="untimed calls first")
    parser.add_argument("--worker", choices=sorted(CASES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.calls, args.warmup)

    print("direct (in-process) call_tool round trips, one echo tool, sequential calls")
    print(f"machine: {machine()}")
    print(f"snodo {version_of('snodo')}, mcp {version_of('mcp')}")
    print(f"{args.rounds} rounds x {args.calls} calls after {args.warmup} warm-up calls\n")

    rates: dict[str, list[float]] = {case: [] for case in CASES}
    negotiated: dict[str, str] = {}
    errors: dict[str, str] = {}
    for _ in range(args.rounds):
        for case in CASES:
            if case in errors:
                continue
            got = measure(case, args.calls, args.warmup)
            if isinstance(got, str):
                errors[case] = got
                continue
            rates[case].append(got[0])
            negotiated[case] = got[1]

    print(
        f"{'case':<22} {'negotiated':<11} {'min/s':>9} {'median/s':>9} {'max/s':>9} {'µs/call':>8}"
    )
    medians: dict[str, float] = {}
    for case, samples in rates.items():
        if case in errors:
            print(f"{case:<22} failed: {errors[case]}")
            continue
        median = statistics.median(samples)
        medians[case] = median
        print(
            f"{case:<22} {negotiated[case]:<11} {min(samples):9.0f} {median:9.0f} "
            f"{max(samples):9.0f} {1e6 / median:8.1f}"
        )

    print()
    for ours, theirs in PAIRS:
        if ours not in medians or theirs not in medians:
            print(f"ratio {ours} / {theirs}: n/a")
            continue
        ratio = medians[ours] / medians[theirs]
        verdict = "met" if ratio >= TARGET_RATIO else "NOT met"
        print(f"ratio {ours} / {theirs}: {ratio:.2f}x (target >= {TARGET_RATIO:.0f}x: {verdict})")
    inline, task, floor = "snodo 2026-07-28", "snodo task 2026-07-28", "floor hand-off"
    if inline in medians and task in medians and floor in medians:
        print(
            f"a task per call (progress=; what close() can fail at once) costs "
            f"{medians[inline] / medians[task]:.1f}x the inline call; a bare hand-off to a "
            f"waiting thread, no library, {medians[inline] / medians[floor]:.1f}x "
            f"(docs/decisions/0029)"
        )
    return 1 if any(CASES[case][0] != "sdk" for case in errors) else 0


if __name__ == "__main__":
    sys.exit(main())
