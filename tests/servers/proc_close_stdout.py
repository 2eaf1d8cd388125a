"""Close stdout at once but keep running: read stdin to EOF, then exit 3.

Used by tests/test_transport_process.py (EOF on stdout while the process lives).
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    os.close(1)
    sys.stdin.buffer.read()
    return 3


if __name__ == "__main__":
    sys.exit(main())
