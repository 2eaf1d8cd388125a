"""Print one JSON line describing this process, then exit 0 without reading stdin.

Reports: pid, pgid, cwd, the open fds, argv, and the environment variables named in argv[1:]
(None for an unset one). Used by tests/test_transport_process.py.
"""

from __future__ import annotations

import json
import os
import sys


def _open_fds() -> list[int]:
    listed = [int(name) for name in os.listdir("/proc/self/fd")]
    still_open = []
    for fd in listed:  # drop the fd listdir itself used
        try:
            os.fstat(fd)
        except OSError:
            continue
        still_open.append(fd)
    return sorted(still_open)


def main() -> int:
    info = {
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "cwd": os.getcwd(),
        "fds": _open_fds(),
        "argv": sys.argv,
        "env": {name: os.environ.get(name) for name in sys.argv[1:]},
    }
    sys.stdout.write(json.dumps(info) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
