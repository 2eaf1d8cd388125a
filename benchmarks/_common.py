"""What the benchmark scripts share: the machine line, package versions, CPU time and /proc
readings, running a measurement in a subprocess, and starting and stopping a server that prints
its port. (The leading underscore keeps run_all from running it.)"""

from __future__ import annotations

import gc
import json
import os
import platform
import re
import selectors
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

__all__ = [
    "cpu_seconds",
    "footprint",
    "last_error",
    "machine",
    "read_port",
    "run_json",
    "spread",
    "status_field",
    "stop",
    "version_of",
]


def machine() -> str:
    """CPU model, cores, Python and OS: printed at the top of every benchmark."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{model}, {os.cpu_count()} cores; Python {platform.python_version()} "
        f"({platform.python_implementation()}) on {platform.system()} {platform.release()}"
    )


def version_of(distribution: str) -> str:
    """The installed version of a distribution, or "not installed"."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def cpu_seconds() -> float:
    """This process's user + system CPU time, all threads (nanosecond clock: ``os.times`` counts
    10 ms ticks, too coarse for a floor's ~20 µs per call over a few thousand calls)."""
    return time.process_time()


def status_field(name: str) -> int:
    """A number from /proc/self/status (VmRSS is in KiB)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {name} in /proc/self/status")


def footprint() -> dict[str, int]:
    """RSS in bytes, OS threads and open file descriptors of this process, after a collection."""
    gc.collect()
    return {
        "rss": status_field("VmRSS") * 1024,
        "threads": status_field("Threads"),
        "fds": len(os.listdir("/proc/self/fd")),
    }


def last_error(stderr: str, status: int) -> str:
    """The exception line of a traceback (exception groups included), or the last line."""
    lines = [line.strip(" |") for line in stderr.strip().splitlines()]
    for line in reversed(lines):
        if re.match(r"^[\w.]*(Error|Exception|Exit)\b", line):
            return line
    return next((line for line in reversed(lines) if line), f"exit status {status}")


def run_json(command: list[str]) -> dict[str, Any] | str:
    """Run one measurement; its last stdout line as JSON, or an error text."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        return "timed out after 600 s"
    if done.returncode != 0:
        return last_error(done.stderr, done.returncode)
    try:
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return f"unreadable output: {done.stdout.strip()[-200:]!r}"


def spread(samples: Sequence[float], fmt: Callable[[float], str]) -> str:
    """min / median / max of ``samples``, each formatted by ``fmt``."""
    return " / ".join(fmt(v) for v in (min(samples), statistics.median(samples), max(samples)))


def read_port(process: subprocess.Popen[bytes], deadline: float) -> int:
    """The port from the server's ``PORT <n>`` line, before ``deadline`` (monotonic)."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    seen = b""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while b"\n" not in seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or process.poll() is not None:
                raise RuntimeError(f"no port (exit status {process.poll()}): {seen!r}")
            if selector.select(remaining):
                chunk = os.read(fd, 4096)
                if chunk:
                    seen += chunk
    word, port = seen.split(b"\n", 1)[0].decode().split()
    if word != "PORT":
        raise RuntimeError(f"unexpected first line {seen!r}")
    return int(port)


def stop(process: subprocess.Popen[bytes]) -> None:
    """End one server we started: SIGTERM, SIGKILL after 10 s; reap it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    if process.stdout is not None:
        process.stdout.close()


#: ``python -c`` code that monkey-patches with gevent first, then runs ``argv[1:]`` as a script:
#: a worker whose threads are greenlets (issue 19's gevent rows).
_GEVENT_BOOT = (
    "import os, runpy, sys; from gevent import monkey; monkey.patch_all(); "
    "sys.argv = sys.argv[1:]; sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0]))); "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def under_gevent(command: list[str]) -> list[str]:
    """``[python, script, *args]`` run with gevent's monkey-patching done before anything."""
    return [command[0], "-c", _GEVENT_BOOT, *command[1:]]
