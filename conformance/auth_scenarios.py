"""The ``auth/*`` conformance scenarios (placeholder: OAuth is issue 8)."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("conformance.auth")


def run(server_url: str, scenario: str, protocol_version: str, context: dict[str, Any]) -> int:
    """Run one ``auth/*`` scenario against ``server_url``; the process exit status."""
    log.error("auth scenarios wait on issue 8 (%s at %s)", scenario, protocol_version)
    return 1
