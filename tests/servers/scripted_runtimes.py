"""Runtimes for ``python -m snodo.server tests.servers.scripted_runtimes:NAME`` (cwd: the repo).

Each import appends this process's pid to the file named by ``SNODO_TEST_STARTS`` (if set), so
a test can count how many times the server was started.
"""

from __future__ import annotations

import os

from examples import example_runtime
from snodo.server import Runtime

_starts = os.environ.get("SNODO_TEST_STARTS")
if _starts:
    with open(_starts, "a") as f:
        f.write(f"{os.getpid()}\n")


def _example(versions: list[str]) -> Runtime:
    """The example runtime's tools, resources, prompts and completion, on ``versions`` only.

    Runtime fixes its versions at construction, so the catalog of a freshly built example
    runtime is carried over (before either runtime has served anything).
    """
    source = example_runtime.build()
    runtime = Runtime(
        "snodo-example",
        "0.1.0",
        title="snodo example server",
        instructions=source.instructions,
        versions=versions,
        cache_hints=source.cache_hints,
    )
    runtime.catalog = source.catalog
    return runtime


#: The example runtime with only the session-era versions: a server/discover probe is refused.
session_era = _example(["2025-11-25", "2025-06-18"])
