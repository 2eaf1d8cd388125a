"""What the benchmark scripts share: the machine line, package versions, CPU time and /proc
readings. (The leading underscore keeps run_all from running it.)"""

from __future__ import annotations

import os
import platform
from importlib import metadata


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
    """This process's user + system CPU time."""
    times = os.times()
    return times.user + times.system


def status_field(name: str) -> int:
    """A number from /proc/self/status (VmRSS is in KiB)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {name} in /proc/self/status")
