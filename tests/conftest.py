"""Shared fixtures: a leak check of threads and actors around every test.

After each test, every thread and every actor (snodo's registry and Pykka's) that the
test started must be gone within ``LEAK_DEADLINE`` seconds; the check waits on the
threads and actors themselves, never sleeps. Service threads (``service_threads()``: the
pooled-actor workers and the timer thread, shared by the whole process, started lazily
and ended when idle) are no test's own and are not counted. Leftovers are stopped so one
leak does not fail the next test too. Mark a test ``@pytest.mark.allow_leaks`` to skip
the check.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pykka
import pytest
from hypothesis import settings

from snodo.supervision import connections, join, kill, registry, service_threads, stop
from tests.support.client_support import Wire, recording_direct

LEAK_DEADLINE = 5.0

# CI must be repeatable: there hypothesis replays the same examples on every run (and never fails
# a test for being slow on a loaded machine); locally it keeps exploring new ones.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "allow_leaks: skip the thread/actor leak check")


def _threads() -> set[threading.Thread]:
    dummy: Any = getattr(threading, "_DummyThread", ())  # foreign threads/greenlets: not ours
    service = service_threads()
    return {
        t
        for t in threading.enumerate()
        if t.is_alive() and not isinstance(t, dummy) and t not in service
    }


def _leaks(
    threads: set[threading.Thread], urns: set[str], pykka_refs: set[pykka.ActorRef[Any]]
) -> tuple[list[threading.Thread], list[pykka.ActorRef[Any]]]:
    new_threads = [t for t in _threads() if t not in threads]
    new_actors = [r for r in registry.all() if r.actor_urn not in urns]
    new_actors += [r for r in pykka.ActorRegistry.get_all() if r not in pykka_refs]
    return new_threads, new_actors


@pytest.fixture
def supervision_root() -> None:
    """The root supervision tree every connection lives under (started on first use, one per
    process; a test may shut it down) runs before each test's baseline: it is no test's own."""
    connections()


@pytest.fixture(autouse=True)
def leak_check(request: pytest.FixtureRequest, supervision_root: None) -> Iterator[None]:
    """Fail a test that leaves a thread or an actor of its own behind."""
    if request.node.get_closest_marker("allow_leaks"):
        yield
        return
    threads = _threads()
    urns = {r.actor_urn for r in registry.all()}
    pykka_refs = set(pykka.ActorRegistry.get_all())
    yield
    deadline = time.monotonic() + LEAK_DEADLINE
    new_threads, new_actors = _leaks(threads, urns, pykka_refs)
    if new_threads or new_actors:
        # A client the test dropped without close() (say, held by a caught exception's
        # traceback cycle) stops its connection owner once it is collected.
        gc.collect()
        new_threads, new_actors = _leaks(threads, urns, pykka_refs)
    while new_threads or new_actors:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        for ref in new_actors:
            left = max(0.0, deadline - time.monotonic())
            if hasattr(ref, "_snodo_proc"):
                join(ref, left)
            else:
                ref.actor_stopped.wait(left)
        for thread in new_threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        new_threads, new_actors = _leaks(threads, urns, pykka_refs)
    if new_threads or new_actors:
        for ref in reversed(new_actors):
            if hasattr(ref, "_snodo_proc"):
                if not stop(ref, timeout=1.0):
                    kill(ref)
            else:
                ref.stop(block=False)
        pytest.fail(f"leaked after the test: threads {new_threads}, actors {new_actors}")


@pytest.fixture(autouse=True)
def wire() -> Iterator[Wire]:
    """Every message a client sends through a direct transport is schema-checked and recorded."""
    with recording_direct() as recorded:
        yield recorded
