"""Run pytest on greenlets: ``.venv/bin/python tests/gevent_pytest.py ARGS...``.

gevent must patch before anything imports ``threading`` users (pykka, urllib3, ssl), so
this runner patches first and only then imports pytest, which imports the tests.
"""

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402

import pytest  # noqa: E402

if __name__ == "__main__":
    sys.exit(pytest.main(sys.argv[1:]))
