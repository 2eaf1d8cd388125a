"""Owners to crash: the thread, greenlet or actor that owns a connection ends at a chosen moment.

A connection closes when its owner ends (``owner=`` of ``snodo.connect``; by default the
opening thread, greenlet or actor). :func:`owner` starts an owner of the kind asked for and
runs code in it (``run``, ``connect``: a client opened there is that owner's), and
:meth:`CrashableOwner.crash` ends it abnormally. :func:`crash_owner` crashes an owner now: a
:class:`CrashableOwner`, a client one of them opened, a snodo actor (the ``ClientRef`` of
``snodo.actors.start_client`` among them: ``snodo.supervision.kill``) or a gevent greenlet
(``Greenlet.kill``). :func:`crash_owner_on` crashes it when the client next sends a request of
a method, seen by a ``FaultProxy`` in front of the server.

A thread cannot be interrupted from outside: its crash is the next thing it does once its
running job returns (a greenlet and an actor end at once, an actor once its running handler
returns). Every wait has a deadline.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from snodo.supervision import Actor, join, kill, stop

if TYPE_CHECKING:
    import snodo
    from snodo.testing.proxy import FaultProxy

__all__ = [
    "CRASH_DEADLINE",
    "CrashableOwner",
    "OwnerCrashed",
    "Tripwire",
    "crash_owner",
    "crash_owner_on",
    "owner",
]

T = TypeVar("T")

#: Longest a crash waits for the owner to end, and a job in the owner to finish by default.
CRASH_DEADLINE = 10.0

Kind = Literal["thread", "greenlet", "actor"]

#: The clients opened through a CrashableOwner, for ``crash_owner(client)``.
_owners: weakref.WeakKeyDictionary[Any, CrashableOwner] = weakref.WeakKeyDictionary()


class OwnerCrashed(Exception):
    """What a crashed owner ends with (the exception a greenlet is killed with)."""


class _Job:
    __slots__ = ("args", "done", "error", "fn", "kwargs", "value")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def __call__(self) -> None:
        try:
            self.value = self.fn(*self.args, **self.kwargs)
        except BaseException as exc:  # handed back to run()'s caller
            self.error = exc
        finally:
            self.done.set()


class _Stop:
    def __init__(self, crash: bool) -> None:
        self.crash = crash


class _OwnerActor(Actor):
    """An actor whose only job is to run what it is asked to (so that what it opens is its)."""

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Job):
            message()
        return None


class CrashableOwner:
    """A thread, greenlet or actor that owns what it opens, and can be crashed (see the module
    docstring). ``handle`` is what to pass as ``owner=`` from elsewhere: the greenlet or the
    actor ref (a thread can only own what it opens itself: use :meth:`run`)."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.crashed = False
        self._jobs: queue.Queue[_Job | _Stop] = queue.Queue(maxsize=64)
        self._ended = threading.Event()
        self.handle: Any = None
        self._thread: threading.Thread | None = None
        if kind == "actor":
            self.handle = _OwnerActor.start()
        elif kind == "greenlet":
            gevent = _gevent()
            self.handle = gevent.spawn(self._loop)
            self.handle.rawlink(lambda _glet: self._ended.set())
        elif kind == "thread":
            self._thread = threading.Thread(target=self._loop, name="snodo-testing-owner")
            self._thread.start()
            self.handle = self._thread
        else:
            raise ValueError(f"an owner is a 'thread', 'greenlet' or 'actor', not {kind!r}")

    def __repr__(self) -> str:
        state = "crashed" if self.crashed else "ended" if not self.alive else "alive"
        return f"<CrashableOwner {self.kind} {state}>"

    def __enter__(self) -> CrashableOwner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        if self.kind == "actor":
            return bool(self.handle.is_alive())
        return not self._ended.is_set()

    def _loop(self) -> None:
        try:
            while True:
                job = self._jobs.get()
                if isinstance(job, _Stop):
                    if job.crash:
                        raise OwnerCrashed("crashed by snodo.testing")
                    return
                job()
        except OwnerCrashed:
            return  # the end is what matters; a traceback on stderr is noise
        finally:
            self._ended.set()

    # -- running code in it ----------------------------------------------------------------

    def run(self, fn: Callable[..., T], *args: Any, timeout: float = 30.0, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in the owner and return what it returns (or raise what
        it raised), within ``timeout`` seconds."""
        if not self.alive:
            raise RuntimeError(f"{self!r} has ended")
        job = _Job(fn, args, kwargs)
        if self.kind == "actor":
            self.handle.tell(job)
        else:
            self._jobs.put(job, timeout=timeout)
        if not job.done.wait(timeout):
            raise TimeoutError(f"{fn!r} did not finish in {self!r} within {timeout}s")
        if job.error is not None:
            raise job.error
        return job.value  # type: ignore[no-any-return]

    def connect(self, target: Any, **options: Any) -> snodo.Client:
        """``snodo.connect(target, **options)`` run in the owner: the client is the owner's, and
        :func:`crash_owner` accepts it."""
        import snodo

        client = self.run(snodo.connect, target, **options)
        _owners[client] = self
        return client

    # -- ending it -------------------------------------------------------------------------

    def crash(self, deadline: float = CRASH_DEADLINE) -> None:
        """End the owner abnormally now (a thread: once its running job returns) and wait, up
        to ``deadline`` seconds, until it has ended and every client it opened has seen it
        (is closed): the next call on one fails."""
        from snodo.testing.servers import wait_until

        began = time.monotonic()
        self._end_abnormally(deadline)
        # A client learns of its owner's end from the owner watch, on another thread: no event
        # to await from here, so its public state is read until the deadline.
        wait_until(
            lambda: all(client.closed for client, by in list(_owners.items()) if by is self),
            max(0.0, deadline - (time.monotonic() - began)),
            f"a client of {self!r} was not closed",
        )

    def _end_abnormally(self, deadline: float) -> None:
        self.crashed = True
        if self.kind == "actor":
            kill(self.handle)
            if not join(self.handle, deadline):
                raise AssertionError(f"{self!r} did not end within {deadline}s")
            return
        if self.kind == "greenlet":
            self.handle.kill(OwnerCrashed("crashed by snodo.testing"), block=True, timeout=deadline)
        else:
            self._jobs.put(_Stop(crash=True), timeout=deadline)
            assert self._thread is not None
            self._thread.join(deadline)
        if not self._ended.wait(deadline):
            raise AssertionError(f"{self!r} did not end within {deadline}s")

    def close(self, deadline: float = CRASH_DEADLINE) -> None:
        """End the owner normally (what it owns closes too); idempotent."""
        if self.kind == "actor":
            stop(self.handle, timeout=deadline)
            return
        if self._ended.is_set():
            return
        self._jobs.put(_Stop(crash=False), timeout=deadline)
        if self._thread is not None:
            self._thread.join(deadline)
        elif self.handle is not None:
            self.handle.join(deadline)
        if not self._ended.wait(deadline):
            raise AssertionError(f"{self!r} did not end within {deadline}s")


def _gevent() -> Any:
    gevent = sys.modules.get("gevent")
    if gevent is None:
        raise RuntimeError("a greenlet owner needs gevent (imported by the application)")
    return gevent


def _default_kind() -> Kind:
    from snodo.supervision import green_mode

    return "greenlet" if green_mode() else "thread"


def owner(kind: Kind | None = None) -> CrashableOwner:
    """A new owner to open connections in and crash: ``"thread"``, ``"greenlet"`` or
    ``"actor"``; by default a greenlet under gevent's monkey-patching, else a thread."""
    return CrashableOwner(kind or _default_kind())


def crash_owner(target: Any, deadline: float = CRASH_DEADLINE) -> None:
    """Crash an owner now and wait until it has ended: a :class:`CrashableOwner`, a client a
    CrashableOwner opened, a snodo actor ref (``snodo.actors.start_client``'s ``ClientRef``
    too: killed, reason KILLED) or a gevent greenlet (killed with :class:`OwnerCrashed`)."""
    import pykka

    if isinstance(target, CrashableOwner):
        target.crash(deadline)
        return
    found = _owners.get(target) if _weakrefable(target) else None
    if found is not None:
        found.crash(deadline)
        return
    if isinstance(target, pykka.ActorRef):
        if hasattr(target, "_snodo_proc"):
            kill(target)
            if not join(target, deadline):
                raise AssertionError(f"{target!r} did not end within {deadline}s")
        else:
            target.stop(block=True, timeout=deadline)
        return
    gevent = sys.modules.get("gevent")
    if gevent is not None and isinstance(target, gevent.Greenlet):
        target.kill(OwnerCrashed("crashed by snodo.testing"), block=True, timeout=deadline)
        if not target.dead:
            raise AssertionError(f"{target!r} did not end within {deadline}s")
        return
    msg = (
        f"cannot crash {target!r}: open the connection in snodo.testing.owner() (a thread "
        "cannot be ended from outside), or pass an actor ref or a greenlet"
    )
    raise TypeError(msg)


def _weakrefable(target: Any) -> bool:
    try:
        weakref.ref(target)
    except TypeError:
        return False
    return True


class Tripwire:
    """A crash armed by :func:`crash_owner_on`; ``fired`` is set once the owner has crashed
    (``error`` holds what the crash raised, if it failed)."""

    def __init__(self, target: Any, deadline: float) -> None:
        self.target = target
        self.deadline = deadline
        self.fired = threading.Event()
        self.error: BaseException | None = None
        self._armed = True
        self._lock = threading.Lock()

    def trip(self) -> bool:
        """Crash the owner (once), on a thread of its own so that what saw the message goes on."""
        with self._lock:
            if not self._armed:
                return False
            self._armed = False
        threading.Thread(target=self._crash, name="snodo-testing-tripwire", daemon=True).start()
        return True

    def _crash(self) -> None:
        try:
            crash_owner(self.target, self.deadline)
        except BaseException as exc:  # reported through wait()
            self.error = exc
        finally:
            self.fired.set()

    def wait(self, timeout: float = CRASH_DEADLINE) -> None:
        """Wait until the owner has crashed (AssertionError past ``timeout``)."""
        if not self.fired.wait(timeout):
            raise AssertionError(f"the tripwire did not fire within {timeout}s")
        if self.error is not None:
            raise self.error


def crash_owner_on(
    target: Any,
    proxy: FaultProxy,
    method: str = "tools/call",
    *,
    deadline: float = CRASH_DEADLINE,
) -> Tripwire:
    """Crash ``target`` (anything :func:`crash_owner` takes) when the client next sends a
    ``method`` request through ``proxy``. The request itself goes on to the server; the
    crash follows at once, on a thread of its own. Returns the armed :class:`Tripwire`."""
    from snodo.testing.proxy import TO_SERVER

    wire = Tripwire(target, deadline)

    def seen(message: Any) -> bool:
        if message.direction == TO_SERVER and message.method == method:
            wire.trip()
        return False  # the message passes untouched

    proxy.on(seen, "drop", times=None)
    return wire
