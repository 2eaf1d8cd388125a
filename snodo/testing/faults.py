"""The fault proxy's shared book: what it saw, the fault rules, and the stalls it holds.

Both proxies (``http_proxy.py``, ``stdio_proxy.py``) record every message that passes through
them here and ask it which faults apply (``FaultBook.decide``). A rule matches messages by
direction, method, id or kind and fires its action a given number of times. Nothing here does
I/O; the waits (``wait_for``, ``stall``) all have deadlines.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ACTIONS",
    "ANY",
    "FLOOD_PREFIX",
    "TO_CLIENT",
    "TO_SERVER",
    "Action",
    "FaultBook",
    "HttpRequest",
    "Match",
    "MatchLike",
    "Message",
    "Rule",
    "as_match",
    "decode",
]

#: A message the client sent (a stdio line it wrote; an HTTP request).
TO_SERVER = "to_server"
#: A message the server sent (a stdio line; a JSON body or an SSE event of an answer).
TO_CLIENT = "to_client"
#: The ids of the server requests a flood sends start with this; their answers stop here.
FLOOD_PREFIX = "snodo-flood-"

#: Every action a rule may carry.
ACTIONS = frozenset(
    {
        "cut",
        "delay",
        "drop",
        "duplicate",
        "flood",
        "garbage",
        "oversize",
        "reset",
        "session_404",
        "stall_body",
        "stall_head",
    }
)


class _Any:
    """Matches every value (``Match(id=ANY)``, the default)."""

    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()


def decode(data: bytes) -> Any:
    """The JSON value of ``data``, or None when it is not JSON."""
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class Message:
    """One message as it reached the proxy, before any fault was applied to it.

    ``data`` is the line (stdio, without its newline), the JSON body or the SSE event's data
    (HTTP); ``message`` its JSON value or None; ``method`` the request's method, or for a
    response the method of the request it answers; ``faults`` the actions applied to it.
    """

    index: int
    direction: str
    data: bytes
    message: Any
    connection: int
    method: str | None = None
    http_method: str | None = None
    session_id: str | None = None
    faults: tuple[str, ...] = ()
    arrived: float = field(default_factory=time.monotonic)

    @property
    def id(self) -> Any:
        """The JSON-RPC id (None for a notification or a non-message)."""
        return self.message.get("id") if isinstance(self.message, dict) else None

    @property
    def kind(self) -> str:
        """``"request"``, ``"notification"``, ``"response"`` or ``"other"`` (not JSON-RPC)."""
        message = self.message
        if not isinstance(message, dict):
            return "other"
        if "method" in message:
            return "request" if "id" in message else "notification"
        return "response" if "id" in message else "other"


@dataclass(frozen=True)
class HttpRequest:
    """One HTTP request as the client sent it: headers keep their order and case."""

    index: int
    connection: int
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    arrived: float = field(default_factory=time.monotonic)

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        values = self.header_values(name)
        return values[0] if values else None

    def header_values(self, name: str) -> list[str]:
        """Every value of header ``name`` (case-insensitive), in order."""
        lower = name.lower()
        return [v for n, v in self.headers if n.lower() == lower]

    def header_names(self) -> set[str]:
        """Every header name, lower-cased."""
        return {n.lower() for n, _ in self.headers}

    @property
    def message(self) -> Any:
        """The JSON body (exact integers, as Python's json parses them), or None."""
        if not self.body:
            return None
        return json.loads(self.body)

    @property
    def rpc(self) -> str | None:
        """The JSON-RPC method of the body, or None (a response, no body, not JSON)."""
        message = decode(self.body) if self.body else None
        if isinstance(message, dict) and isinstance(message.get("method"), str):
            return str(message["method"])
        return None

    @property
    def kind(self) -> str:
        """``"request"``, ``"notification"``, ``"response"`` or the HTTP method for no body."""
        message = decode(self.body) if self.body else None
        if not isinstance(message, dict):
            return self.method
        if "method" not in message:
            return "response"
        return "request" if "id" in message else "notification"


@dataclass(frozen=True)
class Match:
    """Which messages a rule picks: every field left at its default matches anything.

    ``direction`` is ``TO_SERVER`` or ``TO_CLIENT``; ``method`` matches a request's method and
    the answer to it; ``kind`` is a ``Message.kind``; ``id`` a JSON-RPC id.
    """

    direction: str | None = None
    method: str | None = None
    kind: str | None = None
    id: Any = ANY

    def __call__(self, message: Message) -> bool:
        return (
            (self.direction is None or message.direction == self.direction)
            and (self.method is None or message.method == self.method)
            and (self.kind is None or message.kind == self.kind)
            and (self.id is ANY or message.id == self.id)
        )


@dataclass(frozen=True)
class Action:
    """A fault: ``kind`` is one of ``ACTIONS``; ``seconds`` is a delay's, ``nbytes`` an
    oversized answer's size, ``count`` and ``method`` a flood's server requests."""

    kind: str
    seconds: float = 0.0
    nbytes: int = 0
    count: int = 0
    method: str = "ping"

    def __post_init__(self) -> None:
        if self.kind not in ACTIONS:
            raise ValueError(f"unknown fault {self.kind!r}; one of {sorted(ACTIONS)}")


MatchLike = Match | Callable[[Message], bool] | str | None


@dataclass
class Rule:
    """A scripted fault: ``action`` on the next ``remaining`` messages ``match`` picks (None:
    every one); ``hits`` counts the messages it fired on."""

    match: Callable[[Message], bool]
    action: Action
    remaining: int | None = 1
    hits: int = 0


def as_match(match: MatchLike) -> Callable[[Message], bool]:
    """A predicate from a Match, a callable, a method name or None (anything)."""
    if match is None:
        return Match()
    if isinstance(match, str):
        return Match(method=match)
    return match


class FaultBook:
    """What one proxy saw and the rules it applies; shared by its connections' threads."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.requests: list[HttpRequest] = []
        self.rules: list[Rule] = []
        self.stopping = threading.Event()
        self.cond = threading.Condition()
        self._connections = itertools.count(1)
        self._methods: dict[tuple[int, str], str] = {}  # (connection, id) -> request method
        self._generation = 0  # release() counts up: every stall before it ends
        self._stalled = 0
        self._flood_ids = itertools.count(1)

    def connection(self) -> int:
        """A number for a new connection (a relay session, an HTTP connection)."""
        return next(self._connections)

    def flood_id(self) -> str:
        return f"{FLOOD_PREFIX}{next(self._flood_ids)}"

    # -- rules -------------------------------------------------------------------------------

    def add(self, match: MatchLike, action: Action, times: int | None = 1) -> Rule:
        rule = Rule(as_match(match), action, times)
        with self.cond:
            self.rules.append(rule)
        return rule

    def decide(self, message: Message) -> list[Action]:
        """The actions of every live rule that picks ``message`` (each rule fires once)."""
        actions = []
        with self.cond:
            for rule in self.rules:
                if rule.remaining is not None and rule.remaining <= 0:
                    continue
                if rule.match(message):
                    rule.hits += 1
                    if rule.remaining is not None:
                        rule.remaining -= 1
                    actions.append(rule.action)
        return actions

    # -- recording ---------------------------------------------------------------------------

    def record(
        self,
        direction: str,
        data: bytes,
        connection: int,
        *,
        http_method: str | None = None,
        session_id: str | None = None,
    ) -> Message:
        """Record what arrived, with the method it belongs to; the faults are added later."""
        value = decode(data) if data else None
        method = None
        with self.cond:
            if isinstance(value, dict):
                rid = value.get("id")
                key = (connection, json.dumps(rid))
                if isinstance(value.get("method"), str):
                    method = str(value["method"])
                    if rid is not None:
                        self._methods[key] = method
                elif rid is not None:
                    method = self._methods.pop(key, None)
            message = Message(
                len(self.messages),
                direction,
                data,
                value,
                connection,
                method,
                http_method,
                session_id,
            )
            self.messages.append(message)
            self.cond.notify_all()
        return message

    def applied(self, message: Message, actions: Iterable[Action]) -> Message:
        """Note on the record what was done to ``message``."""
        kinds = tuple(a.kind for a in actions)
        if not kinds:
            return message
        with self.cond:
            updated = dataclasses.replace(message, faults=message.faults + kinds)
            self.messages[message.index] = updated
        return updated

    def record_request(self, request: HttpRequest) -> None:
        with self.cond:
            self.requests.append(request)
            self.cond.notify_all()

    def wait_for(
        self, predicate: Callable[[], Any], timeout: float, what: str = "condition"
    ) -> Any:
        """Wait (under the book's lock) until ``predicate()`` is truthy; its value."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"{what} not seen within {timeout}s")
                self.cond.wait(min(remaining, 0.5))

    # -- stalls ------------------------------------------------------------------------------

    def stall(self, timeout: float) -> None:
        """Hold the calling thread until ``release()``, the proxy closing, or ``timeout``."""
        deadline = time.monotonic() + timeout
        with self.cond:
            generation = self._generation
            self._stalled += 1
            self.cond.notify_all()
            try:
                while self._generation == generation and not self.stopping.is_set():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    self.cond.wait(min(remaining, 0.5))
            finally:
                self._stalled -= 1

    def stalled(self) -> int:
        """How many answers are held right now."""
        with self.cond:
            return self._stalled

    def release(self) -> None:
        with self.cond:
            self._generation += 1
            self.cond.notify_all()

    def pause(self, seconds: float) -> bool:
        """A delay fault's pause; False when the proxy is closing."""
        return not self.stopping.wait(seconds)
