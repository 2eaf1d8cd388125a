"""The Client facade: one API over every connection.

The client holds the negotiated dialect, the validated options and a transport. Each method
checks what it was given, builds the call's :class:`~snodo.options.CallOptions` once, and hands
the call to the pipeline (``snodo.calls``), which sends it, reads the answer and answers its
input rounds; the response cache, when enabled, wraps the pipeline. Paging follows
``nextCursor`` here (``snodo.protocol.paging``), and so does the -32020 re-list of a tool called
by name.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from snodo import telemetry
from snodo.calls import CallPipeline, Progress, Steps, drive
from snodo.flag import Flag
from snodo.listing import complete, end_session, list_all, list_page
from snodo.log import get_logger
from snodo.options import (
    NO_CALL_OPTIONS,
    CallOptions,
    ClientOptions,
    ProgressTarget,
    call_options,
    check_timeout,
)
from snodo.protocol import errors, jsonrpc, results
from snodo.protocol.dialects import Dialect
from snodo.protocol.dialects.base import LIST_KINDS
from snodo.protocol.errors import McpError
from snodo.protocol.inputs import ROOTS_LIST_CHANGED, Done, roots_changed_refusal
from snodo.protocol.meta import notification_params
from snodo.protocol.negotiation import Session
from snodo.protocol.results import InputRequired, Page
from snodo.protocol.trace import validate_trace_context
from snodo.stats import CallStats
from snodo.transports.base import (
    NotifyingTransport,
    RequestOptions,
    ServerRequestHandler,
    Transport,
    byte_counts_of,
    session_events_of,
    traits_of,
)

if TYPE_CHECKING:
    from snodo.cached_calls import CachedCalls
    from snodo.lifecycle import Lifecycle, Negotiated, Supervision
    from snodo.output_validation import KnownSchemas
    from snodo.subscription import ListenContext, Subscription
    from snodo.tasks import Task, TaskSteps

_log = get_logger("snodo.client")

#: How long a second close() waits for the first one to finish (a transport bounds its own close).
CLOSE_WAIT = 30.0

#: The longest close() waits for a custom transport's delete_session (seconds).
SESSION_DELETE_WAIT = 5.0


class Client:
    """A connection to one MCP server; safe to share between threads, greenlets and actors."""

    def __init__(
        self,
        transport: Transport,
        dialect: Dialect,
        options: ClientOptions,
        *,
        session: Session | None = None,
        on_server_request: ServerRequestHandler | None = None,
        supervision: Supervision | None = None,
    ) -> None:
        self._options = options
        self._answer = on_server_request
        self._closed = False
        self._close_lock = threading.Lock()
        self._close_done = Flag()
        self._opened = time.monotonic()  # for mcp.client.session.duration (snodo.telemetry)
        #: The counters behind stats(); every pipeline this client installs adds to them.
        self._stats = CallStats()
        self._install(transport, dialect, session)
        #: Owner, state and restarts (``snodo.lifecycle``); None for a bare client.
        self._lifecycle: Lifecycle | None = None
        #: Set by the lifecycle the moment the connection is gone for good (closing follows).
        self._gone = False
        if supervision is not None:
            from snodo.lifecycle import Lifecycle

            # Weakly: a client dropped without close() is still collected, and its owner stops.
            self._lifecycle = Lifecycle(supervision, _ClientSide(self))
        #: Only clients that restart check the connection's state on every call.
        self._restarts = self._lifecycle is not None and self._lifecycle.restarts

    def _install(self, transport: Transport, dialect: Dialect, session: Session | None) -> None:
        """Send through ``transport`` from now on (at the start, and after each restart)."""
        pipeline = CallPipeline(transport, dialect, self._options, self._answer, self._stats)
        cached: CachedCalls | None = None
        store = self._options.cache
        if store is not False:
            from snodo.cached_calls import CachedCalls  # the cache is loaded only when used

            cached = CachedCalls(pipeline, None if store is True else store)
        self._transport = transport
        self._dialect = dialect
        self._session = session
        self._traits = traits_of(transport)
        self._pipeline = pipeline
        self._cached = cached
        #: What every call runs: the pipeline, or the cache around it.
        self._calls: CallPipeline | CachedCalls = cached if cached is not None else pipeline
        #: The tools' outputSchemas listed on this connection (made on the first validated call).
        self._known: KnownSchemas | None = None

    # -- what the connection is -------------------------------------------------------------

    @property
    def version(self) -> str:
        """The negotiated protocol version."""
        return self._dialect.version

    @property
    def dialect(self) -> Dialect:
        return self._dialect

    @property
    def session(self) -> Session | None:
        """The session-era session (version, session id, server info, capabilities), or None."""
        return self._session

    @property
    def transport(self) -> Transport:
        """The transport this client sends through."""
        return self._transport

    @property
    def options(self) -> ClientOptions:
        return self._options

    @property
    def name(self) -> str:
        """The server's name in logs (``name=`` of ``connect``/``direct``, or derived)."""
        return self._options.name or ""

    @property
    def closed(self) -> bool:
        """True once the connection is gone for any reason (closed, owner ended, server gone
        for good)."""
        return self._closed or self._gone

    @property
    def state(self) -> str:
        """``"connecting"``, ``"ready"``, ``"restarting"`` or ``"closed"``."""
        if self._closed or self._gone or self._lifecycle is None:
            return "closed" if self._closed or self._gone else "ready"
        return self._lifecycle.state

    def stats(self) -> dict[str, Any]:
        """What the connection has done: calls sent, completed, failed by code, timed out,
        abandoned and in flight; subscription events delivered and dropped; restarts; the
        transport's bytes in and out (None where it has no bytes: direct). Cheap counters."""
        lifecycle = self._lifecycle
        restarts = lifecycle.restarted if lifecycle is not None else 0
        return self._stats.snapshot(restarts, byte_counts_of(self._transport))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<snodo.Client {type(self._transport).__name__} {self.version} {self.state}>"

    # -- calls (each one is its steps, carried out here by the sync driver) -------------------

    @property
    def steps(self) -> ClientSteps:
        """The client's calls as steps, for a driver other than the calling thread
        (``snodo.aio``): the same checks, options, cache, restarts and paging."""
        return ClientSteps(self)

    def discover(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> dict[str, Any]:
        """``server/discover`` (2026-07-28; refused with -32601 on session-era connections)."""
        return drive(
            self._discover(
                timeout=timeout, meta=meta, trace_context=trace_context, bypass_cache=bypass_cache
            )
        )

    def ping(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``ping`` (session era)."""
        return drive(self._ping_steps(timeout=timeout, meta=meta, trace_context=trace_context))

    def list_tools(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> list[dict[str, Any]]:
        """Every tool, following ``nextCursor`` to the end."""
        return drive(
            self._list(
                "tools/list",
                timeout=timeout,
                meta=meta,
                trace_context=trace_context,
                bypass_cache=bypass_cache,
            )
        )

    def list_resources(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> list[dict[str, Any]]:
        """Every resource, following ``nextCursor`` to the end."""
        return drive(
            self._list(
                "resources/list",
                timeout=timeout,
                meta=meta,
                trace_context=trace_context,
                bypass_cache=bypass_cache,
            )
        )

    def list_resource_templates(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> list[dict[str, Any]]:
        """Every resource template, following ``nextCursor`` to the end."""
        return drive(
            self._list(
                "resources/templates/list",
                timeout=timeout,
                meta=meta,
                trace_context=trace_context,
                bypass_cache=bypass_cache,
            )
        )

    def list_prompts(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> list[dict[str, Any]]:
        """Every prompt, following ``nextCursor`` to the end."""
        return drive(
            self._list(
                "prompts/list",
                timeout=timeout,
                meta=meta,
                trace_context=trace_context,
                bypass_cache=bypass_cache,
            )
        )

    def list_page(
        self,
        kind: str,
        cursor: str | None = None,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> Page:
        """One page of ``kind`` ("tools", "resources", "resource_templates", "prompts")."""
        return drive(
            self._list_page(
                kind,
                cursor,
                timeout=timeout,
                meta=meta,
                trace_context=trace_context,
                bypass_cache=bypass_cache,
            )
        )

    def call_tool(
        self,
        tool: str | Mapping[str, Any],
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        max_input_rounds: int | None = None,
        reset_timeout_on_progress: bool | None = None,
        max_total_timeout: float | None = None,
        log_level: str | None = None,
        validate_output: bool | None = None,
    ) -> dict[str, Any] | InputRequired:
        """``tools/call`` by name, or with the definition from ``list_tools`` (for Mcp-Param-*).

        ``validate_output`` (None: the client's option) checks the result's
        ``structuredContent`` against the tool's ``outputSchema`` (docs/decisions/0041).
        """
        return drive(
            self._call_tool(
                tool,
                arguments,
                timeout=timeout,
                progress=progress,
                meta=meta,
                trace_context=trace_context,
                input_responses=input_responses,
                request_state=request_state,
                max_input_rounds=max_input_rounds,
                reset_timeout_on_progress=reset_timeout_on_progress,
                max_total_timeout=max_total_timeout,
                log_level=log_level,
                validate_output=validate_output,
            )
        )

    def call_tool_task(
        self,
        tool: str | Mapping[str, Any],
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        max_input_rounds: int | None = None,
        log_level: str | None = None,
    ) -> Task:
        """``tools/call`` opted into the Tasks extension for this call; a :class:`snodo.Task`.

        The server decides: a ``CreateTaskResult`` gives a handle to follow (``status``,
        ``wait``, ``result``, ``cancel``); a result given at once, a handle already
        ``completed``. ``timeout`` bounds the request that makes the task, not the task
        (``wait(timeout=)`` does). 2026-07-28 only (-32601 before anything is sent otherwise).
        """
        return drive(
            self._call_tool_task(
                tool,
                arguments,
                timeout=timeout,
                progress=progress,
                meta=meta,
                trace_context=trace_context,
                max_input_rounds=max_input_rounds,
                log_level=log_level,
            )
        )

    def request_task(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        max_input_rounds: int | None = None,
        log_level: str | None = None,
    ) -> Task:
        """Any task-capable request (``request()``'s rules), opted into the Tasks extension
        for this call; a :class:`snodo.Task` as for ``call_tool_task``."""
        return drive(
            self._request_task(
                method,
                params,
                timeout=timeout,
                progress=progress,
                meta=meta,
                trace_context=trace_context,
                max_input_rounds=max_input_rounds,
                log_level=log_level,
            )
        )

    def task(
        self,
        task_id: str,
        *,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
    ) -> Task:
        """A handle on a task made earlier (by this connection or another one that opted in):
        nothing is sent until its ``status``, ``wait`` or ``result`` asks."""
        from snodo.protocol import tasks as wire
        from snodo.tasks import Task

        if not isinstance(task_id, str) or not task_id:
            raise ValueError("task_id must be a non-empty string")
        self._check_tasks()
        record = wire.parse_task({"taskId": task_id, "status": "working"})
        return Task(self, self._task_steps(record, None, self._opted(meta), trace_context, None))

    def read_resource(
        self,
        uri: str,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        max_input_rounds: int | None = None,
        bypass_cache: bool = False,
        log_level: str | None = None,
    ) -> dict[str, Any] | InputRequired:
        """``resources/read``."""
        return drive(
            self._read_resource(
                uri,
                timeout=timeout,
                progress=progress,
                meta=meta,
                trace_context=trace_context,
                input_responses=input_responses,
                request_state=request_state,
                max_input_rounds=max_input_rounds,
                bypass_cache=bypass_cache,
                log_level=log_level,
            )
        )

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        max_input_rounds: int | None = None,
        log_level: str | None = None,
    ) -> dict[str, Any] | InputRequired:
        """``prompts/get``."""
        return drive(
            self._get_prompt(
                name,
                arguments,
                timeout=timeout,
                progress=progress,
                meta=meta,
                trace_context=trace_context,
                input_responses=input_responses,
                request_state=request_state,
                max_input_rounds=max_input_rounds,
                log_level=log_level,
            )
        )

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        max_input_rounds: int | None = None,
        reset_timeout_on_progress: bool | None = None,
        max_total_timeout: float | None = None,
        bypass_cache: bool = False,
        log_level: str | None = None,
    ) -> dict[str, Any] | InputRequired:
        """Any request the negotiated dialect lets a client send (an extension's too on 2026-07-28)."""
        return drive(
            self._request(
                method,
                params,
                timeout=timeout,
                progress=progress,
                meta=meta,
                trace_context=trace_context,
                input_responses=input_responses,
                request_state=request_state,
                max_input_rounds=max_input_rounds,
                reset_timeout_on_progress=reset_timeout_on_progress,
                max_total_timeout=max_total_timeout,
                bypass_cache=bypass_cache,
                log_level=log_level,
            )
        )

    def notify(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
    ) -> None:
        """Send the notification ``method`` and return once it is written (stdio), delivered
        (direct) or accepted (HTTP: 202, within ``timeout``).

        The catalog rule of ``request()``: on session-era versions a notification the version
        does not define is -32601 before anything is sent; on 2026-07-28 an unlisted method (an
        extension's) is sent. ``notifications/initialized`` and ``notifications/cancelled`` are
        snodo's own (ValueError); ``notifications/roots/list_changed`` is ``roots_changed()``'s
        rule. A closed connection is -32000.
        """
        if not isinstance(method, str):
            raise TypeError("method must be a string")
        dialect = self._dialect
        if method == ROOTS_LIST_CHANGED:
            refusal = roots_changed_refusal(self._options.client_capabilities, dialect)
            if refusal is not None:
                raise refusal
        else:
            dialect.check_client_notification(method)
        check_timeout("timeout", timeout)
        trace = validate_trace_context(trace_context) if trace_context is not None else None
        message = jsonrpc.notification(method, notification_params(params, meta=meta, trace=trace))
        if self._closed or self._gone:
            raise self._closed_error()
        transport = self._transport
        if not isinstance(transport, NotifyingTransport):
            raise TypeError(
                f"{type(transport).__name__} cannot send notifications (it has no notify())"
            )
        wait = timeout if timeout is not None else self._options.timeout
        transport.notify(message, RequestOptions(dialect=dialect, timeout=wait))

    def roots_changed(self, *, timeout: float | None = None) -> None:
        """Tell the server the client's roots changed (``notifications/roots/list_changed``):
        it asks for them again with ``roots/list``, which the roots input handler answers.

        Only when the client declared ``roots.listChanged`` (``client_capabilities=
        {"roots": {"listChanged": True}}``), else -32021; and only on versions that define it
        (the session era), else -32601. Nothing is sent when it is refused.
        """
        self.notify(ROOTS_LIST_CHANGED, timeout=timeout)

    def listen(
        self,
        notifications: Mapping[str, Any],
        *,
        timeout: float | None = None,
        max_buffer: int = 100,
        overflow: str = "drop_oldest",
        owner: Any = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
    ) -> Subscription:
        """Open a ``subscriptions/listen`` stream with ``notifications`` (a SubscriptionFilter,
        sent as given) and return once the server acknowledged it (``sub.accepted``).

        Events arrive against demand (``sub.demand(n)``, ``sub.next()``, iteration); at most
        ``max_buffer`` wait, ``overflow`` ("drop_oldest" or "drop_newest") decides what a full
        buffer drops. ``owner`` (an ActorRef, a greenlet, the current thread; default: the
        caller) owns it: an actor owner receives ``SubscriptionEvent(ref, event)`` messages, and
        the subscription is cancelled when the owner ends. See ``snodo.subscription``.
        """
        # The stream actor (and Pykka) load on the first listen, not with the client.
        from snodo.subscription import open_subscription

        check_timeout("timeout", timeout)
        return open_subscription(
            self._listen_context(),
            notifications,
            timeout=timeout if timeout is not None else self._options.timeout,
            max_buffer=max_buffer,
            overflow=overflow,
            owner=owner,
            meta=meta,
            trace_context=trace_context,
        )

    def close(self) -> None:
        """Close the connection; later calls fail with -32000. Idempotent: every caller returns
        once the connection is closed (a racing caller waits for the first, within a bound)."""
        self._end(None)

    def _end(self, error: McpError | None) -> None:
        """Close the connection; later calls fail with ``error`` (None: "Connection closed")."""
        with self._close_lock:
            first = not self._closed
            self._closed = True
        if first:
            lifecycle = self._lifecycle
            try:
                if lifecycle is not None:
                    lifecycle.closing(error)
                if error is None:
                    wait = SESSION_DELETE_WAIT
                    if self._options.timeout is not None:
                        wait = min(wait, self._options.timeout)
                    end_session(self._transport, self._session, self._traits, wait)
                self._transport.close()
                if telemetry.enabled is not False:
                    telemetry.session_closed(self._transport, self._dialect.version, self._opened)
            finally:
                self._close_done.set()
                if lifecycle is not None:
                    lifecycle.closed()
        else:
            self._close_done.wait(CLOSE_WAIT)

    # -- internals --------------------------------------------------------------------------

    def _send(
        self, method: str, params: Mapping[str, Any] | None, call: CallOptions = NO_CALL_OPTIONS
    ) -> Steps[Done]:
        """The call's steps (a plain function: no generator of its own on the hot path)."""
        if self._closed or self._gone:
            raise self._closed_error()
        if not self._restarts:
            return self._calls.steps(method, params, call)
        assert self._lifecycle is not None
        return self._lifecycle.send(self._options, method, params, call)

    def _discover(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> Steps[dict[str, Any]]:
        self._dialect.check_client_request("server/discover")
        call = call_options(timeout, None, meta, trace_context, bypass_cache=bypass_cache)
        return complete((yield from self._send("server/discover", None, call)).outcome)

    def _ping_steps(
        self,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
    ) -> Steps[dict[str, Any]]:
        self._dialect.check_client_request("ping")
        call = call_options(timeout, None, meta, trace_context)
        return complete((yield from self._send("ping", None, call)).outcome)

    def _list_page(
        self,
        kind: str,
        cursor: str | None = None,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> Steps[Page]:
        method = LIST_KINDS.get(kind)
        if method is None:
            raise ValueError(f"unknown list kind {kind!r}; expected one of {sorted(LIST_KINDS)}")
        call = call_options(timeout, None, meta, trace_context, bypass_cache=bypass_cache)
        page = yield from list_page(self._send, method, cursor, call, self._traits.header_policy)
        if method == "tools/list" and self._known is not None:
            self._known.learn(page.items)
        return page

    def _call_tool(
        self,
        tool: str | Mapping[str, Any],
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        max_input_rounds: int | None = None,
        reset_timeout_on_progress: bool | None = None,
        max_total_timeout: float | None = None,
        log_level: str | None = None,
        validate_output: bool | None = None,
        as_task: bool = False,
    ) -> Steps[dict[str, Any] | InputRequired]:
        definition: Mapping[str, Any] | None = None
        if isinstance(tool, Mapping):
            definition = tool
            name = tool.get("name")
            if not isinstance(name, str):
                raise ValueError("a tool definition needs a string 'name'")
        elif isinstance(tool, str):
            name = tool
        else:
            raise TypeError("tool must be a name or a tool definition dict")
        params = {"name": name, "arguments": dict(arguments) if arguments is not None else {}}
        call = call_options(
            timeout,
            progress,
            meta,
            trace_context,
            input_responses,
            request_state,
            max_input_rounds,
            reset_timeout_on_progress,
            max_total_timeout,
            definition,
            log_level=log_level,
        )
        validate = self._options.validate_output if validate_output is None else validate_output
        if not isinstance(validate, bool):
            raise TypeError("validate_output must be True, False or None")
        schema: Any = None
        remembered = False
        if validate:
            schema, remembered = yield from self._output_schema(name, definition, timeout)
        try:
            outcome = (yield from self._send("tools/call", params, call)).outcome
        except McpError as error:
            if not as_task and error.code == errors.MISSING_CLIENT_CAPABILITY:
                from snodo.protocol import tasks as wire

                if wire.requires_task(error):  # the tool runs only as a task: say how
                    raise wire.required_task_error(error, name) from None
            if not results.relists_on_header_mismatch(
                error, header_policy=self._traits.header_policy, by_name=definition is None
            ):
                raise
            listed = yield from self._list_all("tools/list", call_options(timeout))
            found = next((t for t in listed if t.get("name") == name), None)
            if found is None:
                raise
            schema, remembered = found.get("outputSchema"), False
            call = replace(call, tool=found)
            outcome = (yield from self._send("tools/call", params, call)).outcome
        if validate:
            yield from self._check_output(name, schema, remembered, outcome, timeout)
        return outcome

    def _check_tasks(self) -> None:
        """Tasks opt in per call on 2026-07-28; on a session-era connection only per client (the
        extension declared at initialize), else -32601 before anything is sent."""
        if self._dialect.stateless:
            return
        from snodo.protocol import tasks as wire

        if not wire.declares_tasks(self._options.client_capabilities):
            raise errors.method_not_found(
                "tasks/get",
                reason=(
                    f"on {self.version} the Tasks extension is opted into per client: declare"
                    " it in client_capabilities (per call needs 2026-07-28)"
                ),
            )

    def _opted(self, meta: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """``meta`` opting the request into tasks (2026-07-28: per request; the session era
        declared it at initialize)."""
        if not self._dialect.stateless:
            return meta
        from snodo.protocol import tasks as wire

        return wire.opt_in_meta(self._options.client_capabilities, meta)

    def _task_steps(
        self,
        record: Any,
        max_input_rounds: int | None,
        meta: Mapping[str, Any] | None,
        trace_context: Mapping[str, Any] | None,
        resend: Any,
    ) -> TaskSteps:
        from snodo.tasks import TaskSteps

        options = self._options
        return TaskSteps(
            self._request,
            record,
            handlers=options.input_handlers,
            max_input_rounds=(
                options.max_input_rounds if max_input_rounds is None else max_input_rounds
            ),
            meta=meta,
            trace_context=trace_context,
            resend=resend,
        )

    def _call_tool_task(
        self,
        tool: str | Mapping[str, Any],
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        max_input_rounds: int | None = None,
        log_level: str | None = None,
    ) -> Steps[Task]:

        self._check_tasks()
        opted = self._opted(meta)

        def send(
            responses: Mapping[str, Any] | None, state: str | None
        ) -> Steps[dict[str, Any] | InputRequired]:
            return self._call_tool(
                tool,
                arguments,
                timeout=timeout,
                progress=progress,
                meta=opted,
                trace_context=trace_context,
                input_responses=responses,
                request_state=state,
                max_input_rounds=max_input_rounds,
                log_level=log_level,
                validate_output=False,
                as_task=True,
            )

        return (yield from self._made_task(send, max_input_rounds, meta, trace_context))

    def _request_task(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        max_input_rounds: int | None = None,
        log_level: str | None = None,
    ) -> Steps[Task]:

        self._check_tasks()
        opted = self._opted(meta)

        def send(
            responses: Mapping[str, Any] | None, state: str | None
        ) -> Steps[dict[str, Any] | InputRequired]:
            return self._request(
                method,
                params,
                timeout=timeout,
                progress=progress,
                meta=opted,
                trace_context=trace_context,
                input_responses=responses,
                request_state=state,
                max_input_rounds=max_input_rounds,
                log_level=log_level,
            )

        return (yield from self._made_task(send, max_input_rounds, meta, trace_context))

    def _made_task(
        self,
        send: Callable[
            [Mapping[str, Any] | None, str | None], Steps[dict[str, Any] | InputRequired]
        ],
        max_input_rounds: int | None,
        meta: Mapping[str, Any] | None,
        trace_context: Mapping[str, Any] | None,
    ) -> Steps[Task]:
        """Send the opted-in request; the handle of what it made (``tasks/*`` carry the caller's
        own ``meta``: the request's opt-in is theirs already, per request)."""
        from snodo.protocol import tasks as wire
        from snodo.tasks import Task

        outcome = yield from send(None, None)
        opted = self._opted(meta)
        steps = self._task_steps(wire.immediate({}), max_input_rounds, opted, trace_context, send)
        steps.adopt(outcome)
        return Task(self, steps)

    def _known_schemas(self) -> KnownSchemas:
        """The outputSchemas listed on this connection (made on first use)."""
        known = self._known
        if known is None:
            from snodo.output_validation import KnownSchemas

            known = self._known = KnownSchemas()
        return known

    def _output_schema(
        self, name: str, definition: Mapping[str, Any] | None, timeout: float | None
    ) -> Steps[tuple[Any, bool]]:
        """The schema a validated call checks against, and whether it was remembered from an
        earlier listing: the passed definition's; else the one listed on this connection; else
        list the tools once (None when the tool is not listed: its result is not checked)."""
        from snodo.output_validation import require_library

        require_library()  # ImportError naming the extra, before anything is sent
        if definition is not None:
            return definition.get("outputSchema"), False
        known = self._known_schemas()
        listed, schema = known.lookup(name)
        if listed:
            return schema, True
        yield from self._list_all("tools/list", call_options(timeout))
        return known.lookup(name)[1], False

    def _check_output(
        self, name: str, schema: Any, remembered: bool, outcome: Any, timeout: float | None
    ) -> Steps[None]:
        """Raise the McpError of a result that fails its outputSchema (redacted like other
        answers). A schema remembered from an earlier listing may be stale: the tools are
        listed once more, and the result fails only against the server's current schema."""
        from snodo.output_validation import RedactingTransport, check

        error = check(name, schema, outcome)
        if error is not None and remembered:
            try:
                yield from self._list_all("tools/list", call_options(timeout, bypass_cache=True))
            except McpError:
                pass  # the listing failed: the result is judged by the schema it had
            else:
                fresh = self._known_schemas().lookup(name)[1]
                if fresh != schema:
                    error = check(name, fresh, outcome)
        if error is not None:
            transport = self._transport
            if isinstance(transport, RedactingTransport):
                error = transport.redacted(error)
            raise error

    def _read_resource(
        self,
        uri: str,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        max_input_rounds: int | None = None,
        bypass_cache: bool = False,
        log_level: str | None = None,
    ) -> Steps[dict[str, Any] | InputRequired]:
        call = call_options(
            timeout,
            progress,
            meta,
            trace_context,
            input_responses,
            request_state,
            max_input_rounds,
            bypass_cache=bypass_cache,
            log_level=log_level,
        )
        return (yield from self._send("resources/read", {"uri": uri}, call)).outcome

    def _get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        max_input_rounds: int | None = None,
        log_level: str | None = None,
    ) -> Steps[dict[str, Any] | InputRequired]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        call = call_options(
            timeout,
            progress,
            meta,
            trace_context,
            input_responses,
            request_state,
            max_input_rounds,
            log_level=log_level,
        )
        return (yield from self._send("prompts/get", params, call)).outcome

    def _request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressTarget = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        max_input_rounds: int | None = None,
        reset_timeout_on_progress: bool | None = None,
        max_total_timeout: float | None = None,
        bypass_cache: bool = False,
        log_level: str | None = None,
    ) -> Steps[dict[str, Any] | InputRequired]:
        if not isinstance(method, str):
            raise TypeError("method must be a string")
        if method == "subscriptions/listen":
            raise ValueError("use Client.listen() for subscriptions/listen, not request()")
        self._dialect.check_client_request(method)
        call = call_options(
            timeout,
            progress,
            meta,
            trace_context,
            input_responses,
            request_state,
            max_input_rounds,
            reset_timeout_on_progress,
            max_total_timeout,
            bypass_cache=bypass_cache,
            log_level=log_level,
        )
        return (yield from self._send(method, params, call)).outcome

    def _list(
        self,
        method: str,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        trace_context: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
    ) -> Steps[list[dict[str, Any]]]:
        call = call_options(timeout, None, meta, trace_context, bypass_cache=bypass_cache)
        return (yield from self._list_all(method, call))

    def _current(self) -> tuple[CallPipeline | CachedCalls, Session | None]:
        """What a call runs now and the session it runs in (read together, for restarts)."""
        return self._calls, self._session

    def _mark_gone(self) -> None:
        self._gone = True

    def _ping(self, timeout: float) -> None:
        """The owner's health check: ``ping`` on the session era, nothing on the stateless."""
        if not self._dialect.stateless:
            self._calls.run("ping", None, call_options(timeout))

    def _closed_error(self) -> McpError:
        lifecycle = self._lifecycle
        if lifecycle is not None:
            return lifecycle.closed_error()
        return errors.connection_error("Connection closed")

    def _list_all(self, method: str, call: CallOptions) -> Steps[list[dict[str, Any]]]:
        max_pages, policy = self._options.max_pages, self._traits.header_policy
        listed = yield from list_all(self._send, method, call, max_pages, policy)
        if method == "tools/list" and self._known is not None:
            self._known.learn(listed)  # what validated calls check against (decision 0041)
        return listed

    def _listen_context(self) -> ListenContext:
        from snodo.subscription import ListenContext

        lifecycle = self._lifecycle
        return ListenContext(
            transport=self._transport,
            dialect=self._dialect,
            session=self._session,
            listen_message=self._pipeline.listen_message,
            observe=self._observe_notification,
            request=self.request,
            is_closed=lambda: self._closed,
            session_events=session_events_of(self._transport),
            park=lifecycle.park if lifecycle is not None and lifecycle.restarts else None,
            stats=self._stats,
        )

    def _observe_notification(self, method: str, params: dict[str, Any]) -> None:
        """A subscription notification reached this client: drop the cached results it names.

        Called by the subscription machinery as each event arrives, before the owner demands it.
        """
        if self._cached is not None:
            self._cached.observe(method, params)
        if self._known is not None and method == "notifications/tools/list_changed":
            self._known.forget()


class ClientSteps:
    """A client's calls as steps (``snodo.calls.Steps``), for drivers other than the calling
    thread: each takes the arguments of the ``Client`` method of its name."""

    __slots__ = (
        "call_tool",
        "call_tool_task",
        "discover",
        "get_prompt",
        "list_page",
        "list_prompts",
        "list_resource_templates",
        "list_resources",
        "list_tools",
        "listen_context",
        "ping",
        "read_resource",
        "request",
        "request_task",
    )

    def __init__(self, client: Client) -> None:
        # The client's own module: its step methods, under their public names.
        self.discover = client._discover  # noqa: SLF001
        self.ping = client._ping_steps  # noqa: SLF001
        self.list_page = client._list_page  # noqa: SLF001
        self.call_tool = client._call_tool  # noqa: SLF001
        self.read_resource = client._read_resource  # noqa: SLF001
        self.get_prompt = client._get_prompt  # noqa: SLF001
        self.request = client._request  # noqa: SLF001
        #: These two return a sync ``snodo.Task``: ``snodo.aio`` wraps its steps (``AsyncTask``).
        self.call_tool_task = client._call_tool_task  # noqa: SLF001
        self.request_task = client._request_task  # noqa: SLF001
        self.list_tools = partial(client._list, "tools/list")  # noqa: SLF001
        self.list_resources = partial(client._list, "resources/list")  # noqa: SLF001
        self.list_resource_templates = partial(
            client._list,  # noqa: SLF001
            "resources/templates/list",
        )
        self.list_prompts = partial(client._list, "prompts/list")  # noqa: SLF001
        self.listen_context = client._listen_context  # noqa: SLF001


class _ClientSide:
    """The client as its lifecycle drives it (``snodo.lifecycle.ClientSide``), held weakly."""

    __slots__ = ("_ref",)

    def __init__(self, client: Client) -> None:
        self._ref: weakref.ref[Client] = weakref.ref(client)

    def _client(self) -> Client:
        client = self._ref()
        if client is None:
            raise errors.connection_error("The client was dropped without close()")
        return client

    # The client's own module: these are its internals, reached by its own adapter.
    def current(self) -> tuple[CallPipeline | CachedCalls, Session | None]:
        return self._client()._current()  # noqa: SLF001

    def install(self, negotiated: Negotiated) -> None:
        connection = negotiated.transport, negotiated.dialect, negotiated.session
        self._client()._install(*connection)  # noqa: SLF001

    def end(self, error: McpError | None) -> None:
        self._client()._end(error)  # noqa: SLF001

    def ping(self, timeout: float) -> None:
        self._client()._ping(timeout)  # noqa: SLF001

    def listen_context(self) -> ListenContext:
        return self._client()._listen_context()  # noqa: SLF001

    def transport(self) -> Transport:
        return self._client().transport

    def gone(self) -> None:
        self._client()._mark_gone()  # noqa: SLF001

    def on_collected(self, callback: Callable[[], None]) -> None:
        client = self._client()
        self._ref = weakref.ref(client, lambda _ref: callback())


__all__ = [
    "CLOSE_WAIT",
    "SESSION_DELETE_WAIT",
    "Client",
    "ClientOptions",
    "ClientSteps",
    "Progress",
]
