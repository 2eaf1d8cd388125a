"""snodo.supervision.PooledActor: the Actor's semantics with no thread of its own.

Rules under test come from the brief of pooled actors (same exit semantics as
``Actor``; serialized per actor, FIFO, a fairness bound per turn; no thread while idle,
at most 4 KiB each) and ../shared/reference/runtime-costs.md §1.2-§2 (Pykka traps 1-3,
the cost of a thread per actor).
"""

from __future__ import annotations

import contextvars
import gc
import queue
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pykka
import pytest
from pykka import ActorRef

from snodo.supervision import (
    KILLED,
    NORMAL,
    SHUTDOWN,
    Actor,
    ActorCrashed,
    ActorDead,
    CallTimeout,
    ChildSpec,
    Crash,
    Dispatcher,
    Down,
    Exit,
    InboxFull,
    MonitorRef,
    PooledActor,
    Reason,
    Supervisor,
    call,
    child,
    current_actor,
    current_owner,
    default_dispatcher,
    demonitor,
    exit_reason,
    green_mode,
    join,
    kill,
    link,
    monitor,
    registry,
    service_threads,
    stop,
    unlink,
    which_children,
)
from snodo.supervision.core import proc_of

WAIT = 5.0  # generous deadline for things that should happen at once


class Worker(PooledActor):
    """Does what its messages say: answer, raise, or block on an event (tests only)."""

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, BaseException):
            raise message
        if isinstance(message, tuple) and message[0] == "block":
            started, release = message[1], message[2]
            started.set()
            release.wait(WAIT)
            return "released"
        return message


class ThreadWorker(Actor):
    def on_receive(self, message: Any) -> Any:
        if isinstance(message, BaseException):
            raise message
        return message


class Probe(PooledActor):
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
    return queue.Queue(maxsize=1000)


@pytest.fixture
def probe(events: queue.Queue[Any]) -> Iterator[ActorRef[Any]]:
    ref = Probe.start(events)
    yield ref
    stop(ref, timeout=WAIT)


@pytest.fixture
def pool() -> Iterator[Dispatcher]:
    """A private pool, so tests that block a worker on purpose disturb no one else."""
    dispatcher = Dispatcher(workers=2, name="test-pool")
    yield dispatcher
    assert dispatcher.shutdown(WAIT)
    assert not dispatcher.threads()


def on(dispatcher: Dispatcher, cls: type[PooledActor]) -> Any:
    """``cls`` running on ``dispatcher``."""
    return type(cls.__name__, (cls,), {"dispatcher": dispatcher})


def drained(probe: ActorRef[Any], events: queue.Queue[Any]) -> list[Any]:
    """Every event the probe has recorded so far (a call flushes its inbox first)."""
    call(probe, lambda actor: None, WAIT)
    out = []
    while not events.empty():
        out.append(events.get_nowait())
    return out


def a_yield() -> None:
    """A switch point (not synchronisation): widens race windows, in both modes."""
    time.sleep(0)


# -- the same exit semantics as Actor ------------------------------------------------------


