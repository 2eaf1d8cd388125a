"""The Client facade: one API over every connection.

The client holds the negotiated dialect, the validated options and a transport. Each call builds
its params and ``_meta`` (``snodo.protocol.meta``), checks the method against the dialect's
catalog, sends it, and reads the answer (``snodo.protocol.results``). Calls that may need input
run the multi round-trip loop here, in the calling thread.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import orjson

from snodo.protocol import caching, errors, inputs, negotiation, paging, results
from snodo.protocol import meta as meta_rules
from snodo.protocol.dialects import Dialect
from snodo.protocol.dialects.base import LIST_KINDS
from snodo.protocol.errors import HandlerError, McpError
from snodo.protocol.negotiation import Session
from snodo.protocol.results import InputRequired, Page
from snodo.protocol.trace import validate_trace_context
from snodo.transports.base import (
    RequestOptions,
    Transport,
    supports_delete_session,
    supports_notify,
)

if TYPE_CHECKING:
    from snodo.cache import ResponseCache
    from snodo.subscription import Subscription
    from snodo.transports.listening import Listening, SubscriptionSink

#: Request ids are fresh integers, unique in the process, so one client can be shared freely.
_ids = itertools.count(1)

#: The pause before re-sending a result that carried only a requestState (as the TS client does).
STATE_ONLY_RETRY_DELAY = 0.25

#: How long a second close() waits for the first one to finish (a transport bounds its own close).
CLOSE_WAIT = 30.0

#: The longest close() waits for a custom transport's delete_session (seconds).
SESSION_DELETE_WAIT = 5.0

ProgressTarget = Any  # a callable, a queue.Queue, or a Pykka ActorRef


def next_request_id() -> int:
    """A fresh request id."""
    return next(_ids)


@dataclass(frozen=True, slots=True)
class Progress:
    """A progress report delivered to a queue or an actor: the ``notifications/progress`` params."""

    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """The client-wide options, validated once at connect time."""

    protocol: tuple[str, ...]
    client_info: dict[str, Any] | None
    client_capabilities: dict[str, Any]
    input_handlers: dict[str, Callable[[dict[str, Any]], Any]]
    timeout: float | None = 30.0
    max_input_rounds: int = 10
    max_pages: int = 1000
    reset_timeout_on_progress: bool = False
    max_total_timeout: float | None = 600.0
    #: Use the process's response cache (``snodo.cache``) for cacheable results.
    cache: bool = False


def build_options(
    *,
    protocol: str | Sequence[str] | None = None,
    client_info: Mapping[str, Any] | None = None,
    client_capabilities: Mapping[str, Any] | None = None,
    input_handlers: Mapping[str, Any] | None = None,
    timeout: float | None = 30.0,
    max_input_rounds: int = 10,
    max_pages: int = 1000,
    reset_timeout_on_progress: bool = False,
    max_total_timeout: float | None = 600.0,
    cache: bool = False,
) -> ClientOptions:
    """Validate the options every connection shares (unknown names are a TypeError)."""
    if not isinstance(cache, bool):
        raise TypeError("cache must be True or False")
    handlers = inputs.validate_handlers(input_handlers)
    _check_positive_int("max_input_rounds", max_input_rounds, allow_zero=True)
    _check_positive_int("max_pages", max_pages)
    _check_timeout("timeout", timeout)
    _check_timeout("max_total_timeout", max_total_timeout)
    info = dict(client_info) if client_info is not None else dict(negotiation.DEFAULT_CLIENT_INFO)
    return ClientOptions(
        protocol=negotiation.allowed_versions(protocol),
        client_info=info,
        client_capabilities=inputs.merge_capabilities(client_capabilities, handlers),
        input_handlers=handlers,
        timeout=timeout,
        max_input_rounds=max_input_rounds,
        max_pages=max_pages,
        reset_timeout_on_progress=reset_timeout_on_progress,
        max_total_timeout=max_total_timeout,
        cache=cache,
    )


class Client:
    """A connection to one MCP server; safe to share between threads, greenlets and actors."""

    def __init__(
        self,
        transport: Transport,
        dialect: Dialect,
        options: ClientOptions,
        *,
        session: Session | None = None,
    ) -> None:
        self._transport = transport
        self._dialect = dialect
        self._options = options
        self._session = session
        self._closed = False
        self._close_lock = threading.Lock()
        self._close_done = threading.Event()
        self._request_options = RequestOptions(
            dialect=dialect,
            timeout=options.timeout,
            on_server_request=self._answer_server_request,
            reset_timeout_on_progress=options.reset_timeout_on_progress,
            max_total_timeout=options.max_total_timeout,
        )
        self._cache: ResponseCache | None = None
        self._cache_ns: Any = None  # this connection's namespace (what invalidation matches)
        self._cache_base: Any = None  # namespace, protocol and client metadata: every key's prefix
        self._cache_credential: Callable[[], str] | None = None  # the private partition, hashed
        if options.cache:
            self._use_cache()

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
        """The initialize-era session (version, session id, server info, capabilities), or None."""
        return self._session

    @property
    def transport(self) -> Transport:
        """The transport this client sends through."""
        return self._transport

    @property
    def options(self) -> ClientOptions:
        return self._options

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<snodo.Client {type(self._transport).__name__} {self.version} {state}>"

    # -- calls -----------------------------------------------------------------------------

    def discover(
        self, *, timeout: float | None = None, bypass_cache: bool = False
    ) -> dict[str, Any]:
        """``server/discover`` (2026-07-28; refused with -32601 on initialize-era connections)."""
        self._dialect.check_client_request("server/discover")
        return self._complete(
            self._call("server/discover", None, timeout=timeout, bypass_cache=bypass_cache)
        )

    def ping(self, *, timeout: float | None = None) -> dict[str, Any]:
        """``ping`` (initialize era)."""
        self._dialect.check_client_request("ping")
        return self._complete(self._call("ping", None, timeout=timeout))

    def list_tools(
        self, *, timeout: float | None = None, bypass_cache: bool = False
    ) -> list[dict[str, Any]]:
        """Every tool, following ``nextCursor`` to the end."""
        return self._list_all("tools/list", timeout, bypass_cache)

    def list_resources(
        self, *, timeout: float | None = None, bypass_cache: bool = False
    ) -> list[dict[str, Any]]:
        """Every resource, following ``nextCursor`` to the end."""
        return self._list_all("resources/list", timeout, bypass_cache)

    def list_resource_templates(
        self, *, timeout: float | None = None, bypass_cache: bool = False
    ) -> list[dict[str, Any]]:
        """Every resource template, following ``nextCursor`` to the end."""
        return self._list_all("resources/templates/list", timeout, bypass_cache)

    def list_prompts(
        self, *, timeout: float | None = None, bypass_cache: bool = False
    ) -> list[dict[str, Any]]:
        """Every prompt, following ``nextCursor`` to the end."""
        return self._list_all("prompts/list", timeout, bypass_cache)

    def list_page(
        self,
        kind: str,
        cursor: str | None = None,
        *,
        timeout: float | None = None,
        bypass_cache: bool = False,
    ) -> Page:
        """One page of ``kind`` ("tools", "resources", "resource_templates", "prompts")."""
        method = LIST_KINDS.get(kind)
        if method is None:
            raise ValueError(f"unknown list kind {kind!r}; expected one of {sorted(LIST_KINDS)}")
        return self._page(method, cursor, timeout, bypass_cache)

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
    ) -> dict[str, Any] | InputRequired:
        """``tools/call`` by name, or with the definition from ``list_tools`` (for Mcp-Param-*)."""
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
        call = partial(
            self._call,
            "tools/call",
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
        )
        try:
            return call(tool=definition)
        except McpError as error:
            if error.code != errors.HEADER_MISMATCH or definition is not None:
                raise
            if not getattr(self._transport, "tool_headers", False):
                raise
            # Called by name, a tool that needs Mcp-Param-* headers is refused: list the tools
            # and retry once with the definition.
            found = next(
                (t for t in self.list_tools(timeout=timeout) if t.get("name") == name), None
            )
            if found is None:
                raise
            return call(tool=found)

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
    ) -> dict[str, Any] | InputRequired:
        """``resources/read``."""
        return self._call(
            "resources/read",
            {"uri": uri},
            timeout=timeout,
            progress=progress,
            meta=meta,
            trace_context=trace_context,
            input_responses=input_responses,
            request_state=request_state,
            max_input_rounds=max_input_rounds,
            bypass_cache=bypass_cache,
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
    ) -> dict[str, Any] | InputRequired:
        """``prompts/get``."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return self._call(
            "prompts/get",
            params,
            timeout=timeout,
            progress=progress,
            meta=meta,
            trace_context=trace_context,
            input_responses=input_responses,
            request_state=request_state,
            max_input_rounds=max_input_rounds,
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
    ) -> dict[str, Any] | InputRequired:
        """Any request the negotiated dialect lets a client send (an extension's too on 2026-07-28)."""
        if not isinstance(method, str):
            raise TypeError("method must be a string")
        if method == "subscriptions/listen":
            raise ValueError("use Client.listen() for subscriptions/listen, not request()")
        self._dialect.check_client_request(method)
        return self._call(
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
        )

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
        from snodo.subscription import open_subscription

        _check_timeout("timeout", timeout)
        return open_subscription(
            self,
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
        with self._close_lock:
            first = not self._closed
            self._closed = True
        if first:
            try:
                self._end_session()
                self._transport.close()
            finally:
                self._close_done.set()
        else:
            self._close_done.wait(CLOSE_WAIT)

    # -- the request pipeline ---------------------------------------------------------------

    def _list_all(
        self, method: str, timeout: float | None, bypass_cache: bool = False
    ) -> list[dict[str, Any]]:
        first = self._page(method, None, timeout, bypass_cache)
        if first.next_cursor is None:
            return list(first.items)  # one page: nothing to follow (the common case)
        state = paging.start(method, self._options.max_pages)
        state, cursor = paging.advance(state, first)
        while cursor is not None:
            page = self._page(method, cursor, timeout, bypass_cache)
            state, cursor = paging.advance(state, page)
        return cast("list[dict[str, Any]]", list(state.items))

    def _page(
        self, method: str, cursor: str | None, timeout: float | None, bypass_cache: bool = False
    ) -> Page:
        params = {"cursor": cursor} if cursor is not None else None
        result = self._complete(
            self._call(method, params, timeout=timeout, bypass_cache=bypass_cache)
        )
        page = results.page_of(method, result)
        if method == "tools/list" and getattr(self._transport, "tool_headers", False):
            from snodo.transports.streamable_http import filter_listed_tools

            page = replace(page, items=filter_listed_tools(page.items))
        return page

    @staticmethod
    def _complete(outcome: dict[str, Any] | InputRequired) -> dict[str, Any]:
        if isinstance(outcome, InputRequired):  # interpret() only allows it for MRTR methods
            raise errors.connection_error("Unexpected input_required result")
        return outcome

    def _call(
        self,
        method: str,
        params: Mapping[str, Any] | None,
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
        tool: Mapping[str, Any] | None = None,
        bypass_cache: bool = False,
        rounds_seen: list[int] | None = None,
    ) -> dict[str, Any] | InputRequired:
        if self._closed:
            raise errors.connection_error("Connection closed")
        if (
            self._cache is not None
            and not bypass_cache
            and method in caching.CACHEABLE_METHODS
            and progress is None
            and meta is None
            and trace_context is None
            and input_responses is None
            and request_state is None
            and max_input_rounds is None
            and reset_timeout_on_progress is None
            and max_total_timeout is None
            and tool is None
        ):
            # Only timeout= may come with a cached call; any other per-call option sends it.
            return self._cached_call(method, params, timeout)
        trace = validate_trace_context(trace_context) if trace_context is not None else None
        if (
            timeout is None
            and progress is None
            and tool is None
            and reset_timeout_on_progress is None
            and max_total_timeout is None
        ):
            options = self._request_options  # the common case: nothing per call
        else:
            _check_timeout("timeout", timeout)
            options = RequestOptions(
                dialect=self._dialect,
                timeout=timeout if timeout is not None else self._options.timeout,
                on_progress=_progress_sink(progress),
                on_server_request=self._answer_server_request,
                reset_timeout_on_progress=(
                    reset_timeout_on_progress
                    if reset_timeout_on_progress is not None
                    else self._options.reset_timeout_on_progress
                ),
                max_total_timeout=(
                    max_total_timeout
                    if max_total_timeout is not None
                    else self._options.max_total_timeout
                ),
                tool=tool,
            )
        rounds_allowed = (
            max_input_rounds if max_input_rounds is not None else self._options.max_input_rounds
        )
        handlers = self._options.input_handlers
        rounds = 0
        last: InputRequired | None = None
        version_retried = False
        while True:
            request_id = next_request_id()
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
            sent_params = meta_rules.build_params(
                self._dialect,
                params,
                client_info=self._options.client_info,
                client_capabilities=self._options.client_capabilities,
                meta=meta,
                trace=trace,
                progress_token=request_id if options.on_progress is not None else None,
                input_responses=input_responses,
                request_state=request_state,
            )
            if sent_params is not None:
                message["params"] = sent_params
            try:
                response = self._transport.request(message, options)
                outcome = results.interpret(self._dialect, method, response)
            except McpError as error:
                if not version_retried and negotiation.retries_unsupported_version(
                    self._dialect.version, self._options.protocol, error
                ):
                    version_retried = True  # -32022 naming our version: send it once more
                    continue
                raise _with_last(error, last) from None
            if not isinstance(outcome, InputRequired) or not handlers:
                return outcome
            if rounds >= rounds_allowed:
                raise McpError(
                    errors.CONNECTION_CLOSED,
                    f"Maximum input rounds exceeded ({rounds_allowed})",
                    {"maxInputRounds": rounds_allowed},
                    kind="transport",
                    cause=("max_input_rounds", outcome),
                )
            rounds += 1
            if rounds_seen is not None:
                rounds_seen.append(rounds)
            last = outcome
            request_state = outcome.request_state
            if outcome.input_requests:
                input_responses = self._answer_round(outcome, handlers)
            else:
                input_responses = None
                _pause(STATE_ONLY_RETRY_DELAY)

    def _answer_round(
        self, pending: InputRequired, handlers: Mapping[str, Callable[[dict[str, Any]], Any]]
    ) -> dict[str, Any]:
        """Match and check every input request first, then run the handlers one at a time."""
        try:
            tasks = inputs.plan_round(pending.input_requests, handlers)
        except McpError as error:
            raise _with_last(error, pending) from None
        answers: dict[str, Any] = {}
        for task in tasks:
            try:
                response = handlers[task.kind](task.params)
            except HandlerError as failure:
                raise errors.internal_error(
                    f"Input handler for {task.key!r} failed",
                    cause=("input_handler", task.key, failure.reason, pending),
                ) from None
            if not inputs.valid_response(task.kind, response):
                raise errors.internal_error(
                    f"Input handler for {task.key!r} returned an invalid {task.kind} response",
                    cause=("input_handler", task.key, ("invalid_response", response), pending),
                )
            answers[task.key] = response
        return answers

    def _answer_server_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return answer_server_request(self._options.input_handlers, method, params)

    # -- sessions and subscriptions ---------------------------------------------------------

    def _end_session(self) -> None:
        """Before closing: end a session the server identified, if the transport can."""
        session = self._session
        transport = self._transport
        if (
            session is None
            or session.session_id is None
            or not supports_delete_session(transport)
            or getattr(transport, "deletes_session_on_close", False)
        ):
            return
        wait = SESSION_DELETE_WAIT
        if self._options.timeout is not None:
            wait = min(wait, self._options.timeout)
        try:
            transport.delete_session(wait)  # type: ignore[attr-defined]
        except McpError:
            pass  # the session ends with the connection anyway

    def _observe_notification(self, method: str, params: dict[str, Any]) -> None:
        """A subscription notification reached this client: drop the cached results it names.

        Called by the subscription machinery as each event arrives, before the owner demands it.
        """
        cache = self._cache
        if cache is None:
            return
        change = caching.invalidation(method, params)
        if change is not None:
            cache.invalidate(self._cache_ns, change)

    # -- the response cache -----------------------------------------------------------------

    def _use_cache(self) -> None:
        """Join the process's cache under this connection's namespace (see decision 0019)."""
        from snodo.cache import fresh_namespace, shared_cache

        transport = self._transport
        own = getattr(transport, "_cache_namespace", None)
        credential = getattr(transport, "_cache_credential", None)
        namespace: Any
        if callable(own) and callable(credential):
            namespace = own()
            self._cache_credential = credential
        else:
            # A custom transport: public results only, shared when it names its endpoint.
            named = getattr(transport, "cache_namespace", None)
            kind = f"custom:{type(transport).__module__}.{type(transport).__qualname__}"
            namespace = (kind, named) if named is not None else fresh_namespace(kind)
            self._cache_credential = None
        self._cache_ns = namespace
        self._cache_base = caching.client_base(
            namespace,
            self._dialect.version,
            self._options.client_info,
            self._options.client_capabilities,
        )
        self._cache = shared_cache()

    def _cached_call(
        self, method: str, params: Mapping[str, Any] | None, timeout: float | None
    ) -> dict[str, Any] | InputRequired:
        """Serve a fresh stored result, or send the call and store what it may store."""
        cache = self._cache
        assert cache is not None
        _check_timeout("timeout", timeout)
        arg = caching.params_key(params)
        public = caching.public_key(self._cache_base, method, arg)
        data = cache.get(public)
        if data is not None:
            return cast("dict[str, Any]", orjson.loads(data))
        credential_of = self._cache_credential
        credential = credential_of() if credential_of is not None else None
        if credential is not None:
            data = cache.get(caching.private_key(self._cache_base, method, arg, credential))
            if data is not None:
                return cast("dict[str, Any]", orjson.loads(data))
        generation = cache.generation  # read before sending: an invalidation after it wins
        rounds: list[int] = []
        outcome = self._call(method, params, timeout=timeout, bypass_cache=True, rounds_seen=rounds)
        arrived = cache.clock()
        hint = caching.storable(outcome)
        if hint is None or rounds:  # the result of an answered input round is never stored
            return outcome
        if hint.scope == "public":
            key = public
        elif credential is None or credential_of is None or credential_of() != credential:
            return outcome  # unknown credentials, or they changed while the call was out
        else:
            key = caching.private_key(self._cache_base, method, arg, credential)
        try:
            encoded = orjson.dumps(outcome)
        except (TypeError, ValueError):
            return outcome  # not plain JSON (an integer beyond 64 bits): not stored
        cache.put(
            key,
            encoded,
            expires=arrived + hint.ttl,
            generation=generation,
            namespace=self._cache_ns,
            method=method,
            uri=caching.read_uri(method, params),
        )
        return outcome

    def _listen_request(
        self,
        notifications: dict[str, Any],
        sink: SubscriptionSink,
        timeout: float | None,
        meta: Mapping[str, Any] | None,
        trace_context: Mapping[str, Any] | None,
    ) -> Listening:
        """Send ``subscriptions/listen`` through the transport (2026-07-28)."""
        trace = validate_trace_context(trace_context) if trace_context is not None else None
        message: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": next_request_id(),
            "method": "subscriptions/listen",
            "params": meta_rules.build_params(
                self._dialect,
                {"notifications": notifications},
                client_info=self._options.client_info,
                client_capabilities=self._options.client_capabilities,
                meta=meta,
                trace=trace,
            ),
        }
        options = replace(self._request_options, timeout=timeout)
        listening: Listening = self._transport.listen(message, options, sink)  # type: ignore[attr-defined]
        return listening


