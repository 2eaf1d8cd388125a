"""Time from a server's crash to ``ready`` again: snodo's restart="transient" against the floor.

    python benchmarks/restarts.py [--rounds 15]

stdio: a client on ``benchmarks/_echo_server.py`` (session era, 2025-11-25, ``backoff`` with no
wait) whose server is killed with SIGKILL; timed from the kill to the ``ready`` state change
(``on_state=``), then one call checks the new server. The floor row does the same work with no
library: spawn the server with ``subprocess``, write ``initialize``, read its answer.

HTTP: ``python -m snodo.server --http`` on a fixed port, session era; the server is killed and
started again (its start-up is excluded: the clock starts once it listens again), then a call
meets the 404 for the forgotten session: timed from that call to its answer on the new session
(the restart, a new ``initialize`` and the call sent once more). The floor row: one
``initialize`` and one ``tools/call`` POST with ``http.client``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import machine

HERE = Path(__file__).resolve().parent
ECHO_SERVER = HERE / "_echo_server.py"
SESSION = "2025-11-25"
SERVE = [sys.executable, "-m", "snodo.server", "--http"]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": SESSION,
        "capabilities": {},
        "clientInfo": {"name": "floor", "version": "0"},
    },
}


def stdio_snodo(rounds: int) -> list[float]:
    import snodo

    states: queue.Queue[Any] = queue.Queue()
    client = snodo.connect(
        snodo.Stdio(sys.executable, [str(ECHO_SERVER)]),
        protocol=SESSION,
        restart="transient",
        backoff={"initial": 0.0, "factor": 1.0, "cap": 0.0},
        max_restarts=rounds + 1,
        on_state=states,
    )
    samples = []
    try:
        while states.get(timeout=10).state != "ready":
            pass
        for _ in range(rounds):
            pid = client.transport.pid  # type: ignore[attr-defined]
            started = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            while states.get(timeout=30).state != "ready":
                pass
            samples.append(time.perf_counter() - started)
            answer: Any = client.call_tool("echo", {"text": "hi"})
            assert answer["content"][0]["text"] == "hi", answer
    finally:
        client.close()
    return samples


def stdio_floor(rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, str(ECHO_SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write((json.dumps(INIT) + "\n").encode())
        child.stdin.flush()
        line = child.stdout.readline()
        samples.append(time.perf_counter() - started)
        assert json.loads(line)["id"] == 1
        child.kill()
        child.wait()
        child.stdin.close()
        child.stdout.close()
    return samples


class Server:
    """``python -m snodo.server --http`` serving benchmarks/_subs_runtime.py on a fixed port."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [*SERVE, "--port", str(self.port), "_subs_runtime:runtime"],
            cwd=str(HERE),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stderr is not None
        assert "serving" in self.process.stderr.readline()

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            if self.process.stderr is not None:
                self.process.stderr.close()
            self.process = None


def http_snodo(server: Server, rounds: int) -> list[float]:
    import snodo

    client = snodo.connect(
        snodo.Http(f"http://127.0.0.1:{server.port}/mcp"),
        protocol=SESSION,
        restart="transient",
        backoff={"initial": 0.0, "factor": 1.0, "cap": 0.0},
        max_restarts=rounds + 1,
    )
    samples = []
    try:
        for _ in range(rounds):
            server.stop()
            server.start()
            started = time.perf_counter()
            answer: Any = client.call_tool("burst", {"count": 0})
            samples.append(time.perf_counter() - started)
            assert answer["content"][0]["text"] == "sent 0", answer
    finally:
        client.close()
    return samples


def http_floor(server: Server, rounds: int) -> list[float]:
    samples = []
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    for _ in range(rounds):
        started = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/mcp", json.dumps(INIT), headers)
        response = conn.getresponse()
        response.read()
        session = response.getheader("Mcp-Session-Id") or ""
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        call["params"] = {"name": "burst", "arguments": {"count": 0}}  # type: ignore[assignment]
        more = {**headers, "Mcp-Session-Id": session, "MCP-Protocol-Version": SESSION}
        conn.request("POST", "/mcp", json.dumps(call), more)
        answer = conn.getresponse()
        answer.read()
        samples.append(time.perf_counter() - started)
        assert answer.status == 200, answer.status
        conn.close()
    return samples


def row(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    return f"{name:<28} {ms[0]:8.1f} {statistics.median(ms):9.1f} {ms[-1]:8.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print("Time from a server's crash to ready again (restart='transient', no backoff)")
    print(machine())
    print(f"{args.rounds} rounds each\n")
    print(f"{'case':<28} {'min ms':>8} {'median ms':>9} {'max ms':>8}")
    snodo_stdio = stdio_snodo(args.rounds)
    floor_stdio = stdio_floor(args.rounds)
    print(row("stdio snodo (kill -> ready)", snodo_stdio))
    print(row("stdio floor (spawn+init)", floor_stdio))
    server = Server()
    server.start()
    try:
        snodo_http = http_snodo(server, args.rounds)
        floor_http = http_floor(server, args.rounds)
    finally:
        server.stop()
    print(row("http snodo (404 -> answer)", snodo_http))
    print(row("http floor (init+call)", floor_http))
    ratio_stdio = statistics.median(snodo_stdio) / statistics.median(floor_stdio)
    ratio_http = statistics.median(snodo_http) / statistics.median(floor_http)
    print(f"\nratio snodo / floor: stdio {ratio_stdio:.2f}x, http {ratio_http:.2f}x")


if __name__ == "__main__":
    main()