def test_stop_sends_one_down_with_shutdown_and_pykka_stop_means_normal(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    """Every exit path produces exactly one reason, sent once to each monitor."""
    a, b = Worker.start(), Worker.start()
    ma, mb = monitor(probe, a), monitor(probe, b)
    assert stop(a, timeout=WAIT)
    assert b.stop(timeout=WAIT) is True  # Pykka's own stop
    assert join(b, WAIT)
    assert drained(probe, events) == [Down(ma, a, SHUTDOWN), Down(mb, b, NORMAL)]
    assert exit_reason(a) == SHUTDOWN
    assert exit_reason(b) == NORMAL
    assert not a.is_alive()
    assert b.stop(timeout=WAIT) is False  # Pykka: "was not running"


def test_hooks_run_on_the_pool_with_current_actor_set() -> None:
    """on_start, handlers and on_stop run on pool workers, current_actor() is the actor."""
    seen: queue.Queue[tuple[str, Any, str]] = queue.Queue(maxsize=10)

    class Hooked(PooledActor):
        def on_start(self) -> None:
            seen.put(("start", current_actor(), threading.current_thread().name))

        def on_receive(self, message: Any) -> Any:
            seen.put(("receive", current_actor(), threading.current_thread().name))
            return current_owner()

        def on_stop(self) -> None:
            seen.put(("stop", current_actor(), threading.current_thread().name))

    ref = Hooked.start()
    owner = call(ref, "who", WAIT)
    assert owner.kind == "actor"
    assert owner.target is ref
    assert stop(ref, timeout=WAIT)
    got = [seen.get_nowait() for _ in range(3)]
    assert [g[0] for g in got] == ["start", "receive", "stop"]
    for _, actor, thread_name in got:
        assert actor is ref
        assert thread_name.startswith("snodo-pool-")  # a worker of the default dispatcher
    assert current_actor() is None


def test_tell_failure_crashes_once_to_links_and_monitors(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    """A failing tell handler ends the actor with Crash(exc), sent once to each."""
    failures: queue.Queue[BaseException | None] = queue.Queue(maxsize=10)

    class Failing(Worker):
        def on_failure(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
            failures.put(exc)

    w = Failing.start()
    link(probe, w)
    mref = monitor(probe, w)
    error = ValueError("tell failed")
    w.tell(error)
    queued = w.ask("behind the crash", block=False)
    assert join(w, WAIT)
    assert drained(probe, events) == [Exit(w, Crash(error)), Down(mref, w, Crash(error))]
    assert failures.get_nowait() is error
    with pytest.raises(ActorDead):
        queued.get(timeout=WAIT)


def test_ask_failure_goes_back_to_caller_and_the_actor_lives() -> None:
    """Pykka semantics kept: an exception in an ask is the caller's, not a crash."""
    w = Worker.start()
    with pytest.raises(KeyError):
        call(w, KeyError("nope"), WAIT)
    assert call(w, "still here", WAIT) == "still here"
    assert w.proxy().on_receive("by proxy").get(timeout=WAIT) == "by proxy"
    assert stop(w, timeout=WAIT)


def test_on_start_failure_propagates_an_exit(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    """A failing on_start ends the actor with Crash and runs on_failure (as Actor does)."""
    failures: queue.Queue[BaseException | None] = queue.Queue(maxsize=10)

    class BadStart(PooledActor):
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
    class BadStop(PooledActor):
        def on_stop(self) -> None:
            raise OSError("cleanup failed")

    bad = BadStop.start()
    mref = monitor(probe, bad)
    assert stop(bad, timeout=WAIT)
    (got,) = drained(probe, events)
    assert got.monitor_ref is mref
    assert isinstance(got.reason, Crash)
    assert isinstance(got.reason.exc, OSError)


# -- BaseException containment (trap 1) ------------------------------------------------------


def _base_exceptions() -> list[BaseException]:
    found: list[BaseException] = [SystemExit(2), KeyboardInterrupt()]
    if green_mode():
        import gevent

        found.append(gevent.GreenletExit())
    return found


@pytest.mark.parametrize("exc", _base_exceptions(), ids=repr)
def test_base_exception_in_tell_crashes_only_that_actor(
    exc: BaseException, probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    """Pykka would stop every actor; snodo contains it to the one pooled actor.

    Its worker keeps serving the others (the pool is shared, so this matters more here).
    """
    pool = default_dispatcher()
    bystanders = [Worker.start() for _ in range(3)] + [ThreadWorker.start()]
    plain = pykka.ThreadingActor.start()
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
    assert len(pool.threads()) <= pool.size
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
    class ExitAtStart(PooledActor):
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


# -- links ------------------------------------------------------------------------------


@pytest.mark.parametrize("crashing", ["first", "second"])
@pytest.mark.parametrize("other_kind", ["pooled", "thread"])
def test_link_propagates_a_crash_both_ways(
    crashing: str, other_kind: str, probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    """Links work both ways between pooled actors, and between pooled and thread actors."""
    a = Worker.start()
    b = Worker.start() if other_kind == "pooled" else ThreadWorker.start()
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
    assert set(drained(probe, events)) == {Exit(a, Crash(error)), Exit(b, NORMAL)}
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
    m2 = monitor(probe, w)
    kill(w)
    assert join(w, WAIT)
    m3 = monitor(probe, w)
    assert drained(probe, events) == [Down(m1, w, KILLED), Down(m2, w, KILLED), Down(m3, w, KILLED)]


def test_demonitor_drops_the_down(probe: ActorRef[Any], events: queue.Queue[Any]) -> None:
    w = Worker.start()
    mref = monitor(probe, w)
    demonitor(mref)
    keep = monitor(probe, w)
    assert stop(w, timeout=WAIT)
    assert drained(probe, events) == [Down(keep, w, SHUTDOWN)]


def test_a_thread_actor_monitors_a_pooled_one_and_back(events: queue.Queue[Any]) -> None:
    class ThreadProbe(Actor):
        trap_exits = True

        def on_down(self, monitor_ref: MonitorRef, ref: ActorRef[Any], reason: Reason) -> None:
            events.put(Down(monitor_ref, ref, reason))

    watcher = ThreadProbe.start()
    pooled = Worker.start()
    m1 = monitor(watcher, pooled)
    pooled_probe = Probe.start(events)
    target = ThreadWorker.start()
    m2 = monitor(pooled_probe, target)
    assert stop(pooled, "bye", timeout=WAIT)
    assert stop(target, "later", timeout=WAIT)
    call(watcher, lambda actor: None, WAIT)
    call(pooled_probe, lambda actor: None, WAIT)
    got = {events.get_nowait() for _ in range(2)}
    assert got == {Down(m1, pooled, "bye"), Down(m2, target, "later")}
    assert stop(watcher, timeout=WAIT)
    assert stop(pooled_probe, timeout=WAIT)


# -- bounded waits (trap 2), the inbox, kill ------------------------------------------------


def test_call_times_out_and_calls_to_the_dead_or_to_itself_fail(pool: Dispatcher) -> None:
    w = on(pool, Worker).start()
    running, release = threading.Event(), threading.Event()
    w.tell(("block", running, release))
    assert running.wait(WAIT)
    with pytest.raises(CallTimeout, match=r"did not answer .* within 0.05 s"):
        call(w, "late", 0.05)
    release.set()
    assert stop(w, timeout=WAIT)
    with pytest.raises(ActorDead):
        call(w, "anyone?", WAIT)

    class SelfCaller(PooledActor):
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
            if i % 10 == 0:
                a_yield()

    for _ in range(30):
        w = Worker.start()
        go = threading.Event()
        lists: list[list[pykka.Future[Any]]] = [[], []]
        threads = [threading.Thread(target=hammer, args=(w, go, lst)) for lst in lists]
        for t in threads:
            t.start()
        go.set()
        assert stop(w, timeout=WAIT)
        for t in threads:
            t.join(WAIT)
        futures = lists[0] + lists[1]
        assert len(futures) == 100
        for i, f in enumerate(futures):
            try:
                assert f.get(timeout=WAIT) == i % 50
            except pykka.ActorDeadError:
                pass


def test_full_inbox_blocks_a_bounded_time_then_raises_but_signals_pass(pool: Dispatcher) -> None:
    class Small(Worker):
        inbox_size = 2
        inbox_put_timeout = 0.05
        dispatcher = pool

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


def test_a_sender_waiting_for_room_gets_in_when_a_turn_makes_room(pool: Dispatcher) -> None:
    class Small(Worker):
        inbox_size = 1
        inbox_put_timeout = WAIT
        dispatcher = pool

    w = Small.start()
    running, release = threading.Event(), threading.Event()
    w.tell(("block", running, release))
    assert running.wait(WAIT)
    w.tell("fills the inbox")
    done = threading.Event()

    def send() -> None:
        w.tell("waits for room")
        done.set()

    sender = threading.Thread(target=send)
    sender.start()
    release.set()
    assert done.wait(WAIT)
    sender.join(WAIT)
    assert call(w, "after", WAIT) == "after"
    assert stop(w, timeout=WAIT)


def test_kill_drops_the_inbox_and_answers_queued_asks(pool: Dispatcher) -> None:
    w = on(pool, Worker).start()
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

    idle = Worker.start()
    call(idle, "started", WAIT)
    kill(idle)  # an idle pooled actor is scheduled by the kill signal
    assert join(idle, WAIT)
    assert exit_reason(idle) == KILLED


def test_stop_is_bounded(pool: Dispatcher) -> None:
    w = on(pool, Worker).start()
    running, release = threading.Event(), threading.Event()
    w.tell(("block", running, release))
    assert running.wait(WAIT)
    assert stop(w, timeout=0.02) is False
    release.set()
    assert join(w, WAIT)
    assert stop(w, timeout=WAIT) is True


def test_registry_and_self_stop() -> None:
    before = registry.count()

    class SelfStopper(PooledActor):
        def on_receive(self, message: Any) -> Any:
            return stop(self.actor_ref, "by itself")  # queues the stop, cannot wait

    a, b = Worker.start(), SelfStopper.start()
    assert registry.count() == before + 2
    assert registry.get(a.actor_urn) is a
    assert call(b, "go", WAIT) is False
    assert join(b, WAIT)
    assert exit_reason(b) == "by itself"
    assert registry.get(b.actor_urn) is None
    assert stop(a, timeout=WAIT)
    assert registry.count() == before


# -- scheduling: order, no concurrency, fairness ---------------------------------------------


def test_each_actor_handles_its_messages_one_at_a_time_in_order_under_load() -> None:
    """Many actors, many senders, several workers: FIFO per sender, never two at once."""
    dispatcher = Dispatcher(workers=4, throughput=3, name="load-pool")

    class Counter(PooledActor):
        def __init__(self) -> None:
            super().__init__()
            self.in_flight = 0
            self.max_in_flight = 0
            self.last: dict[int, int] = {}
            self.out_of_order = 0
            self.handled = 0
            self.workers: set[str] = set()  # which workers ran it

        def on_receive(self, message: Any) -> Any:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            sender, seq = message
            if seq != self.last.get(sender, -1) + 1:
                self.out_of_order += 1
            a_yield()  # let another worker try to run this actor too
            self.last[sender] = seq
            self.handled += 1
            self.workers.add(threading.current_thread().name)
            self.in_flight -= 1

    Counter.dispatcher = dispatcher
    actors = [Counter.start() for _ in range(40)]
    senders, per_sender = 4, 60
    go = threading.Event()

    def send(sender: int) -> None:
        go.wait(WAIT)
        for seq in range(per_sender):
            for ref in actors:
                ref.tell((sender, seq))
            a_yield()

    threads = [threading.Thread(target=send, args=(s,)) for s in range(senders)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(WAIT * 2)
    stats = [
        call(
            ref,
            lambda a: (a.handled, a.max_in_flight, a.out_of_order, a.last, set(a.workers)),
            WAIT * 2,
        )
        for ref in actors
    ]
    for handled, max_in_flight, out_of_order, last, _ in stats:
        assert handled == senders * per_sender
        assert max_in_flight == 1
        assert out_of_order == 0
        assert last == {s: per_sender - 1 for s in range(senders)}
    assert len(dispatcher.threads()) <= 4
    assert len(set().union(*(s[4] for s in stats))) > 1  # several workers ran at once
    for ref in actors:
        assert stop(ref, timeout=WAIT)
    assert dispatcher.shutdown(WAIT)


def test_a_flooded_actor_does_not_starve_another() -> None:
    """Fairness: after at most ``throughput`` envelopes a busy actor yields its worker."""
    throughput = 8
    dispatcher = Dispatcher(workers=1, throughput=throughput, name="fair-pool")
    log: list[tuple[str, int]] = []

    class Recorder(PooledActor):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def on_receive(self, message: Any) -> Any:
            if isinstance(message, tuple):
                message[1].set()
                message[2].wait(WAIT)
                return None
            log.append((self.name, message))
            return None

    Recorder.dispatcher = dispatcher
    blocker, flooded, other = (Recorder.start(n) for n in ("blocker", "flooded", "other"))
    running, release = threading.Event(), threading.Event()
    blocker.tell(("block", running, release))
    assert running.wait(WAIT)  # the only worker is busy: everything below queues up
    flood = 1000
    for i in range(flood):
        flooded.tell(i)
    other.tell(0)
    release.set()
    assert call(other, lambda a: None, WAIT) is None
    assert call(flooded, lambda a: None, WAIT) is None
    assert len(log) == flood + 1
    position = log.index(("other", 0))
    assert position == throughput  # one turn of the flooded actor, then the other's
    assert [m for n, m in log if n == "flooded"] == list(range(flood))  # FIFO kept
    for ref in (blocker, flooded, other):
        assert stop(ref, timeout=WAIT)
    assert dispatcher.shutdown(WAIT)


def test_a_turn_runs_in_the_actors_own_context() -> None:
    """contextvars set in on_start are the actor's own, whichever worker runs it."""
    var: contextvars.ContextVar[str] = contextvars.ContextVar("test_pooled_var", default="-")
    dispatcher = Dispatcher(workers=1, name="ctx-pool")

    class Ctx(PooledActor):
        def __init__(self, value: str) -> None:
            super().__init__()
            self.value = value

        def on_start(self) -> None:
            var.set(self.value)

        def on_receive(self, message: Any) -> Any:
            return var.get()

    Ctx.dispatcher = dispatcher
    a, b = Ctx.start("a"), Ctx.start("b")
    for _ in range(3):
        assert call(a, "get", WAIT) == "a"
        assert call(b, "get", WAIT) == "b"
    seen: queue.Queue[Any] = queue.Queue(maxsize=2)
    dispatcher.submit(lambda: seen.put((var.get(), current_actor())))
    assert seen.get(timeout=WAIT) == ("-", None)  # nothing leaks into the worker itself
    assert var.get() == "-"
    for ref in (a, b):
        assert stop(ref, timeout=WAIT)
    assert dispatcher.shutdown(WAIT)


def test_an_ended_pooled_actor_is_not_kept_alive() -> None:
    """As a thread actor's object goes with its thread, an ended pooled actor is freed.

    Only its ref (and what it holds: the inbox, the exit reason) may outlive it.
    """
    dispatcher = Dispatcher(workers=1, name="gc-pool")
    ref = on(dispatcher, Worker).start()
    assert call(ref, "hi", WAIT) == "hi"
    actor = proc_of(ref).actor  # a weakref
    assert actor() is not None
    assert stop(ref, timeout=WAIT)
    done: queue.Queue[bool] = queue.Queue(maxsize=1)
    dispatcher.submit(lambda: done.put(True))  # the one worker has left the last turn
    assert done.get(timeout=WAIT)
    gc.collect()
    assert actor() is None
    assert exit_reason(ref) == SHUTDOWN
    assert dispatcher.shutdown(WAIT)


# -- cost ------------------------------------------------------------------------------


def test_a_thousand_idle_pooled_actors_use_no_additional_threads() -> None:
    """The point of pooled actors: no thread each (runtime-costs.md §2: ~16 KiB a thread)."""
    pool = default_dispatcher()
    warm = Worker.start()
    call(warm, "warm", WAIT)
    before = set(threading.enumerate())
    refs = [Worker.start() for _ in range(1000)]
    for ref in refs:
        ref.tell("hello")
    for ref in refs:
        assert call(ref, "ready", WAIT) == "ready"
    new = [t for t in threading.enumerate() if t not in before]
    assert all(t in service_threads() for t in new)
    assert len(pool.threads()) <= pool.size
    for ref in [*refs, warm]:
        ref.tell("bye")  # no wait per actor; join them all below
        stop(ref, timeout=0)
    for ref in [*refs, warm]:
        assert join(ref, WAIT)


def test_an_idle_pooled_actor_allocates_under_4_kib() -> None:
    """Python allocations per idle pooled actor (tracemalloc: exact, no RSS noise)."""

    class Conn(PooledActor):
        def on_receive(self, message: Any) -> Any:
            return message

    warm = [Conn.start() for _ in range(10)]
    for ref in warm:
        call(ref, "x", WAIT)
    n = 300
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        refs = [Conn.start() for _ in range(n)]
        for ref in refs:
            call(ref, "x", WAIT)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    per_actor = sum(d.size_diff for d in after.compare_to(before, "filename")) / n
    for ref in [*refs, *warm]:
        stop(ref, timeout=0)
    for ref in [*refs, *warm]:
        assert join(ref, WAIT)
    assert per_actor < 4096, f"{per_actor:.0f} bytes per idle pooled actor"


RSS_PROBE = textwrap.dedent(
    """
    import gc, os, sys, threading
    if sys.argv[1] == "gevent":
        from gevent import monkey
        monkey.patch_all()
    from snodo.supervision import Actor, PooledActor, call, service_threads, stop_all

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    class Conn(PooledActor if sys.argv[2] == "pooled" else Actor):
        def on_receive(self, message):
            return message

    n = 1000
    warm = [Conn.start() for _ in range(20)]
    for ref in warm:
        call(ref, "x", 5)
    def own_threads():
        return threading.active_count() - len(service_threads())

    gc.collect()
    before, threads = rss(), own_threads()
    refs = [Conn.start() for _ in range(n)]
    for ref in refs:
        call(ref, "x", 5)
    gc.collect()
    print((rss() - before) / n, own_threads() - threads)
    stop_all(30)
    """
)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_idle_rss_per_pooled_actor_over_a_thousand_is_under_4_kib() -> None:
    """RSS per idle pooled actor over 1,000 in a fresh process (the brief's measure)."""
    mode = "gevent" if green_mode() else "threads"
    out = subprocess.run(
        [sys.executable, "-c", RSS_PROBE, mode, "pooled"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    per_actor, new_threads = float(out[0]), int(out[1])
    assert per_actor < 4096, f"{per_actor / 1024:.2f} KiB RSS per idle pooled actor"
    assert new_threads == 0  # none but pool workers (bounded) appeared


# -- supervisors -----------------------------------------------------------------------------


def test_a_supervisor_restarts_and_stops_pooled_children(
    probe: ActorRef[Any], events: queue.Queue[Any]
) -> None:
    sup = Supervisor.start(
        strategy="one_for_all",
        children=[ChildSpec("a", Worker.start), ChildSpec("b", Worker.start)],
    )
    a1, b1 = child(sup, "a"), child(sup, "b")
    assert a1 is not None and b1 is not None
    mref = monitor(probe, b1)
    a1.tell(ValueError("child crash"))
    assert join(a1, WAIT) and join(b1, WAIT)
    assert drained(probe, events) == [Down(mref, b1, SHUTDOWN)]  # one_for_all stopped it
    infos = which_children(sup)
    assert [i.id for i in infos] == ["a", "b"]
    a2, b2 = (i.ref for i in infos)
    assert a2 is not None and b2 is not None
    assert a2 is not a1 and b2 is not b1
    assert call(a2, "new", WAIT) == "new"
    assert stop(sup, timeout=WAIT)
    assert exit_reason(a2) == SHUTDOWN
    assert exit_reason(b2) == SHUTDOWN


def test_on_stop_of_a_pooled_child_runs_when_the_tree_stops() -> None:
    stopped: queue.Queue[str] = queue.Queue(maxsize=10)

    class Tidy(PooledActor):
        def on_stop(self) -> None:
            stopped.put(threading.current_thread().name)

    sup = Supervisor.start(children=[ChildSpec("t", Tidy.start, shutdown=WAIT)])
    assert stop(sup, timeout=WAIT)
    assert stopped.get_nowait().startswith("snodo-pool-")


# -- the dispatcher ----------------------------------------------------------------------


def test_dispatcher_bounds_workers_contains_job_errors_and_ends_idle_workers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dispatcher = Dispatcher(workers=2, idle_timeout=0.05, name="small-pool")
    gate = threading.Event()
    started: queue.Queue[str] = queue.Queue(maxsize=20)

    def job() -> None:
        started.put(threading.current_thread().name)
        gate.wait(WAIT)

    def bad() -> None:
        raise ValueError("job bug")

    dispatcher.submit(bad)
    for _ in range(5):
        dispatcher.submit(job)
    names = {started.get(timeout=WAIT), started.get(timeout=WAIT)}
    assert len(dispatcher.threads()) == 2  # never more than its size
    assert dispatcher.queued() == 3
    assert all(t in service_threads() for t in dispatcher.threads())
    gate.set()
    for _ in range(3):
        names.add(started.get(timeout=WAIT))
    assert names <= {"small-pool-1", "small-pool-2"}
    assert "pool job failed" in caplog.text
    for thread in dispatcher.threads():  # they end by themselves after idle_timeout
        thread.join(WAIT)
    assert not dispatcher.threads()
    dispatcher.submit(lambda: started.put("again"))  # and start again on demand
    assert started.get(timeout=WAIT) == "again"
    assert dispatcher.shutdown(WAIT)
    with pytest.raises(ValueError):
        Dispatcher(workers=0)


class Recorder(PooledActor):
    """Puts every message it receives on ``got``."""

    def __init__(self, got: queue.Queue[Any]) -> None:
        super().__init__()
        self.got = got

    def on_receive(self, message: Any) -> None:
        self.got.put(message)


def test_an_interrupt_in_a_workers_start_reaches_the_sender_and_the_turn_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C that lands in ``Thread.start``'s wait for a new pool worker goes on to the
    sender (the pool swallowed it, and ``snodo listen`` ignored that Ctrl-C), and the worker it
    started still runs the actor's turn, once."""
    dispatcher = Dispatcher(workers=2, idle_timeout=0.05, name="interrupted-pool")
    got: queue.Queue[Any] = queue.Queue(maxsize=10)
    ref = on(dispatcher, Recorder).start(got)
    for thread in dispatcher.threads():  # the worker that ran on_start ends when idle
        thread.join(WAIT)
    assert not dispatcher.threads()
    real_start = threading.Thread.start

    def start_then_interrupted(thread: threading.Thread) -> None:
        real_start(thread)
        raise KeyboardInterrupt  # where a Ctrl-C lands: start's wait for the new thread

    monkeypatch.setattr(threading.Thread, "start", start_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        ref.tell("first")
    monkeypatch.undo()
    assert got.get(timeout=WAIT) == "first"
    ref.tell("second")
    assert got.get(timeout=WAIT) == "second"
    stop(ref, timeout=WAIT)
    assert dispatcher.shutdown(WAIT)
    assert not dispatcher.threads()
    assert got.empty()  # each message once


def test_dispatcher_workers_are_service_threads_and_stop_on_shutdown() -> None:
    dispatcher = Dispatcher(workers=3, name="svc-pool")
    done: queue.Queue[Callable[[], None]] = queue.Queue(maxsize=10)
    for _ in range(3):
        dispatcher.submit(lambda: done.put(lambda: None))
    for _ in range(3):
        done.get(timeout=WAIT)
    workers = dispatcher.threads()
    assert workers
    assert set(workers) <= service_threads()
    assert all(t.daemon for t in workers)
    assert dispatcher.shutdown(WAIT)
    assert not any(t.is_alive() for t in workers)
    assert not set(workers) & service_threads()


@pytest.mark.skipif(not green_mode(), reason="gevent mode only")
def test_pool_workers_are_greenlets_under_gevent() -> None:
    import gevent

    w = Worker.start()
    assert call(w, lambda actor: isinstance(gevent.getcurrent(), gevent.Greenlet), WAIT)
    assert stop(w, timeout=WAIT)
