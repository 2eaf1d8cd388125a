"""A runtime for the stdio cache tests: ``python -m snodo.server tests.servers.cache_runtime:runtime``.

``proc://pid`` answers this process's pid and how many times it was read, with a public hint.
"""

from __future__ import annotations

import itertools
import os

from snodo.server import CacheHint, Context, Runtime

runtime = Runtime(
    "cache-stdio",
    "1.0",
    versions=["2026-07-28"],
    cache_hints={"resources": CacheHint(60_000, "public"), "tools": CacheHint(60_000, "public")},
)
_reads = itertools.count(1)


@runtime.resource("proc://pid", name="pid", mime_type="text/plain")
def pid(ctx: Context) -> str:
    return f"{os.getpid()} read {next(_reads)}"
