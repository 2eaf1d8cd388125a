"""Owners: the thread, greenlet or snodo actor that opened something, and watches on them.

What a client or subscription owns closes when its owner ends. ``current_owner()``
names the owner of the calling code: the running snodo actor if any; else, when
threading is monkey-patched by gevent, the current ``gevent.Greenlet`` (not the hub, not
a raw greenlet); else the current OS thread. ``watch(owner, callback)`` calls
``callback(reason)`` once when the owner ends; ``OwnerWatch.cancel()`` withdraws it.

How each kind is watched, with no polling and no thread per watched thread:

* **actor**: an exit callback on the actor (the same mechanism as monitors); it runs in
  the ending actor's thread with the actor's exit reason.
* **greenlet**: ``Greenlet.rawlink``; the hub's notice spawns a raw greenlet that runs the
  callback (never in the hub itself, where blocking is forbidden). Reason: NORMAL, KILLED
  for a ``GreenletExit``, or ``Crash(exc)``.
* **thread**: the thread-local finalizer trick. The first ``current_owner()`` in a thread
  stores a bare sentinel object in a module-level ``threading.local()`` and attaches
  ``weakref.finalize(sentinel, ...)``. Only that thread's locals dict holds the sentinel,
  and CPython clears a thread's locals when the thread state is cleared at thread exit
  (3.10-3.12: ``tstate->dict`` holds the per-thread "localdummy" whose weakref callback
  drops the dict; 3.13+: ``tstate->threading_local_sentinel`` does the same), so the
  finalizer fires when the thread ends, in the dying thread. That thread state is half
  torn down (``threading.current_thread()`` there would register a ``_DummyThread`` that
  never goes away), so the finalizer only appends to a queue; one shared daemon thread
  ("snodo-owner-watch", running only while thread watches exist) runs the callbacks.
  Verified on CPython 3.11 (tests/test_supervision_owner.py); the code path is the same
  C code in 3.10 and 3.12, and the 3.13 sentinel exists for this very purpose. The
  reason is always NORMAL (a thread's exception is not observable from here). The main
  thread's watches fire at interpreter exit (``weakref.finalize`` runs them at atexit).

In gevent mode a "thread" owner is the OS thread (the original, unpatched
``_thread._local`` is used), which in a patched program is the main thread; its watches
fire at interpreter exit, run inline.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

import pykka

from snodo.log import get_logger
from snodo.supervision.actor import exit_reason
from snodo.supervision.core import add_exit_callback, current_actor, proc_of
from snodo.supervision.reasons import KILLED, NORMAL, Crash, Reason

__all__ = [
    "Owner",
    "OwnerKind",
    "OwnerWatch",
    "current_owner",
    "green_mode",
    "owner_of",
    "watch",
]

OwnerKind: TypeAlias = Literal["actor", "greenlet", "thread"]

_logger = get_logger("snodo.supervision")


def green_mode() -> bool:
    """True when gevent has monkey-patched ``threading`` (actors then run on greenlets).

    Never imports gevent: if the application has not imported it, this is False.
    """
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None:
        return False
    return bool(monkey.is_module_patched("threading"))


# -- the thread-end machinery ------------------------------------------------------------


class _ThreadEndWorker:
    """One daemon thread that runs thread-end callbacks, alive while thread watches exist."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._jobs: deque[Callable[[], None]] = deque()
        self._users = 0
        self._running = False

    def hold(self) -> None:
        with self._lock:
            self._users += 1
            if self._running or green_mode():  # gevent mode runs thread-end jobs inline
                return
            self._running = True
        try:
            threading.Thread(target=self._run, name="snodo-owner-watch", daemon=True).start()
        except RuntimeError:  # interpreter shutting down: post() runs jobs inline
            with self._lock:
                self._running = False

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            self._cond.notify()

    def post(self, job: Callable[[], None]) -> None:
        """Queue ``job`` (safe in a dying thread: a lock, an append, a notify)."""
        with self._lock:
            if self._running:
                self._jobs.append(job)
                self._cond.notify()
                return
        job()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._jobs and self._users > 0:
                    self._cond.wait()
                if not self._jobs:
                    self._running = False
                    return
                job = self._jobs.popleft()
            try:
                job()
            except BaseException:
                _logger.exception("owner watch callback failed")


