"""Supervisors: strategies with exact restart sets, intensity, restart types, the API.

Rules: OTP supervisor semantics as the supervision brief spells them (one_for_one,
one_for_all, rest_for_one; max_restarts within max_seconds; permanent / transient /
temporary; children stopped newest first).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import pytest
from pykka import ActorRef

from snodo.supervision import (
    NORMAL,
    SHUTDOWN,
    Actor,
    ActorCrashed,
    ChildSpec,
    Crash,
    Exit,
    Reason,
    Strategy,
    Supervisor,
    TooManyRestarts,
    call,
    child,
    exit_reason,
    join,
    link,
    start_child,
    stop,
    terminate_child,
    which_children,
)

WAIT = 5.0


class Kid(Actor):
    """A child that records its stop and does what its messages say."""

    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__()
        self.name = name
        self.journal = log

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, BaseException):
            raise message
        if isinstance(message, tuple) and message[0] == "block":
            message[1].set()
            message[2].wait(WAIT)
        return message

    def on_stop(self) -> None:
        self.journal.append(f"stop {self.name}")


class Probe(Actor):
    trap_exits = True

    def __init__(self, events: queue.Queue[Any]) -> None:
        super().__init__()
        self.events = events

    def on_exit(self, ref: ActorRef[Any], reason: Reason) -> None:
        self.events.put(Exit(ref, reason))


def spec(name: str, log: list[str], restart: Any = "permanent", shutdown: float = 1.0) -> ChildSpec:
    def start() -> ActorRef[Any]:
        log.append(f"start {name}")
        return Kid.start(name, log)

    return ChildSpec(name, start, restart, shutdown)


def settle(sup: ActorRef[Any], old: ActorRef[Any]) -> None:
    """Wait until ``sup`` has handled ``old``'s exit (the Exit is queued before join returns)."""
    assert join(old, WAIT)
    call(sup, lambda s: None, WAIT)


def refs(sup: ActorRef[Any]) -> dict[str, Any]:
    """id -> current ref (None while not running), in start order."""
    return {info.id: info.ref for info in which_children(sup)}


@pytest.fixture
def journal() -> list[str]:
    return []


@pytest.fixture
def make_sup() -> Any:
    started: list[ActorRef[Any]] = []

    def make(strategy: Strategy, children: list[ChildSpec], **kw: Any) -> ActorRef[Any]:
        ref = Supervisor.start(strategy=strategy, children=children, **kw)
        started.append(ref)
        return ref

    yield make
    for ref in started:
        stop(ref, timeout=WAIT)


def crash(ref: ActorRef[Any]) -> None:
    ref.tell(ValueError(f"crash {ref.actor_urn}"))


# -- strategies ---------------------------------------------------------------------------


def test_one_for_one_restarts_only_the_failed_child(
    make_sup: Callable[..., ActorRef[Any]], journal: list[str]
) -> None:
    sup = make_sup("one_for_one", [spec(n, journal) for n in "abc"])
    before = refs(sup)
    crash(before["b"])
    settle(sup, before["b"])
    after = refs(sup)
    assert after["a"] is before["a"] and after["c"] is before["c"]
    assert after["b"] is not None and after["b"].actor_urn != before["b"].actor_urn
    assert after["b"].is_alive()
    assert journal == ["start a", "start b", "start c", "start b"]
    assert child(sup, "b") is after["b"]


def test_one_for_all_restarts_every_child_in_order(
    make_sup: Callable[..., ActorRef[Any]], journal: list[str]
) -> None:
    sup = make_sup("one_for_all", [spec(n, journal) for n in "abc"])
    before = refs(sup)
    del journal[:]
    crash(before["b"])
    settle(sup, before["b"])
    after = refs(sup)
    for name in "abc":
        assert after[name].actor_urn != before[name].actor_urn
        assert not before[name].is_alive()
    assert exit_reason(before["a"]) == SHUTDOWN
    assert exit_reason(before["c"]) == SHUTDOWN
    # siblings stopped newest first, then all started again in the original order
    assert journal == ["stop c", "stop a", "start a", "start b", "start c"]


def test_rest_for_one_restarts_the_failed_child_and_those_after_it(
    make_sup: Callable[..., ActorRef[Any]], journal: list[str]
) -> None:
    sup = make_sup("rest_for_one", [spec(n, journal) for n in "abcd"])
    before = refs(sup)
    del journal[:]
    crash(before["b"])
    settle(sup, before["b"])
    after = refs(sup)
    assert after["a"] is before["a"]
    for name in "bcd":
        assert after[name].actor_urn != before[name].actor_urn
    assert journal == ["stop d", "stop c", "start b", "start c", "start d"]


# -- intensity ----------------------------------------------------------------------------


def test_too_many_restarts_takes_the_supervisor_down_and_its_link_sees_it(
    journal: list[str],
) -> None:
    events: queue.Queue[Any] = queue.Queue(maxsize=10)
    probe = Probe.start(events)
    sup = Supervisor.start(
        strategy="one_for_one", children=[spec("a", journal), spec("b", journal)], max_restarts=2
    )
    link(probe, sup)
    for _ in range(2):
        old = child(sup, "a")
        assert old is not None
        crash(old)
        settle(sup, old)
    last_a, b = child(sup, "a"), child(sup, "b")
    assert last_a is not None and b is not None
    crash(last_a)  # the third restart within max_seconds is one too many
    assert join(sup, WAIT)
    got = events.get(timeout=WAIT)
    assert got.ref is sup
    assert isinstance(got.reason, Crash)
    assert isinstance(got.reason.exc, TooManyRestarts)
    assert got.reason.exc.child_id == "a"
    assert not b.is_alive() and exit_reason(b) == SHUTDOWN  # children stopped first
    assert stop(probe, timeout=WAIT)


