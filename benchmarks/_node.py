"""The TypeScript clients the call benchmarks run with node: the SDK 1.x (``benchmarks/ts``) and the
v2 client (``benchmarks/ts2``). Whether they can run (``npm ci`` once when node_modules is
missing), their versions, and the v2 client's command and answer in the shape of the Python
workers'. (The leading underscore keeps run_all from running it.)"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from _common import last_error

__all__ = [
    "TS2_DIR",
    "TS2_PACKAGE",
    "TS_DIR",
    "TS_PACKAGE",
    "node_version",
    "npm_ready",
    "package_version",
    "ts2_command",
    "ts2_outcome",
]

HERE = Path(__file__).resolve().parent
TS_DIR = HERE / "ts"
TS_PACKAGE = "@modelcontextprotocol/sdk"
TS2_DIR = HERE / "ts2"
TS2_PACKAGE = "@modelcontextprotocol/client"


def node_version() -> str:
    if shutil.which("node") is None:
        return "not installed"
    done = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def npm_ready(directory: Path, package: str) -> str | None:
    """None when node and ``package`` are there (``npm ci`` in ``directory`` first if needed);
    else why the row is skipped."""
    if shutil.which("node") is None:
        return "node is not installed"
    if (directory / "node_modules" / package).is_dir():
        return None
    where = f"benchmarks/{directory.name}"
    if shutil.which("npm") is None:
        return f"npm is not installed (needed once for npm ci in {where})"
    try:
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"npm ci in {where} timed out"
    if done.returncode != 0:
        return f"npm ci in {where} failed: {last_error(done.stderr, done.returncode)}"
    return None


def package_version(directory: Path, package: str) -> str:
    try:
        with open(directory / "node_modules" / package / "package.json") as manifest:
            return str(json.load(manifest)["version"])
    except (OSError, ValueError, KeyError):
        return "not installed"


def ts2_command(
    version: str, counts: tuple[int, int, int], concurrency: int, target: list[str]
) -> list[str]:
    """``node benchmarks/ts2/bench.mjs`` for one rates run; ``counts``: (calls, concurrent calls,
    warm-up calls); ``target``: ``["stdio", command, *args]`` or ``["http", url]``."""
    calls, concurrent_calls, warmup = counts
    command = ["node", str(TS2_DIR / "bench.mjs"), version]
    command += [str(calls), str(concurrent_calls), str(warmup), str(concurrency)]
    return command + target


def ts2_outcome(got: dict[str, Any] | str, concurrency: int) -> dict[str, Any] | str:
    """The v2 client's answer (one ``conc`` entry per level) in the Python workers' shape."""
    if isinstance(got, str):
        return got
    level = got["conc"][str(concurrency)]
    return {
        "seq_seconds": got["seq_seconds"],
        "seq_cpu": got["seq_cpu"],
        "conc_seconds": level["seconds"],
        "conc_calls": level["calls"],
        "conc_cpu": level["cpu"],
        "negotiated": got["negotiated"],
    }
