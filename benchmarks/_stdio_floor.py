"""The CPython floor for one stdio ``tools/call`` round trip: no library, stdlib only.

    python benchmarks/_stdio_floor.py [--calls 5000] [--version 2025-11-25|2026-07-28]

Against ``benchmarks/_echo_server.py`` it sends what snodo sends on the wire for the version
(2025-11-25: ``initialize`` and ``notifications/initialized``, then bare calls; 2026-07-28: no
handshake, every call carries the ``_meta`` envelope), so the server does the same work. Per
call: ``json.dumps`` of the request with a fresh id, one ``os.write``, ``os.read`` up to the
newline, ``json.loads`` and a check of the id and the text. Any CPython stdio client is bounded
by these numbers on this machine. Shapes:

* sequential: a bare loop, no thread, no hand-off; and the same calls through the reader thread
  below (the floor row takes the faster of the two);
* N concurrent callers: one reader thread (blocking ``os.read``, splitting lines, decoding each
  reply) hands each reply, by id, to the caller waiting for it through that caller's own
  ``queue.SimpleQueue``; callers write their own requests (a write of at most PIPE_BUF bytes to a
  pipe is atomic, so no lock).

``benchmarks/stdio.py`` imports :func:`rates` for its floor rows (each in its own worker process);
run alone, this prints the sequential loop, the sequential loop through the reader thread and
16 concurrent callers. The leading underscore keeps benchmarks/run_all from running it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import cpu_seconds

HERE = Path(__file__).resolve().parent
ECHO_SERVER = HERE / "_echo_server.py"
TEXT = "hi"
STATELESS = "2026-07-28"
CLIENT_INFO = {"name": "floor", "version": "0.1.0"}
#: what snodo puts in every 2026-07-28 request's params (read from its wire with a tee)
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
}
DEADLINE = 30.0  # seconds any one reply may take


def encode(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


class Floor:
    """One server process and the bare client side of its pipe."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.server = subprocess.Popen(
            [sys.executable, str(ECHO_SERVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        assert self.server.stdin is not None and self.server.stdout is not None
        self.fd_in, self.fd_out = self.server.stdin.fileno(), self.server.stdout.fileno()
        self.buffer = b""
        self.ids = itertools.count(1)
        self.reader: threading.Thread | None = None
        self.params: dict[str, Any] = {"name": "echo", "arguments": {"text": TEXT}}
        if version == STATELESS:
            self.params["_meta"] = ENVELOPE
            self.negotiated = version
        else:
            init = {
                "jsonrpc": "2.0",
                "id": next(self.ids),
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": CLIENT_INFO,
                },
            }
            os.write(self.fd_in, encode(init))
            self.negotiated = json.loads(self.read_line())["result"]["protocolVersion"]
            os.write(self.fd_in, encode({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def request(self, call_id: int) -> bytes:
        message = {"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": self.params}
        return encode(message)

    def read_line(self) -> bytes:
        """The next line from the server (sequential use only: no reader thread running)."""
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line, self.buffer = self.buffer[:end], self.buffer[end + 1 :]
                return line
            chunk = os.read(self.fd_out, 65536)
            if not chunk:
                raise EOFError("the server closed its stdout")
            self.buffer += chunk

    def call(self) -> dict[str, Any]:
        """One sequential round trip: write, read the line, decode, check."""
        call_id = next(self.ids)
        os.write(self.fd_in, self.request(call_id))
        reply = json.loads(self.read_line())
        assert reply["id"] == call_id, reply
        result: dict[str, Any] = reply["result"]
        assert result["content"][0]["text"] == TEXT, result
        return result

    def start_reader(self) -> None:
        """From now on one reader thread dispatches every reply by id; use :meth:`dispatched_call`."""
        self.pending: dict[int, queue.SimpleQueue[dict[str, Any]]] = {}
        self.mine = threading.local()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        pending, fd, rest = self.pending, self.fd_out, self.buffer
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                reply = json.loads(line)
                pending.pop(reply["id"]).put(reply)

    def dispatched_call(self) -> dict[str, Any]:
        """One round trip with the reply handed over by the reader thread."""
        inbox = getattr(self.mine, "inbox", None)
        if inbox is None:
            inbox = self.mine.inbox = queue.SimpleQueue()
        call_id = next(self.ids)
        self.pending[call_id] = inbox
        os.write(self.fd_in, self.request(call_id))
        reply = inbox.get(timeout=DEADLINE)
        assert reply["id"] == call_id, reply
        result: dict[str, Any] = reply["result"]
        assert result["content"][0]["text"] == TEXT, result
        return result

    def close(self) -> None:
        assert self.server.stdin is not None and self.server.stdout is not None
        self.server.stdin.close()
        self.server.wait(10)
        if self.reader is not None:  # it ends at the server's end of file
            self.reader.join(10)
        self.server.stdout.close()


def concurrent(floor: Floor, callers: int, share: int) -> tuple[float, float]:
    """``callers`` threads each making ``share`` dispatched calls: (seconds, CPU seconds)."""
    gate = threading.Barrier(callers + 1)
    failures: list[BaseException] = []

    def caller() -> None:
        gate.wait()
        try:
            for _ in range(share):
                floor.dispatched_call()
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for thread in threads:
        thread.start()
    gate.wait()
    cpu, started = cpu_seconds(), time.perf_counter()
    for thread in threads:
        thread.join()
    seconds, used = time.perf_counter() - started, cpu_seconds() - cpu
    if failures:
        raise failures[0]
    return seconds, used


def timed(call: Callable[[], object], calls: int) -> tuple[float, float]:
    """``calls`` sequential calls: (seconds, CPU seconds)."""
    cpu, started = cpu_seconds(), time.perf_counter()
    for _ in range(calls):
        call()
    return time.perf_counter() - started, cpu_seconds() - cpu


def rates(
    version: str, calls: int, concurrent_calls: int, warmup: int, callers: int
) -> dict[str, Any]:
    """The floor in the shape of benchmarks/stdio.py's workers: sequential, then ``callers``.

    Sequential is the faster of the bare loop and the same calls through the reader thread (on
    some machines a thread parked in ``read`` wakes sooner than the writer turning reader; both
    rates are in the answer, as ``seq_loop`` and ``seq_reader``)."""
    floor = Floor(version)
    try:
        floor.call()
        for _ in range(warmup):
            floor.call()
        loop = timed(floor.call, calls)
        floor.start_reader()
        for _ in range(warmup):
            floor.dispatched_call()
        reader = timed(floor.dispatched_call, calls)
        share = concurrent_calls // callers
        conc_seconds, conc_cpu = concurrent(floor, callers, share)
    finally:
        floor.close()
    seq_seconds, seq_cpu = min(loop, reader)  # the faster shape is the floor
    return {
        "seq_seconds": seq_seconds,
        "seq_cpu": seq_cpu,
        "seq_loop": calls / loop[0],
        "seq_reader": calls / reader[0],
        "conc_seconds": conc_seconds,
        "conc_calls": share * callers,
        "conc_cpu": conc_cpu,
        "negotiated": floor.negotiated,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--version", default="2025-11-25", choices=["2025-11-25", STATELESS])
    args = parser.parse_args()
    floor = Floor(args.version)
    try:
        started = time.perf_counter()
        for _ in range(args.calls):
            floor.call()
        direct = args.calls / (time.perf_counter() - started)
        floor.start_reader()
        started = time.perf_counter()
        for _ in range(args.calls):
            floor.dispatched_call()
        handoff = args.calls / (time.perf_counter() - started)
        seconds, _ = concurrent(floor, 16, args.calls // 16)
        many = args.calls // 16 * 16 / seconds
    finally:
        floor.close()
    print(f"{args.version}, {args.calls} calls each")
    print(f"bare os.write/os.read loop:   {direct:,.0f} round trips/s")
    print(f"through one reader thread:    {handoff:,.0f} round trips/s")
    print(f"16 callers, one reader:       {many:,.0f} round trips/s")


if __name__ == "__main__":
    main()
