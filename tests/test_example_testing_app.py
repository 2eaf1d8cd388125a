"""The example suite of snodo.testing runs and passes: examples/testing_app (a notebook
application with ``restart="transient"``, tested through the public kit: a crashed server, a
cut stream, a frozen server, a killed owner, a leak check on every test).

It runs as a user would run it, ``pytest examples/testing_app`` in a subprocess, in the mode of
this run (under gevent through tests/gevent_pytest.py), with a deadline.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from snodo.supervision import green_mode
from tests.support.stdio_support import ROOT

DEADLINE = 50.0  # seconds; pytest-timeout stops the test at 60
EXPECTED = 4


def test_the_testing_app_example_suite_passes_through_the_public_kit() -> None:
    runner = [str(ROOT / "tests" / "gevent_pytest.py")] if green_mode() else ["-m", "pytest"]
    env = {**os.environ}
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)  # the plugin comes by its entry point
    done = subprocess.run(
        [sys.executable, *runner, "-q", "-p", "no:randomly", "examples/testing_app"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        start_new_session=True,  # its leak checks see only its own (suites run side by side)
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    summary = re.search(r"^(\d+) passed in ", done.stdout, flags=re.MULTILINE)
    assert summary is not None, output
    assert int(summary.group(1)) == EXPECTED, output
    assert "failed" not in done.stdout and "error" not in done.stdout, output
