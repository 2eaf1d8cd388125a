"""``snodo.Fleet``: many MCP servers from one ``mcpServers`` config, supervised, behind one catalog.

Each server is a supervised connection (``snodo.connect`` with ``restart="transient"`` unless the
config says otherwise) whose owner actor runs under the fleet's own supervisor. The fleet holds
each server's state and catalog and routes calls by qualified name; it decides nothing about the
config itself (``snodo.protocol.fleet_config`` does). Blocking work (starting, stopping, listing)
runs on a few fleet threads (``max_parallel_starts``); callbacks from connections and
subscriptions only record and schedule.

States of a server: ``"stopped"`` (lazy, not started yet), ``"starting"``, ``"ready"``,
``"restarting"``, ``"idle"`` (stopped after ``idle_timeout``; its catalog is kept and the next use
starts it), ``"failed"`` (did not start, or crashed past its restart intensity; ``error`` says
why), ``"disabled"`` (``"disabled": true`` in the config).
"""

from __future__ import annotations

import inspect
import json
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from itertools import count
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from snodo.connections import connect, restart_policy
from snodo.log import get_logger
from snodo.options import OPTION_DEFAULTS, build_options, check_positive_int, check_timeout
from snodo.protocol import errors
from snodo.protocol.errors import McpError
from snodo.protocol.fleet_config import (
    ServerSpec,
    parse_config,
    plan_reload,
    qualify,
    split_qualified,
)
from snodo.protocol.headers import tool_param_headers
from snodo.protocol.subscriptions import Dropped, Gap, Notification
from snodo.subscription import open_subscription
from snodo.supervision import (
    ChildSpec,
    Supervisor,
    call_later,
    current_owner,
    owner_of,
    root,
    start_child,
    stop,
)
from snodo.supervision.restarts import RestartAfter, decide
from snodo.transports.stdio import StdioTransport, stderr_mode
from snodo.transports.targets import Http, Sse, Stdio

if TYPE_CHECKING:
    from pykka import ActorRef

    from snodo.actors.connection_owner import StateChange
    from snodo.client import Client
    from snodo.protocol.results import InputRequired
    from snodo.protocol.subscriptions import Event
    from snodo.subscription import Subscription
    from snodo.supervision import Owner, Timer

__all__ = ["Fleet", "FleetStatus", "Route", "ServerState"]

_log = get_logger("snodo.fleet")

ServerState = Literal["stopped", "starting", "ready", "restarting", "idle", "failed", "disabled"]
Kind = Literal["tools", "prompts", "resources", "resource_templates"]

_KINDS: tuple[Kind, ...] = ("tools", "prompts", "resources", "resource_templates")
#: Which catalog a list-changed notification makes stale.
_STALE: Mapping[str, tuple[Kind, ...]] = {
    "notifications/tools/list_changed": ("tools",),
    "notifications/prompts/list_changed": ("prompts",),
    "notifications/resources/list_changed": ("resources", "resource_templates"),
}
#: What a catalog subscription listens for.
_WATCH = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")
#: Events asked for at once on a catalog subscription (asked again as they are used).
_DEMAND = 256
#: ``connect()`` keywords a fleet sets itself, and those of one transport.
_FLEET_OWNED = frozenset({"target", "name", "owner", "supervisor", "on_state"})
_CONNECT_PARAMETERS = frozenset(inspect.signature(connect).parameters)
_STDIO_ONLY = frozenset({"env", "cwd", "stderr"})
_HTTP_ONLY = frozenset({"headers", "token_provider", "verify", "ca_certs", "client_cert"})
#: Jobs (starts, stops, listings) waiting for a fleet thread at most: a few per server.
MAX_QUEUED_JOBS = 100_000
#: The longest ``Fleet(...)`` waits for eager starts by default.
START_WAIT = 120.0
_fleet_ids = count(1)


class Route(NamedTuple):
    """Where a fleet call goes: the server, its own name for the tool or prompt (or the URI),
    and the definition its ``Client`` call needs (None: by name)."""

    server: str
    name: str
    definition: Mapping[str, Any] | None


class FleetStatus(dict[str, dict[str, Any]]):
    """``Fleet.status()``: server name -> its status dict; ``str()`` prints a table."""

    _COLUMNS = (
        "state",
        "transport",
        "version",
        "restarts",
        "pid",
        "tools",
        "since_success",
        "error",
    )

    def __str__(self) -> str:
        rows: list[tuple[str, ...]] = [("server", *self._COLUMNS)]
        for name, status in self.items():
            cells = [name]
            for column in self._COLUMNS:
                value = status[column]
                if value is None:
                    cells.append("-")
                elif column == "since_success":
                    cells.append(f"{value:.1f}s")
                elif column == "error":
                    cells.append(str(value)[:60])
                else:
                    cells.append(str(value))
            rows.append(tuple(cells))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        return "\n".join(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows
        )


