"""Per-version shapes: which fields each version's schema defines for the objects we send.

Session-era results must not carry fields their version's schema does not define (for
instance 2025-06-18 ``Implementation`` has no ``icons``, ``websiteUrl`` or ``description``).
The tables below are copied from each version's ``schema.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["ANY_STRUCTURED_CONTENT", "FIELDS", "shape"]

_COMMON: Final[dict[str, frozenset[str]]] = {
    "Implementation": frozenset({"name", "title", "version", "description", "icons", "websiteUrl"}),
    "Tool": frozenset(
        {
            "_meta",
            "annotations",
            "description",
            "icons",
            "inputSchema",
            "name",
            "outputSchema",
            "title",
        }
    ),
    "Resource": frozenset(
        {"_meta", "annotations", "description", "icons", "mimeType", "name", "size", "title", "uri"}
    ),
    "ResourceTemplate": frozenset(
        {"_meta", "annotations", "description", "icons", "mimeType", "name", "title", "uriTemplate"}
    ),
    "Prompt": frozenset({"_meta", "arguments", "description", "icons", "name", "title"}),
}

FIELDS: Final[dict[str, dict[str, frozenset[str]]]] = {
    "2026-07-28": dict(_COMMON),
    "2025-11-25": {**_COMMON, "Tool": _COMMON["Tool"] | {"execution"}},
    "2025-06-18": {
        "Implementation": frozenset({"name", "title", "version"}),
        "Tool": _COMMON["Tool"] - {"icons"},
        "Resource": _COMMON["Resource"] - {"icons"},
        "ResourceTemplate": _COMMON["ResourceTemplate"] - {"icons"},
        "Prompt": _COMMON["Prompt"] - {"icons"},
    },
}

#: Versions whose ``CallToolResult.structuredContent`` may be any JSON value (not only an object).
ANY_STRUCTURED_CONTENT: Final = frozenset({"2026-07-28"})


def shape(version: str, kind: str, value: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict holding the fields of ``value`` that ``version`` defines for ``kind``."""
    allowed = FIELDS[version][kind]
    return {k: v for k, v in value.items() if k in allowed}
