"""Never read stdin (so never see its EOF); print "ready" and wait for a signal.

With ``--ignore-term`` SIGTERM is ignored too, so only SIGKILL ends it. Used by
tests/test_transport_process.py (terminate's SIGTERM and SIGKILL steps, write deadlines).
"""

from __future__ import annotations

import signal
import sys


def main() -> None:
    if "--ignore-term" in sys.argv[1:]:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
