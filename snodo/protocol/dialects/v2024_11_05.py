"""Protocol 2024-11-05 (session era, opt in): 2025-03-26 without batches (and, on the server's
side, without tool annotations, audio content or the completions capability); the catalogs
are the same."""

from dataclasses import replace

from snodo.protocol.dialects.v2025_03_26 import DIALECT as V2025_03_26

DIALECT = replace(V2025_03_26, version="2024-11-05", batches=False)


__all__ = ["DIALECT"]