_end_worker = _ThreadEndWorker()


class _ThreadEnd:
    """Per-thread: the callbacks (each a watch's firing) to run when that thread ends."""

    __slots__ = ("__weakref__", "callbacks", "ended", "ident", "lock", "name")

    def __init__(self, ident: int, name: str) -> None:
        self.ident = ident
        self.name = name
        self.lock = threading.Lock()
        self.ended = False
        self.callbacks: dict[object, Callable[[Reason], None]] = {}

    def add(self, callback: Callable[[Reason], None]) -> object | None:
        """Register ``callback``; its key, or None if the thread has already ended."""
        key = object()
        with self.lock:
            if self.ended:
                return None
            self.callbacks[key] = callback
            return key

    def remove(self, key: object) -> bool:
        with self.lock:
            return self.callbacks.pop(key, None) is not None

    def finalized(self) -> None:
        """The thread's locals were torn down: it has ended (or the interpreter exits)."""
        with self.lock:
            self.ended = True
            callbacks = list(self.callbacks.values())
            self.callbacks.clear()
        if not callbacks:
            return

        def job() -> None:
            for callback in callbacks:
                callback(NORMAL)
            for _ in callbacks:
                _end_worker.release()

        in_dying_thread = _os_get_ident() == self.ident and self.ident != _main_ident
        if in_dying_thread and not green_mode():
            _end_worker.post(job)
        else:  # atexit, or gevent mode (see module docstring)
            job()


class _Sentinel:
    __slots__ = ("__weakref__",)


_tls: Any = None  # the module-level thread local (created lazily, unpatched in gevent mode)
_tls_lock = threading.Lock()
_main_ident = threading.main_thread().ident


def _os_get_ident() -> int:
    if green_mode():
        from gevent.monkey import get_original

        return int(get_original("_thread", "get_ident")())
    return threading.get_ident()


def _thread_end() -> _ThreadEnd:
    """The current OS thread's ``_ThreadEnd``, installing its sentinel on first use."""
    global _tls
    if _tls is None:
        with _tls_lock:
            if _tls is None:
                if green_mode():
                    from gevent.monkey import get_original

                    _tls = get_original("_thread", "_local")()
                else:
                    _tls = threading.local()
    end: _ThreadEnd | None = getattr(_tls, "end", None)
    if end is None:
        ident = _os_get_ident()
        name = threading.current_thread().name if not green_mode() else f"thread-{ident}"
        end = _ThreadEnd(ident, name)
        sentinel = _Sentinel()
        weakref.finalize(sentinel, end.finalized)
        _tls.sentinel = sentinel  # the only strong reference: dropped at thread exit
        _tls.end = end
    return end


# -- owners and watches ------------------------------------------------------------------


class Owner:
    """Who owns something: ``kind`` and ``target`` (an ActorRef, a Greenlet, or a thread id).

    Owners are equal when they have the same ``kind`` and ``key``: the actor's supervision
    state, the greenlet, or the thread's end record (a thread id can be reused; that
    record cannot).
    """

    __slots__ = ("key", "kind", "name", "target")

    def __init__(self, kind: OwnerKind, target: Any, name: str, key: object) -> None:
        self.kind: OwnerKind = kind
        self.target = target
        self.name = name
        self.key = key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Owner) and self.kind == other.kind and self.key is other.key

    def __hash__(self) -> int:
        return hash((self.kind, id(self.key)))

    def __repr__(self) -> str:
        return f"Owner({self.kind}: {self.name})"

    def is_alive(self) -> bool:
        """True until the owner has ended."""
        if self.kind == "actor":
            return exit_reason(self.target) is None
        if self.kind == "greenlet":
            return not bool(self.target.dead)
        assert isinstance(self.key, _ThreadEnd)
        return not self.key.ended


def current_owner() -> Owner:
    """The owner of the calling code: snodo actor, else gevent greenlet, else OS thread."""
    ref = current_actor()
    if ref is not None:
        return Owner("actor", ref, str(ref), proc_of(ref))
    if green_mode():
        import gevent

        g = gevent.getcurrent()
        if isinstance(g, gevent.Greenlet):
            return Owner("greenlet", g, str(g), g)
    end = _thread_end()
    return Owner("thread", end.ident, end.name, end)


