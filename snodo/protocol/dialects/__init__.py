"""The protocol dialects: one frozen catalog per version, read by client and server alike.

``get(version)`` returns the :class:`Dialect`. ``SUPPORTED_VERSIONS`` lists the versions snodo
speaks by default, newest first (the client's preference order, and what a ``Runtime`` serves);
``ALL_VERSIONS`` adds the older ones (2025-03-26, 2024-11-05) a client speaks only when its
``protocol=`` names them (decision 0039).
"""

from __future__ import annotations

from typing import Final

from snodo.protocol.dialects.base import Dialect, Era
from snodo.protocol.dialects.v2024_11_05 import DIALECT as V2024_11_05
from snodo.protocol.dialects.v2025_03_26 import DIALECT as V2025_03_26
from snodo.protocol.dialects.v2025_06_18 import DIALECT as V2025_06_18
from snodo.protocol.dialects.v2025_11_25 import DIALECT as V2025_11_25
from snodo.protocol.dialects.v2026_07_28 import DIALECT as V2026_07_28

DIALECTS: Final[dict[str, Dialect]] = {
    d.version: d for d in (V2026_07_28, V2025_11_25, V2025_06_18)
}

#: The versions snodo speaks by default, newest first.
SUPPORTED_VERSIONS: Final[tuple[str, ...]] = tuple(DIALECTS)
"""The versions snodo speaks by default, newest first: what ``protocol=`` allows when not given
(the stateless ``2026-07-28`` and the session-era ``2025-11-25`` and ``2025-06-18``)."""

#: Every dialect, the older opt-in ones included.
ALL_DIALECTS: Final[dict[str, Dialect]] = {
    d.version: d for d in (*DIALECTS.values(), V2025_03_26, V2024_11_05)
}

#: Every version snodo can speak, newest first: the default ones and the opt-in older ones.
ALL_VERSIONS: Final[tuple[str, ...]] = tuple(ALL_DIALECTS)
"""Every version snodo can speak, newest first: ``protocol=snodo.ALL_VERSIONS`` also allows the
older opt-in ``2025-03-26`` and ``2024-11-05`` that many installed servers still speak."""

#: The versions a client speaks only when ``protocol=`` names them.
OPT_IN_VERSIONS: Final[tuple[str, ...]] = tuple(
    v for v in ALL_VERSIONS if v not in SUPPORTED_VERSIONS
)

#: The newest version (the stateless era).
LATEST: Final[str] = SUPPORTED_VERSIONS[0]


def get(version: str) -> Dialect:
    """The dialect for ``version`` (an opt-in one too); ``KeyError`` for one snodo cannot speak."""
    return ALL_DIALECTS[version]


__all__ = [
    "ALL_DIALECTS",
    "ALL_VERSIONS",
    "DIALECTS",
    "LATEST",
    "OPT_IN_VERSIONS",
    "SUPPORTED_VERSIONS",
    "V2024_11_05",
    "V2025_03_26",
    "V2025_06_18",
    "V2025_11_25",
    "V2026_07_28",
    "Dialect",
    "Era",
    "get",
]
