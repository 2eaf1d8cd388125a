"""The snodo actor: a Pykka ``ThreadingActor`` with Erlang exit semantics.

Every exit path of an ``Actor`` ends in one place (``_snodo_terminate``) that fixes exactly one
exit reason and sends it once to every linked actor (``Exit``) and every monitor
(``Down``): a normal stop, a failing tell/``defer`` handler, a failing ``on_start``
(Pykka reports that to no hook), a failing ``on_exit``/``on_down`` hook, and any
``BaseException`` (``SystemExit``, ``KeyboardInterrupt``, gevent's ``GreenletExit``).
A ``BaseException`` is contained: it crashes this actor only and never reaches Pykka's
``ActorRegistry.stop_all()`` path, and an ask that was being handled is answered with
``ActorCrashed``. Waits are bounded: ``call``, ``stop`` and ``join`` take deadlines, and
the inbox closes atomically with its drain so no ask is ever left unanswered.

``PooledActor`` (``pooled.py``) runs the same exit semantics (``_snodo_setup``,
``_snodo_handle``, ``_snodo_terminate``) in turns on a shared worker pool instead of a
thread of its own.

Hooks (all run in the actor's own thread or greenlet, or a pooled actor's turn):

* ``on_start()``; ``on_stop()`` after any exit that is not a crash of the actor's own
  code (stop, link exit, kill once the running handler returned); ``on_failure(type,
  value, tb)`` instead of ``on_stop`` when its own code raised, ``on_start`` included.
* ``on_exit(ref, reason)`` for a linked actor's exit when ``trap_exits`` is true.
* ``on_down(monitor_ref, ref, reason)`` for a monitored actor's exit.

An exception in an *ask* (``call``, proxy method ``.get()``) goes back to the caller and
the actor keeps running (Pykka's semantics). One in a tell, a hook or ``on_start``
crashes the actor with ``Crash(exc)``.

Ordering: ``Exit`` and ``Down`` keep their place among messages (what an actor sent
before it died arrives before its ``Down``, as in Erlang). ``stop(ref, reason)`` is
graceful: it takes effect after the messages already queued, like Pykka's ``ref.stop()``
(whose reason is ``NORMAL``). ``kill(ref)`` jumps the queue and drops it.

Differences from Pykka that users may notice:

* snodo actors live in snodo's own registry (``registry``, a dict by urn) and **not** in
  ``pykka.ActorRegistry``: lookups are O(1), and a ``BaseException`` in some plain Pykka
  actor elsewhere in the process (its ``stop_all()``) cannot stop them.
* Threads are daemon threads (``use_daemon_thread = True``): Python joins non-daemon
  threads *before* atexit hooks run, so a forgotten actor would hang the exit; the root
  tree is stopped in order by an atexit hook instead (``root.py``).
* The inbox is bounded (``inbox_size``, default 10,000 user messages; ``<= 0`` is
  unbounded). When it is full, ``tell``/``ask`` block the sender for at most
  ``inbox_put_timeout`` seconds (5.0) and then raise ``InboxFull``. Exit signals, down
  notices and stop requests never block and never count against the bound.

Pykka internals relied on (pin ``pykka>=4.4,<4.6``; checked identical in 4.4.0-4.5.0):

* ``ThreadingActor._start_actor_loop`` runs ``self._actor_loop`` in a new thread; this
  class replaces ``_actor_loop`` entirely (Pykka's ``_actor_loop_setup/_running/
  _teardown``, ``_stop`` and ``_handle_failure`` are never called).
* ``Actor.__init__`` calls ``self._create_actor_inbox()`` after setting ``actor_urn``;
  ``ActorRef.tell/ask`` call ``actor_inbox.put(Envelope)``; ``pykka._envelope.Envelope``
  has ``message`` and ``reply_to``; ``ActorRef.stop`` sends ``pykka.messages._ActorStop``
  and reads ``ActorDeadError`` on its future as "was not running".
* ``Actor._handle_receive(message)`` dispatches proxy messages and ``on_receive``.
* ``Actor.start`` is re-implemented (build, register, ``_start_actor_loop``) to use
  snodo's registry instead of ``ActorRegistry``.
* Each actor has exactly one ``ActorRef`` object (made in ``Actor.__init__``); snodo
  keeps its per-actor state on it as the attribute ``_snodo_proc`` (``core.py``).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast, overload

import pykka
import structlog
from pykka import ActorRef, ThreadingFuture
from pykka._envelope import Envelope  # noqa: PLC2701  # Pykka's message carrier (see above)
from pykka.messages import _ActorStop  # noqa: PLC2701  # what ref.stop() sends (see above)

from snodo.log import get_logger
from snodo.supervision.core import (
    PROC_ATTR,
    Ending,
    ExcInfo,
    Proc,
    current_actor,
    exc_info,
    proc_of,
    running,
)
from snodo.supervision.inbox import CONTROL_TYPES, Inbox, KillSignal, StopSignal, reject
from snodo.supervision.reasons import (
    KILLED,
    NORMAL,
    SHUTDOWN,
    ActorCrashed,
    ActorDead,
    CallTimeout,
    Crash,
    Down,
    Exit,
    InboxFull,
    MonitorRef,
    Reason,
)

if TYPE_CHECKING:
    from typing_extensions import Self


__all__ = [
    "Actor",
    "Registry",
    "call",
    "demonitor",
    "exit_reason",
    "join",
    "kill",
    "link",
    "monitor",
    "registry",
    "stop",
    "stop_all",
    "unlink",
]

_A = TypeVar("_A", bound=pykka.Actor)
_T = TypeVar("_T")

_logger = get_logger("snodo.supervision")
_KILL_JOIN = 1.0  # registry.stop_all: how long to wait after a kill


@contextmanager
def _both(a: Proc, b: Proc) -> Iterator[None]:
    """Hold two actors' locks, always taken in the same order (no lock-order deadlock)."""
    if a is b:
        with a.lock:
            yield
        return
    first, second = (a, b) if id(a) < id(b) else (b, a)
    with first.lock, second.lock:
        yield


