"""``python -m snodo.server`` under gevent: patches first, then runs the same command line.

``python tests/servers/server_stdio_gevent.py MODULE:ATTR [options]`` (cwd = the repository, so
that MODULE is importable); the workers are greenlets and stdin/stdout are read and written off
the hub.
"""

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402

from snodo.server.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
