"""Echo each stdin line back on stdout; exit with status argv[1] (default 0) at stdin EOF.

Used by tests/test_transport_process.py (the graceful path: exits when stdin closes).
"""

from __future__ import annotations

import sys


def main() -> int:
    for line in sys.stdin.buffer:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    return int(sys.argv[1]) if len(sys.argv) > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
