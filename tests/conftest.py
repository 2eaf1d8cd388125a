"""Shared fixtures: a leak check of threads and actors around every test.

After each test, every thread and every actor (snodo's registry and Pykka's) that the
test started must be gone within ``LEAK_DEADLINE`` seconds; the check waits on the
threads and actors themselves, never sleeps. Service threads (``service_threads()``: the
pooled-actor workers and the timer thread, shared by the whole process, started lazily
and ended when idle) and the I/O hub are no test's own and are not counted. Leftover actors
are stopped so one leak does not fail the next test too. The check is
``snodo.testing.leaks.no_leaks`` (the kit applications use). Mark a test
``@pytest.mark.allow_leaks`` to skip the check.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from snodo.supervision import connections
from snodo.testing.leaks import no_leaks
from tests.support.client_support import Wire, recording_direct

LEAK_DEADLINE = 5.0

# CI must be repeatable: there hypothesis replays the same examples on every run (and never fails
# a test for being slow on a loaded machine); locally it keeps exploring new ones.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "allow_leaks: skip the thread/actor leak check")


@pytest.fixture
def supervision_root() -> None:
    """The root supervision tree every connection lives under (started on first use, one per
    process; a test may shut it down) runs before each test's baseline: it is no test's own."""
    connections()


@pytest.fixture(autouse=True)
def leak_check(request: pytest.FixtureRequest, supervision_root: None) -> Iterator[None]:
    """Fail a test that leaves a thread or an actor of its own behind (``snodo.testing.leaks``,
    the one implementation; fds and child processes are ``stdio_no_leaks``'s)."""
    if request.node.get_closest_marker("allow_leaks"):
        yield
        return
    with no_leaks(LEAK_DEADLINE, fds=False, processes=False):
        yield


@pytest.fixture(autouse=True)
def wire() -> Iterator[Wire]:
    """Every message a client sends through a direct transport is schema-checked and recorded."""
    with recording_direct() as recorded:
        yield recorded
