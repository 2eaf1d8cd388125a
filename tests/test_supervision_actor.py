"""snodo.supervision.Actor: exit reasons, links, monitors, containment, bounded waits.

Rules under test come from the brief of the supervision layer and
../shared/reference/runtime-costs.md §1.2-1.3 (Pykka traps 1-3).
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import pykka
import pytest
import structlog
from pykka import ActorRef

from snodo.supervision import (
    KILLED,
    NORMAL,
    SHUTDOWN,
    Actor,
    ActorCrashed,
    ActorDead,
    CallTimeout,
    Crash,
    Down,
    Exit,
    InboxFull,
    MonitorRef,
    Reason,
    call,
    current_actor,
    demonitor,
    exit_reason,
    green_mode,
    is_abnormal,
    join,
    kill,
    link,
    monitor,
    registry,
    stop,
    unlink,
)
from snodo.supervision.core import proc_of

WAIT = 5.0  # generous deadline for things that should happen at once


class Worker(Actor):
    """Does what its messages say: answer, raise, or block on an event."""

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, BaseException):
            raise message
        if isinstance(message, tuple) and message[0] == "block":
            started, release = message[1], message[2]
            started.set()
            release.wait(WAIT)
            return "released"
        return message


class Probe(Actor):
    """Traps exits and records every Exit and Down it gets, in order."""

    trap_exits = True

    def __init__(self, events: queue.Queue[Any]) -> None:
        super().__init__()
        self.events = events

    def on_exit(self, ref: ActorRef[Any], reason: Reason) -> None:
        self.events.put(Exit(ref, reason))

    def on_down(self, monitor_ref: MonitorRef, ref: ActorRef[Any], reason: Reason) -> None:
        self.events.put(Down(monitor_ref, ref, reason))


@pytest.fixture
def events() -> queue.Queue[Any]:
    return queue.Queue(maxsize=100)


@pytest.fixture
def probe(events: queue.Queue[Any]) -> Any:
    ref = Probe.start(events)
    yield ref
    stop(ref, timeout=WAIT)


def drained(probe: ActorRef[Any], events: queue.Queue[Any]) -> list[Any]:
    """Every event the probe has recorded so far (a call flushes its inbox first)."""
    call(probe, lambda actor: None, WAIT)
    out = []
    while not events.empty():
        out.append(events.get_nowait())
    return out


def started(*refs: ActorRef[Any]) -> None:
    """Wait until each actor has run on_start (a call is handled after it)."""
    for ref in refs:
        call(ref, lambda actor: None, WAIT)


# -- exit reasons ----------------------------------------------------------------------


def test_reason_helpers_follow_otp() -> None:
    """NORMAL and SHUTDOWN are orderly; KILLED, crashes and other strings are abnormal."""
    assert (NORMAL, SHUTDOWN, KILLED) == ("normal", "shutdown", "killed")
    assert not is_abnormal(NORMAL)
    assert not is_abnormal(SHUTDOWN)
    assert is_abnormal(KILLED)
    assert is_abnormal("transport closed")
    assert is_abnormal(Crash(ValueError("x")))


def test_stop_sends_one_down_with_shutdown_and_pykka_stop_means_normal(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    """Every exit path produces exactly one reason, sent once to each monitor."""
    a, b = Worker.start(), Worker.start()
    ma, mb = monitor(probe, a), monitor(probe, b)
    assert stop(a, timeout=WAIT)
    assert b.stop(timeout=WAIT) is True  # Pykka's own stop
    assert join(b, WAIT)
    got = drained(probe, events)
    assert got == [Down(ma, a, SHUTDOWN), Down(mb, b, NORMAL)]
    assert exit_reason(a) == SHUTDOWN
    assert exit_reason(b) == NORMAL


def test_tell_failure_crashes_once_to_links_and_monitors(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    """A failing tell handler ends the actor with Crash(exc), sent once to each."""
    w = Worker.start()
    link(probe, w)
    mref = monitor(probe, w)
    error = ValueError("tell failed")
    w.tell(error)
    assert join(w, WAIT)
    got = drained(probe, events)
    assert got == [Exit(w, Crash(error)), Down(mref, w, Crash(error))]
    assert got[0].reason.exc is error


def test_ask_failure_goes_back_to_caller_and_the_actor_lives() -> None:
    """Pykka semantics kept: an exception in an ask is the caller's, not a crash."""
    w = Worker.start()
    with pytest.raises(KeyError):
        call(w, KeyError("nope"), WAIT)
    assert call(w, "still here", WAIT) == "still here"
    assert stop(w, timeout=WAIT)


