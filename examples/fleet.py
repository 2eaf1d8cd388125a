"""A fleet: many MCP servers from one ``mcpServers`` file, supervised, behind one catalog.

    python examples/fleet.py        # from the repository root

examples/fleet.json holds two stdio servers running the example Runtime
(``python -m snodo.server example_runtime:runtime``): ``main`` (eager, a tools allow filter) and
``jobs`` (lazy, pinned to the session era, a deny filter). The example prints the status table,
the fleet's qualified tool names, routed calls and one the tools filter refuses, a call on
``fleet["jobs"]`` (the server's own ``Client``), then reloads the config with ``jobs`` removed and ``extra`` added (``main`` is
unchanged and keeps its process), and closes.

``${PYTHON:-python3}`` in the file is the interpreter; this example sets ``PYTHON`` to its own
(``environ=``) so the servers import this checkout's snodo. ``${SNODO_EXAMPLES:-examples}`` is
left to its default: the servers run in examples/ (relative to the repository root).
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import snodo

CONFIG = Path(__file__).resolve().parent / "fleet.json"


def main() -> None:
    environ = {**os.environ, "PYTHON": sys.executable}
    fleet = snodo.Fleet.from_file(CONFIG, environ=environ, start_wait=30.0)
    try:
        print("started:", fleet)
        print(fleet.status())  # "jobs" is lazy: stopped until first used

        names = sorted(tool["name"] for tool in fleet.list_tools())  # starts "jobs" to list it
        print("tools:", ", ".join(names))
        tool = next(tool for tool in fleet.list_tools() if tool["name"] == "main_add")
        print("main_add is", tool["fleet"])

        result: Any = fleet.call_tool("main_add", {"a": 2, "b": 3})
        print("routed call main_add:", result["structuredContent"])
        echoed: Any = fleet.call_tool("jobs_echo", {"text": "hello, fleet"})
        print("routed call jobs_echo:", echoed["content"][0]["text"])
        try:
            fleet.call_tool("main_slow_count", {"n": 1})
        except snodo.McpError as error:
            print(f"main_slow_count refused ({error.code}): {error.message}")

        jobs = fleet["jobs"]
        counted: Any = jobs.call_tool("slow_count", {"n": 3})
        print(f'fleet["jobs"]: version {jobs.version}, {counted["content"][0]["text"]}')
        print(fleet.status())

        before = fleet.status()["main"]["pid"]
        with open(CONFIG, encoding="utf-8") as file:
            config = json.load(file)
        servers = config["mcpServers"]
        servers["extra"] = copy.deepcopy(servers.pop("jobs"))
        servers["extra"].update(start="eager", tools={"allow": ["echo"]})
        done = fleet.reload(config)
        print("reload:", ", ".join(f"{what} {names}" for what, names in done.items()))
        after = fleet.status()["main"]["pid"]
        print("main kept its process:", before is not None and before == after)
        print("tools:", ", ".join(sorted(tool["name"] for tool in fleet.list_tools())))
        print(fleet.status())
    finally:
        fleet.close()
    print("closed:", fleet)


if __name__ == "__main__":
    main()
