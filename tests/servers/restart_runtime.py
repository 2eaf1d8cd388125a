"""A Runtime for the restart tests (stdio and HTTP): ``echo``, ``pid``, ``touch(uri)`` (publishes an
update of a resource so that listens see events), ``slow(seconds)`` and ``exit``. With
``RESTART_GRANDCHILD=1`` in its environment the server starts a grandchild in its process group
(a ``sleep``) before serving."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from snodo.server import Context, Runtime

runtime = Runtime("restart-runtime", "1.0")

if os.environ.get("RESTART_GRANDCHILD") == "1":
    subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)


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


@runtime.tool
def slow(arguments: dict[str, Any], ctx: Context) -> str:
    """Report progress 0 (the request has arrived), then answer after ``seconds``."""
    ctx.progress(0, 1)
    time.sleep(float(arguments["seconds"]))
    return "slept"
