"""Python servers written by others, pinned whole in a requirements file under tests/interop:
each gets a venv of its own in tests/interop/.venvs/<file's stem>, made once (a stamp holds the
file's hash) under a lock on the file, so test processes started together install it once."""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
import venv
from pathlib import Path

import pytest

INTEROP = Path(__file__).resolve().parent.parent / "interop"
INSTALL_DEADLINE = 600.0


def ensure_venv(requirements: Path) -> Path:
    """The python of ``requirements``' venv, made or brought up to date first."""
    home = INTEROP / ".venvs" / requirements.stem
    python = home / "bin" / "python"
    stamp = home / ".snodo-stamp"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    with open(requirements, "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and stamp.exists() and stamp.read_text() == digest:
            return python
        stamp.unlink(missing_ok=True)
        venv.EnvBuilder(clear=True, with_pip=True).create(home)
        try:
            pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
            done = subprocess.run(
                [*pip, "--no-deps", "-r", str(requirements)],
                capture_output=True,
                text=True,
                timeout=INSTALL_DEADLINE,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"installing {requirements.name} took over {INSTALL_DEADLINE:.0f}s", pytrace=False
            )
        if done.returncode != 0:
            pytest.fail(
                f"pip install -r {requirements} failed (exit {done.returncode}):\n"
                f"{done.stdout[-2000:]}{done.stderr[-2000:]}",
                pytrace=False,
            )
        stamp.write_text(digest)
    return python


if __name__ == "__main__":  # make it by hand: python tests/support/pinned_venvs.py FILE
    print(ensure_venv(Path(sys.argv[1]).resolve()))