def answer_server_request(
    handlers: Mapping[str, Callable[[dict[str, Any]], Any]], method: str, params: Any
) -> dict[str, Any]:
    """Answer a request the server sent the client, through the input handlers.

    ``ping`` is answered ``{}`` without a handler; a kind without a handler is -32601, params
    lacking the kind's keys -32602, a handler that fails (HandlerError) or returns an invalid
    response -32603. Any other exception a handler raises propagates to the caller.
    """
    checked = inputs.check_server_request(method, params, handlers)
    if checked is None:
        return {}
    kind, handler_params = checked
    try:
        response = handlers[kind](handler_params)
    except HandlerError as failure:
        raise errors.internal_error(
            f"Input handler for {method} failed", cause=("input_handler", failure.reason)
        ) from None
    if not inputs.valid_response(kind, response):
        raise errors.internal_error(
            f"Input handler for {method} returned an invalid response",
            cause=("input_handler", ("invalid_response", response)),
        )
    return cast("dict[str, Any]", response)


def initialize_session(
    transport: Transport, options: ClientOptions, version: str, dialect: Dialect
) -> Session:
    """Run ``initialize`` + ``notifications/initialized`` on ``transport`` and check the verdict."""
    if not supports_notify(transport):
        raise errors.invalid_params(
            "This transport cannot send notifications, so it cannot open an initialize-era session",
            {"requested": version},
        )
    request_options = RequestOptions(dialect=dialect, timeout=options.timeout)
    message = {
        "jsonrpc": "2.0",
        "id": next_request_id(),
        "method": "initialize",
        "params": negotiation.initialize_params(
            version, options.client_capabilities, options.client_info or {}
        ),
    }
    response = transport.request(message, request_options)
    if "error" in response:
        if "result" in response:  # neither can be trusted: -32000, as for any other call
            results.interpret(dialect, "initialize", response)
        raise McpError.from_wire(response["error"])
    session = negotiation.initialize_verdict(
        response.get("result"),
        options.protocol,
        session_id=getattr(transport, "session_id", None),  # Mcp-Session-Id, when issued
    )
    from snodo.protocol.dialects import get

    negotiated = get(session.version)
    notify = transport.notify  # type: ignore[attr-defined]
    notify(
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        replace(request_options, dialect=negotiated),
    )
    return session


