"""``python -m snodo``: the ``snodo`` command (``snodo.cli.main``)."""

from __future__ import annotations

import sys

from snodo.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
