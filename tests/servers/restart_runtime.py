"""A Runtime for the restart tests (stdio and HTTP): ``echo``, ``pid`` and ``touch(uri)``, which
publishes an update of a resource so that listens see events."""

from __future__ import annotations

import os
from typing import Any

from snodo.server import Context, Runtime

runtime = Runtime("restart-runtime", "1.0")


@runtime.tool
def echo(arguments: dict[str, Any], ctx: Context) -> str:
    """Return ``text``."""
    return str(arguments["text"])


@runtime.tool
def pid(arguments: dict[str, Any], ctx: Context) -> str:
    """The server's process id."""
    return str(os.getpid())


@runtime.tool
def touch(arguments: dict[str, Any], ctx: Context) -> str:
    """Publish one update of ``uri``."""
    runtime.resource_updated(str(arguments["uri"]))
    return "touched"


@runtime.tool
def exit(arguments: dict[str, Any], ctx: Context) -> str:
    """End the server process with status 0 (a clean exit) without answering."""
    os._exit(0)