@dataclass(slots=True)
class _Member:
    """One server of the fleet and what the fleet knows of it (guarded by the fleet's lock)."""

    spec: ServerSpec
    state: ServerState
    client: Client | None = None
    error: McpError | None = None
    #: Bumped by every start and stop: callbacks of an older connection are ignored.
    generation: int = 0
    restarts: int = 0
    start_failures: tuple[float, ...] = ()
    last_success: float | None = None
    catalog: dict[str, list[dict[str, Any]] | None] | None = None
    subscription: Subscription | None = None
    stale: set[Kind] | None = None
    refresh: Timer | None = None
    events: int = 0
    #: Idle tracking: the calls seen sent at the last check, and when that number last moved.
    seen_calls: int = -1
    active_at: float = 0.0


class _Jobs:
    """At most ``limit`` fleet threads running queued jobs; they end when the queue is empty."""

    def __init__(self, limit: int, name: str) -> None:
        self._limit = limit
        self._name = name
        self._queue: deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if len(self._queue) >= MAX_QUEUED_JOBS:
                raise errors.connection_error(
                    f"The fleet has {MAX_QUEUED_JOBS} jobs queued: refusing more"
                )
            self._queue.append(job)
            self._threads = [thread for thread in self._threads if thread.is_alive()]
            if len(self._threads) >= self._limit:
                return
            thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._threads.append(thread)
        thread.start()

    def join(self, deadline: float) -> bool:
        """Wait for every thread to end (no more jobs), until ``deadline``."""
        while True:
            with self._lock:
                threads = [thread for thread in self._threads if thread.is_alive()]
            if not threads:
                return True
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            if time.monotonic() >= deadline:
                with self._lock:
                    return not any(thread.is_alive() for thread in self._threads)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    current = threading.current_thread()
                    self._threads = [thread for thread in self._threads if thread is not current]
                    return
                job = self._queue.popleft()
            try:
                job()
            except Exception:
                _log.exception("a fleet job failed")