def test_a_child_failing_in_on_start_exhausts_the_intensity() -> None:
    """An on_start failure is an exit like any other: restarted until intensity runs out."""
    starts: list[int] = []

    class Broken(Actor):
        def on_start(self) -> None:
            raise RuntimeError("never starts")

    def start() -> ActorRef[Any]:
        starts.append(1)
        return Broken.start()

    try:  # the crash loop may finish before or after start() returns
        sup = Supervisor.start(children=[ChildSpec("x", start)], max_restarts=3)
    except ActorCrashed as exc:
        reason = exc.reason
    else:
        assert join(sup, WAIT)
        reason = exit_reason(sup)  # type: ignore[assignment]
    assert isinstance(reason, Crash) and isinstance(reason.exc, TooManyRestarts)
    assert len(starts) == 4  # the first start and three restarts


# -- restart types ------------------------------------------------------------------------


def test_temporary_children_are_never_restarted_and_forgotten(
    make_sup: Callable[..., ActorRef[Any]], journal: list[str]
) -> None:
    sup = make_sup("one_for_one", [spec("t", journal, "temporary"), spec("p", journal)])
    t = child(sup, "t")
    assert t is not None
    crash(t)
    settle(sup, t)
    assert list(refs(sup)) == ["p"]
    assert child(sup, "t") is None


def test_transient_restarts_only_after_an_abnormal_exit(
    make_sup: Callable[..., ActorRef[Any]], journal: list[str]
) -> None:
    sup = make_sup("one_for_one", [spec("tr", journal, "transient"), spec("pe", journal)])
    tr = child(sup, "tr")
    assert tr is not None
    crash(tr)
    settle(sup, tr)
    tr2 = child(sup, "tr")
    assert tr2 is not None and tr2 is not tr
    assert stop(tr2, NORMAL, timeout=WAIT)
    settle(sup, tr2)
    assert refs(sup) == {"tr": None, "pe": child(sup, "pe")}
    pe = child(sup, "pe")  # permanent: restarted even after NORMAL
    assert pe is not None
    assert stop(pe, NORMAL, timeout=WAIT)
    settle(sup, pe)
    pe2 = child(sup, "pe")
    assert pe2 is not None and pe2 is not pe


def test_one_for_all_does_not_restart_temporary_siblings(
    make_sup: Callable[..., ActorRef[Any]], journal: list[str]
) -> None:
    sup = make_sup("one_for_all", [spec("p", journal), spec("t", journal, "temporary")])
    p, t = child(sup, "p"), child(sup, "t")
    assert p is not None and t is not None
    crash(p)
    settle(sup, p)
    assert exit_reason(t) == SHUTDOWN
    assert list(refs(sup)) == ["p"]


# -- the API ----------------------------------------------------------------------------


def test_dynamic_children_and_shutdown_in_reverse_start_order(journal: list[str]) -> None:
    sup = Supervisor.start(children=[spec("a", journal)])
    b = start_child(sup, spec("b", journal))
    c = start_child(sup, spec("c", journal))
    assert [i.id for i in which_children(sup)] == ["a", "b", "c"]
    assert child(sup, "b") is b
    with pytest.raises(ValueError, match="already exists"):
        start_child(sup, spec("b", journal))

    def failing() -> ActorRef[Any]:
        raise OSError("cannot spawn")

    with pytest.raises(OSError, match="cannot spawn"):
        start_child(sup, ChildSpec("bad", failing))
    assert [i.id for i in which_children(sup)] == ["a", "b", "c"]  # failed spec not kept

    assert terminate_child(sup, "b") is True
    assert terminate_child(sup, "b") is False
    assert exit_reason(b) == SHUTDOWN
    assert child(sup, "b") is None
    del journal[:]
    assert stop(sup, timeout=WAIT)
    assert journal == ["stop c", "stop a"]
    assert not c.is_alive()


def test_a_child_that_ignores_its_shutdown_is_killed(journal: list[str]) -> None:
    class Quick(Supervisor):
        kill_wait = 0.05

    sup = Quick.start(children=[spec("stuck", journal, shutdown=0.05)])
    stuck = child(sup, "stuck")
    assert stuck is not None
    running, release = threading.Event(), threading.Event()
    stuck.tell(("block", running, release))
    assert running.wait(WAIT)
    assert terminate_child(sup, "stuck", timeout=WAIT) is True  # bounded despite the block
    release.set()
    assert join(stuck, WAIT)
    assert exit_reason(stuck) == "killed"
    assert stop(sup, timeout=WAIT)


def test_nested_supervisor_follows_its_parent_down(journal: list[str]) -> None:
    inner_spec = ChildSpec("inner", lambda: Supervisor.start(children=[spec("leaf", journal)]))
    outer = Supervisor.start(children=[inner_spec])
    inner = child(outer, "inner")
    assert inner is not None
    leaf = child(inner, "leaf")
    assert leaf is not None
    assert stop(outer, timeout=WAIT)
    assert not inner.is_alive() and not leaf.is_alive()
    assert journal[-1] == "stop leaf"


def test_invalid_specs_are_refused() -> None:
    with pytest.raises(ValueError, match="restart"):
        ChildSpec("x", lambda: Kid.start("x", []), restart="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="strategy"):
        Supervisor(strategy="all_for_none")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="duplicate"):
        Supervisor(children=[spec("a", []), spec("a", [])])
