"""System programs a test needs (``tmux``), installed from Debian's packages when missing and
this machine allows it (root, ``apt-get``), once at a time under a lock, with a deadline."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

INSTALL_DEADLINE = 300.0


def ensure_program(program: str, package: str) -> str | None:
    """The path of ``program``, installing ``package`` first if need be (``apt-get update`` too
    when the first try fails); None when it cannot be had here (no root, no apt-get, or the
    install failed)."""
    found = shutil.which(program)
    if found is not None:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None
    lock_path = Path(tempfile.gettempdir()) / "snodo-tests-apt.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = shutil.which(program)
        if found is not None:
            return found
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", package]
        for command in (install, ["apt-get", "update", "-q"], install):
            try:
                done = subprocess.run(
                    command,
                    capture_output=True,
                    env=env,
                    timeout=INSTALL_DEADLINE,
                    stdin=subprocess.DEVNULL,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return None
            if command is install and done.returncode == 0:
                break
    return shutil.which(program)