class Fleet:
    """Many MCP servers from one ``mcpServers`` config (see the module docstring and "Fleets"
    in the API tour).

    ``start``: ``"eager"`` (the constructor returns once every server is ready or failed, within
    ``start_wait`` seconds) or ``"lazy"`` (a server starts on first use; listing the catalog is
    a use of every server whose catalog is not known yet). ``idle_timeout``: a stdio server with
    no call for that long is stopped (state ``"idle"``) and started again on next use.
    ``max_parallel_starts`` bounds the fleet's threads. ``separator`` joins a server's name and
    its tool or prompt names (``"git_status"``). ``debounce``: seconds a list-changed
    notification waits for others before the catalog is listed again. ``owner`` owns every
    connection (the creating thread by default; see "Owners"); ``environ`` is where ``${VAR}``
    comes from (``os.environ`` by default).

    ``connect_options``: ``connect()`` keywords for every server (what a JSON file cannot hold:
    ``log_handler``, ``input_handlers``, a ``stderr`` logger, a ``token_provider``...; a
    keyword of one transport applies to that transport's servers only); ``server_options``:
    keywords per server name. A server's own entry wins over ``connect_options``, and
    ``server_options`` over both.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        start: Literal["eager", "lazy"] = "eager",
        idle_timeout: float | None = None,
        max_parallel_starts: int = 8,
        separator: str = "_",
        debounce: float = 0.5,
        start_wait: float = START_WAIT,
        owner: Any = None,
        environ: Mapping[str, str] | None = None,
        connect_options: Mapping[str, Any] | None = None,
        server_options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:

        if start not in ("eager", "lazy"):
            raise ValueError(f'start must be "eager" or "lazy", not {start!r}')
        check_timeout("idle_timeout", idle_timeout)
        check_positive_int("max_parallel_starts", max_parallel_starts)
        check_timeout("debounce", debounce, optional=False)
        check_timeout("start_wait", start_wait, optional=False)
        if not isinstance(separator, str) or not separator:
            raise ValueError("separator must be a non-empty string")
        self._environ = os.environ if environ is None else environ
        self._common = _keywords("connect_options", connect_options)
        self._own = {
            name: _keywords(f"server_options[{name!r}]", keywords)
            for name, keywords in (server_options or {}).items()
        }
        specs = self._checked(parse_config(config, self._environ))
        unknown = sorted(set(self._own) - {spec.name for spec in specs})
        if unknown:
            raise ValueError(f"server_options names servers not in the config: {unknown}")
        self._start = start
        self._start_wait = start_wait
        self._idle_timeout = idle_timeout
        self._separator = separator
        self._debounce = debounce
        self._owner: Owner = current_owner() if owner is None else owner_of(owner)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._members: dict[str, _Member] = {}
        #: (kind, qualified name or URI) -> the member, the server's own name (or the URI) and
        #: the definition a call needs (None: by name).
        self._routes: dict[tuple[Kind, str], tuple[_Member, str, dict[str, Any] | None]] = {}
        #: Names and URIs more than one server gives, with those servers.
        self._shared: dict[tuple[Kind, str], list[str]] = {}
        #: Set by every catalog or state change; the next lookup rebuilds the routes once.
        self._routes_stale = False
        self._closed = False
        self._name = f"fleet-{next(_fleet_ids)}"
        self._jobs = _Jobs(max_parallel_starts, f"snodo-{self._name}")
        self._supervisor = _start_supervisor(self._name)
        self._tick: Timer | None = None
        try:
            for spec in specs:
                self._members[spec.name] = _Member(spec, self._initial_state(spec))
            self._start_eager(list(self._members.values()), start_wait)
            self._arm_idle_check()
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **options: Any) -> Fleet:
        """A fleet from a JSON file in the ``mcpServers`` format (``options``: as ``Fleet``)."""
        with open(path, encoding="utf-8") as file:
            try:
                config = json.load(file)
            except json.JSONDecodeError as error:
                raise ValueError(f"{os.fspath(path)}: not JSON: {error}") from None
        return cls(config, **options)

    # -- the servers ------------------------------------------------------------------------

    def __getitem__(self, name: str) -> Client:
        """The server's ``Client`` (a lazy or idle server is started first). Valid until the
        fleet stops that server (idle, reload, close): take it again rather than keep it."""
        member = self._members.get(name)
        if member is None:
            raise KeyError(name)
        return self._ready_client(member)

    def ready_client(self, name: str) -> Client | None:
        """The server's ``Client`` if it is ready (or restarting: a call waits for it), else
        None; never starts a server or waits (``snodo.aio`` uses it)."""
        member = self._members.get(name)
        if member is None:
            raise KeyError(name)
        client = member.client
        return client if member.state in ("ready", "restarting") else None

    def route(self, kind: Literal["tools", "prompts", "resources"], target: Any) -> Route:
        """Where ``call_tool`` (``kind="tools"``), ``get_prompt`` or ``read_resource`` would
        send ``target`` (a qualified name, a catalog item, a URI); -32602 when nowhere. For a
        URI not listed yet it lists the resources first (blocking)."""
        member, name, definition = self._route(kind, target)
        return Route(member.spec.name, name, definition)

    def succeeded(self, name: str) -> None:
        """Record that a call routed to ``name`` succeeded outside the fleet's own methods
        (``snodo.aio`` calls on its own clients): ``status()``'s ``since_success`` counts from now."""
        member = self._members.get(name)
        if member is None:
            raise KeyError(name)
        member.last_success = time.monotonic()

    def __contains__(self, name: object) -> bool:
        return name in self._members

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._members))

    def __len__(self) -> int:
        return len(self._members)

    def status(self) -> FleetStatus:
        """Per server: state, transport, negotiated version, restarts, pid, number of tools
        (None until listed), seconds since its last success (ready, a listing, or a routed
        call answered), and its last error."""
        now = time.monotonic()
        status = FleetStatus()
        with self._lock:
            members = list(self._members.values())
        for member in members:
            client = member.client
            catalog = member.catalog
            tools = None if catalog is None else catalog.get("tools")
            live = client is not None and member.state in ("ready", "restarting")
            status[member.spec.name] = {
                "state": member.state,
                "transport": member.spec.transport,
                "version": client.version if live and client is not None else None,
                "restarts": member.restarts
                + (client.stats()["restarts"] if live and client else 0),
                "pid": _pid(client) if live else None,
                "tools": None if tools is None else len(tools),
                "since_success": None if member.last_success is None else now - member.last_success,
                "error": None if member.error is None else str(member.error),
            }
        return status

    # -- the catalog --------------------------------------------------------------------------

    def list_tools(self) -> list[dict[str, Any]]:
        """Every ready server's tools (after its tool filter), named ``server + separator +
        tool``; ``item["fleet"]`` is ``{"server": ..., "name": <the server's own name>}``."""
        return self._list("tools")

    def list_prompts(self) -> list[dict[str, Any]]:
        """Every ready server's prompts, qualified as tools are."""
        return self._list("prompts")

    def list_resources(self) -> list[dict[str, Any]]:
        """Every ready server's resources (URIs as the server gives them; ``item["fleet"]`` is
        ``{"server": ...}``)."""
        return self._list("resources")

    def list_resource_templates(self) -> list[dict[str, Any]]:
        """Every ready server's resource templates (``item["fleet"]`` names the server)."""
        return self._list("resource_templates")

    def call_tool(
        self,
        tool: str | Mapping[str, Any],
        arguments: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> dict[str, Any] | InputRequired:
        """Call a tool by its qualified name (or an item of ``list_tools()``) on its server,
        with every option of ``Client.call_tool``."""
        member, name, definition = self._route("tools", tool)
        client = self._ready_client(member)
        result = client.call_tool(name if definition is None else definition, arguments, **options)
        member.last_success = time.monotonic()
        return result

    def get_prompt(
        self,
        prompt: str | Mapping[str, Any],
        arguments: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> dict[str, Any] | InputRequired:
        """Get a prompt by its qualified name on its server (options: as ``Client.get_prompt``)."""
        member, name, _ = self._route("prompts", prompt)
        result = self._ready_client(member).get_prompt(name, arguments, **options)
        member.last_success = time.monotonic()
        return result

    def read_resource(
        self, uri: str, *, server: str | None = None, **options: Any
    ) -> dict[str, Any] | InputRequired:
        """Read ``uri`` on the server that listed it (or on ``server``; required for a URI no
        server listed, such as one made from a template)."""
        if server is None:
            member, _, _ = self._route("resources", uri)
        else:
            found = self._members.get(server)
            if found is None:
                raise errors.invalid_params(f"No server named {server!r} in the fleet")
            member = found
        result = self._ready_client(member).read_resource(uri, **options)
        member.last_success = time.monotonic()
        return result

    # -- reload and close ---------------------------------------------------------------------

    def restart(self, name: str, *, wait: float = START_WAIT) -> None:
        """Stop the server ``name`` if it runs and start it again (a failed one too, with its
        restart intensity reset); returns once it is ready or failed, within ``wait``."""
        member = self._members.get(name)
        if member is None:
            raise KeyError(name)
        if member.state == "disabled":
            raise errors.connection_error(f"Server {name!r} is disabled in the config")
        self._stop(member, "stopped")
        with self._lock:
            member.start_failures = ()
        self._begin(member)
        self._settle([member], wait)

    def reload(self, config: Mapping[str, Any]) -> dict[str, list[str]]:
        """Start added servers, stop removed ones, restart changed ones, leave the rest as they
        are (an unchanged server keeps its connection and pid). Returns what it did."""
        specs = self._checked(parse_config(config, self._environ))
        with self._lock:
            if self._closed:
                raise errors.connection_error("The fleet is closed")
            old = [member.spec for member in self._members.values()]
            plan = plan_reload(old, specs)
            by_name = {spec.name: spec for spec in specs}
            gone = [self._members[name] for name in (*plan.removed, *plan.changed)]
            for name in plan.removed:
                del self._members[name]
            fresh = []
            for name in (*plan.added, *plan.changed):
                member = _Member(by_name[name], self._initial_state(by_name[name]))
                self._members[name] = member
                fresh.append(member)
            # Keep the config's order.
            self._members = {spec.name: self._members[spec.name] for spec in specs}
            self._routes_stale = True
        for member in gone:
            self._stop(member, "stopped")
        self._start_eager(fresh, self._start_wait)
        return {
            "added": list(plan.added),
            "removed": list(plan.removed),
            "changed": list(plan.changed),
            "unchanged": list(plan.unchanged),
        }

    def close(self, timeout: float = 10.0) -> None:
        """Close every server within about ``timeout`` seconds. Idempotent."""
        deadline = time.monotonic() + timeout
        with self._lock:
            already, self._closed = self._closed, True
            members = list(self._members.values())
            tick, self._tick = self._tick, None
            self._changed.notify_all()
        if tick is not None:
            tick.cancel()
        if not already:
            for member in members:
                self._jobs.submit(partial(self._stop, member, "stopped"))
        self._jobs.join(deadline)
        stop(self._supervisor, timeout=max(0.1, deadline - time.monotonic()))

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        states = [member.state for member in self._members.values()]
        ready = states.count("ready")
        return f"<snodo.Fleet {ready}/{len(states)} ready{' closed' if self._closed else ''}>"

    # -- routing ------------------------------------------------------------------------------

    def _route(
        self, kind: Kind, target: str | Mapping[str, Any]
    ) -> tuple[_Member, str, dict[str, Any] | None]:
        """The member, the server's own name and item (None if not listed yet) for a
        qualified name or a fleet item."""
        if isinstance(target, Mapping):
            fleet = target.get("fleet")
            if not isinstance(fleet, Mapping) or "server" not in fleet:
                raise errors.invalid_params(
                    f"{kind[:-1]} {target.get('name')!r} is not an item of this fleet's catalog"
                )
            key = target.get("uri" if kind == "resources" else "name")
        else:
            key = target
        if self._routes_stale:
            self._fresh_routes()
        route = self._routes.get((kind, key))  # type: ignore[arg-type]
        if kind == "resources":
            if route is None and (kind, key) not in self._shared:
                self._list("resources")  # the first use: list them, then look again
                self._fresh_routes()
                route = self._routes.get((kind, key))  # type: ignore[arg-type]
            if (kind, key) in self._shared:
                servers = ", ".join(self._shared[kind, key])  # type: ignore[index]
                raise errors.invalid_params(
                    f"The resource {key!r} is listed by several servers ({servers}): pass server="
                )
            if route is None:
                raise errors.invalid_params(
                    f"No server in the fleet listed the resource {key!r}: pass server="
                )
        if route is not None:
            return route
        if not isinstance(key, str):
            raise errors.invalid_params(f"A {kind[:-1]} name is a string, not {key!r}")
        split = split_qualified(key, list(self._members), self._separator)
        if split is None:
            raise errors.invalid_params(
                f"No server in the fleet for the {kind[:-1]} {key!r} (names are "
                f"server{self._separator}name)"
            )
        member = self._members[split[0]]
        if kind == "tools" and not member.spec.tools.admits(split[1]):
            raise errors.invalid_params(
                f"The tool {split[1]!r} of server {split[0]!r} is not allowed by the fleet config"
            )
        return member, split[1], None

    def _fresh_routes(self) -> None:
        with self._lock:
            if self._routes_stale:
                self._rebuild_routes()

    def _rebuild_routes(self) -> None:
        """The routing table from every ready member's catalog (with the lock held). A name two
        servers give goes to the first in config order (logged once); a URI two servers list
        needs ``server=``."""
        routes: dict[tuple[Kind, str], tuple[_Member, str, dict[str, Any] | None]] = {}
        shared: dict[tuple[Kind, str], list[str]] = {}
        for member in self._members.values():
            if member.catalog is None or member.state not in ("ready", "idle"):
                continue
            for kind in _KINDS:
                for item in member.catalog.get(kind) or ():
                    key = item["fleet_key"]
                    if (kind, key) in routes:
                        first = routes[kind, key][0].spec.name
                        shared.setdefault((kind, key), [first]).append(member.spec.name)
                        continue
                    routes[kind, key] = (member, item["own"], item["definition"])
        for (kind, key), servers in shared.items():
            if kind in ("tools", "prompts") and (kind, key) not in self._shared:
                _log.warning(
                    "two servers give the same name; the first keeps it", name=key, servers=servers
                )
        self._routes = routes
        self._shared = shared
        self._routes_stale = False

    def _list(self, kind: Kind) -> list[dict[str, Any]]:
        self._load(kind)
        items: list[dict[str, Any]] = []
        with self._lock:
            for member in self._members.values():
                if member.catalog is None or member.state not in ("ready", "idle"):
                    continue
                items.extend(item["item"] for item in member.catalog.get(kind) or ())
        if kind in ("tools", "prompts"):  # a name two servers give is the first one's, as routed
            named: dict[Any, dict[str, Any]] = {}
            for item in items:
                named.setdefault(item.get("name"), item)
            items = list(named.values())
        return [dict(item) for item in items]

    def _load(self, kind: Kind) -> None:
        """List ``kind`` on every member that has not listed it yet, a few at once; a lazy
        member that never started is started for it."""
        with self._lock:
            todo = [
                member
                for member in self._members.values()
                if member.state in ("ready", "stopped")
                and (member.catalog is None or member.catalog.get(kind) is None)
            ]
        if not todo:
            return
        done = threading.Semaphore(0)

        def load(member: _Member) -> None:
            try:
                if member.state == "stopped":
                    self._ready_client(member)
                self._refresh(member, (kind,))
            except McpError as error:
                _log.info("listing failed", server=member.spec.name, kind=kind, error=str(error))
            finally:
                done.release()

        for member in todo:
            self._jobs.submit(partial(load, member))
        deadline = time.monotonic() + START_WAIT
        for _ in todo:
            if not done.acquire(timeout=max(0.0, deadline - time.monotonic())):
                break

    # -- starting and stopping ----------------------------------------------------------------

    def _initial_state(self, spec: ServerSpec) -> ServerState:
        return "disabled" if spec.disabled else "stopped"

    def _start_eager(self, members: list[_Member], wait: float) -> None:
        eager = [
            member
            for member in members
            if member.state == "stopped" and (member.spec.start or self._start) == "eager"
        ]
        for member in eager:
            self._begin(member)
        self._settle(eager, wait)

    def _settle(self, members: list[_Member], wait: float) -> None:
        """Wait until none of ``members`` is starting, within ``wait`` seconds."""
        deadline = time.monotonic() + wait
        with self._lock:
            while any(member.state == "starting" for member in members) and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)

    def _begin(self, member: _Member) -> bool:
        """Queue a start unless one is under way (True if this call queued it)."""
        with self._lock:
            if self._closed or member.state in ("starting", "ready", "restarting", "disabled"):
                return False
            member.state = "starting"
            member.generation += 1
            generation = member.generation
            self._changed.notify_all()
        self._jobs.submit(partial(self._open, member, generation))
        return True

    def _open(self, member: _Member, generation: int) -> None:
        """Connect one server and list its tools (on a fleet thread)."""
        spec = member.spec
        options = self._options(spec)
        target: Any = (
            Stdio(spec.command or "", list(spec.args))
            if spec.transport == "stdio"
            else Sse(spec.url or "")
            if spec.transport == "sse"
            else Http(spec.url or "")
        )
        try:
            client = connect(
                target,
                name=spec.name,
                owner=self._owner,
                supervisor=self._supervisor,
                on_state=partial(self._state_changed, member, generation),
                **options,
            )
        except McpError as error:
            self._start_failed(member, generation, error)
            return
        except OSError as error:
            self._start_failed(member, generation, errors.connection_error(str(error)))
            return
        except (ValueError, TypeError) as error:  # what the entry says cannot work: no retry
            self._start_failed(member, generation, errors.connection_error(str(error)), final=True)
            return
        with self._lock:
            current = member.generation == generation and not self._closed
            if current:
                member.client = client
        if not current:
            client.close()
            return
        failure: McpError | None = None
        try:
            self._refresh(member, ("tools",))
        except McpError as error:
            failure = error
            _log.info("listing tools failed", server=spec.name, error=str(error))
        self._watch(member, client)
        with self._lock:
            if member.generation != generation or member.state != "starting":
                return
            # What the connection went through while it was starting (its on_state changes
            # were the start's own until now); the client's state is set before each change.
            now = client.state
            if now != "ready":
                member.state = "failed" if now == "closed" else "restarting"
                member.error = failure or errors.connection_error(
                    "The connection ended while the fleet started it"
                )
                if now == "closed":
                    member.client = None
                self._routes_stale = True
                self._changed.notify_all()
                return
            member.state = "ready"
            member.error = None
            member.last_success = time.monotonic()
            member.seen_calls, member.active_at = -1, time.monotonic()
            self._routes_stale = True
            self._changed.notify_all()
        _log.info("server ready", server=spec.name, version=client.version)

    def _start_failed(
        self, member: _Member, generation: int, error: McpError, *, final: bool = False
    ) -> None:
        """A start failed: try again after the backoff while the restart policy allows (never
        when ``final``)."""
        spec = member.spec
        options = self._options(spec)
        _log.warning("server failed to start", server=spec.name, error=str(error))
        with self._lock:
            if member.generation != generation:
                return
            member.error = error
            policy = restart_policy(
                options.get("restart", "transient"),
                options.get("backoff"),
                options.get("max_restarts", 5),
                options.get("restart_window", 60.0),
            )
            verdict = decide(policy, member.start_failures, True, time.monotonic(), random.random())
            if final or self._closed or not isinstance(verdict, RestartAfter):
                member.state = "failed"
                self._changed.notify_all()
                return
            member.start_failures = verdict.history
            member.restarts += 1

        def again() -> None:
            with self._lock:
                if member.generation != generation or self._closed:
                    return
                member.generation += 1
                retry = member.generation
            self._jobs.submit(partial(self._open, member, retry))

        call_later(verdict.delay, again)

    def _stop(self, member: _Member, state: ServerState) -> None:
        """Close the member's connection (on a fleet thread); ``state``: what it is afterwards."""
        with self._lock:
            member.generation += 1
            client, member.client = member.client, None
            if client is not None:  # its restarts stay counted (an idle stop, a restart)
                member.restarts += client.stats()["restarts"]
            subscription, member.subscription = member.subscription, None
            refresh, member.refresh = member.refresh, None
            if member.state != "disabled":
                member.state = state
            if state != "idle":
                member.catalog = None
            self._routes_stale = True
            self._changed.notify_all()
        if refresh is not None:
            refresh.cancel()
        if subscription is not None:
            subscription.close()
        if client is not None:
            client.close()

    def _ready_client(self, member: _Member) -> Client:
        """The member's client once it is ready: starts a stopped or idle one and waits (within
        its timeout) for a start or restart under way."""
        client = member.client
        if member.state == "ready" and client is not None:
            return client
        if member.state == "disabled":
            raise errors.connection_error(f"Server {member.spec.name!r} is disabled in the config")
        if member.state in ("stopped", "idle"):
            self._begin(member)
        timeout = self._options(member.spec).get("timeout", 30.0)
        deadline = time.monotonic() + (START_WAIT if timeout is None else timeout)
        with self._lock:
            while True:
                if self._closed:
                    raise errors.connection_error("The fleet is closed")
                client = member.client
                if member.state == "ready" and client is not None:
                    return client
                if member.state == "failed":
                    raise errors.connection_error(
                        f"Server {member.spec.name!r} is not available: {member.error}",
                        cause=("fleet", member.spec.name),
                    )
                if member.state in ("stopped", "idle", "disabled"):
                    raise errors.connection_error(f"Server {member.spec.name!r} was stopped")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise errors.timeout_error(
                        START_WAIT if timeout is None else timeout, cause=("starting",)
                    )
                if member.state == "restarting" and client is not None:
                    return client  # the client waits for its restart within the call's timeout
                self._changed.wait(remaining)

    # -- what the connections and subscriptions tell ------------------------------------------

    def _state_changed(self, member: _Member, generation: int, change: StateChange) -> None:
        """``on_state`` of a member's connection (quick: record, schedule)."""
        with self._lock:
            if member.generation != generation or member.state in ("starting", "stopped", "idle"):
                return  # the start itself, or an old connection's last words
            if change.state == "restarting":
                member.state = "restarting"
                member.error = change.error
            elif change.state == "ready":
                member.state = "ready"
                member.last_success = time.monotonic()
                member.stale = set(_KINDS)
            elif change.state == "closed":
                member.state = "failed"
                member.error = change.error or errors.connection_error("Connection closed")
                member.restarts += member.client.stats()["restarts"] if member.client else 0
                member.client = None
            self._routes_stale = True
            self._changed.notify_all()
            stale = change.state == "ready"
        if stale:
            self._schedule_refresh(member, generation)

    def _watch(self, member: _Member, client: Client) -> None:
        """Follow the server's list-changed notifications, if it declares any."""
        declared = _declared_changes(client)
        if not declared:
            return
        generation = member.generation
        try:
            subscription = open_subscription(
                client.steps.listen_context(),
                dict.fromkeys(declared, True),
                timeout=None,
                max_buffer=_DEMAND,
                overflow="drop_oldest",
                owner=self._owner,
                meta=None,
                trace_context=None,
                into=partial(self._event, member, generation),
            )
        except (McpError, TypeError) as error:
            _log.info("no catalog updates", server=member.spec.name, error=str(error))
            return
        subscription.demand(_DEMAND)
        with self._lock:
            if member.generation == generation:
                member.subscription = subscription
                return
        subscription.close()

    def _event(self, member: _Member, generation: int, event: Event) -> None:
        """One event of a member's catalog subscription (on the stream's thread: quick)."""
        if isinstance(event, Notification):
            kinds: tuple[Kind, ...] = _STALE.get(event.method, ())
        elif isinstance(event, (Gap, Dropped)):
            kinds = _KINDS
        else:
            return
        with self._lock:
            if member.generation != generation:
                return
            member.events += 1
            subscription = member.subscription
            if member.stale is None:
                member.stale = set()
            member.stale.update(kinds)
            asked = member.events % (_DEMAND // 2) == 0
        if asked and subscription is not None:
            subscription.demand(_DEMAND // 2)
        if kinds:
            self._schedule_refresh(member, generation)

    def _schedule_refresh(self, member: _Member, generation: int) -> None:

        with self._lock:
            if member.refresh is not None or self._closed:
                return

            def due() -> None:
                with self._lock:
                    member.refresh = None
                    stale, member.stale = member.stale or set(), None
                    if member.generation != generation or self._closed:
                        return
                ordered = tuple(kind for kind in _KINDS if kind in stale)
                self._jobs.submit(partial(self._refresh_quietly, member, ordered))

            member.refresh = call_later(self._debounce, due)

    def _refresh_quietly(self, member: _Member, kinds: tuple[Kind, ...]) -> None:
        try:
            self._refresh(member, kinds, known_only=True)
        except McpError as error:
            _log.info("catalog refresh failed", server=member.spec.name, error=str(error))

    def _refresh(
        self, member: _Member, kinds: tuple[Kind, ...], *, known_only: bool = False
    ) -> None:
        """List ``kinds`` on the member (``known_only``: only those it has listed before, and
        its tools) and put them in its catalog."""
        client = member.client
        if client is None:
            return
        generation = member.generation
        catalog = member.catalog
        listed: dict[str, list[dict[str, Any]] | None] = {}
        for kind in kinds:
            known = catalog is not None and catalog.get(kind) is not None
            if known_only and kind != "tools" and not known:
                continue
            try:
                items = _lister(client, kind)()
            except McpError as error:
                if error.code != errors.METHOD_NOT_FOUND:
                    raise
                items = []
            listed[kind] = [
                self._entry(member, kind, item) for item in items if _admitted(member, kind, item)
            ]
        with self._lock:
            if member.generation != generation:
                return
            catalog = member.catalog if member.catalog is not None else dict.fromkeys(_KINDS)
            catalog.update(listed)
            member.catalog = catalog
            member.last_success = time.monotonic()
            self._routes_stale = True
        _log.debug("catalog listed", server=member.spec.name, kinds=list(listed))

    def _entry(self, member: _Member, kind: str, item: dict[str, Any]) -> dict[str, Any]:
        """A catalog entry: the fleet's item, its routing key and the server's own item."""
        server = member.spec.name
        shown = dict(item)
        if kind in ("tools", "prompts"):
            shown["name"] = qualify(server, item["name"], self._separator)
            shown["fleet"] = {"server": server, "name": item["name"]}
            key = shown["name"]
        else:
            shown["fleet"] = {"server": server}
            key = item.get("uri") if kind == "resources" else item.get("uriTemplate")
        # Only an HTTP call with Mcp-Param-* headers needs the definition; by name, a call
        # takes the client's shared options (decision 0037: the routed-call cost).
        needed = kind == "tools" and member.spec.transport == "http" and tool_param_headers(item)
        own = item["name"] if kind in ("tools", "prompts") else key
        return {"item": shown, "fleet_key": key, "own": own, "definition": item if needed else None}

    # -- options ------------------------------------------------------------------------------

    def _options(self, spec: ServerSpec) -> dict[str, Any]:
        """The ``connect()`` keywords of one server: the fleet's, its entry's, its own."""
        other = _HTTP_ONLY if spec.transport == "stdio" else _STDIO_ONLY
        options: dict[str, Any] = {"restart": "transient"}
        options.update((key, value) for key, value in self._common.items() if key not in other)
        options.update(spec.connect_options())
        options.update(self._own.get(spec.name, {}))
        return options

    def _checked(self, specs: tuple[ServerSpec, ...]) -> tuple[ServerSpec, ...]:
        """Refuse a server whose ``connect()`` keywords ``connect`` would refuse, naming it,
        before anything starts (the checks are ``connect``'s own)."""
        for spec in specs:
            options = self._options(spec)
            try:
                build_options(**{key: options[key] for key in options if key in OPTION_DEFAULTS})
                check_timeout("probe_timeout", options.get("probe_timeout", 10.0), optional=False)
                check_timeout("ping_interval", options.get("ping_interval"))
                for key in ("max_server_requests", "max_response_bytes"):
                    if key in options:
                        check_positive_int(key, options[key])
                restart_policy(
                    options["restart"],
                    options.get("backoff"),
                    options.get("max_restarts", 5),
                    options.get("restart_window", 60.0),
                )
                if "stderr" in options:
                    stderr_mode(options["stderr"])
                misplaced = sorted(
                    set(options) & (_HTTP_ONLY if spec.transport == "stdio" else _STDIO_ONLY)
                )
                if misplaced:
                    raise ValueError(f"{misplaced} apply to the other transport")
            except (ValueError, TypeError, McpError) as error:
                raise ValueError(f"server {spec.name!r}: {error}") from None
        return specs

    # -- idle servers -------------------------------------------------------------------------

    def _arm_idle_check(self) -> None:

        timeouts = [
            member.spec.idle_timeout or self._idle_timeout
            for member in self._members.values()
            if member.spec.transport == "stdio"
        ]
        shortest = min((t for t in timeouts if t), default=None)
        if shortest is None:
            return
        with self._lock:
            if not self._closed:
                self._tick = call_later(max(0.05, shortest / 4), self._idle_check)

    def _idle_check(self) -> None:
        """On the timer thread: stop stdio servers with no call for their idle timeout."""
        now = time.monotonic()
        idle: list[_Member] = []
        with self._lock:
            if self._closed:
                return
            for member in self._members.values():
                limit = member.spec.idle_timeout or self._idle_timeout
                client = member.client
                if not limit or member.spec.transport != "stdio" or member.state != "ready":
                    continue
                if client is None:
                    continue
                stats = client.stats()
                if stats["calls_sent"] != member.seen_calls or stats["calls_in_flight"]:
                    member.seen_calls, member.active_at = stats["calls_sent"], now
                elif now - member.active_at >= limit:
                    idle.append(member)
        for member in idle:
            _log.info("stopping an idle server", server=member.spec.name)
            self._jobs.submit(partial(self._stop, member, "idle"))
        self._arm_idle_check()


# -- small pieces -----------------------------------------------------------------------------


def _keywords(what: str, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """Checked ``connect_options``/``server_options`` keywords (the fleet's own are refused)."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise TypeError(f"{what} must be a mapping of connect() keywords")
    for key in given:
        if key in _FLEET_OWNED:
            raise ValueError(f"{what}: {key!r} is the fleet's own (see snodo.Fleet)")
        if key not in _CONNECT_PARAMETERS:
            raise ValueError(f"{what}: {key!r} is not a keyword of snodo.connect")
    return dict(given)


def _start_supervisor(name: str) -> ActorRef[Any]:
    """The fleet's supervisor, a temporary child of the root (its children: the owners)."""
    spec = ChildSpec(
        id=name,
        start=partial(Supervisor.start, strategy="one_for_one"),
        restart="temporary",
        shutdown=10.0,
    )
    return start_child(root(), spec)


def _pid(client: Client | None) -> int | None:
    if client is None:
        return None
    transport = client.transport
    return transport.pid if isinstance(transport, StdioTransport) else None


def _declared_changes(client: Client) -> list[str]:
    """What a catalog subscription asks for: every list change, when the server declares any
    (``tools.listChanged`` and so on); its acknowledgement says which it honours."""
    session = client.session
    if session is not None:
        capabilities = session.capabilities
    else:
        try:
            capabilities = client.discover().get("capabilities") or {}
        except McpError:
            return []
    declared = any(
        isinstance(capabilities.get(kind), Mapping) and capabilities[kind].get("listChanged")
        for kind in ("tools", "prompts", "resources")
    )
    return list(_WATCH) if declared else []


def _lister(client: Client, kind: str) -> Callable[[], list[dict[str, Any]]]:
    listers: dict[str, Callable[[], list[dict[str, Any]]]] = {
        "tools": client.list_tools,
        "prompts": client.list_prompts,
        "resources": client.list_resources,
        "resource_templates": client.list_resource_templates,
    }
    return listers[kind]


def _admitted(member: _Member, kind: str, item: Any) -> bool:
    if not isinstance(item, Mapping):
        return False
    if kind == "tools":
        return isinstance(item.get("name"), str) and member.spec.tools.admits(item["name"])
    if kind == "prompts":
        return isinstance(item.get("name"), str)
    return True
