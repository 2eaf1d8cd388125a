"""Starts a grandchild in its own process group (the server's) and serves normally; on stdin
EOF it exits and leaves the grandchild behind. ``--pidfile FILE`` receives the grandchild's pid;
``--stubborn-grandchild`` makes the grandchild ignore SIGTERM; ``--grandchild-inherits-stdio``
lets it hold the server's stdin, stdout and stderr open after the server is gone."""

from __future__ import annotations

import subprocess
import sys

from scripted_lib import Server, main

SLEEPER = "import time\nfor _ in range(600):\n    time.sleep(0.1)\n"
STUBBORN = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + SLEEPER


def configure(server: Server) -> None:
    code = STUBBORN if "--stubborn-grandchild" in server.extra else SLEEPER
    inherit = "--grandchild-inherits-stdio" in server.extra
    quiet = None if inherit else subprocess.DEVNULL
    child = subprocess.Popen([sys.executable, "-c", code], stdin=quiet, stdout=quiet, stderr=quiet)
    if "--pidfile" in server.extra:
        with open(server.extra[server.extra.index("--pidfile") + 1], "w") as f:
            f.write(f"{child.pid}\n")


if __name__ == "__main__":
    main(configure)