def _deliver(ref: ActorRef[Any], message: Exit | Down) -> None:
    """Put a control message in ``ref``'s inbox; dropped if that actor is ending."""
    ref.actor_inbox.put_control(Envelope(message))  # type: ignore[attr-defined]


class _RunInActor:
    """Message of ``call(ref, fn)``: run ``fn(actor)`` in the actor and answer its result."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __repr__(self) -> str:
        return f"call({self.fn!r})"


class Registry:
    """Process-wide index of running snodo actors by urn (O(1), unlike Pykka's list)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refs: dict[str, ActorRef[Any]] = {}

    def add(self, ref: ActorRef[Any]) -> None:
        """Index a starting actor (``Actor.start`` does; not for applications)."""
        with self._lock:
            self._refs[ref.actor_urn] = ref

    def remove(self, urn: str) -> None:
        """Drop an ended actor (its teardown does; not for applications)."""
        with self._lock:
            self._refs.pop(urn, None)

    def get(self, urn: str) -> ActorRef[Any] | None:
        """The running actor with this urn, or None."""
        return self._refs.get(urn)

    def all(self) -> list[ActorRef[Any]]:
        """Every running snodo actor, oldest first."""
        with self._lock:
            return list(self._refs.values())

    def count(self) -> int:
        """How many snodo actors are running."""
        return len(self._refs)

    def stop_all(self, timeout: float = 5.0) -> bool:
        """Stop every actor, newest first, within ``timeout`` in total (for tests).

        An actor that does not stop in its share of time is killed. Returns True when
        every actor has ended.
        """
        deadline = time.monotonic() + timeout
        for ref in reversed(self.all()):
            remaining = max(0.0, deadline - time.monotonic())
            if not stop(ref, SHUTDOWN, timeout=remaining):
                kill(ref)
                join(ref, min(_KILL_JOIN, max(0.0, deadline - time.monotonic())))
        return all(proc_of(ref).exited.is_set() for ref in self.all()) and not self._refs


registry = Registry()
"""The process-wide registry of running snodo actors."""


def stop_all(timeout: float = 5.0) -> bool:
    """Stop every running snodo actor within ``timeout`` (see ``Registry.stop_all``)."""
    return registry.stop_all(timeout)


class Actor(pykka.ThreadingActor):
    """Base class of every snodo actor: links, monitors, exit reasons, bounded inbox."""

    trap_exits: bool = False
    """When true, linked exits arrive as ``on_exit`` calls instead of ending this actor."""

    inbox_size: ClassVar[int] = 10_000
    """Bound on queued user messages (control messages are not counted); ``<= 0``: none."""

    inbox_put_timeout: ClassVar[float] = 5.0
    """Longest a sender waits for room in a full inbox before ``InboxFull``."""

    use_daemon_thread: ClassVar[bool] = True

    log: Any
    """structlog logger bound with this actor's class and urn."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._snodo = Proc(self)
        setattr(self.actor_ref, PROC_ATTR, self._snodo)
        self._snodo_stop_replies: list[pykka.Future[Any]] = []
        self.log = _logger.bind(actor=type(self).__name__, urn=self.actor_urn)

    def _create_actor_inbox(self) -> Inbox:  # type: ignore[override]
        """Pykka hook: the bounded inbox (see ``inbox.py``)."""
        return Inbox(self.inbox_size, self.inbox_put_timeout, str(self))

    @classmethod
    def start(cls, *args: Any, **kwargs: Any) -> ActorRef[Self]:
        """Build the actor, register it in snodo's registry, and start its thread."""
        obj = cls(*args, **kwargs)
        ref = obj.actor_ref
        registry.add(ref)
        try:
            obj._start_actor_loop()
        except BaseException as exc:  # e.g. "can't start new thread"
            obj._snodo_terminate(Crash(exc), None)
            raise
        return ref

    # -- hooks ---------------------------------------------------------------------------

    def on_exit(self, ref: ActorRef[Any], reason: Reason) -> None:
        """A linked actor ended with ``reason`` (called only when ``trap_exits``)."""

    def on_down(self, monitor_ref: MonitorRef, ref: ActorRef[Any], reason: Reason) -> None:
        """The actor ``ref`` watched through ``monitor_ref`` ended with ``reason``."""

    # -- conveniences --------------------------------------------------------------------

    def link(self, other: ActorRef[Any]) -> None:
        """Link this actor with ``other`` (see ``link``)."""
        link(self.actor_ref, other)

    def unlink(self, other: ActorRef[Any]) -> None:
        """Remove the link with ``other`` (see ``unlink``)."""
        unlink(self.actor_ref, other)

    def monitor(self, other: ActorRef[Any]) -> MonitorRef:
        """Monitor ``other``; its exit arrives as ``on_down`` (see ``monitor``)."""
        return monitor(self.actor_ref, other)

    # -- the exit semantics, in three steps -----------------------------------------------
    #
    # ``_snodo_setup`` (on_start), ``_snodo_handle`` (one envelope) and ``_snodo_terminate``
    # (the one way out) hold every rule; an actor kind only decides where they run. The
    # thread actor loops over them in its own thread (``_actor_loop``); a pooled actor
    # runs them in turns on a shared worker pool (``pooled.py``). Both keep the running
    # actor in ``current_actor()`` while any of them runs, and turn a ``BaseException``
    # that escapes them (one thrown into the wait, say) into ``Crash``.

    def _actor_loop(self) -> None:
        """Run on_start and the receive loop; every way out goes through ``_snodo_terminate``."""
        running.ref = self.actor_ref
        ending: Ending = (KILLED, None)
        try:
            found = self._snodo_setup()
            inbox = self.actor_inbox
            while found is None:
                found = self._snodo_handle(inbox.get())
            ending = found
        except BaseException as exc:  # a GreenletExit thrown into the idle wait, say
            ending = (Crash(exc), exc_info(exc))
        finally:
            try:
                self._snodo_terminate(*ending)
            finally:
                running.ref = None

    def _snodo_setup(self) -> Ending | None:
        """Bind the log context and run ``on_start``; the actor's ending if it failed."""
        try:
            structlog.contextvars.bind_contextvars(actor=type(self).__name__, urn=self.actor_urn)
            self.on_start()
        except BaseException as exc:
            return Crash(exc), exc_info(exc)
        return None

    def _snodo_handle(self, envelope: Envelope[Any]) -> Ending | None:
        """Handle one envelope; the actor's ending if it must end now, else None."""
        message = envelope.message
        reply_to = envelope.reply_to
        if isinstance(message, CONTROL_TYPES):
            if isinstance(message, _ActorStop):  # Pykka's ref.stop() / self.stop()
                if reply_to is not None:
                    self._snodo_stop_replies.append(reply_to)
                return NORMAL, None
            if isinstance(message, StopSignal):
                return message.reason, None
            if isinstance(message, KillSignal):
                return KILLED, None
            try:
                if isinstance(message, Exit):
                    ending = self._snodo_handle_exit(message)
                else:
                    self._snodo_handle_down(cast("Down", message))
                    ending = None
            except BaseException as exc:
                return Crash(exc), exc_info(exc)
            if reply_to is not None:
                reply_to.set(None)
            if ending is not None:
                return ending, None
            return None
        try:
            if isinstance(message, _RunInActor):
                result = message.fn(self)
            else:
                result = self._handle_receive(message)
        except Exception as exc:
            if reply_to is None:
                return Crash(exc), exc_info(exc)
            reply_to.set_exception()  # an ask: the caller gets it, the actor lives on
        except BaseException as exc:
            if reply_to is not None:
                text = f"{self} crashed handling the message: {exc!r}"
                crashed = ActorCrashed(text, Crash(exc))
                crashed.__cause__ = exc
                reply_to.set_exception((ActorCrashed, crashed, None))
            return Crash(exc), exc_info(exc)
        else:
            if reply_to is not None:
                reply_to.set(result)
        return None

    def _snodo_handle_exit(self, message: Exit) -> Reason | None:
        """Apply a linked actor's exit; returns this actor's exit reason if it must end."""
        urn = message.ref.actor_urn
        with self._snodo.lock:
            linked = self._snodo.links.pop(urn, None) is not None
        if not linked:  # unlinked in the meantime (or not a link exit at all)
            return None
        if self.trap_exits:
            self.on_exit(message.ref, message.reason)
            return None
        if message.reason == NORMAL:
            return None
        return message.reason

    def _snodo_handle_down(self, message: Down) -> None:
        mref = message.monitor_ref
        with self._snodo.lock:
            active = mref in self._snodo.watching
            self._snodo.watching.pop(mref, None)
        if active:
            self.on_down(mref, message.ref, message.reason)

    def _snodo_terminate(self, reason: Reason, failure: ExcInfo | None) -> None:
        """End the actor once: close the inbox, run the hook, send Exit/Down, unregister."""
        proc = self._snodo
        try:
            self.actor_stopped.set()
            for envelope in self.actor_inbox.close():  # type: ignore[attr-defined]
                if isinstance(envelope.message, _ActorStop) and envelope.reply_to is not None:
                    self._snodo_stop_replies.append(envelope.reply_to)
                else:
                    reject(envelope, proc.name)
            reason = self._snodo_exit_hook(reason, failure)
            with proc.lock:
                proc.reason = reason
                links = list(proc.links.values())
                proc.links.clear()
                monitors = list(proc.monitors)
                proc.monitors.clear()
                watching = list(proc.watching)
                proc.watching.clear()
                callbacks = list(proc.callbacks.values())
                proc.callbacks.clear()
            registry.remove(self.actor_urn)
            for mref in watching:  # this actor's own monitors on others end with it
                target = proc_of(mref.target)
                with target.lock:
                    target.monitors.pop(mref, None)
            for ref in links:
                _deliver(ref, Exit(self.actor_ref, reason))
            for mref in monitors:
                _deliver(mref.watcher, Down(mref, self.actor_ref, reason))
            for callback in callbacks:
                try:
                    callback(reason)
                except BaseException:
                    self.log.exception("exit callback failed")
            self._snodo_log_exit(reason, failure)  # after the signals: formatting is slow
        except BaseException:  # never let the end of an actor take anything else down
            try:
                self.log.exception("actor teardown failed")
            except BaseException:
                pass
        finally:
            if proc.reason is None:
                proc.reason = reason
            registry.remove(self.actor_urn)
            proc.exited.set()
            for future in self._snodo_stop_replies:
                try:
                    future.set(None)
                except Exception:
                    pass

    def _snodo_exit_hook(self, reason: Reason, failure: ExcInfo | None) -> Reason:
        """Run ``on_failure`` after a crash of own code, else ``on_stop``."""
        if failure is not None:
            try:
                self.on_failure(*failure)
            except BaseException:
                self.log.exception("on_failure raised")
            return reason
        try:
            self.on_stop()
        except BaseException as exc:
            self.log.exception("on_stop raised")
            if reason != KILLED and not isinstance(reason, Crash):
                return Crash(exc)
        return reason

    def _snodo_log_exit(self, reason: Reason, failure: ExcInfo | None) -> None:
        if failure is not None:
            self.log.error("actor crashed", reason=str(reason), exc_info=failure)
        elif reason != NORMAL and reason != SHUTDOWN:
            self.log.warning("actor exited", reason=str(reason))


# -- links and monitors ------------------------------------------------------------------


def link(a: ActorRef[Any], b: ActorRef[Any]) -> None:
    """Link two actors: when one ends with a reason other than NORMAL, so does the other.

    An actor that traps exits gets ``on_exit(ref, reason)`` instead (for every reason,
    NORMAL included). If one of them has already ended, the other receives its exit at
    once, with the reason it ended with (Erlang sends ``noproc``; the real reason tells
    a supervisor more). Linking is idempotent; linking an actor to itself does nothing.
    """
    pa, pb = proc_of(a), proc_of(b)
    if pa is pb:
        return
    with _both(pa, pb):
        ra, rb = pa.reason, pb.reason
        if ra is None:
            pa.links[b.actor_urn] = b
        if rb is None:
            pb.links[a.actor_urn] = a
    if ra is not None and rb is None:
        _deliver(b, Exit(a, ra))
    elif rb is not None and ra is None:
        _deliver(a, Exit(b, rb))


def unlink(a: ActorRef[Any], b: ActorRef[Any]) -> None:
    """Remove the link between ``a`` and ``b``; an exit already in flight is then ignored."""
    pa, pb = proc_of(a), proc_of(b)
    with _both(pa, pb):
        pa.links.pop(b.actor_urn, None)
        pb.links.pop(a.actor_urn, None)


def monitor(watcher: ActorRef[Any], target: ActorRef[Any]) -> MonitorRef:
    """Make ``watcher`` get ``on_down(mref, target, reason)`` once ``target`` ends.

    Monitoring an actor that has already ended delivers the ``Down`` at once, with its
    exit reason. Each call makes a new, independent monitor.
    """
    pw, pt = proc_of(watcher), proc_of(target)
    mref = MonitorRef(watcher, target)
    with _both(pw, pt):
        ended = pt.reason
        if pw.reason is None:
            pw.watching[mref] = None
            if ended is None:
                pt.monitors[mref] = None
    if ended is not None and pw.reason is None:
        _deliver(watcher, Down(mref, target, ended))
    return mref


def demonitor(monitor_ref: MonitorRef) -> None:
    """Cancel a monitor; a ``Down`` already queued for it is dropped."""
    pw, pt = proc_of(monitor_ref.watcher), proc_of(monitor_ref.target)
    with _both(pw, pt):
        pt.monitors.pop(monitor_ref, None)
        pw.watching.pop(monitor_ref, None)


# -- stopping and calling ----------------------------------------------------------------


def stop(ref: ActorRef[Any], reason: Reason = SHUTDOWN, timeout: float = 5.0) -> bool:
    """Ask the actor to end with ``reason`` once the messages already queued are handled.

    Waits at most ``timeout`` seconds and returns True when the actor has ended (by this
    stop or any other cause) and has sent its exit signals, False if it is still running.
    From inside the actor itself it only queues the stop and returns False.
    """
    proc = proc_of(ref)
    if proc.exited.is_set():
        return True
    ref.actor_inbox.put_control(Envelope(StopSignal(reason)))  # type: ignore[attr-defined]
    if current_actor() is ref:
        return False
    return proc.exited.wait(timeout)


def kill(ref: ActorRef[Any]) -> None:
    """End the actor with ``KILLED`` as soon as its running handler (if any) returns.

    Queued messages are dropped (queued asks get ``ActorDead``), new ones are refused and
    ``is_alive()`` turns False at once.
    A handler blocked forever cannot be interrupted in a thread; ``join`` bounds the wait.
    Does not wait; a no-op on an actor that is already ending.
    """
    proc = proc_of(ref)
    dropped = ref.actor_inbox.kill(Envelope(KillSignal()))  # type: ignore[attr-defined]
    if dropped is None:
        return
    ref.actor_stopped.set()  # is_alive() is False from now on
    for envelope in dropped:
        reject(envelope, proc.name)


def join(ref: ActorRef[Any], timeout: float) -> bool:
    """Wait at most ``timeout`` seconds for the actor to end; True if it has."""
    return proc_of(ref).exited.wait(timeout)


def exit_reason(ref: ActorRef[Any]) -> Reason | None:
    """The reason the actor ended with, or None while it runs."""
    return proc_of(ref).reason


@overload
def call(ref: ActorRef[_A], message: Callable[[_A], _T], timeout: float) -> _T: ...


@overload
def call(ref: ActorRef[Any], message: Any, timeout: float) -> Any: ...


def call(ref: ActorRef[Any], message: Any, timeout: float) -> Any:
    """Ask ``ref`` and wait at most ``timeout`` seconds for the answer.

    ``message`` is sent as for ``ref.ask``; a callable is run inside the actor as
    ``message(actor)`` and its result returned (wrap a callable you mean as a plain
    message). Raises ``CallTimeout`` at the deadline (the message is not cancelled),
    ``ActorDead`` if the actor is not running or ends before handling the message,
    ``ActorCrashed`` if the handler took the actor down, ``InboxFull`` if the inbox
    stayed full until the deadline, or whatever the handler raised (the actor lives on).
    """
    current = current_actor()
    if current is not None and current.actor_urn == ref.actor_urn:
        msg = f"call from {ref} to itself would wait for itself"
        raise RuntimeError(msg)
    deadline = time.monotonic() + timeout
    future: ThreadingFuture[Any] = ThreadingFuture()
    if callable(message):
        proc_of(ref)  # TypeError: only snodo actors run callables
        message = _RunInActor(message)
    if not ref.is_alive():
        msg = f"{ref} is not running"
        raise ActorDead(msg)
    try:
        ref.actor_inbox.put(Envelope(message, reply_to=future), timeout=timeout)  # type: ignore[call-arg]
    except queue.Full:  # a plain Pykka actor's queue.Queue inbox
        msg = f"inbox of {ref} stayed full for {timeout} s"
        raise InboxFull(msg) from None
    try:
        return future.get(timeout=max(0.0, deadline - time.monotonic()))
    except pykka.Timeout:
        msg = f"{ref} did not answer {message!r} within {timeout} s"
        raise CallTimeout(msg) from None