def owner_of(target: Any) -> Owner:
    """An explicit owner: a snodo ActorRef, a ``gevent.Greenlet``, or the current thread.

    Another live OS thread cannot be watched from outside (its locals are out of reach);
    pass ``threading.current_thread()`` from inside it, or use ``current_owner()`` there (an
    ``Owner`` so taken can be passed on to code running elsewhere: ``snodo.aio`` does).
    """
    if isinstance(target, Owner):
        return target
    if isinstance(target, pykka.ActorRef):
        return Owner("actor", target, str(target), proc_of(target))
    gevent = sys.modules.get("gevent")
    if gevent is not None and isinstance(target, gevent.Greenlet):
        return Owner("greenlet", target, str(target), target)
    if isinstance(target, threading.Thread):
        if target is threading.current_thread() and not green_mode():
            end = _thread_end()
            return Owner("thread", end.ident, end.name, end)
        msg = f"{target!r}: only the current thread can be named as an owner"
        raise ValueError(msg)
    msg = f"an owner is a snodo ActorRef, a gevent Greenlet or a thread, not {target!r}"
    raise TypeError(msg)


class OwnerWatch:
    """A pending ``callback(reason)`` for the end of an owner; fires at most once.

    ``OwnerWatch(owner, callback)`` is ``watch(owner, callback)``: it is armed when made.
    """

    __slots__ = ("__weakref__", "_callback", "_cancel", "_done", "_lock", "owner")

    def __init__(self, owner: Owner, callback: Callable[[Reason], None]) -> None:
        self.owner = owner
        self._callback = callback
        self._lock = threading.Lock()
        self._done = False
        self._cancel: Callable[[], bool] = _on_end(owner, self._fire)

    @property
    def active(self) -> bool:
        """True until the watch has fired or been cancelled."""
        return not self._done

    def _fire(self, reason: Reason) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        try:
            self._callback(reason)
        except BaseException:
            _logger.exception("owner watch callback failed", owner=self.owner.name)

    def cancel(self) -> bool:
        """Withdraw the watch; True if it had not fired yet."""
        with self._lock:
            if self._done:
                return False
            self._done = True
        self._cancel()
        return True


def watch(owner: Owner, callback: Callable[[Reason], None]) -> OwnerWatch:
    """Call ``callback(reason)`` once, when ``owner`` ends (soon, if it already has).

    Where it runs: actor owners, in the ending actor's thread; greenlets, in a new raw
    greenlet; threads, in the shared "snodo-owner-watch" thread. Keep it short (tell an
    actor, set an event); its exceptions are logged and dropped.
    """
    return OwnerWatch(owner, callback)


def _on_end(owner: Owner, fire: Callable[[Reason], None]) -> Callable[[], bool]:
    """Hook ``fire(reason)`` to the end of ``owner`` (at once if it has ended); a canceller."""
    if owner.kind == "actor":
        return add_exit_callback(owner.target, fire)
    if owner.kind == "greenlet":
        return _on_greenlet_end(owner.target, fire)
    end = owner.key
    assert isinstance(end, _ThreadEnd)
    _end_worker.hold()
    key = end.add(fire)
    if key is None:  # that thread has already ended
        _end_worker.release()
        fire(NORMAL)
        return lambda: False

    def cancel() -> bool:
        removed = end.remove(key)
        if removed:
            _end_worker.release()
        return removed

    return cancel


def _on_greenlet_end(glet: Any, fire: Callable[[Reason], None]) -> Callable[[], bool]:
    import gevent

    def ended(g: Any) -> None:  # runs in the hub: hand over to a fresh greenlet
        gevent.spawn_raw(fire, _greenlet_reason(g))

    glet.rawlink(ended)

    def cancel() -> bool:
        glet.unlink(ended)
        return True

    return cancel


def _greenlet_reason(g: Any) -> Reason:
    exc = g.exception
    if exc is None:
        import gevent

        return KILLED if isinstance(g.value, gevent.GreenletExit) else NORMAL
    if isinstance(exc, BaseException):
        return Crash(exc)
    return Crash(RuntimeError(repr(exc)))