def test_on_start_failure_propagates_an_exit(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    """Pykka reports an on_start failure to no hook; snodo sends Exit and runs on_failure."""
    failures: queue.Queue[BaseException | None] = queue.Queue(maxsize=10)

    class BadStart(Actor):
        def on_start(self) -> None:
            raise RuntimeError("cannot start")

        def on_failure(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
            failures.put(exc)

    bad = BadStart.start()
    link(probe, bad)  # before or after its death: both deliver the exit
    assert join(bad, WAIT)
    (got,) = drained(probe, events)
    assert got.ref is bad
    assert isinstance(got.reason, Crash)
    assert isinstance(got.reason.exc, RuntimeError)
    assert failures.get(timeout=WAIT) is got.reason.exc


def test_on_stop_failure_turns_the_exit_into_a_crash(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    class BadStop(Actor):
        def on_stop(self) -> None:
            raise OSError("cleanup failed")

    bad = BadStop.start()
    mref = monitor(probe, bad)
    assert stop(bad, timeout=WAIT)
    (got,) = drained(probe, events)
    assert got.monitor_ref is mref
    assert isinstance(got.reason, Crash)
    assert isinstance(got.reason.exc, OSError)


# -- BaseException containment (trap 1) ---------------------------------------------------


@pytest.mark.parametrize("exc", [SystemExit(2), KeyboardInterrupt()], ids=repr)
def test_base_exception_in_tell_crashes_only_that_actor(
    exc: BaseException, probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    """Pykka would call ActorRegistry.stop_all(); snodo contains it to the one actor."""
    bystanders = [Worker.start() for _ in range(3)]
    plain = pykka.ThreadingActor.start()  # a plain Pykka bystander too
    victim = Worker.start()
    mref = monitor(probe, victim)
    victim.tell(exc)
    assert join(victim, WAIT)
    assert drained(probe, events) == [Down(mref, victim, Crash(exc))]
    for b in bystanders:
        assert call(b, "alive", WAIT) == "alive"
        assert registry.get(b.actor_urn) is b
    assert plain.is_alive()
    assert registry.get(victim.actor_urn) is None
    plain.stop()
    for b in bystanders:
        assert stop(b, timeout=WAIT)


def test_base_exception_in_ask_answers_the_asker_with_actor_crashed() -> None:
    """The ask that triggered a SystemExit is answered (Pykka leaves it hanging)."""
    bystander = Worker.start()
    victim = Worker.start()
    with pytest.raises(ActorCrashed) as info:
        call(victim, SystemExit(1), WAIT)
    assert isinstance(info.value.reason, Crash)
    assert isinstance(info.value.__cause__, SystemExit)
    assert join(victim, WAIT)
    assert isinstance(exit_reason(victim), Crash)
    assert call(bystander, "ok", WAIT) == "ok"
    assert stop(bystander, timeout=WAIT)


def test_base_exception_in_on_start_is_contained() -> None:
    class ExitAtStart(Actor):
        def on_start(self) -> None:
            raise SystemExit("at start")

    bystander = Worker.start()
    victim = ExitAtStart.start()
    assert join(victim, WAIT)
    reason = exit_reason(victim)
    assert isinstance(reason, Crash)
    assert isinstance(reason.exc, SystemExit)
    assert call(bystander, "ok", WAIT) == "ok"
    assert stop(bystander, timeout=WAIT)


@pytest.mark.skipif(not green_mode(), reason="gevent mode only")
def test_greenlet_exit_thrown_into_an_actor_is_contained(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    """gevent's default Greenlet.kill() (GreenletExit) crashes that actor alone."""
    import gevent

    class Green(Actor):
        def on_start(self) -> None:
            self.greenlet = gevent.getcurrent()

    bystander = Worker.start()
    victim = Green.start()
    glet = call(victim, lambda actor: actor.greenlet, WAIT)
    mref = monitor(probe, victim)
    glet.kill(block=False)  # GreenletExit while the actor idles in its inbox
    assert join(victim, WAIT)
    (got,) = drained(probe, events)
    assert got.monitor_ref is mref
    assert isinstance(got.reason, Crash)
    assert isinstance(got.reason.exc, gevent.GreenletExit)
    assert call(bystander, "ok", WAIT) == "ok"
    assert registry.get(bystander.actor_urn) is bystander
    assert stop(bystander, timeout=WAIT)


def test_foreign_pykka_stop_all_does_not_reach_snodo_actors() -> None:
    """snodo actors are not in pykka.ActorRegistry, so a plain actor's trap 1 spares them."""

    class Plain(pykka.ThreadingActor):
        def on_receive(self, message: Any) -> Any:
            raise SystemExit("plain actor")

    mine = Worker.start()
    plain = Plain.start()
    plain.tell("go")
    assert plain.actor_stopped.wait(WAIT)
    assert call(mine, "ok", WAIT) == "ok"
    assert mine not in pykka.ActorRegistry.get_all()
    assert stop(mine, timeout=WAIT)


# -- links ------------------------------------------------------------------------------


@pytest.mark.parametrize("crashing", ["first", "second"])
def test_link_propagates_a_crash_both_ways(
    crashing: str, probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    a, b = Worker.start(), Worker.start()
    link(a, b)
    victim, other = (a, b) if crashing == "first" else (b, a)
    mref = monitor(probe, other)
    error = ValueError("linked crash")
    victim.tell(error)
    assert join(other, WAIT)
    assert exit_reason(victim) == Crash(error)
    assert drained(probe, events) == [Down(mref, other, Crash(error))]


def test_normal_exit_spares_links_and_shutdown_propagates() -> None:
    """Erlang: NORMAL does not kill a linked actor; any other reason (SHUTDOWN too) does."""
    a, b, c = Worker.start(), Worker.start(), Worker.start()
    link(a, b)
    link(b, c)
    assert stop(a, NORMAL, timeout=WAIT)
    assert call(b, "alive", WAIT) == "alive"
    assert stop(b, SHUTDOWN, timeout=WAIT)
    assert join(c, WAIT)
    assert exit_reason(c) == SHUTDOWN


def test_trap_exits_receives_every_exit_and_survives(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    a, b = Worker.start(), Worker.start()
    link(probe, a)
    link(probe, b)
    error = RuntimeError("boom")
    a.tell(error)
    assert stop(b, NORMAL, timeout=WAIT)
    assert join(a, WAIT)
    got = drained(probe, events)
    assert set(got) == {Exit(a, Crash(error)), Exit(b, NORMAL)}
    assert probe.is_alive()


def test_trap_exits_can_be_set_in_on_start(events: queue.Queue[Any]) -> None:
    class LateTrap(Probe):
        trap_exits = False

        def on_start(self) -> None:
            self.trap_exits = True

    trapper = LateTrap.start(events)
    w = Worker.start()
    link(trapper, w)
    w.tell(ValueError("x"))
    assert join(w, WAIT)
    assert [type(e) for e in drained(trapper, events)] == [Exit]
    assert stop(trapper, timeout=WAIT)


def test_linking_to_a_dead_actor_delivers_its_exit_at_once(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    """Like Erlang's noproc, but with the reason the actor really ended with."""
    dead = Worker.start()
    assert stop(dead, "gone", timeout=WAIT)
    link(probe, dead)
    assert drained(probe, events) == [Exit(dead, "gone")]

    alive = Worker.start()
    link(alive, dead)  # a non-trapping actor dies of it
    assert join(alive, WAIT)
    assert exit_reason(alive) == "gone"


def test_unlink_stops_propagation() -> None:
    a, b = Worker.start(), Worker.start()
    link(a, b)
    unlink(b, a)
    a.tell(ValueError("alone"))
    assert join(a, WAIT)
    assert call(b, "alive", WAIT) == "alive"
    assert stop(b, timeout=WAIT)


# -- monitors ---------------------------------------------------------------------------


def test_monitor_gets_down_with_the_reason_and_monitoring_the_dead_is_immediate(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    w = Worker.start()
    m1 = monitor(probe, w)
    m2 = monitor(probe, w)  # independent monitors: one Down each
    kill(w)
    assert join(w, WAIT)
    m3 = monitor(probe, w)
    got = drained(probe, events)
    assert got == [Down(m1, w, KILLED), Down(m2, w, KILLED), Down(m3, w, KILLED)]


def test_demonitor_drops_the_down(probe: ActorRef[Any], events: queue.Queue[Any]) -> None:
    w = Worker.start()
    mref = monitor(probe, w)
    demonitor(mref)
    keep = monitor(probe, w)
    assert stop(w, timeout=WAIT)
    assert drained(probe, events) == [Down(keep, w, SHUTDOWN)]


def test_a_dead_watchers_monitors_are_removed_from_the_target(events: queue.Queue[Any]) -> None:
    target = Worker.start()
    watcher = Probe.start(events)
    monitor(watcher, target)
    assert stop(watcher, timeout=WAIT)
    assert not proc_of(target).monitors
    assert stop(target, timeout=WAIT)


# -- bounded waits (trap 2) and inbox ----------------------------------------------------


def test_call_times_out_with_a_clear_error() -> None:
    w = Worker.start()
    running, release = threading.Event(), threading.Event()
    w.tell(("block", running, release))
    assert running.wait(WAIT)
    with pytest.raises(CallTimeout, match=r"Worker .* did not answer .* within 0.05 s"):
        call(w, "late", 0.05)
    release.set()
    assert stop(w, timeout=WAIT)


def test_call_to_a_dead_actor_raises_actor_dead_and_to_itself_refuses() -> None:
    w = Worker.start()
    assert stop(w, timeout=WAIT)
    with pytest.raises(ActorDead):
        call(w, "anyone?", WAIT)
    with pytest.raises(pykka.ActorDeadError):  # the Pykka name catches it too
        call(w, "anyone?", WAIT)

    class SelfCaller(Actor):
        def on_receive(self, message: Any) -> Any:
            return call(self.actor_ref, "me", WAIT)

    s = SelfCaller.start()
    with pytest.raises(RuntimeError, match="to itself"):
        call(s, "go", WAIT)
    assert stop(s, timeout=WAIT)


def test_asks_racing_a_stop_are_all_answered() -> None:
    """Trap 2: no ask may be left unanswered when it races the actor's end."""

    def hammer(w: ActorRef[Any], go: threading.Event, out: list[pykka.Future[Any]]) -> None:
        go.wait(WAIT)
        for i in range(50):
            out.append(w.ask(i, block=False))

    for _ in range(30):
        w = Worker.start()
        go = threading.Event()
        lists: list[list[pykka.Future[Any]]] = [[], []]
        threads = [threading.Thread(target=hammer, args=(w, go, lst)) for lst in lists]
        for t in threads:
            t.start()
        go.set()
        stop(w, timeout=WAIT)
        for t in threads:
            t.join(WAIT)
        futures = lists[0] + lists[1]
        assert len(futures) == 100
        for i, f in enumerate(futures):
            try:
                assert f.get(timeout=WAIT) == i % 50
            except pykka.ActorDeadError:  # Pykka's own dead check, or snodo's ActorDead
                pass


def test_full_inbox_blocks_a_bounded_time_then_raises_but_signals_pass() -> None:
    class Small(Worker):
        inbox_size = 2
        inbox_put_timeout = 0.05

    w = Small.start()
    running, release = threading.Event(), threading.Event()
    w.tell(("block", running, release))
    assert running.wait(WAIT)
    w.tell("one")
    w.tell("two")
    with pytest.raises(InboxFull, match="stayed full"):
        w.tell("three")
    with pytest.raises(InboxFull):
        call(w, "four", 0.05)
    assert not stop(w, timeout=0.01)  # the stop is queued despite the bound
    release.set()
    assert join(w, WAIT)
    assert exit_reason(w) == SHUTDOWN


def test_kill_drops_the_inbox_and_answers_queued_asks() -> None:
    w = Worker.start()
    running, release = threading.Event(), threading.Event()
    w.tell(("block", running, release))
    assert running.wait(WAIT)
    queued = w.ask("queued", block=False)
    kill(w)
    with pytest.raises(ActorDead):  # answered now, while the handler still runs
        queued.get(timeout=WAIT)
    assert not w.is_alive()
    with pytest.raises(pykka.ActorDeadError):
        w.tell("after the kill")
    release.set()
    assert join(w, WAIT)
    assert exit_reason(w) == KILLED


def test_stop_is_bounded() -> None:
    w = Worker.start()
    running, release = threading.Event(), threading.Event()
    w.tell(("block", running, release))
    assert running.wait(WAIT)
    assert stop(w, timeout=0.02) is False
    release.set()
    assert join(w, WAIT)
    assert stop(w, timeout=WAIT) is True  # already ended


# -- registry and current_actor ------------------------------------------------------------


def test_registry_and_current_actor() -> None:
    before = registry.count()
    a, b = Worker.start(), Worker.start()
    assert registry.count() == before + 2
    assert registry.get(a.actor_urn) is a
    assert registry.all()[-2:] == [a, b]
    assert current_actor() is None
    assert call(a, lambda actor: current_actor(), WAIT) is a
    assert stop(a, timeout=WAIT)
    assert registry.get(a.actor_urn) is None
    assert registry.count() == before + 1
    assert stop(b, timeout=WAIT)


def test_actor_conveniences_and_logger_binding(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    class Linker(Actor):
        def on_receive(self, message: Any) -> Any:
            self.link(message)
            return structlog.get_context(self.log)  # bound in __init__, before on_start

    w = Linker.start()
    context = call(w, probe, WAIT)
    assert context == {"actor": "Linker", "urn": w.actor_urn}
    assert stop(w, "bye", timeout=WAIT)
    assert drained(probe, events) == [Exit(w, "bye")]