def _with_last(error: McpError, last: InputRequired | None) -> McpError:
    """Put the last input_required result at the end of the error's cause."""
    if last is None:
        return error
    cause = error.cause
    if isinstance(cause, tuple):
        error.cause = (*cause, last)
    elif cause is None:
        error.cause = (last,)
    else:
        error.cause = (cause, last)
    return error


def _progress_sink(target: ProgressTarget) -> Callable[[dict[str, Any]], None] | None:
    """Turn ``progress=`` (a callable, a queue, or an actor ref) into a params consumer."""
    if target is None:
        return None
    if isinstance(target, queue.Queue):
        q: queue.Queue[Any] = target

        def to_queue(params: dict[str, Any]) -> None:
            try:
                q.put_nowait(Progress(params))
            except queue.Full:
                pass  # the caller's own bounded queue; a full one drops the report

        return to_queue
    tell = getattr(target, "tell", None)
    if callable(tell) and hasattr(target, "actor_urn"):

        def to_actor(params: dict[str, Any]) -> None:
            tell(Progress(params))

        return to_actor
    if callable(target):
        return cast("Callable[[dict[str, Any]], None]", target)
    raise TypeError("progress must be a callable, a queue.Queue or a Pykka ActorRef")


def _pause(seconds: float) -> None:
    """Wait ``seconds`` (the state-only retry pacing)."""
    threading.Event().wait(seconds)


def _check_positive_int(name: str, value: object, *, allow_zero: bool = False) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < (0 if allow_zero else 1):
        raise ValueError(f"{name} must be a {'non-negative' if allow_zero else 'positive'} integer")


def _check_timeout(name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds or None")
