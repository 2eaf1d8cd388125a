"""The fault proxy: sits between a client and any stdio or HTTP server and breaks things on cue.

``FaultProxy.http(url)`` listens on 127.0.0.1 and passes requests to ``url``;
``FaultProxy.stdio(command)`` gives a ``snodo.Stdio`` that runs a small relay, which starts the
real server as its child and hands every line to this process. Either way ``.target`` is what
to connect to (a ``snodo.Http``, a ``snodo.Stdio``), the faults are armed on command
(``cut()``, ``drop()``, ...) or by rule (``on(match, action)``), and ``.messages`` is what
passed, both ways (docs/decisions/0048).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from snodo.testing.faults import (
    TO_CLIENT,
    TO_SERVER,
    Action,
    FaultBook,
    HttpRequest,
    Match,
    MatchLike,
    Message,
    Rule,
    as_match,
)
from snodo.transports.targets import Http, Stdio

__all__ = [
    "TO_CLIENT",
    "TO_SERVER",
    "Action",
    "FaultProxy",
    "HttpRequest",
    "Match",
    "Message",
    "Rule",
]

#: How long a stalled answer is held at most when nothing releases it.
STALL_TIMEOUT = 30.0
#: Faults that only mean something over HTTP.
HTTP_ONLY = frozenset({"session_404"})


class FaultProxy:
    """A proxy in front of one server; build it with ``FaultProxy.http`` or ``.stdio``."""

    def __init__(self, kind: str, book: FaultBook, engine: Any, target: Http | Stdio) -> None:
        self.kind = kind
        self._book = book
        self._engine = engine
        #: what to pass to ``snodo.connect``: a ``snodo.Http`` or a ``snodo.Stdio``
        self.target: Any = target
        #: HTTP: the proxy's URL (on 127.0.0.1, the upstream's path); stdio: None
        self.url: str | None = target.url if isinstance(target, Http) else None

    @classmethod
    def http(cls, upstream_url: str, *, stall_timeout: float = STALL_TIMEOUT) -> FaultProxy:
        """A proxy on 127.0.0.1 in front of the Streamable HTTP endpoint ``upstream_url``;
        ``.target`` is a ``snodo.Http`` of its URL (``.url``, the upstream's path)."""
        from snodo.testing.http_proxy import HttpEngine

        book = FaultBook()
        engine = HttpEngine(book, upstream_url, stall_timeout)
        return cls("http", book, engine, Http(engine.url))

    @classmethod
    def stdio(
        cls,
        command: Stdio | str | Sequence[str],
        args: Sequence[str] = (),
        *,
        stall_timeout: float = STALL_TIMEOUT,
    ) -> FaultProxy:
        """A proxy in front of the stdio server ``command`` (a ``snodo.Stdio``, a command and
        ``args``, or an argv list); ``.target`` is a ``snodo.Stdio`` running the relay."""
        from snodo.testing.stdio_proxy import StdioEngine

        if isinstance(command, Stdio):
            program, argv = command.command, tuple(command.args)
        elif isinstance(command, str):
            program, argv = command, tuple(args)
        else:
            program, *rest = command
            argv = tuple(rest)
        book = FaultBook()
        engine = StdioEngine(book, program, argv, stall_timeout)
        return cls("stdio", book, engine, engine.target)

    # -- what it saw -------------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """Every message so far, both directions, in the order they reached the proxy."""
        with self._book.cond:
            return list(self._book.messages)

    @property
    def requests(self) -> list[HttpRequest]:
        """HTTP: every request as the client sent it (headers in order and case)."""
        with self._book.cond:
            return list(self._book.requests)

    def sent(self, method: str | None = None, direction: str = TO_SERVER) -> list[Message]:
        """The messages of ``direction`` (the client's, by default), of ``method`` if given."""
        match = Match(direction=direction, method=method)
        return [m for m in self.messages if match(m)]

    def wait_for(self, match: MatchLike, count: int = 1, timeout: float = 10.0) -> list[Message]:
        """Wait until ``count`` messages ``match`` picks have passed; those messages."""
        predicate = as_match(match)

        def found() -> list[Message] | None:
            hits = [m for m in self._book.messages if predicate(m)]
            return hits if len(hits) >= count else None

        result: list[Message] = self._book.wait_for(found, timeout, f"{count} x {match!r}")
        return result

    def wait_until(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait until ``predicate()`` (asked again after each message) is truthy; its value."""
        return self._book.wait_for(predicate, timeout, repr(predicate))

    @property
    def rules(self) -> list[Rule]:
        """The scripted faults, in the order they apply (a rule's ``hits`` counts its uses)."""
        with self._book.cond:
            return list(self._book.rules)

    # -- faults ------------------------------------------------------------------------------

    def on(
        self,
        match: MatchLike,
        action: Action | str,
        times: int | None = 1,
    ) -> Rule:
        """Apply ``action`` to the next ``times`` messages ``match`` picks (None: to all).

        ``match`` is a :class:`Match`, a predicate on :class:`Message`, a method name, or None
        (any message); ``action`` an :class:`Action` or the name of one without arguments.
        Over HTTP a request (``TO_SERVER``) takes ``delay``, ``drop``, ``cut``, ``reset``,
        ``session_404`` and the stalls (of its answer); the other actions act on answers and do
        nothing to a request. Over stdio every action but ``session_404`` works both ways.
        """
        if isinstance(action, str):
            action = Action(action)
        if self.kind != "http" and action.kind in HTTP_ONLY:
            raise ValueError(f"{action.kind} is an HTTP fault")
        return self._book.add(match, action, times)

    def _answers(self, method: str | None) -> Match:
        return Match(direction=TO_CLIENT, kind="response", method=method)

    def cut(self, method: str | None = None) -> Rule:
        """End the stream mid-way at the next answer (of ``method``): half of it is written,
        then the connection (HTTP) or the server's stdout (stdio) closes."""
        return self.on(self._answers(method), "cut")

    def reset(self, method: str | None = None) -> Rule:
        """At the next answer: HTTP, a TCP RST instead of it; stdio, both pipes closed."""
        return self.on(self._answers(method), "reset")

    def delay(self, seconds: float, n: int = 1, method: str | None = None) -> Rule:
        """Hold each of the next ``n`` answers ``seconds`` before passing it on."""
        return self.on(self._answers(method), Action("delay", seconds=seconds), n)

    def drop(self, n: int = 1, method: str | None = None) -> Rule:
        """Lose the next ``n`` answers (HTTP: the answer's stream ends without it)."""
        return self.on(self._answers(method), "drop", n)

    def duplicate(self, n: int = 1, method: str | None = None) -> Rule:
        """Pass each of the next ``n`` answers on twice."""
        return self.on(self._answers(method), "duplicate", n)

    def garbage(self, method: str | None = None) -> Rule:
        """Before the next answer, a line that is not JSON (stdio) or a broken SSE event."""
        return self.on(self._answers(method), "garbage")

    def oversize(self, nbytes: int, method: str | None = None) -> Rule:
        """Make the next answer ``nbytes`` long (padded with JSON whitespace: still valid)."""
        return self.on(self._answers(method), Action("oversize", nbytes=nbytes))

    def stall_head(self, method: str | None = None) -> Rule:
        """HTTP: hold the status line of the answer to the next request until ``release()``
        (stdio: hold the next answer)."""
        return self.on(self._held(method), "stall_head")

    def stall_body(self, method: str | None = None) -> Rule:
        """HTTP: send the head of the answer to the next request, hold its body until
        ``release()`` (stdio: hold the next answer)."""
        return self.on(self._held(method), "stall_body")

    def _held(self, method: str | None) -> Callable[[Message], bool]:
        if self.kind == "http":
            return Match(direction=TO_SERVER, kind="request", method=method)
        return self._answers(method)

    def session_404(self) -> Rule:
        """HTTP: answer the next request that carries a session id with 404, unforwarded."""
        return self.on(
            lambda m: m.direction == TO_SERVER and m.session_id is not None, "session_404"
        )

    def flood(self, n: int, method: str = "ping") -> Rule:
        """Send ``n`` server requests of ``method`` (no params) to the client just before the
        next answer; the client's answers to them stop at the proxy."""
        return self.on(self._answers(None), Action("flood", count=n, method=method))

    def release(self) -> None:
        """Let every stalled answer go on."""
        self._book.release()

    def wait_stalled(self, count: int = 1, timeout: float = 10.0) -> None:
        """Wait until ``count`` answers are held by a stall."""
        self._book.wait_for(lambda: self._book.stalled() >= count, timeout, "a stall")

    def clear(self) -> None:
        """Remove every rule (armed faults included) and release what is stalled."""
        with self._book.cond:
            self._book.rules.clear()
        self._book.release()

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop listening, end every connection and join every thread (with a deadline)."""
        self._book.release()
        self._engine.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<FaultProxy {self.kind} {self.target!r}>"
