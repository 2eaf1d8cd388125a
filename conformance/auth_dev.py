"""Dev entry point: the harness's environment and argv[-1] into auth_scenarios.run."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from conformance.auth_scenarios import run

if __name__ == "__main__":
    sys.exit(
        run(
            sys.argv[-1],
            os.environ["MCP_CONFORMANCE_SCENARIO"],
            os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25"),
            json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}"),
        )
    )
