"""Read stdin to EOF, then print the number of bytes read and exit 0.

Used by tests/test_transport_process.py (large writes through write_all).
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    total = 0
    while chunk := os.read(0, 1 << 16):
        total += len(chunk)
    sys.stdout.write(f"{total}\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
