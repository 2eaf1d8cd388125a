"""The three protocol dialects: one frozen catalog per version, read by client and server alike.

``get(version)`` returns the :class:`Dialect`; ``SUPPORTED_VERSIONS`` lists the versions snodo
speaks, newest first (the client's preference order).
"""

from __future__ import annotations

from typing import Final

from snodo.protocol.dialects.base import Dialect, Era
from snodo.protocol.dialects.v2025_06_18 import DIALECT as V2025_06_18
from snodo.protocol.dialects.v2025_11_25 import DIALECT as V2025_11_25
from snodo.protocol.dialects.v2026_07_28 import DIALECT as V2026_07_28

DIALECTS: Final[dict[str, Dialect]] = {
    d.version: d for d in (V2026_07_28, V2025_11_25, V2025_06_18)
}

#: Every version snodo speaks, newest first.
SUPPORTED_VERSIONS: Final[tuple[str, ...]] = tuple(DIALECTS)

#: The newest version (the stateless era).
LATEST: Final[str] = SUPPORTED_VERSIONS[0]


def get(version: str) -> Dialect:
    """The dialect for ``version``; ``KeyError`` for a version snodo does not speak."""
    return DIALECTS[version]


__all__ = [
    "DIALECTS",
    "LATEST",
    "SUPPORTED_VERSIONS",
    "V2025_06_18",
    "V2025_11_25",
    "V2026_07_28",
    "Dialect",
    "Era",
    "get",
]
