"""The process-wide root supervisor and its dynamic ``connections`` child.

Rules: architecture §3 (root started lazily, one per process; connections children are
temporary: a dead connection is reported, never silently restarted).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pykka import ActorRef

from snodo.supervision import (
    Actor,
    ChildSpec,
    Supervisor,
    call,
    child,
    connections,
    join,
    kill,
    registry,
    root,
    shutdown_root,
    start_child,
    which_children,
)

WAIT = 5.0


@pytest.fixture(autouse=True)
def no_root() -> Iterator[None]:
    """Each test starts without a root tree and leaves none behind."""
    assert shutdown_root(WAIT)
    yield
    assert shutdown_root(WAIT)


class Conn(Actor):
    def on_receive(self, message: Any) -> Any:
        raise message


def supervisors() -> list[ActorRef[Any]]:
    return [r for r in registry.all() if issubclass(r.actor_class, Supervisor)]


def test_root_starts_once_under_concurrent_first_use() -> None:
    assert supervisors() == []
    barrier = threading.Barrier(16, timeout=WAIT)
    got: list[ActorRef[Any]] = []

    def first_use() -> None:
        barrier.wait()
        got.append(root())

    threads = [threading.Thread(target=first_use) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert len(got) == 16
    assert all(r is got[0] for r in got)
    assert len(supervisors()) == 2  # the root and its connections supervisor, once
    assert root() is got[0]


def test_connections_is_the_roots_child_and_keeps_dead_connections_dead() -> None:
    conns = connections()
    assert child(root(), "connections") is conns
    assert [i.id for i in which_children(root())] == ["connections"]

    conn = start_child(conns, ChildSpec("conn-1", Conn.start, restart="temporary"))
    conn.tell(ValueError("transport crashed"))
    assert join(conn, WAIT)
    call(conns, lambda s: None, WAIT)  # the exit has been handled
    assert which_children(conns) == []
    assert conns.is_alive()


def test_connections_supervisor_is_restarted_by_the_root() -> None:
    old = connections()
    kill(old)
    new = connections()
    assert new is not old and new.is_alive()
    assert not old.is_alive()


def test_root_can_start_again_after_shutdown() -> None:
    first = root()
    conns = connections()
    assert shutdown_root(WAIT)
    assert not first.is_alive() and not conns.is_alive()
    second = root()
    assert second is not first and second.is_alive()
    assert connections() is not conns
