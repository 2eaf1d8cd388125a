"""The npm packages of the interop tests (pinned by tests/interop/package-lock.json): install
them, and start ``@modelcontextprotocol/server-everything`` over stdio or Streamable HTTP.

The install is ``npm ci`` in tests/interop, run once per test session when node_modules does not
hold every pinned version, bounded by ``INSTALL_DEADLINE``. Missing node or npm fails the tests
with a message that says what to install: they are never skipped.

The HTTP server is started under ``node --require tests/interop/bind-localhost.cjs``, which
binds its wildcard ``listen()`` to 127.0.0.1 and appends the address it got to the file named by
``SNODO_LISTEN_FILE``; ``HttpServer`` reads the port from there.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.started_processes import START_DEADLINE, stop
from tests.support.stdio_support import wait_until

ROOT = Path(__file__).resolve().parents[2]
INTEROP = ROOT / "tests" / "interop"
PACKAGE = "@modelcontextprotocol/server-everything"
INSTALLED = INTEROP / "node_modules" / PACKAGE
ENTRY = INSTALLED / "dist" / "index.js"
PRELOAD = INTEROP / "bind-localhost.cjs"
MIN_NODE = 20
INSTALL_DEADLINE = 240.0


# -- installing ------------------------------------------------------------------------------


def pinned_versions() -> dict[str, str]:
    """Every package tests/interop/package.json pins and its version (an ``npm:`` alias's too)."""
    manifest = json.loads((INTEROP / "package.json").read_text())
    return {name: str(spec).rsplit("@", 1)[-1] for name, spec in manifest["dependencies"].items()}


def installed_version(package: str) -> str | None:
    """The version of ``package`` in node_modules, or None when it is not installed."""
    try:
        found = json.loads((INTEROP / "node_modules" / package / "package.json").read_text())
        return str(found["version"])
    except (OSError, ValueError, KeyError):
        return None


def stale_packages() -> list[str]:
    """The pinned packages node_modules lacks or holds at another version."""
    return [name for name, wanted in pinned_versions().items() if installed_version(name) != wanted]


def tool(name: str) -> str:
    """The absolute path of ``node`` or ``npm``; a clear failure when it is not on PATH."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(
            f"the interop tests need Node.js >= {MIN_NODE} with npm on PATH ({name!r} not found): "
            "install them (e.g. apt-get install nodejs npm), they run "
            f"{PACKAGE} from tests/interop/package-lock.json",
            pytrace=False,
        )
    return found


def node_major(node: str) -> int:
    """The major version of ``node``."""
    done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    return int(done.stdout.strip().lstrip("v").split(".")[0])


def ensure_installed() -> str:
    """Install the pinned packages with ``npm ci`` unless they are there; the node path.

    A lock file keeps two test processes from installing at once.
    """
    node = tool("node")
    major = node_major(node)
    if major < MIN_NODE:
        pytest.fail(f"the interop tests need Node.js >= {MIN_NODE}, found {major}", pytrace=False)
    with open(INTEROP / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stale_packages():
            return node
        npm = tool("npm")
        try:
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=INTEROP,
                capture_output=True,
                text=True,
                timeout=INSTALL_DEADLINE,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"npm ci in {INTEROP} took over {INSTALL_DEADLINE:.0f}s", pytrace=False)
        stale = stale_packages()
        if done.returncode != 0 or stale:
            pytest.fail(
                f"npm ci in {INTEROP} failed (exit {done.returncode}, not installed as pinned: "
                f"{', '.join(stale) or 'none'}):\n{done.stdout[-2000:]}"
                f"{done.stderr[-2000:]}",
                pytrace=False,
            )
    return node


# -- the HTTP server -------------------------------------------------------------------------


@dataclass
class HttpServer:
    """One running ``server-everything streamableHttp`` on 127.0.0.1."""

    process: subprocess.Popen[bytes]
    address: dict[str, Any]
    log: Path

    @property
    def port(self) -> int:
        return int(self.address["port"])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


def _announced(listen_file: Path) -> dict[str, Any] | None:
    try:
        text = listen_file.read_text()
    except FileNotFoundError:
        return None
    lines = [line for line in text.split("\n")[:-1] if line]  # only complete lines
    return json.loads(lines[0]) if lines else None


def start_http(node: str, workdir: Path) -> HttpServer:
    """Start the HTTP server with the 127.0.0.1 preload and ``PORT=0``; wait for its address."""
    listen_file = workdir / "listen.jsonl"
    log = workdir / "server.log"
    env = {**os.environ, "PORT": "0", "SNODO_LISTEN_FILE": str(listen_file)}
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [node, "--require", str(PRELOAD), str(ENTRY), "streamableHttp"],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            cwd=str(INTEROP),
            env=env,
        )

    def listening() -> dict[str, Any] | None:
        if process.poll() is not None:
            raise AssertionError(
                f"server-everything exited with {process.returncode}:\n"
                f"{log.read_text(errors='replace')[-2000:]}"
            )
        return _announced(listen_file)

    try:
        address: dict[str, Any] = wait_until(listening, timeout=START_DEADLINE)
    except BaseException:
        stop(process)
        raise
    return HttpServer(process, address, log)


@contextlib.contextmanager
def http_server(node: str, workdir: Path) -> Iterator[HttpServer]:
    server = start_http(node, workdir)
    try:
        yield server
    finally:
        stop(server.process)


# -- sockets ---------------------------------------------------------------------------------


def tcp_listeners(port: int) -> list[str]:
    """The local addresses of the LISTEN sockets on ``port`` (from /proc/net/tcp and tcp6),
    as the kernel writes them: hex address, e.g. ``0100007F`` for 127.0.0.1."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            fields = row.split()
            address, hex_port = fields[1].split(":")
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: TCP_LISTEN
                found.append(address)
    return found
